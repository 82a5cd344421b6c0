"""Scheduled send: a request's ``send_at``, and how an item waits for it.

An item with a ``send_at`` stays ``queued`` until then; nothing reads waiting items one by one:

- A wait of at most 900 s (SQS's longest delay) is the send message's DelaySeconds: the item is
  published at enqueue like any other.
- A longer wait publishes nothing at enqueue. The request's items go into due-time buckets
  (``ScheduledRecord``: a few per request, keyed by send_at) that the minute sweep reads with a
  key condition on time, ``LEAD_SECONDS`` ahead, from a cursor per lane and shard (high lane
  first): it publishes each bucket's items with the rest of the wait as their delay and moves
  the cursor past it (TTL removes the bucket later, for free). The items themselves are not
  read or written, so a cancelled item's message is dropped by the worker's attempt check
  (cancel raised the attempt the bucket's message carries).

The choice against EventBridge Scheduler one-time schedules (one CreateSchedule a receiver at
enqueue, one billed invocation and one SQS message each) is by measured cost: ``python -m
bench.lanes`` and docs/architecture/sending.md, "Scheduled send".

Precision: to the second (SQS's delay) for both, as long as the sweep runs at least once in the
``LEAD_SECONDS`` before send_at (it runs every minute) and a run's batch holds what is due. The
item's publish timer waits until send_at plus the grace period, so the re-publish sweep never
sends it early, and a publish that was lost (or a bucket written behind the cursor by a clock
more than a minute behind the schedule's) still goes out then.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from vdq.core.clock import iso, parse_iso
from vdq.core.errors import BadValue, ValidationError
from vdq.core.observability import logger
from vdq.store.models import ScheduledRecord, scheduled_partition, shard
from vdq.store.scheduled import bucket_record
from vdq.workflow.lanes import PRIORITIES
from vdq.workflow.sendqueue import (  # noqa: F401  (wait_seconds: re-exported)
    MAX_DELAY_SECONDS,
    SendMessage,
    delay_for,
    is_long,
    wait_seconds,
)

# A long wait's bucket is published this long before send_at: below SQS's 900 s, with a
# minute's sweep to spare.
LEAD_SECONDS = MAX_DELAY_SECONDS - 60
BUCKET_IDS = 5000  # item ids per bucket: 26 characters and a space each, about 135 KB

# ASCII digits only, the whole text (``$`` would take a trailing newline); any number of
# fraction digits, as RFC 3339 allows (read to the microsecond).
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?"
    r"(?P<offset>[Zz]|[+-](?P<hours>\d{2}):(?P<minutes>\d{2}))?",
    re.ASCII,
)


def parse_send_at(value: Any, now: datetime, max_days: int, path: str = "send_at") -> str | None:
    """The stored form (UTC) of a requested send time; None when absent, null, or not later
    than now (a time in the past means now). A 400 naming the field when it is not an RFC 3339
    timestamp with an offset; a 422 when it is more than ``max_days`` ahead (the document's
    schema takes any date-time and states the limit in words: valid by it, refused as
    invalid input)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadValue(path, "must be an RFC 3339 timestamp, e.g. 2026-12-24T09:00:00+01:00")
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise BadValue(path, f"{value[:40]!r} is not an RFC 3339 timestamp, e.g. "
                             "2026-12-24T09:00:00+01:00")  # fmt: skip
    if match.group("offset") is None:
        raise BadValue(path, "needs a UTC offset (Z or +hh:mm): without one the time is "
                             "ambiguous")  # fmt: skip
    if match.group("hours") and (int(match.group("hours")) > 23
                                 or int(match.group("minutes")) > 59):  # fmt: skip
        raise BadValue(path, "has an offset out of range: hours 00 to 23, minutes 00 to 59")
    text = value[:-1] + "+00:00" if value[-1] in "Zz" else value
    fraction = match.group(1)
    if fraction and len(fraction) > 7:  # Python reads at most microseconds
        text = text.replace(fraction, fraction[:7], 1)
    try:
        at = datetime.fromisoformat(text.replace("t", "T"))
    except ValueError as exc:
        raise BadValue(path, f"is not a valid time: {exc}") from None
    if at > now + timedelta(days=max_days):
        raise ValidationError(path, f"is more than {max_days} days ahead "
                                    "(VDQ_MAX_SCHEDULE_DAYS)")  # fmt: skip
    if at <= now:
        return None
    return iso(at.astimezone(UTC))


def publish_after(send_at: str | None, now: datetime) -> datetime:
    """From when the item's publish counts: its send time, or now."""
    return parse_iso(send_at) if send_at is not None and parse_iso(send_at) > now else now


def buckets(items: list[Any], content_id: str, send_at: str, priority: str,
            shards: int) -> list[ScheduledRecord]:  # fmt: skip
    """The due-time buckets of a request's items that wait longer than SQS can delay."""
    out = []
    partition = scheduled_partition(priority, shard(content_id, shards))
    for n, start in enumerate(range(0, len(items), BUCKET_IDS)):
        ids = " ".join(i.id for i in items[start : start + BUCKET_IDS])
        out.append(bucket_record(partition, f"{send_at}#{content_id}#{n}", send_at, priority,
                                 ids))  # fmt: skip
    return out


def release_due(runtime: Any, report: Any) -> None:
    """Publish the items of every bucket due within ``LEAD_SECONDS`` that the last run did not,
    each delayed until its send_at, and move the cursor of its lane and shard past them. The
    high lane's buckets go first, then normal's, then bulk's: a run's batch spent on a bulk
    backlog never holds back a high item due at the same time. A bucket whose publish failed
    stops its partition there, for the next run (a message that goes out twice is dropped by
    the worker's claim)."""
    s = runtime.settings
    now = runtime.clock.now()
    before = iso(now + timedelta(seconds=LEAD_SECONDS))
    left = s.schedule_batch
    for priority in PRIORITIES:
        for k in range(s.index_shards):
            if left <= 0:
                return
            left = _release_partition(runtime, report, scheduled_partition(priority, k),
                                      before, now, left)  # fmt: skip


def _release_partition(runtime: Any, report: Any, partition: str, before: str, now: datetime,
                       left: int) -> int:  # fmt: skip
    """Release one partition's due buckets until ``left`` items are published; what is left."""
    store = runtime.store
    cursor = store.bucket_cursor(partition)
    if cursor is not None and cursor >= before:
        # An overlapping run with a later clock moved it past this run's window: nothing is
        # due here, and DynamoDB refuses a Query that starts outside its key condition.
        return left
    moved = cursor
    for bucket in store.due_buckets(partition, before, left, after=cursor):
        ids = bucket.item_ids.split()
        delay = delay_for(bucket.send_at, now)
        attempt = int(bucket.attempt or 1)  # a retry's bucket names its attempt
        messages = [SendMessage(i, attempt, delay, priority=bucket.priority) for i in ids]
        failed = runtime.send_queue.publish(messages)
        if failed:
            report.add("scheduled_publish_failed", len(failed))
            logger.error("%d scheduled sends of %s not published: %s; the next run tries "
                         "again", len(failed), bucket.sk, next(iter(failed.values())))
            break
        moved = bucket.sk
        report.add("scheduled_released", len(ids))
        left -= len(ids)
        if left <= 0:
            break
    if moved != cursor:
        assert moved is not None
        store.move_bucket_cursor(partition, moved)
    return left
