"""Suppressions: the receivers VDQ does not send to, and each receiver's suppression history.

A suppression is one record in one of ``SUPPRESSION_SHARDS`` partitions (``SUP#<n>``, sort key
``R#<receiver>``): read by key, listed by querying each partition. Its history lives in the
receiver's own partition (``SUPH#<receiver>``) and outlives a removal. Adding and removing write
the record and the history entry in one transaction, conditional on the record's absence or
presence, so two feeds adding the same receiver keep the first ``since``.
"""

from __future__ import annotations

from collections.abc import Iterable

from pynamodb.exceptions import DoesNotExist, TransactWriteError
from pynamodb.transactions import TransactWrite

from vdq.store.models import (
    SuppressionEventRecord,
    SuppressionRecord,
    suppression_history_pk,
    suppression_pk,
    suppression_sk,
)
from vdq.store.tx import condition_failed, transact


class Suppressions:
    """Reads and conditional writes of suppression records and their history."""

    def get_suppression(self, receiver: str) -> SuppressionRecord | None:
        """The suppression of ``receiver`` (normalised), strongly consistent: one GetItem."""
        try:
            return SuppressionRecord.get(suppression_pk(receiver), suppression_sk(receiver),
                                         consistent_read=True)  # fmt: skip
        except DoesNotExist:
            return None

    def get_suppressions(self, receivers: Iterable[str]) -> dict[str, SuppressionRecord]:
        """The suppressions among ``receivers``: BatchGetItem, a hundred keys a request.

        Eventually consistent (half the read units): it only flags receivers in an enqueue's
        answer; the worker's strongly consistent read decides whether an item is sent."""
        keys = [(suppression_pk(r), suppression_sk(r)) for r in dict.fromkeys(receivers)]
        if not keys:
            return {}
        return {r.receiver: r for r in SuppressionRecord.batch_get(keys)}

    def add_suppression(
        self, record: SuppressionRecord, entry: SuppressionEventRecord
    ) -> tuple[SuppressionRecord, bool]:
        """Store ``record`` with its history ``entry`` unless the receiver is suppressed
        already; returns the suppression that holds and whether this call added it."""
        def fill(tx: TransactWrite) -> None:
            tx.save(record, condition=SuppressionRecord.pk.does_not_exist())
            tx.save(entry)

        try:
            transact(fill)
        except TransactWriteError as exc:
            if not condition_failed((exc.cancellation_reasons or [None])[0]):
                raise
            current = self.get_suppression(record.receiver)
            if current is None:  # removed in between: try once more
                return self.add_suppression(record, entry)
            return current, False
        return record, True

    def remove_suppression(self, receiver: str, entry: SuppressionEventRecord, *,
                           reason: str | None = None) -> SuppressionRecord | None:  # fmt: skip
        """Delete the suppression of ``receiver`` (only one for ``reason``, when given) with its
        history ``entry``; the suppression that was removed, or None when there was none
        (nothing written). The delete is conditional on the record read: one that changed in
        between is read and checked again."""
        current = self.get_suppression(receiver)
        if current is None or (reason is not None and current.reason != reason):
            return None
        def fill(tx: TransactWrite) -> None:
            tx.delete(current, condition=(SuppressionRecord.since == current.since)
                      & (SuppressionRecord.reason == current.reason))  # fmt: skip
            tx.save(entry)

        try:
            transact(fill)
        except TransactWriteError as exc:
            if not condition_failed((exc.cancellation_reasons or [None])[0]):
                raise
            return self.remove_suppression(receiver, entry, reason=reason)
        return current

    def note_suppression_event(self, entry: SuppressionEventRecord) -> None:
        """A history entry that changes no suppression (an SMS HELP)."""
        entry.save()

    def suppression_history(self, receiver: str) -> list[SuppressionEventRecord]:
        """The receiver's suppression history, oldest first."""
        return list(SuppressionEventRecord.query(suppression_history_pk(receiver),
                                                 consistent_read=True))  # fmt: skip

    def query_suppressions(self, shard: int, *, start_after: str | None,
                           limit: int) -> list[SuppressionRecord]:  # fmt: skip
        """Up to ``limit`` suppressions of one partition past ``start_after`` (a sort key), by
        receiver."""
        condition = (SuppressionRecord.sk > start_after if start_after is not None
                     else SuppressionRecord.sk.startswith("R#"))  # fmt: skip
        return list(SuppressionRecord.query(f"SUP#{shard}", condition, limit=limit,
                                            page_size=limit))  # fmt: skip
