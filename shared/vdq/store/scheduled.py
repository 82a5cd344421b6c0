"""The due-time buckets of long scheduled sends (``ScheduledRecord``), read by due time from
where the last run stopped (a cursor a shard); TTL removes them."""

from __future__ import annotations

from pynamodb.exceptions import DoesNotExist

from vdq.store.models import (
    SCHEDULED_CURSOR_SK,
    SCHEDULED_PREFIX,
    ScheduledCursorRecord,
    ScheduledRecord,
)


class Scheduled:
    def due_buckets(self, shard: int, before: str, limit: int,
                    after: str | None = None) -> list[ScheduledRecord]:  # fmt: skip
        """The shard's buckets whose send_at is below ``before``, earliest first, past the
        bucket ``after`` (a sort key): one Query whose key condition reads only what is due."""
        pk = f"{SCHEDULED_PREFIX}{shard}"
        start = {"pk": {"S": pk}, "sk": {"S": after}} if after else None
        return list(ScheduledRecord.query(
            pk, ScheduledRecord.sk < before, limit=limit, page_size=limit,
            consistent_read=True, last_evaluated_key=start,
        ))  # fmt: skip

    def bucket_cursor(self, shard: int) -> str | None:
        """The sort key of the last bucket of the shard published; None before the first."""
        try:
            record = ScheduledCursorRecord.get(f"{SCHEDULED_PREFIX}{shard}", SCHEDULED_CURSOR_SK,
                                               consistent_read=True)  # fmt: skip
        except DoesNotExist:
            return None
        return record.position

    def move_bucket_cursor(self, shard: int, position: str) -> None:
        """Buckets up to ``position`` are published (a plain put: only the schedule, one run
        at a time, moves it; a lost move publishes a few buckets twice, which the worker's
        claim drops)."""
        ScheduledCursorRecord(f"{SCHEDULED_PREFIX}{shard}", SCHEDULED_CURSOR_SK,
                              position=position).save()
