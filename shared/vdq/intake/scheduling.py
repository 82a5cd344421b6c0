"""Scheduled send: a request's ``send_at``, and how an item waits for it.

An item with a ``send_at`` stays ``queued`` until then; nothing reads waiting items one by one:

- A wait of at most 900 s (SQS's longest delay) is the send message's DelaySeconds: the item is
  published at enqueue like any other.
- A longer wait publishes nothing at enqueue. The request's items go into due-time buckets
  (``ScheduledRecord``: a few per request, keyed by send_at) that the minute sweep reads with a
  key condition on time, ``LEAD_SECONDS`` ahead, from a cursor per lane and shard (high lane
  first; in a lane, the shards' buckets earliest due first, those due together sharing the
  run's batch): it publishes each bucket's items with the rest of the wait as their delay and
  moves the cursor past it (TTL removes the bucket later, for free). The items themselves are
  not read or written, so a cancelled item's message is dropped by the worker's attempt check
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
        out.append(bucket_record(partition, f"{content_id}#{n}", send_at, priority,
                                 ids))  # fmt: skip
    return out


def release_due(runtime: Any, report: Any) -> None:
    """Publish the items of every bucket due within ``LEAD_SECONDS`` that the last run did not,
    each delayed until its send_at, and move the cursor of its lane and shard past them. The
    high lane's buckets go first, then normal's, then bulk's: a run's batch spent on a bulk
    backlog never holds back a high item due at the same time. Within a lane, the shards'
    buckets go earliest due minute first; those due in the same minute, and all due before the
    next run (late ones too), share the batch between the shards (``_next_shard``). A bucket
    whose publish failed stops its shard there, for the next run (a message that goes out
    twice is dropped by the worker's claim)."""
    s = runtime.settings
    now = runtime.clock.now()
    left = s.schedule_batch
    for priority in PRIORITIES:
        if left <= 0:
            return
        partitions = [scheduled_partition(priority, k) for k in range(s.index_shards)]
        left = _release_lane(runtime, report, partitions, now, left)


def _release_lane(runtime: Any, report: Any, partitions: list[str], now: datetime,
                  left: int) -> int:  # fmt: skip
    """Release one lane's due buckets, across its shards, until ``left`` items are published;
    what is left. Reads a cursor and a Query page a shard, as many as one shard at a time
    did: a shard's next page only when the run goes on in it."""
    store = runtime.store
    before = iso(now + timedelta(seconds=LEAD_SECONDS))
    cursors = {p: store.bucket_cursor(p) for p in partitions}
    # A cursor at or past the window: an overlapping run with a later clock moved it, nothing
    # is due there, and DynamoDB refuses a Query that starts outside its key condition.
    due = {p: store.due_buckets(p, before, left, after=c) for p, c in cursors.items()
           if c is None or c < before}  # fmt: skip
    heads = {p: b for p, d in due.items() if (b := next(d, None)) is not None}
    moved, released = dict(cursors), dict.fromkeys(heads, 0)
    soon = iso(now + timedelta(seconds=60))[:_MINUTE]
    turn = int(now.timestamp() // 60)
    while heads and left > 0:
        partition = _next_shard(heads, released, left, soon, turn)
        bucket = heads[partition]
        ids = bucket.item_ids.split()
        delay = delay_for(bucket.send_at, now)
        attempt = int(bucket.attempt or 1)  # a retry's bucket names its attempt
        messages = [SendMessage(i, attempt, delay, priority=bucket.priority) for i in ids]
        failed = runtime.send_queue.publish(messages)
        if failed:
            report.add("scheduled_publish_failed", len(failed))
            logger.error("%d scheduled sends of %s not published: %s; the next run tries "
                         "again", len(failed), bucket.sk, next(iter(failed.values())))
            del heads[partition]
            continue
        moved[partition] = bucket.sk
        report.add("scheduled_released", len(ids))
        released[partition] += len(ids)
        left -= len(ids)
        following = next(due[partition], None)
        if following is None:
            del heads[partition]
        else:
            heads[partition] = following
    # Every shard's cursor, though one write fails: the run then fails, and the next one
    # publishes again only the buckets of the shards whose cursor stayed.
    error: Exception | None = None
    for partition in partitions:
        position = moved[partition]
        if position != cursors[partition]:
            assert position is not None
            try:
                store.move_bucket_cursor(partition, position)
            except Exception as exc:
                error = error or exc
    if error is not None:
        raise error
    return left


_MINUTE = len("2026-12-24T09:00")  # an iso time's due minute


def _next_shard(heads: dict[str, ScheduledRecord], released: dict[str, int], left: int,
                soon: str, turn: int) -> str:  # fmt: skip
    """The partition whose first due bucket goes next: the earliest due minute, each bucket
    due before the next run's minute counted as due then (late ones share the batch rather
    than wait for what is due earlier to drain); in a minute, the shard that with this
    bucket will have published the fewest items in the run, a bucket counting at most what is
    left of the batch (a newsletter's bucket that fills the batch goes after a single item's
    in another shard); among equals, a shard a run in turn (``turn``: the run's minute)."""

    def rank(partition: str) -> tuple[str, int]:
        bucket = heads[partition]
        size = bucket.item_ids.count(" ") + 1
        return max(bucket.send_at[:_MINUTE], soon), released[partition] + min(size, left)

    first = min(rank(p) for p in heads)
    equals = [p for p in heads if rank(p) == first]  # in shard order
    return equals[turn % len(equals)]
