"""Storage: the bytes an email holds in DynamoDB, and the table's size under retention.

``per_email`` runs the delivered-email journey (one receiver, 10 KB HTML: POST /emails, the
send worker, SES's Delivery event) and the stream's stamping, then weighs every record the
email left in the table by DynamoDB's storage rules (names + values + 100 bytes a record, and
each keys-only index entry: the table keys, the index keys + 100 bytes).

``month`` runs the product day by day on a fake clock: every day ``EMAILS_PER_DAY`` delivered
emails, the stream's stamping, and DynamoDB's TTL deleter (simulated: moto never deletes; the
deleter here removes what expired ``TTL_LAG_DAYS`` ago, the late end of AWS's "about 48 hours"),
and weighs the whole table each day, beside what it would weigh with nothing deleted
(retention 0, the old "forever"). The steady state at a production volume is bytes per email
x daily volume x (retention + the TTL lag).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench import env
from bench.cost import TTL_LAG_DAYS
from bench.requests import record_bytes, table_records

RETENTION_DAYS = 30
DAYS = 60  # two months: the first fills the retention, the second must stay flat
EMAILS_PER_DAY = 2
VOLUME_PER_DAY = 1_000_000
GB = 1024**3

FIGURES = [
    ("storage per email held (DynamoDB)", "(reported)"),
    ("retention stamping per email (stream)", "(reported)"),
    (f"steady-state table at {VOLUME_PER_DAY:,}/day", "(reported)"),
    ("table size flat over the 2nd simulated month", "flat (TTL)"),
]


def _kind(sk: str) -> str:
    for prefix, kind in (("H#", "history"), ("EV#", "event mark"), ("C#", "content"),
                         ("R#", "content refs")):  # the last two: in an origin's partition
        if sk.startswith(prefix):
            return kind
    return {"STATE": "state", "CONTENT": "content", "MAP": "provider map", "REFS": "content refs",
            "FILE": "attachment"}.get(sk, "other")  # fmt: skip


def _deliver_one(stack: env.Stack) -> str:
    from bench.requests import email_body, post, run_send, run_webhook, ses_event_record

    [item] = post("apigw_post_emails", email_body(1))["items"]
    assert run_send(stack) == 1
    answer = run_webhook(ses_event_record(stack, item["id"]))
    if answer.get("batchItemFailures"):
        raise RuntimeError(f"webhook failed the Delivery event: {answer}")
    from vdq.core.observability import metrics

    metrics.clear_metrics()  # the enqueue handler's metrics pile up unflushed here: no EMF
    return str(item["id"])


def _stamp(stack: env.Stack, item_id: str) -> dict[str, Any]:
    """What the stream consumer does for an item that entered a done state (the stream record
    carries the item: its read is not counted); what that costs."""
    from bench.requests import COUNTER
    from vdq.workflow import retention

    with COUNTER.paused():
        item = stack.runtime.store.get_item(item_id)
    assert item is not None and item.expiration is not None
    with COUNTER.measure(units=True) as tally:
        retention.stamp_done(item, stack.runtime)
    return tally.as_json()


def per_email() -> dict[str, Any]:
    """Bytes one delivered email holds, by record kind."""
    with env.stack(retention_days=RETENTION_DAYS) as stack:
        item_id = _deliver_one(stack)
        stamping = _stamp(stack, item_id)
        rows = table_records(stack.runtime.settings.table_name)
        by_kind: dict[str, int] = {}
        for row in rows:
            kind = _kind(row["sk"]["S"])
            by_kind[kind] = by_kind.get(kind, 0) + record_bytes(row)
        unstamped = [r["sk"]["S"] for r in rows if "expiration" not in r]
    return {"bytes": sum(by_kind.values()), "by_kind": by_kind, "records": len(rows),
            "without_expiration": unstamped, "stamping": stamping}  # fmt: skip


@dataclass
class Month:
    retention_days: int
    sizes: list[int] = field(default_factory=list)  # table bytes at the end of each day
    forever: list[int] = field(default_factory=list)  # the same, had nothing been deleted
    records: list[int] = field(default_factory=list)


def month(retention_days: int, days: int = DAYS, per_day: int = EMAILS_PER_DAY) -> Month:
    """The table's size day by day, the product and a simulated TTL deleter running."""
    import boto3

    out = Month(retention_days)
    with env.stack(retention_days=retention_days) as stack:
        table = stack.runtime.settings.table_name
        client = boto3.client("dynamodb")
        deleted = 0
        for _ in range(days):
            for _ in range(per_day):
                _stamp(stack, _deliver_one(stack))
                stack.clock.advance(86_400 / per_day)
            rows = table_records(table)
            deleted_before = stack.clock.now().timestamp() - TTL_LAG_DAYS * 86_400
            kept = []
            for row in rows:
                if "expiration" in row and int(row["expiration"]["N"]) <= deleted_before:
                    client.delete_item(TableName=table, Key={"pk": row["pk"], "sk": row["sk"]})
                    deleted += record_bytes(row)
                else:
                    kept.append(row)
            out.sizes.append(sum(record_bytes(r) for r in kept))
            out.forever.append(out.sizes[-1] + deleted)
            out.records.append(len(kept))
    return out


def measure(days: int = DAYS, per_day: int = EMAILS_PER_DAY) -> dict[str, Any]:
    email = per_email()
    return {"per_email": email, "month": month(RETENTION_DAYS, days, per_day), "per_day": per_day}


def steady_state_bytes(bytes_per_email: float, per_day: int = VOLUME_PER_DAY,
                       retention_days: int = RETENTION_DAYS) -> float:  # fmt: skip
    """The table's size once retention holds: the emails of the retention and the TTL lag."""
    return bytes_per_email * per_day * (retention_days + TTL_LAG_DAYS)
