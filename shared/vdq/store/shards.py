"""The sparse indexes' write shards, a count that only grows.

An entry of the open-items, timers, sent-items or purge index lives in the shard its item's id
hashes to among ``VDQ_INDEX_SHARDS``; readers (the lists, the schedules' sweeps) query each
shard. Were the count lowered (a redeploy with a lower ``vdq:peakSendRate``), entries written in
the shards above it would be read by nothing: timers that never fire, items missing from the
lists, strays never armed. So the table keeps the highest count any function has run with
(``CFG#shards``), and a function runs with that count when its own setting is lower. A function
raises the stored count before its first write, so no entry is in a shard the stored count does
not name.
"""

from __future__ import annotations

from pynamodb.exceptions import DoesNotExist, UpdateError

from vdq.store.models import ShardCountRecord

SHARDS_PK = "CFG#shards"
SHARDS_SK = "CFG"


class Shards:
    def kept_index_shards(self, configured: int) -> int:
        """The shard count to run with: ``configured``, or the table's stored count when that
        is higher. A higher ``configured`` is stored first (one conditional UpdateItem, which
        only ever raises it); otherwise one strongly consistent GetItem."""
        stored = self._stored_shards()
        if stored >= configured:
            return stored
        record = ShardCountRecord(SHARDS_PK, SHARDS_SK)
        try:
            record.update(actions=[ShardCountRecord.shards.set(configured)],
                          condition=ShardCountRecord.shards.does_not_exist()
                          | (ShardCountRecord.shards < configured))  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
            return max(configured, self._stored_shards())  # another raised it higher first
        return configured

    @staticmethod
    def _stored_shards() -> int:
        try:
            record = ShardCountRecord.get(SHARDS_PK, SHARDS_SK, consistent_read=True)
        except DoesNotExist:
            return 0
        return int(record.shards)
