"""Suppressions: the receivers VDQ does not send to, and each receiver's suppression history.

A suppression is one record in one of ``SUPPRESSION_SHARDS`` partitions (``SUP#<n>``, sort key
``R#<receiver>``): read by key, listed by querying each partition. A receiver's unsubscribe from
one list is a record beside it (``R#<receiver>#L#<list>``, same partition), so a send of list
mail reads both in one request. Its history lives in the receiver's own partition
(``SUPH#<receiver>``) and outlives a removal. Adding and removing write the record and the
history entry in one transaction, conditional on the record's absence or presence, so two feeds
adding the same receiver keep the first ``since``. A provider event's addition also writes the
event's mark (``EV#<hash>`` in the history partition), conditional on its absence: an event
applied before is ``Duplicate`` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pynamodb.exceptions import DoesNotExist, PutError, TransactWriteError
from pynamodb.transactions import TransactWrite

from vdq.store.items import Duplicate
from vdq.store.models import (
    SuppressionEventRecord,
    SuppressionMarkRecord,
    SuppressionRecord,
    suppression_history_pk,
    suppression_pk,
    suppression_sk,
)
from vdq.store.tx import condition_failed, transact


class Suppressions:
    """Reads and conditional writes of suppression records and their history."""

    def get_suppression(self, receiver: str,
                        list_name: str | None = None) -> SuppressionRecord | None:  # fmt: skip
        """The suppression of ``receiver`` (normalised), or its unsubscribe from ``list_name``,
        strongly consistent: one GetItem."""
        try:
            return SuppressionRecord.get(suppression_pk(receiver),
                                         suppression_sk(receiver, list_name),
                                         consistent_read=True)  # fmt: skip
        except DoesNotExist:
            return None

    def suppressions_of(self, receiver: str, list_name: str | None) -> list[SuppressionRecord]:
        """The entries that may stop a send to ``receiver`` of ``list_name``'s mail (None: not
        list mail): its entry for all mail, then its unsubscribe from that list, those that
        exist. Strongly consistent, one request either way (a BatchGetItem of both keys for
        list mail); which of them stops the send is vdq.results.suppression's to say."""
        if list_name is None:
            record = self.get_suppression(receiver)
            return [record] if record is not None else []
        pk = suppression_pk(receiver)
        found = SuppressionRecord.batch_get(
            [(pk, suppression_sk(receiver)), (pk, suppression_sk(receiver, list_name))],
            consistent_read=True)  # fmt: skip
        return sorted(found, key=lambda r: r.list_name is not None)

    def get_suppressions(self, receivers: Iterable[str],
                         list_name: str | None = None) -> list[SuppressionRecord]:  # fmt: skip
        """The entries among ``receivers``' for all mail (with ``list_name``, also their
        unsubscribes from it), in no order: BatchGetItem, a hundred keys a request.

        Eventually consistent (half the read units): it only flags receivers in an enqueue's
        answer; the worker's strongly consistent read decides whether an item is sent."""
        wanted = list(dict.fromkeys(receivers))
        names = [None] if list_name is None else [None, list_name]
        keys = [(suppression_pk(r), suppression_sk(r, n)) for r in wanted for n in names]
        return list(SuppressionRecord.batch_get(keys)) if keys else []

    def receiver_suppressions(self, receiver: str) -> list[SuppressionRecord]:
        """Every entry of ``receiver``: its deployment-wide suppression and its unsubscribes
        from lists, by sort key (one Query of its partition)."""
        rows = SuppressionRecord.query(suppression_pk(receiver),
                                       SuppressionRecord.sk.startswith(suppression_sk(receiver)),
                                       consistent_read=True)  # fmt: skip
        return [r for r in rows if r.receiver == receiver]

    def add_suppression(
        self, record: SuppressionRecord, entry: SuppressionEventRecord,
        mark: SuppressionMarkRecord | None = None,
    ) -> tuple[SuppressionRecord, bool]:
        """Store ``record`` with its history ``entry`` unless the receiver is suppressed
        already; returns the suppression that holds and whether this call added it. With the
        ``mark`` of the provider event that asks it, in the same transaction: ``Duplicate``
        when the event was applied before. The mark is not written when the receiver is
        suppressed already (the caller decides: ``add_suppression_mark``)."""
        def fill(tx: TransactWrite) -> None:
            tx.save(record, condition=SuppressionRecord.pk.does_not_exist())
            tx.save(entry)

        if _transact_marked(fill, mark, record.receiver):
            return record, True
        current = self.get_suppression(record.receiver, record.list_name)
        if current is None:  # removed in between: try once more
            return self.add_suppression(record, entry, mark)
        return current, False

    def add_suppression_mark(self, mark: SuppressionMarkRecord) -> None:
        """The mark of a provider event applied to a receiver suppressed already;
        ``Duplicate`` when it was applied before."""
        try:
            mark.save(condition=_unmarked())
        except PutError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
            raise Duplicate(f"event {mark.sk} of {mark.pk} was applied") from None

    def take_over_suppression(self, current: SuppressionRecord, record: SuppressionRecord,
                              entry: SuppressionEventRecord, moved: SuppressionRecord,
                              mark: SuppressionMarkRecord | None = None) -> bool:  # fmt: skip
        """Store ``record`` in place of ``current`` (its key), with its history ``entry`` (and
        ``mark``, as ``add_suppression``), and ``current`` again as ``moved`` (under another
        key) unless an entry holds that key already: one transaction, conditional on
        ``current`` being unchanged. False when it changed meanwhile (nothing written)."""
        def fill(tx: TransactWrite, keep: bool) -> None:
            tx.save(record, condition=(SuppressionRecord.since == current.since)
                    & (SuppressionRecord.reason == current.reason))  # fmt: skip
            tx.save(entry)
            if keep:
                tx.save(moved, condition=SuppressionRecord.pk.does_not_exist())
            if mark is not None:
                tx.save(mark, condition=_unmarked())

        for keep in (True, False):
            try:
                transact(lambda tx: fill(tx, keep))  # noqa: B023  (called at once)
            except TransactWriteError as exc:
                reasons = exc.cancellation_reasons or []
                at_mark = 3 if keep else 2
                if mark is not None and len(reasons) > at_mark and condition_failed(
                        reasons[at_mark]):  # fmt: skip
                    raise Duplicate(f"event {mark.sk} of {record.receiver} was applied") from None
                if reasons and condition_failed(reasons[0]):
                    return False
                if not (keep and len(reasons) > 2 and condition_failed(reasons[2])):
                    raise
                continue  # ``moved``'s key holds an entry already: that one stays
            return True
        return False

    def remove_suppression(self, receiver: str, entry: SuppressionEventRecord, *,
                           reason: str | None = None, list_name: str | None = None,
                           mark: SuppressionMarkRecord | None = None,
                           ) -> SuppressionRecord | None:  # fmt: skip
        """Delete the suppression of ``receiver`` (its unsubscribe from ``list_name``, when
        given; only one for ``reason``, when given) with its history ``entry``; the suppression
        that was removed, or None when there was none (nothing written but the mark). The
        delete is conditional on the record read: one that changed in between is read and
        checked again. ``mark``: that of the provider event that asks it, spent whether or not
        there was anything to remove; ``Duplicate`` when the event was applied before."""
        current = self.get_suppression(receiver, list_name)
        if current is None or (reason is not None and current.reason != reason):
            if mark is not None:
                self.add_suppression_mark(mark)
            return None
        def fill(tx: TransactWrite) -> None:
            tx.delete(current, condition=(SuppressionRecord.since == current.since)
                      & (SuppressionRecord.reason == current.reason))  # fmt: skip
            tx.save(entry)

        if _transact_marked(fill, mark, receiver):
            return current
        return self.remove_suppression(receiver, entry, reason=reason, list_name=list_name,
                                       mark=mark)  # fmt: skip

    def note_suppression_event(self, entry: SuppressionEventRecord) -> None:
        """A history entry that changes no suppression (an SMS HELP)."""
        entry.save()

    def suppression_history(self, receiver: str) -> list[SuppressionEventRecord]:
        """The receiver's suppression history, oldest first (not the marks beside it)."""
        return list(SuppressionEventRecord.query(suppression_history_pk(receiver),
                                                 SuppressionEventRecord.sk.startswith("H#"),
                                                 consistent_read=True))  # fmt: skip

    def query_suppressions(self, shard: int, *, start_after: str | None,
                           limit: int) -> list[SuppressionRecord]:  # fmt: skip
        """Up to ``limit`` suppressions of one partition past ``start_after`` (a sort key), by
        receiver."""
        condition = (SuppressionRecord.sk > start_after if start_after is not None
                     else SuppressionRecord.sk.startswith("R#"))  # fmt: skip
        return list(SuppressionRecord.query(f"SUP#{shard}", condition, limit=limit,
                                            page_size=limit))  # fmt: skip


def _transact_marked(fill: Callable[[TransactWrite], None],
                     mark: SuppressionMarkRecord | None, receiver: str) -> bool:  # fmt: skip
    """Run the transaction of the two requests ``fill`` adds (a change of a suppression and
    its history entry) and, with ``mark``, the mark's conditional put; False (nothing
    written) when the first request's condition failed, ``Duplicate`` when the mark was there
    (the event was applied before)."""
    def with_mark(tx: TransactWrite) -> None:
        fill(tx)
        if mark is not None:
            tx.save(mark, condition=_unmarked())

    try:
        transact(with_mark)
    except TransactWriteError as exc:
        reasons = exc.cancellation_reasons or []
        if mark is not None and len(reasons) > 2 and condition_failed(reasons[2]):
            raise Duplicate(f"event {mark.sk} of {receiver} was applied") from None
        if not condition_failed((reasons or [None])[0]):
            raise
        return False
    return True


def _unmarked() -> Any:
    """The event's mark is not there."""
    return SuppressionMarkRecord.pk.does_not_exist()
