"""Scale: reads stay bounded by what is asked for, not by how much the table holds.

- 100,000 done items and 50 active ones: GET /queue-items (one page, the default limit) reads
  the active index and the page's items, never the done ones.
- 10,000 awaiting SMS of which 100 passed their timeout window: the schedule's SMS check reads
  the expired timers and those items, not the 9,900 others.

The items are written straight into moto with BatchWriteItem (25 a request), built by the same
``new_item`` enqueue uses and changed to their state as ``transitions.state_write`` sets it.
Counted requests and rows read come from ``bench.requests``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

from bench import env
from bench import requests as rq

DONE_ITEMS = 100_000
ACTIVE_ITEMS = 50
AWAITING_SMS = 10_000
EXPIRED_SMS = 100


def _chunks(rows: Iterable[dict[str, Any]], size: int = 25) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def write(stack: env.Stack, rows: Iterable[dict[str, Any]]) -> int:
    import boto3

    client = boto3.client("dynamodb")
    n = 0
    with rq.COUNTER.paused():
        for chunk in _chunks(rows):
            pending = [{"PutRequest": {"Item": r}} for r in chunk]
            while pending:
                answer = client.batch_write_item(RequestItems={env.TABLE: pending})
                pending = answer.get("UnprocessedItems", {}).get(env.TABLE, [])
            n += len(chunk)
    return n


def _items(stack: env.Stack, count: int, method: str, shape: Any) -> Iterator[dict[str, Any]]:
    from vdq.intake.enqueue import new_item

    rt = stack.runtime
    start = rt.clock.now()
    for n in range(count):
        item = new_item(method=method, sender=env.SENDER if method == "email" else "+15005550006",
                        sender_name=None, receiver=f"r{n}@example.org" if method == "email"
                        else f"+1415{n:07d}", receiver_name=None, content_id="01" + "0" * 24,
                        has_files=False, origin=None, created_by="bench",
                        now=start + timedelta(milliseconds=n), runtime=rt)  # fmt: skip
        shape(item, n)
        yield item.serialize()


def _done(stack: env.Stack) -> Any:
    def shape(item: Any, n: int) -> None:
        item.state = "succeeded"
        item.provider_id = f"bench-{n}"
        item.done_at = item.updated_at
        item.active_pk = item.active_sk = item.timer_pk = item.timer_sk = None

    return shape


def _awaiting(stack: env.Stack) -> Any:
    from vdq.workflow.transitions import TIMER_AWAIT, timer_partition

    shards = stack.runtime.settings.index_shards

    def shape(item: Any, n: int) -> None:
        item.state = "awaiting"
        item.provider_id = f"SM{n:032x}"
        item.claimed_at = item.updated_at
        item.timer_pk = timer_partition(TIMER_AWAIT, item.id, shards)
        item.timer_sk = f"{item.claimed_at}#{item.id}"  # keyed on the claim, as ``await`` keys it

    return shape


def _reads(tally: rq.Tally) -> dict[str, Any]:
    return {"items_read": tally.rows.get("items", 0), "index_rows": tally.rows.get("index", 0),
            "scans": tally.requests.get(("dynamodb", "Scan"), 0),
            "requests": ", ".join(f"{o} {n}" for o, n in tally.operations().items()
                                  if o.startswith("dynamodb."))}  # fmt: skip


def listing(done: int) -> dict[str, Any]:
    env.need("functions.operator.handler", "handler")
    with env.stack() as stack:
        write(stack, _items(stack, done, "email", _done(stack)))
        stack.clock.advance(60)
        write(stack, _items(stack, ACTIVE_ITEMS, "email", lambda item, n: None))
        with rq.COUNTER.measure() as tally:
            status, body = rq.operator("apigw_operator_list_queue_items", path="/queue-items",
                                       query={"limit": "50"})  # fmt: skip
        if status != 200:
            raise RuntimeError(f"listing answered {status}: {body}")
        page = 50
        got = _reads(tally)
        shards = stack.runtime.settings.index_shards
        got.update(page=page, listed=len(body["items"]), done_items=done,
                   holds=got["items_read"] <= page and got["index_rows"] <= shards * page
                   and got["scans"] == 0 and len(body["items"]) == ACTIVE_ITEMS)  # fmt: skip
    return got


def timeouts() -> dict[str, Any]:
    schedule = env.need("functions.schedule.handler", "handler")
    with env.stack() as stack:
        stack.runtime.overrides["twilio"] = env.FakeTwilio(status="sent")
        write(stack, _items(stack, EXPIRED_SMS, "sms", _awaiting(stack)))
        hours = stack.runtime.settings.twilio_sms_timeout_hours
        stack.clock.advance(hours * 3600 - 60)  # the others were queued a minute short of it
        write(stack, _items(stack, AWAITING_SMS - EXPIRED_SMS, "sms", _awaiting(stack)))
        stack.clock.advance(120)
        with rq.COUNTER.measure() as tally:
            counts = schedule({"task": "sms"}, env.LambdaContext("vdq-schedule"))
        got = _reads(tally)
        page = stack.runtime.settings.sms_poll_batch
        timed_out = sum(v for k, v in counts.items() if k.startswith("timeout_"))
        got.update(page=page, timed_out=timed_out, counts=counts, awaiting=AWAITING_SMS,
                   expired=EXPIRED_SMS,
                   holds=got["items_read"] <= EXPIRED_SMS
                   and got["index_rows"] <= EXPIRED_SMS + page and got["scans"] == 0
                   and timed_out == EXPIRED_SMS)  # fmt: skip
    return got


def measure(done: int = DONE_ITEMS) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, run in (("listing", lambda: listing(done)), ("timeout", timeouts)):
        try:
            out[name] = run()
        except env.Missing as missing:
            out[name] = str(missing)
    return out


if __name__ == "__main__":
    import json
    import sys

    env.prepare_process()
    rq.COUNTER.install()
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000), indent=2))
