"""Search: the read units of a receiver search at 100,000 and 1,000,000 items, and what the
receiver index and the stream's postings add to a message's writes.

The table holds ``size`` items of other receivers, then ``MINE`` items (one done, the rest
queued) to the receiver searched for, each built by the same ``new_item`` enqueue uses. The
other items are written straight into moto's table (its backend: a million BatchWriteItem
requests through botocore would take the bench an hour), with the attributes the receiver
index keys on; the searched receiver's go through BatchWriteItem. GET /search?receiver= then
runs through the operator function, counted by ``bench.requests``: one Query of the index and
one BatchGetItem of the page, whatever the table holds.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bench import env
from bench import requests as rq
from bench.figures import Row

SIZES = (100_000, 1_000_000)
MINE = 20  # the searched receiver's items: one page
RECEIVER = "ada@example.org"

FIGURES = [
    (f"receiver search at {SIZES[0]:,} items", "one page of 20: 1 Query + 1 BatchGetItem"),
    (f"receiver search at {SIZES[1]:,} items", "the same units as at 100,000"),
    ("write units a message adds for search", "(reported)"),
]


def _fill(stack: env.Stack, size: int) -> None:
    """``size`` items of other receivers, in moto's table directly (no request counted). They
    carry what the index and a reader need (keys, id, receiver, method, state, times): a
    million whole items would take moto some 10 GB, and no search reads them."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    from vdq.core import ids
    from vdq.core.clock import iso
    from vdq.store.search import receiver_key

    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table(env.TABLE)
    start = stack.runtime.clock.now() - timedelta(days=1)
    at = iso(start)
    for n in range(size):
        item_id = ids.new_id(int(start.timestamp() * 1000) + n)
        table.put_item({"pk": {"S": f"QI#{item_id}"}, "sk": {"S": "STATE"},
                        "id": {"S": item_id}, "receiver": {"S": f"r{n}@example.org"},
                        "rx": {"S": receiver_key(f"r{n}@example.org")},
                        "method": {"S": "email"}, "state": {"S": "succeeded"},
                        "queued_at": {"S": at}})  # fmt: skip


def _mine(stack: env.Stack) -> list[str]:
    from bench.scale import write
    from vdq.intake.enqueue import new_item

    rt = stack.runtime
    items = []
    for n in range(MINE):
        item = new_item(method="email", sender=env.SENDER, sender_name=None, receiver=RECEIVER,
                        receiver_name="Ada", content_id="01" + "0" * 24, has_files=False,
                        origin=None, created_by="bench", excerpt="Your order has shipped",
                        now=rt.clock.now() + timedelta(seconds=n), runtime=rt)  # fmt: skip
        if n == 0:
            item.state, item.done_at, item.provider_id = "succeeded", item.updated_at, "bench-0"
            item.active_pk = item.active_sk = item.timer_pk = item.timer_sk = None
        items.append(item)
    write(stack, (i.serialize() for i in items))
    return [i.id for i in items]


def receiver_search(size: int) -> dict[str, Any]:
    env.need("functions.operator.handler", "handler")
    with env.stack() as stack:
        _fill(stack, size)
        mine = _mine(stack)
        with rq.COUNTER.measure(units=True) as tally:
            status, body = rq.operator("apigw_operator_search", path="/search",
                                       query={"receiver": RECEIVER, "limit": "50"})  # fmt: skip
        if status != 200:
            raise RuntimeError(f"the search answered {status}: {body}")
        found = [i["id"] for i in body["items"]]
    return {"items": size, "found": len(found), "newest_first": found == mine[::-1],
            "requests": tally.operations(), "read_units": tally.rru,
            "scans": tally.requests.get(("dynamodb", "Scan"), 0)}


def message_writes() -> dict[str, Any]:
    """What search adds to a delivered email's writes: the receiver index's entry at enqueue,
    and its share of a stream window's postings and counters (bench.cost's share)."""
    from bench.cost import prices, window_share

    journey = rq.email_delivered()
    window = journey.phases[-1][1]
    per_window = window.wru + window.gsi_wru
    messages = round(window_share(journey.table_bytes / journey.messages, prices()), 1)
    return {"receiver_index": 1.0, "window_units": per_window, "window_messages": messages,
            "window_share": round(per_window / messages, 3),
            "total": round(1.0 + per_window / messages, 3)}


def measure(sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    return {"searches": [receiver_search(n) for n in sizes], "writes": message_writes()}


def rows(result: dict[str, Any]) -> list[Row]:
    out = []
    base = result["searches"][0]
    for n, search in enumerate(result["searches"]):
        figure = f"receiver search at {search['items']:,} items"
        target = FIGURES[min(n, 1)][1]
        requests = ", ".join(f"{k.removeprefix('dynamodb.')} {v}"
                             for k, v in search["requests"].items())  # fmt: skip
        holds = (search["found"] == MINE and search["newest_first"] and search["scans"] == 0
                 and search["read_units"] == base["read_units"])  # fmt: skip
        out.append(Row(figure, target, f"{search['read_units']:g} RRU ({requests}); "
                                       f"{search['found']} found newest first", holds))
    w = result["writes"]
    out.append(Row(FIGURES[2][0], FIGURES[2][1],
                   f"{w['total']:g} WRU: receiver index 1 + the stream window's "
                   f"{w['window_units']:g} / {w['window_messages']} messages", None))
    return out


if __name__ == "__main__":
    import json
    import sys

    env.prepare_process()
    rq.COUNTER.install()
    sizes = tuple(int(a) for a in sys.argv[1:]) or (2_000,)
    print(json.dumps(measure(sizes), indent=2))
