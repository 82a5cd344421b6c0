"""History entries that change no state (provider events that leave an item as it is, late
events, notes), with the event's mark: where the mark and the entries go, so that a duplicate
delivery is found whichever place the first one used (vdq.store.history).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pynamodb.exceptions import TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from vdq.store.expiry import ITEM_PK_PREFIX, stamp, unstamped
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
        as_read: bool = False,
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
        when it is done (the records and the mark take it). ``as_read`` (with a mark): the
        entries were decided on the state and attempt of ``item``; an item that has left them
        since is ``Moved`` (nothing written), for the caller to decide again.
        """
        if mark is None:
            records = pack_history(entries)
            stamp(records, expiration)
            for pk in dict.fromkeys(r.pk for r in records if unstamped([r])):
                self._put_beside([r for r in records if r.pk == pk])
            self._put([r for r in records if not unstamped([r])])  # together, as they are
            return
        read = _as_read(item) if as_read else None
        current = item
        for _ in range(MARK_TRIES):
            if read is not None and _as_read(current) != read:
                raise Moved(current)
            if current is None or len(current.seen or ()) >= SEEN_LIMIT:
                break
            if expiration is None and current.expiration is not None:
                expiration = int(current.expiration)  # done since the caller's read
            try:
                self._mark_in_seen(current, entries, mark, expiration, read)
                return
            except NoRoom:  # the set or the entries' room filled since the read, or it is done
                current = self.get_item(mark.item_id)
        self._mark_record(entries, mark, expiration, read)

    def _put_beside(self, records: Sequence[HistoryRecord]) -> None:
        """One item's records beside its state item. Without an expiration (the item was open
        when the caller read it), they are written in one transaction with the item's
        ``apart``, conditional on the item being there and not done, so that the stream stamps
        them once it is done; an item done since gives them its expiration (the stream may have
        stamped its records already). Nothing is written for an item that is gone: no read
        would find the records, and nothing would ever expire them."""
        if unstamped(records):
            probe = QueueItemRecord(records[0].pk, STATE_SK)

            def fill(tx: TransactWrite) -> None:
                for record in records:
                    tx.save(record)
                tx.update(probe, [QueueItemRecord.apart.set(1)],
                          condition=QueueItemRecord.id.exists()
                          & QueueItemRecord.expiration.does_not_exist())  # fmt: skip

            try:
                transact(fill)
                return
            except TransactWriteError as exc:
                if not condition_failed_at(exc, at=len(records)):  # the puts, then the update
                    raise
            current = self.get_item(records[0].pk.removeprefix(ITEM_PK_PREFIX))
            if current is None:
                return
            if current.expiration is not None:
                stamp(records, current.expiration)
        self._put(records)

    def _put(self, records: Sequence[HistoryRecord]) -> None:
        if len(records) == 1:
            records[0].save()
        elif records:
            self.put_new(records)

    def _mark_in_seen(self, item: QueueItemRecord, entries: Sequence[HistoryRecord],
                      mark: EventMark, expiration: int | float | None,
                      read: tuple[str, int] | None = None) -> None:  # fmt: skip
        """The mark joins the ``seen`` set, the entries on the state item (one UpdateItem) or
        in a record (with the set's update, one transaction); with ``read``, only while the
        item is in that state and attempt (else ``Moved``)."""
        recent = fitting(item, entries) if all(e.pk == item.pk for e in entries) else None
        actions: list[Any] = [QueueItemRecord.seen.add({mark.digest})]
        condition = (QueueItemRecord.id.exists() & ~QueueItemRecord.seen.contains(mark.digest)
                     & seen_room() & _still(read))  # fmt: skip
        probe = QueueItemRecord(item.pk, STATE_SK)
        records: list[HistoryRecord] = []
        if recent:
            actions.append(appended(recent))
            condition = condition & room(len(recent))
        else:
            records = pack_history(entries)
            stamp(records, expiration)
            if unstamped([r for r in records if r.pk == item.pk]):
                # The item is not done (else the records expire with it): it says so.
                actions.append(QueueItemRecord.apart.set(1))
                condition = condition & QueueItemRecord.expiration.does_not_exist()
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
            elif read is not None and _as_read(current) != read:
                raise Moved(current) from None
            else:
                raise NoRoom() from None
        item.seen = {*(item.seen or ()), mark.digest}
        if recent:
            add_recent(item, recent)

    def _mark_record(self, entries: Sequence[HistoryRecord], mark: EventMark,
                     expiration: int | float | None,
                     read: tuple[str, int] | None = None) -> None:  # fmt: skip
        """The mark as a record of its own, with the entries' records: one transaction,
        conditional on the mark being neither there nor in the ``seen`` set (and with
        ``read``, on the item's state and attempt). Records without an expiration (the item is
        not done) set the item's ``apart`` in it, with the same condition; otherwise the state
        item is only checked."""
        records = pack_history(entries)
        stamp(records, expiration)
        unseen = (QueueItemRecord.id.exists() & ~QueueItemRecord.seen.contains(mark.digest)
                  & _still(read))  # fmt: skip
        marker = mark.record()
        stamp([marker], expiration)
        apart = unstamped([marker, *records])
        if apart:  # the item is not done (else the records expire with it): it says so
            unseen = unseen & QueueItemRecord.expiration.does_not_exist()

        def fill(tx: TransactWrite) -> None:
            if not apart:
                tx.condition_check(QueueItemRecord, item_pk(mark.item_id), STATE_SK,
                                   condition=unseen)  # fmt: skip
            tx.save(marker, condition=EventMarkRecord.pk.does_not_exist())
            for record in records:
                tx.save(record)
            if apart:
                tx.update(QueueItemRecord(item_pk(mark.item_id), STATE_SK),
                          [QueueItemRecord.apart.set(1)], condition=unseen)  # fmt: skip

        try:
            transact(fill)
        except TransactWriteError as exc:
            # PynamoDB sends condition checks first, then puts, then updates.
            reasons = exc.cancellation_reasons or []
            state_at, marker_at = (1 + len(records), 0) if apart else (0, 1)
            state = reasons[state_at] if state_at < len(reasons) else None
            marked = reasons[marker_at] if marker_at < len(reasons) else None
            if not condition_failed(state) and not condition_failed(marked):
                raise
            current = self.get_item(mark.item_id) if condition_failed(state) else None
            if condition_failed(state) and current is None:
                raise Moved(None) from None
            if current is not None and read is not None and _as_read(current) != read:
                raise Moved(current) from None
            if (apart and current is not None and current.expiration is not None
                    and mark.digest not in (current.seen or ())):  # fmt: skip
                # Done since the caller read it: the same write, its records stamped.
                self._mark_record(entries, mark, int(current.expiration), read)
                return
            raise Duplicate(f"event {mark.digest} of {mark.item_id} was seen") from exc


def _as_read(item: QueueItemRecord | None) -> tuple[str, int] | None:
    return None if item is None else (str(item.state), int(item.attempt))


def _still(read: tuple[str, int] | None) -> Any:
    """The condition that the item is in the state and attempt ``read`` (none without one)."""
    if read is None:
        return QueueItemRecord.id.exists()
    state, attempt = read
    return (QueueItemRecord.state == state) & (QueueItemRecord.attempt == attempt)
