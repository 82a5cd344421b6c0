"""The due-time buckets of long scheduled sends (``ScheduledRecord``): read by due time, deleted
once their items are published."""

from __future__ import annotations

from vdq.store.models import SCHEDULED_PREFIX, ScheduledRecord


class Scheduled:
    def due_buckets(self, shard: int, before: str, limit: int) -> list[ScheduledRecord]:
        """The shard's buckets whose send_at is below ``before``, earliest first: one Query
        whose key condition reads only what fell due."""
        return list(ScheduledRecord.query(
            f"{SCHEDULED_PREFIX}{shard}", ScheduledRecord.sk < before, limit=limit,
            page_size=limit, consistent_read=True,
        ))  # fmt: skip

    def delete_bucket(self, bucket: ScheduledRecord) -> None:
        """Remove a bucket whose items are published (a bucket already gone is no error)."""
        bucket.delete()
