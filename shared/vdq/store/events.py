"""History entries that change no state (provider events that leave an item as it is, late
events, notes), with the event's mark: where the mark and the entries go, so that a duplicate
delivery is found whichever place the first one used (vdq.store.history).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pynamodb.exceptions import TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from vdq.store.expiry import stamp
from vdq.store.history import (
    SEEN_LIMIT,
    EventMark,
    NoRoom,
    add_recent,
    appended,
    applied,
    fitting,
    pack_history,
    room,
    seen_room,
)
from vdq.store.items import Duplicate, Items, Moved
from vdq.store.models import STATE_SK, EventMarkRecord, HistoryRecord, QueueItemRecord, item_pk
from vdq.store.tx import condition_failed, condition_failed_at, conditional_update, transact

# Writes of one event's mark into the ``seen`` set that may find it (or the entries' room)
# filled by other writes since their read, before the mark is a record of its own.
MARK_TRIES = 5


class Events(Items):
    """Appends to an item's history that change no state."""

    def append_history(
        self,
        entries: Sequence[HistoryRecord],
        *,
        mark: EventMark | None = None,
        expiration: int | float | None = None,
        item: QueueItemRecord | None = None,
    ) -> None:
        """History entries that change no state (events that leave an item as it is).

        With ``mark`` (the event's duplicate check) and the ``item`` as read, one write:

        - while the item's ``seen`` set has room, the mark joins it: with the entries in one
          UpdateItem while they fit on the state item, else in a transaction with their
          record. Every mark written while the set has room is in it, so each later check of
          the set (this one's, ``commit``'s) finds it;
        - once the set is full, a transaction that stores the mark as a record of its own with
          the entries', conditional on the mark being neither there nor in the set.

        A mark seen before is ``Duplicate``; both bounds keep the state item small whatever
        flood of events (opens, clicks, late events) reaches it. ``expiration``: the item's,
        when it is done (the records and the mark take it).
        """
        if mark is None:
            records = pack_history(entries)
            stamp(records, expiration)
            if len(records) == 1:
                records[0].save()
            elif records:
                self.put_new(records)
            return
        current = item
        for _ in range(MARK_TRIES):
            if current is None or len(current.seen or ()) >= SEEN_LIMIT:
                break
            try:
                self._mark_in_seen(current, entries, mark, expiration)
                return
            except NoRoom:  # the set or the entries' room filled since the read
                current = self.get_item(mark.item_id)
        self._mark_record(entries, mark, expiration)

    def _mark_in_seen(self, item: QueueItemRecord, entries: Sequence[HistoryRecord],
                      mark: EventMark, expiration: int | float | None) -> None:  # fmt: skip
        """The mark joins the ``seen`` set, the entries on the state item (one UpdateItem) or
        in a record (with the set's update, one transaction)."""
        recent = fitting(item, entries) if all(e.pk == item.pk for e in entries) else None
        actions: list[Any] = [QueueItemRecord.seen.add({mark.digest})]
        condition = (QueueItemRecord.id.exists() & ~QueueItemRecord.seen.contains(mark.digest)
                     & seen_room())  # fmt: skip
        probe = QueueItemRecord(item.pk, STATE_SK)
        records: list[HistoryRecord] = []
        if recent:
            actions.append(appended(recent))
            condition = condition & room(len(recent))
        else:
            records = pack_history(entries)
            stamp(records, expiration)
        try:
            if recent:
                conditional_update(probe, actions, condition)
            else:
                def fill(tx: TransactWrite) -> None:
                    tx.update(probe, actions, condition=condition)
                    for record in records:
                        tx.save(record)

                transact(fill)
        except (UpdateError, TransactWriteError) as exc:
            if not condition_failed_at(exc, at=len(records)):  # the puts, then the update
                raise
            current = self.get_item(item.id)
            if applied(current, recent):
                pass
            elif current is None:
                raise Moved(None) from None
            elif mark.digest in (current.seen or ()):
                raise Duplicate(f"event {mark.digest} of {item.id} was seen") from None
            else:
                raise NoRoom() from None
        item.seen = {*(item.seen or ()), mark.digest}
        if recent:
            add_recent(item, recent)

    def _mark_record(self, entries: Sequence[HistoryRecord], mark: EventMark,
                     expiration: int | float | None) -> None:  # fmt: skip
        """The mark as a record of its own, with the entries' records: one transaction,
        conditional on the mark being neither there nor in the ``seen`` set."""
        records = pack_history(entries)
        stamp(records, expiration)
        unseen = QueueItemRecord.id.exists() & ~QueueItemRecord.seen.contains(mark.digest)
        marker = mark.record()
        stamp([marker], expiration)

        def fill(tx: TransactWrite) -> None:
            tx.condition_check(QueueItemRecord, item_pk(mark.item_id), STATE_SK,
                               condition=unseen)  # fmt: skip
            tx.save(marker, condition=EventMarkRecord.pk.does_not_exist())
            for record in records:
                tx.save(record)

        try:
            transact(fill)
        except TransactWriteError as exc:
            # PynamoDB sends condition checks first, then puts.
            reasons = exc.cancellation_reasons or []
            if not any(condition_failed(r) for r in reasons[:2]):
                raise
            if condition_failed(reasons[0]) and self.get_item(mark.item_id) is None:
                raise Moved(None) from None
            raise Duplicate(f"event {mark.digest} of {mark.item_id} was seen") from exc
