"""The due-time buckets of long scheduled sends (``ScheduledRecord``), read by due time from
where the last run stopped (a cursor a partition: one per lane and shard); TTL removes them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from pynamodb.exceptions import DoesNotExist, PutError

from vdq.core.clock import parse_iso
from vdq.store.models import SCHEDULED_CURSOR_SK, ScheduledCursorRecord, ScheduledRecord

PAGE = 25  # buckets a Query page: a run that fills its batch early reads no further
BUCKET_EXPIRY_DAYS = 7  # a bucket no sweep could publish is kept this long past its time
COUNT_DIGITS = 4  # a bucket's item count in its key (vdq.intake.scheduling.BUCKET_IDS: 5,000)


def bucket_record(partition: str, name: str, send_at: str, priority: str, item_ids: str,
                  attempt: int | None = None) -> ScheduledRecord:  # fmt: skip
    """A due-time bucket of ``item_ids`` (space-separated), each at ``attempt`` (None: 1),
    expiring a week after its time. Its key, ``<send_at>#<count>#<name>``, puts the buckets of
    a partition due at the same instant fewest items first: a reminder accepted after a
    newsletter due with it goes before the newsletter's buckets, not behind them."""
    expiry = int((parse_iso(send_at) + timedelta(days=BUCKET_EXPIRY_DAYS)).timestamp())
    sk = f"{send_at}#{item_ids.count(' ') + 1:0{COUNT_DIGITS}d}#{name}"
    return ScheduledRecord(partition, sk, send_at=send_at, priority=priority,
                           item_ids=item_ids, attempt=attempt, expiration=expiry)  # fmt: skip


class Scheduled:
    def due_buckets(self, partition: str, before: str, limit: int,
                    after: str | None = None) -> Iterator[ScheduledRecord]:  # fmt: skip
        """The partition's buckets whose send_at is below ``before``, earliest first, past the
        bucket ``after`` (a sort key): a Query whose key condition reads only what is due,
        a page at a time as the caller goes on."""
        start = {"pk": {"S": partition}, "sk": {"S": after}} if after else None
        return iter(ScheduledRecord.query(
            partition, ScheduledRecord.sk < before, limit=limit, page_size=min(limit, PAGE),
            consistent_read=True, last_evaluated_key=start,
        ))  # fmt: skip

    def add_bucket(self, record: ScheduledRecord) -> None:
        """Write one bucket alone (a retried item's: vdq.workflow.transitions); a plain put,
        its key is its item's attempt's own."""
        record.save()

    def bucket_cursor(self, partition: str) -> str | None:
        """The sort key of the last bucket of the partition published; None before the
        first."""
        return self.schedule_place(partition)

    def move_bucket_cursor(self, partition: str, position: str) -> None:
        """Buckets up to ``position`` are published (a plain put: only the schedule, one run
        at a time, moves it; a lost move publishes a few buckets twice, which the worker's
        claim drops)."""
        self.keep_schedule_place(partition, position)

    def schedule_place(self, partition: str) -> str | None:
        """Where a schedule's pass stopped (a cursor record in a partition of its own: the
        strays' shards, vdq.schedules.strays; the watch of open items, vdq.workflow.retention);
        None before its first run."""
        try:
            record = ScheduledCursorRecord.get(partition, SCHEDULED_CURSOR_SK,
                                               consistent_read=True)  # fmt: skip
        except DoesNotExist:
            return None
        return record.position

    def keep_schedule_place(self, partition: str, position: str) -> None:
        """Store where a schedule's pass stopped (a plain put)."""
        ScheduledCursorRecord(partition, SCHEDULED_CURSOR_SK, position=position).save()

    def swap_schedule_place(self, partition: str, was: str | None, position: str) -> bool:
        """Move a cursor only if it is still at ``was`` (None: none stored): a put conditional
        on the position read, for a cursor that runs of two schedules move (the watch's
        place: vdq.workflow.retention). False when another moved it first."""
        record = ScheduledCursorRecord(partition, SCHEDULED_CURSOR_SK, position=position)
        condition = (ScheduledCursorRecord.pk.does_not_exist() if was is None
                     else ScheduledCursorRecord.position == was)  # fmt: skip
        try:
            record.save(condition=condition)
        except PutError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True
