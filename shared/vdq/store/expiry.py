"""Expiration of records: reads that treat a record past it as gone, and the stamping of an
item's records once it is done (vdq.workflow.retention says when and why)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pynamodb.exceptions import UpdateError

from vdq.core import resources
from vdq.core.clock import SYSTEM_CLOCK, Clock
from vdq.store.models import STATE_SK, _Table, item_pk

ITEM_PK_PREFIX = item_pk("")


def gone(expiration: int | float | None, now: datetime) -> bool:
    """A record past its expiration is gone, whether or not DynamoDB deleted it yet."""
    return expiration is not None and expiration <= now.timestamp()


def unstamped(records: Iterable[_Table]) -> bool:
    """Some of ``records`` are an item's records beside its state item (history, event marks)
    that carry no expiration: the write that stores them, or one before it, sets the item's
    ``apart`` (QueueItemRecord.apart), so that the stream stamps them when the item is done."""
    return any(r.pk.startswith(ITEM_PK_PREFIX) and r.sk != STATE_SK and r.expiration is None
               for r in records)  # fmt: skip


def stamp(records: Iterable[_Table], expiration: int | float | None) -> None:
    """Records of an item that is done carry its expiration."""
    if expiration is not None:
        for record in records:
            record.expiration = int(expiration)


class Expiring:
    """DynamoDB deletes an expired record up to two days later: ``clock`` says when now is,
    and a record past its expiration is not live."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock

    def _live(self, record: Any) -> bool:
        return not gone(record.expiration, self.clock.now())

    def stamp_item_records(self, item_id: str, expiration: int) -> int:
        """Give every record of the item but its state (history, event marks) ``expiration``,
        where it has none; returns how many were stamped. Idempotent."""
        stamped = 0
        rows = _Table.query(item_pk(item_id), consistent_read=True,
                            attributes_to_get=["pk", "sk", resources.TABLE_TTL_ATTRIBUTE])
        for row in rows:
            if row.sk != STATE_SK and row.expiration is None:
                stamped += self._stamp_one(row.pk, row.sk, expiration)
        return stamped

    @staticmethod
    def _stamp_one(pk: str, sk: str, expiration: int) -> int:
        probe = _Table(pk, sk)
        try:
            probe.update(actions=[_Table.expiration.set(expiration)],
                         condition=_Table.pk.exists())  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return 0
            raise
        return 1
