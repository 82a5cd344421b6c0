"""Queue items: reads, index queries, and conditional state writes with their history.

Every state change is one conditional write whose condition is the (state, attempt) the writer
read. A failed condition comes back as ``Moved`` carrying the item as it now is (DynamoDB returns
it with the failure), so the caller decides again without another read.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pynamodb.exceptions import DoesNotExist, TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from vdq.core import resources
from vdq.core.errors import VdqError
from vdq.store.expiry import Expiring, stamp, unstamped
from vdq.store.history import (
    SEEN_LIMIT,
    EventMark,
    NoRoom,
    add_recent,
    appended,
    applied,
    fitting,
    pack_history,
    recent_json,
    room,
    unpack_history,
)
from vdq.store.keys import ProviderIdTaken
from vdq.store.models import (
    MAP_SK,
    STATE_SK,
    ContentRefsRecord,
    EventMarkRecord,
    HistoryRecord,
    ProviderRecord,
    QueueItemRecord,
    Release,
    _Table,
    item_pk,
    provider_pk,
    refs_key,
)
from vdq.store.tx import (
    BatchWrites,
    ConditionFailed,
    condition_failed,
    conditional_update,
    transact,
    update_returning,
)


@dataclass
class Moved(Exception):
    """The item was not in the (state, attempt) the writer read. ``current`` is how it is now."""

    current: QueueItemRecord | None

    def __str__(self) -> str:
        if self.current is None:
            return "the queue item does not exist"
        return f"queue item {self.current.id} is now {self.current.state}/{self.current.attempt}"


class Duplicate(VdqError):
    """This provider event was recorded on the item before (its event mark exists)."""

    code = "duplicate_event"


@dataclass
class StateWrite:
    """One conditional change of a queue item: SET and REMOVE of named attributes."""

    set: dict[str, Any] = field(default_factory=dict)
    remove: builtins.set[str] = field(default_factory=builtins.set)
    add: dict[str, int] = field(default_factory=dict)
    # Conditions beyond the item being as read: the attribute is at least this number (the
    # done write's ``cx``: the content outlives the item, vdq.workflow.retention).
    at_least: dict[str, int] = field(default_factory=dict)

    def actions(self) -> list[Any]:
        actions: list[Any] = []
        for name, value in self.set.items():
            attr = getattr(QueueItemRecord, name)
            actions.append(attr.remove() if value is None else attr.set(value))
        actions.extend(getattr(QueueItemRecord, name).remove() for name in sorted(self.remove))
        actions.extend(getattr(QueueItemRecord, name).add(n) for name, n in self.add.items())
        return actions


def _expected(item: QueueItemRecord) -> Any:
    """The item is as read: state, attempt and provider ID (a write that applies a provider
    result assumed the ID it read; a stale read must never replace another attempt's ID)."""
    same_id = (
        QueueItemRecord.provider_id.does_not_exist()
        if item.provider_id is None
        else QueueItemRecord.provider_id == item.provider_id
    )
    same_state = QueueItemRecord.state == item.state
    return same_state & (QueueItemRecord.attempt == item.attempt) & same_id


def _as_read(item: QueueItemRecord, current: QueueItemRecord) -> bool:
    """``current`` is in the (state, attempt, provider ID) ``item`` was read in."""
    return (current.state, int(current.attempt), current.provider_id) == (
        item.state, int(item.attempt), item.provider_id)


def _current_from(reason: Any) -> QueueItemRecord | None:
    raw = getattr(reason, "raw_item", None)
    return QueueItemRecord.from_raw_data(raw) if raw else None


class Items(BatchWrites, Expiring):
    """Reads and conditional writes of queue items and their history.

    Reads treat a record past its expiration as gone (``Expiring``)."""

    def get_item(self, item_id: str) -> QueueItemRecord | None:
        try:
            item = QueueItemRecord.get(item_pk(item_id), STATE_SK, consistent_read=True)
        except DoesNotExist:
            return None
        return item if self._live(item) else None

    def get_items(self, item_ids: Iterable[str], *,
                  consistent: bool = True) -> dict[str, QueueItemRecord]:  # fmt: skip
        """The items (live ones) by id: strongly consistent unless ``consistent`` is False
        (eventually consistent, half the read: a search, which reads an eventually consistent
        index first anyway; a check, which a stale read only costs a failed write)."""
        keys = [(item_pk(i), STATE_SK) for i in dict.fromkeys(item_ids)]
        found = QueueItemRecord.batch_get(keys, consistent_read=consistent) if keys else []
        return {r.id: r for r in found if self._live(r)}

    def history(self, item_id: str) -> list[HistoryRecord]:
        """The item's history entries, oldest first: its records' and its state item's."""
        return self.item_and_history(item_id)[1]

    def item_and_history(self, item_id: str) -> tuple[QueueItemRecord | None,
                                                       list[HistoryRecord]]:  # fmt: skip
        """The state item and its history entries (``history``), the records read first: the
        item is then never older than an entry read (a Query sees a transaction's record only
        once it is committed, and a read after it its state write), though it can be newer."""
        records = [r for r in HistoryRecord.query(item_pk(item_id), HistoryRecord.sk.startswith(
            "H#"), consistent_read=True) if self._live(r)]  # fmt: skip
        item = self.get_item(item_id)
        return item, unpack_history(records, item)

    def query_index(
        self,
        index: resources.IndexSpec,
        partition: str,
        *,
        start_after: str | None = None,
        below: str | None = None,
        descending: bool = False,
        limit: int = 100,
    ) -> list[tuple[str, str]]:
        """(item id, sort key) pairs of one index partition, in sort-key order.

        Sort keys end in the item id, so they are unique and ``start_after`` (exclusive, in the
        order of reading) is a cursor. ``below`` bounds an ascending read from above (with
        ``start_after``: the rows between the two).
        """
        if start_after is not None and below is not None:
            if descending:
                raise ValueError("query_index bounds a descending read by start_after only")
            # One key condition per sort key: BETWEEN is inclusive, and the cursor's own row
            # (read again) is dropped; ``below`` is a time, which no key (time#id) equals.
            rows = self._query(index, partition,
                               getattr(QueueItemRecord, index.sort_key).between(start_after,
                                                                                 below),
                               descending=False, limit=limit + 1)  # fmt: skip
            return [r for r in rows if r[1] not in (start_after, below)][:limit]
        sort_attr = getattr(QueueItemRecord, index.sort_key)
        condition = None
        if start_after is not None:
            condition = sort_attr < start_after if descending else sort_attr > start_after
        elif below is not None:
            condition = sort_attr < below
        return self._query(index, partition, condition, descending=descending, limit=limit)

    def _query(self, index: resources.IndexSpec, partition: str, condition: Any, *,
               descending: bool, limit: int) -> list[tuple[str, str]]:  # fmt: skip
        gsi = {
            resources.ACTIVE_INDEX.name: QueueItemRecord.active_index,
            resources.TIMERS_INDEX.name: QueueItemRecord.timers_index,
        }[index.name]
        rows = gsi.query(
            partition, condition, scan_index_forward=not descending, limit=limit, page_size=limit
        )
        return [(row.pk.removeprefix("QI#"), getattr(row, index.sort_key)) for row in rows]

    def claim(self, item_id: str, attempt: int, source: str, write: StateWrite,
              entry: HistoryRecord, queued_at: str | None = None, *,
              not_created_by: Sequence[str] = ()) -> QueueItemRecord:  # fmt: skip
        """Move an item that is in ``source`` at ``attempt`` by ``write``, with its history
        ``entry`` (the claim's ``send``), reading nothing first; for an email, only when its
        producer is none of ``not_created_by`` (the held ones: vdq.results.guard).

        One UpdateItem that returns the item as written; the entry rides on the state item
        (coded from ``queued_at``, the item's, which the send message names). When the
        condition fails, DynamoDB answers with the item as it was: ``Moved`` carries it (None
        when there is none), and the caller decides without a read. When only the entry's room
        on the state item was missing, the same claim in a transaction with the entry as a
        record (two writes, for an item of many entries)."""
        texts = recent_json([entry], queued_at) or recent_json([entry])
        assert texts is not None, "a claim's entry always fits"
        condition = (QueueItemRecord.state == source) & (QueueItemRecord.attempt == attempt)
        if not_created_by:  # an item of no producer passes: IN is false for a missing value
            condition = condition & ~(QueueItemRecord.created_by.is_in(*not_created_by)
                                      & (QueueItemRecord.method == "email"))  # fmt: skip
        try:
            raw = update_returning(QueueItemRecord, item_pk(item_id), STATE_SK,
                                   [*write.actions(), appended(texts),
                                    QueueItemRecord.claim_apart.remove()],
                                   condition & room(1))  # fmt: skip
        except ConditionFailed as failed:
            old = QueueItemRecord.from_raw_data(failed.old) if failed.old else None
            if old is not None and applied(old, texts):
                return old  # botocore sent it again after a lost answer: the claim is ours
            if old is not None and (old.state, int(old.attempt)) == (source, attempt) and not (
                    old.method == "email" and old.created_by in not_created_by):  # fmt: skip
                return self._claim_beside(old, write, entry)
            raise Moved(old if old is None or self._live(old) else None) from None
        return QueueItemRecord.from_raw_data(raw)

    def _claim_beside(self, item: QueueItemRecord, write: StateWrite,
                      entry: HistoryRecord) -> QueueItemRecord:  # fmt: skip
        """A claim whose entry has no room on the state item: the entry is a record, and the
        item says so (``claim_apart``), so no later write takes the claim's entry for missing
        (vdq.workflow.transitions.missing_send_entry)."""
        apart = StateWrite(set={**write.set, "claim_apart": True}, remove=write.remove,
                           add=write.add)  # fmt: skip
        self.commit(item, apart, [entry], on_state=False)
        return item

    def commit(
        self,
        item: QueueItemRecord,
        write: StateWrite,
        history: Sequence[HistoryRecord] = (),
        *,
        provider_id: str | None = None,
        extra: Sequence[_Table] = (),
        mark: EventMark | None = None,
        release: Release | None = None,
        mapping_expiration: int | None = None,
        on_state: bool = True,
    ) -> None:
        """Apply ``write`` to ``item`` if it is still as read (state, attempt, provider ID),
        with its history entries (and the provider-ID mapping, and an event mark) in one write:
        an UpdateItem when the entries fit on the state item (``vdq.store.history``) and nothing
        else is written, otherwise a transaction.

        ``Moved`` when the item changed first; ``ProviderIdTaken`` when the mapping exists (also
        when it holds only orphans: vdq.results.matching adopts them); ``Duplicate`` when the event
        of
        ``mark`` was recorded on the item before. ``release``: the item enters a done state and
        its content's files count one open item less, in the same transaction (a crash after
        the commit can neither lose nor repeat the release). The history and the mark take the
        item's expiration (the one ``write`` sets, or the one it has: vdq.workflow.retention); the
        mapping takes ``mapping_expiration``. ``on_state`` False: the entries go to a record
        whatever room the state item has.
        """
        try:
            self._commit(item, write, history, provider_id=provider_id, extra=extra, mark=mark,
                         release=release, mapping_expiration=mapping_expiration,
                         on_state=on_state)  # fmt: skip
        except NoRoom:
            # Another write filled the state item's entries since the read, and nothing else
            # it assumed changed: the same write, its entries a record.
            self._commit(item, write, history, provider_id=provider_id, extra=extra, mark=mark,
                         release=release, mapping_expiration=mapping_expiration,
                         on_state=False)  # fmt: skip

    def _commit(self, item: QueueItemRecord, write: StateWrite,
                history: Sequence[HistoryRecord], *, provider_id: str | None,
                extra: Sequence[_Table], mark: EventMark | None, release: Release | None,
                mapping_expiration: int | None, on_state: bool) -> None:  # fmt: skip
        expiration = write.set.get("expiration", item.expiration)
        own = [h for h in history if h.pk == item.pk]
        recent = fitting(item, own) if on_state else None
        packed = pack_history([h for h in history if recent is None or h.pk != item.pk])
        stamp(packed, expiration)
        puts: list[tuple[_Table, Any]] = [(h, None) for h in packed]
        puts.extend((r, None) for r in extra)
        mapping_at = marker_at = None
        if provider_id is not None:
            mapping_at = len(puts)
            mapping = ProviderRecord(provider_pk(provider_id), MAP_SK, item_id=item.id,
                                     attempt=int(item.attempt))  # fmt: skip
            stamp([mapping], mapping_expiration)
            puts.append((mapping, ProviderRecord.pk.does_not_exist()))
        actions, condition = write.actions(), _expected(item)
        for name, least in write.at_least.items():
            condition = condition & (getattr(QueueItemRecord, name) >= least)
        in_set = mark is not None and len(item.seen or ()) < SEEN_LIMIT
        # A cancelled item absorbs an event that may have been recorded as late before the
        # cancel (a mark record): look there too.
        check_record = in_set and item.state == "cancelled"
        if mark is not None:
            # A mark is looked for in both places: the set fills first, records take the rest.
            condition = condition & ~QueueItemRecord.seen.contains(mark.digest)
            if in_set:
                actions.append(QueueItemRecord.seen.add({mark.digest}))
            else:
                marker_at = len(puts)
                marker = mark.record()
                stamp([marker], expiration)
                puts.append((marker, EventMarkRecord.pk.does_not_exist()))
        if recent:
            actions.append(appended(recent))
            condition = condition & room(len(recent))
        if unstamped([r for r, _ in puts if r.pk == item.pk]):
            actions.append(QueueItemRecord.apart.set(1))
        if not puts and release is None and not check_record:
            self._update_state(item, actions, condition, mark, recent)
        else:
            self._transact_state(item, actions, condition, puts, mark=mark, release=release,
                                 check_record=check_record, provider_id=provider_id,
                                 mapping_at=mapping_at, marker_at=marker_at,
                                 on_state=bool(recent))  # fmt: skip
        for name, value in write.set.items():
            setattr(item, name, value)
        for name in write.remove:
            setattr(item, name, None)
        for name, n in write.add.items():
            setattr(item, name, (getattr(item, name) or 0) + n)
        if in_set and mark is not None:
            item.seen = {*(item.seen or ()), mark.digest}
        if recent:
            add_recent(item, recent)

    def _update_state(self, item: QueueItemRecord, actions: list[Any], condition: Any,
                      mark: EventMark | None, recent: list[str] | None) -> None:  # fmt: skip
        """A state write with nothing beside it: one UpdateItem."""
        try:
            conditional_update(QueueItemRecord(item.pk, STATE_SK), actions, condition)
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
            current = self.get_item(item.id)
            if applied(current, recent):
                return
            self._failed(item, current, mark, bool(recent))

    def _failed(self, item: QueueItemRecord, current: QueueItemRecord | None,
                mark: EventMark | None, on_state: bool) -> None:
        """Why a state write's condition failed: ``Duplicate``, ``Moved``, or ``NoRoom``
        (only the room for its entries on the state item was gone)."""
        if mark is not None and current is not None and mark.digest in (current.seen or ()):
            raise Duplicate(f"event {mark.digest} of {item.id} was seen")
        if on_state and current is not None and _as_read(item, current):
            raise NoRoom()
        raise Moved(current)

    def _transact_state(self, item: QueueItemRecord, actions: list[Any], condition: Any,
                        puts: list[tuple[_Table, Any]], *, mark: EventMark | None,
                        release: Release | None, check_record: bool,
                        provider_id: str | None, mapping_at: int | None,
                        marker_at: int | None, on_state: bool) -> None:  # fmt: skip
        """A state write with the records written beside it: one transaction."""

        def fill(tx: TransactWrite) -> None:
            if check_record and mark is not None:
                tx.condition_check(EventMarkRecord, item_pk(item.id), f"EV#{mark.digest}",
                                   condition=EventMarkRecord.pk.does_not_exist())  # fmt: skip
            for record, put_condition in puts:
                tx.save(record, condition=put_condition, return_values="ALL_OLD")
            tx.update(item, actions, condition=condition, return_values="ALL_OLD")
            if release is not None:
                tx.update(ContentRefsRecord(*refs_key(release.content_id)),
                          release.actions())  # fmt: skip

        try:
            transact(fill)
        except TransactWriteError as exc:
            # Request order: the condition check, the puts, then the updates.
            offset = 1 if check_record else 0
            reasons = exc.cancellation_reasons or []

            def failed(index: int | None) -> Any:
                if index is None or index + offset >= len(reasons):
                    return None
                reason = reasons[index + offset]
                return reason if condition_failed(reason) else None

            if check_record and reasons and condition_failed(reasons[0]):
                raise Duplicate(f"event of {item.id} was recorded before its cancel") from exc
            state_reason = failed(len(puts))
            if state_reason is not None:
                current = _current_from(state_reason) or self.get_item(item.id)
                self._failed(item, current, mark, on_state)
            if failed(marker_at) is not None:
                digest = mark.digest if mark else ""
                raise Duplicate(f"event {digest} of {item.id} was seen") from exc
            mapping_reason = failed(mapping_at)
            if mapping_reason is not None:
                raw = mapping_reason.raw_item
                owner = ProviderRecord.from_raw_data(raw) if raw else None
                raise ProviderIdTaken(provider_id or "", owner) from None
            raise

    def store_provider_id(
        self,
        item_id: str,
        provider_id: str,
        history: Sequence[HistoryRecord] = (),
        *,
        attempt: int,
        map_provider_id: bool = True,
        expiration: int | None = None,
        mapping_expiration: int | None = None,
    ) -> bool:
        """Store ``provider_id`` (with its mapping and ``history``) on an item that stores none
        and is still at ``attempt``, changing nothing else: the send worker's record after a
        status update moved the item.

        One transaction. False when the item already stores a provider ID or has moved on to
        another attempt (nothing written); ``ProviderIdTaken`` when the mapping exists (also
        when it holds only orphans). ``expiration``: the item's, when it is done.
        """
        packed = pack_history(history)
        stamp(packed, expiration)
        puts: list[tuple[_Table, Any]] = [(h, None) for h in packed]
        if map_provider_id:
            mapping = ProviderRecord(provider_pk(provider_id), MAP_SK, item_id=item_id,
                                     attempt=attempt)  # fmt: skip
            stamp([mapping], mapping_expiration)
            puts.append((mapping, ProviderRecord.pk.does_not_exist()))
        probe = QueueItemRecord(item_pk(item_id), STATE_SK)
        # A cancelled item takes the ID of the attempt before its cancel: the results of that
        # attempt still reach it (the seed's ignored sources).
        condition = ((QueueItemRecord.attempt == attempt)
                     | (QueueItemRecord.state == "cancelled")) & (
            QueueItemRecord.provider_id.does_not_exist()
        )  # fmt: skip

        actions: list[Any] = [QueueItemRecord.provider_id.set(provider_id)]
        apart = unstamped(packed)
        if apart:  # and the item not done since the caller read it (then the records expire)
            actions.append(QueueItemRecord.apart.set(1))
            condition = condition & QueueItemRecord.expiration.does_not_exist()

        def fill(tx: TransactWrite) -> None:
            for record, put_condition in puts:
                tx.save(record, condition=put_condition, return_values="ALL_OLD")
            tx.update(probe, actions, condition=condition, return_values="ALL_OLD")

        try:
            transact(fill)
        except TransactWriteError as exc:
            reasons = exc.cancellation_reasons or []
            if len(reasons) > len(puts) and condition_failed(reasons[len(puts)]):
                current = _current_from(reasons[len(puts)]) if apart else None
                if (current is not None and current.expiration is not None
                        and current.provider_id is None):  # fmt: skip
                    # Done since the caller read it: the same write, its records stamped.
                    return self.store_provider_id(
                        item_id, provider_id, history, attempt=attempt,
                        map_provider_id=map_provider_id, expiration=int(current.expiration),
                        mapping_expiration=mapping_expiration)  # fmt: skip
                return False
            mapping_reason = reasons[len(puts) - 1] if len(reasons) >= len(puts) else None
            if map_provider_id and mapping_reason is not None and condition_failed(mapping_reason):
                raw = mapping_reason.raw_item
                owner = ProviderRecord.from_raw_data(raw) if raw else None
                raise ProviderIdTaken(provider_id, owner) from None
            raise
        return True

    def add_timer(self, item: QueueItemRecord, timer_pk: str, timer_sk: str) -> bool:
        """Give an item that has no timer one, if it is still in the (state, attempt, provider
        ID) read and not parked by a hold (a stale read may not show the park, which leaves
        the state and attempt as they were). One UpdateItem; False when it moved, has a timer
        or is parked."""
        probe = QueueItemRecord(item_pk(item.id), STATE_SK)
        condition = (_expected(item) & QueueItemRecord.timer_pk.does_not_exist()
                     & QueueItemRecord.held.does_not_exist())  # fmt: skip
        try:
            conditional_update(probe, [QueueItemRecord.timer_pk.set(timer_pk),
                                       QueueItemRecord.timer_sk.set(timer_sk)], condition)
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        item.timer_pk, item.timer_sk = timer_pk, timer_sk
        return True

    def raise_cx(self, item_id: str, cx: int) -> bool:
        """Record that an item's content now expires at ``cx`` or later: one UpdateItem,
        conditional on the item storing an earlier ``cx`` (it only ever moves later). False
        when it stores a later one, or no item is there."""
        probe = QueueItemRecord(item_pk(item_id), STATE_SK)
        try:
            probe.update(actions=[QueueItemRecord.cx.set(cx)],
                         condition=QueueItemRecord.cx < cx)  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def move_timer(self, item: QueueItemRecord, timer_pk: str, timer_sk: str) -> bool:
        """Push an item's timer on, if the item is still in the (state, attempt, timer) read.

        One UpdateItem; False when someone moved the item or its timer first.
        """
        probe = QueueItemRecord(item_pk(item.id), STATE_SK)
        condition = _expected(item) & (QueueItemRecord.timer_sk == item.timer_sk)
        try:
            probe.update(
                actions=[QueueItemRecord.timer_pk.set(timer_pk),
                         QueueItemRecord.timer_sk.set(timer_sk)],
                condition=condition,
            )  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        item.timer_pk, item.timer_sk = timer_pk, timer_sk
        return True
