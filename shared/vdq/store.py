"""The store: the only code that touches DynamoDB.

One table, every record kind under a prefixed key:

| record        | pk           | sk          | what                                            |
|---------------|--------------|-------------|-------------------------------------------------|
| queue item    | ``QI#<id>``  | ``STATE``   | the small, often-written state of one receiver  |
| history       | ``QI#<id>``  | ``H#<at>#…`` | the "why" timeline, one record per write       |
| content       | ``CT#<id>``  | ``CONTENT`` | subject, bodies, recipient lists; written once  |
| content refs  | ``CT#<id>``  | ``REFS``    | open items of a content that has attachments    |
| attachment    | ``AT#<id>``  | ``FILE``    | one file's metadata; the bytes live in S3       |
| provider ID   | ``PID#<id>`` | ``MAP``     | SES message ID / Twilio SID -> item; orphans    |

Every state change is one conditional write whose condition is the (state, attempt) the writer
read. A failed condition comes back as ``Moved`` carrying the item as it now is (DynamoDB returns
it with the failure), so the caller decides again without another read.

A transactional item costs two write units however small it is, so the history entries of one
write share one record, and a provider event's mark (its duplicate check) is a member of the
state item's ``seen`` set rather than a record of its own.
"""

from __future__ import annotations

import builtins
import bz2
import hashlib
import json
import random
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pynamodb.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)
from pynamodb.exceptions import DoesNotExist, PutError, TransactWriteError, UpdateError
from pynamodb.indexes import GlobalSecondaryIndex, KeysOnlyProjection
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from vdq import resources
from vdq.errors import VdqError

STATE_SK = "STATE"
CONTENT_SK = "CONTENT"
REFS_SK = "REFS"
FILE_SK = "FILE"
MAP_SK = "MAP"


def shard(key: str, shards: int) -> int:
    """The write shard of a sparse index entry: a stable hash of the item (or content) id."""
    return int(hashlib.blake2b(key.encode(), digest_size=4).hexdigest(), 16) % shards


def item_pk(item_id: str) -> str:
    return f"QI#{item_id}"


def content_pk(content_id: str) -> str:
    return f"CT#{content_id}"


def attachment_pk(attachment_id: str) -> str:
    return f"AT#{attachment_id}"


def provider_pk(provider_id: str) -> str:
    return f"PID#{provider_id}"


class _Table(Model):
    """Keys shared by every record kind. Meta is filled in by ``bind``."""

    class Meta:
        table_name = "vdq"
        region: str | None = None

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)


class _ActiveIndex(GlobalSecondaryIndex["QueueItemRecord"]):
    class Meta:
        index_name = resources.ACTIVE_INDEX.name
        projection = KeysOnlyProjection()

    active_pk = UnicodeAttribute(hash_key=True)
    active_sk = UnicodeAttribute(range_key=True)


class _SentIndex(GlobalSecondaryIndex["QueueItemRecord"]):
    class Meta:
        index_name = resources.SENT_INDEX.name
        projection = KeysOnlyProjection()

    sent_pk = UnicodeAttribute(hash_key=True)
    sent_sk = UnicodeAttribute(range_key=True)


class _TimersIndex(GlobalSecondaryIndex["QueueItemRecord"]):
    class Meta:
        index_name = resources.TIMERS_INDEX.name
        projection = KeysOnlyProjection()

    timer_pk = UnicodeAttribute(hash_key=True)
    timer_sk = UnicodeAttribute(range_key=True)


class _PurgeIndex(GlobalSecondaryIndex["ContentRefsRecord"]):
    class Meta:
        index_name = resources.PURGE_INDEX.name
        projection = KeysOnlyProjection()

    purge_pk = UnicodeAttribute(hash_key=True)
    purge_sk = UnicodeAttribute(range_key=True)


class QueueItemRecord(_Table):
    """The state of one queue item (one receiver). Kept small: every transition rewrites it."""

    id = UnicodeAttribute()
    method = UnicodeAttribute()  # "email" | "sms"
    state = UnicodeAttribute()
    attempt = NumberAttribute()
    sender = UnicodeAttribute()
    sender_name = UnicodeAttribute(null=True)
    receiver = UnicodeAttribute()
    receiver_name = UnicodeAttribute(null=True)
    content_id = UnicodeAttribute()
    has_files = BooleanAttribute(default=False)
    result = UnicodeAttribute(null=True)
    retries = NumberAttribute(default=0)  # automatic retries of the current operator attempt
    retry_delay = NumberAttribute(null=True)
    queued_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    done_since = UnicodeAttribute()  # set at creation, never changed (the SMS timeout window)
    done_at = UnicodeAttribute(null=True)
    claimed_at = UnicodeAttribute(null=True)
    provider_id = UnicodeAttribute(null=True)
    origin_type = UnicodeAttribute(null=True)
    origin_id = UnicodeAttribute(null=True)
    created_by = UnicodeAttribute(null=True)
    resent_from = UnicodeAttribute(null=True)
    encoding = UnicodeAttribute(null=True)  # SMS: "GSM-7" | "UCS-2" of the body (vdq.segments)
    segments = NumberAttribute(null=True)  # SMS: the segments Twilio bills for the body
    seen = UnicodeSetAttribute(null=True)  # digests of the provider events recorded (EventMark)
    # Sparse index keys: present only while the item belongs to the index.
    active_pk = UnicodeAttribute(null=True)
    active_sk = UnicodeAttribute(null=True)
    sent_pk = UnicodeAttribute(null=True)
    sent_sk = UnicodeAttribute(null=True)
    timer_pk = UnicodeAttribute(null=True)
    timer_sk = UnicodeAttribute(null=True)

    active_index = _ActiveIndex()
    sent_index = _SentIndex()
    timers_index = _TimersIndex()


class HistoryRecord(_Table):
    """One history entry. Stored, it also carries the entries written before it in the same
    write (``more``, JSON): see ``Store.history``."""

    at = UnicodeAttribute()
    actor = UnicodeAttribute()
    source = UnicodeAttribute()  # "server" | "provider" | "operator" | "schedule"
    kind = UnicodeAttribute()  # "transition" | "ignored" | "late" | "event" | "action"
    name = UnicodeAttribute()  # transition or event name
    from_state = UnicodeAttribute(null=True)
    to_state = UnicodeAttribute(null=True)
    attempt = NumberAttribute(null=True)
    text = UnicodeAttribute(null=True)
    more = UnicodeAttribute(null=True)


ENTRY_FIELDS = ("at", "actor", "source", "kind", "name", "from_state", "to_state", "attempt",
                "text")  # fmt: skip


def _entry_json(entry: HistoryRecord) -> dict[str, Any]:
    data = {"sk": entry.sk, **{f: getattr(entry, f) for f in ENTRY_FIELDS}}
    return {k: v for k, v in data.items() if v is not None}


def pack_history(entries: Sequence[HistoryRecord]) -> list[HistoryRecord]:
    """The records that store ``entries``: one per item, holding that item's entries of this
    write (the last one's key, the earlier ones in ``more``). The caller's entries are not
    changed; a writer may store the same entry again with another companion."""
    groups: dict[str, list[HistoryRecord]] = {}
    for entry in entries:
        groups.setdefault(entry.pk, []).append(entry)
    out = []
    for group in groups.values():
        last = group[-1]
        record = HistoryRecord(last.pk, last.sk, **{f: getattr(last, f) for f in ENTRY_FIELDS})
        if len(group) > 1:
            record.more = json.dumps([_entry_json(e) for e in group[:-1]], separators=(",", ":"))
        out.append(record)
    return out


def unpack_history(records: Iterable[HistoryRecord]) -> list[HistoryRecord]:
    """The entries stored in ``records``, in time order, each once: an entry with a fixed key
    (the claim's ``send``) may be stored by two writers."""
    entries: dict[str, HistoryRecord] = {}
    for record in records:
        for data in json.loads(record.more) if record.more else []:
            sk = data.pop("sk")
            entries.setdefault(sk, HistoryRecord(record.pk, sk, **data))
        record.more = None
        entries.setdefault(record.sk, record)
    return [entries[sk] for sk in sorted(entries)]


@dataclass(frozen=True)
class EventMark:
    """A provider event recorded on an item: its digest joins the item's ``seen`` set in the
    write that records the event, conditional on not being there, so a duplicate delivery is
    detected without a read or a record of its own."""

    item_id: str
    digest: str

    def record(self) -> EventMarkRecord:
        return EventMarkRecord(item_pk(self.item_id), f"EV#{self.digest}")


# Marks kept in the state item's ``seen`` set; an item's further marks are records of their
# own, so no flood of events (opens, clicks, delays) can grow the state item.
SEEN_LIMIT = 12


class EventMarkRecord(_Table):
    """A provider event recorded on an item, when its ``seen`` set is full (or the event
    changed no state): the record's existence is the mark."""


@dataclass(frozen=True)
class Release:
    """One item of a content with files entered a done state: its open count goes down and
    the content joins the purge index (the purge checks the count before deleting)."""

    content_id: str
    shard: str
    now_iso: str

    def actions(self) -> list[Any]:
        return [
            ContentRefsRecord.open_items.add(-1),
            ContentRefsRecord.idle_since.set(self.now_iso),
            ContentRefsRecord.purge_pk.set(self.shard),
            ContentRefsRecord.purge_sk.set(f"{self.now_iso}#{self.content_id}"),
        ]


class ContentRecord(_Table):
    method = UnicodeAttribute()
    data = BinaryAttribute(legacy_encoding=False)  # compressed JSON (encode_content)
    created_at = UnicodeAttribute()


class ContentRefsRecord(_Table):
    open_items = NumberAttribute(default=0)
    # JSON list of the item ids an enqueue is writing, until it confirms them: see
    # vdq.enqueue.pending_refs and Store.settle_pending.
    pending = UnicodeAttribute(null=True)
    purged_at = UnicodeAttribute(null=True)
    idle_since = UnicodeAttribute(null=True)
    purge_pk = UnicodeAttribute(null=True)
    purge_sk = UnicodeAttribute(null=True)

    purge_index = _PurgeIndex()


class AttachmentRecord(_Table):
    id = UnicodeAttribute()
    content_id = UnicodeAttribute()
    filename = UnicodeAttribute()
    content_type = UnicodeAttribute()
    size = NumberAttribute()
    s3_key = UnicodeAttribute()
    inline = BooleanAttribute(default=False)
    cid = UnicodeAttribute(null=True)
    purged_at = UnicodeAttribute(null=True)


class ProviderRecord(_Table):
    item_id = UnicodeAttribute(null=True)
    # The item's attempt that the provider took this message for: an event of this message
    # never moves a later attempt of the item (after retry, cancel or an automatic retry).
    attempt = NumberAttribute(null=True)
    # Provider events that arrived before any item stored this ID (JSON list), with a TTL.
    orphans = UnicodeAttribute(null=True)
    expiration = NumberAttribute(null=True)


MODELS: tuple[type[_Table], ...] = (
    QueueItemRecord,
    HistoryRecord,
    ContentRecord,
    ContentRefsRecord,
    AttachmentRecord,
    ProviderRecord,
    EventMarkRecord,
)


def bind(table_name: str, region: str | None = None) -> None:
    """Point every model at ``table_name``. Called once per process (and per test).

    A model keeps its connection when nothing changed: each new connection builds a botocore
    session and loads the DynamoDB service model again (tens of milliseconds).
    """
    models: tuple[type[_Table], ...] = (_Table, *MODELS)
    for model in models:
        if model.Meta.table_name == table_name and model.Meta.region == region:
            continue
        model.Meta.table_name = table_name
        model.Meta.region = region
        model._connection = None


def encode_content(data: dict[str, Any]) -> bytes:
    """The content as stored: the smaller of deflate and bzip2 (each KB written is a write
    unit; bzip2 often wins on long, repetitive HTML, deflate on short texts)."""
    raw = json.dumps(data, separators=(",", ":")).encode()
    deflated = zlib.compress(raw, 9)
    if len(raw) < 2048:
        return deflated
    return min(deflated, bz2.compress(raw, 9), key=len)


def decode_content(blob: bytes) -> dict[str, Any]:
    # bzip2 streams start with "BZh"; a zlib stream never does (its first byte is 0x78).
    return json.loads(bz2.decompress(blob) if blob[:3] == b"BZh" else zlib.decompress(blob))


# ---- state changes ---------------------------------------------------------------------------


@dataclass
class Moved(Exception):
    """The item was not in the (state, attempt) the writer read. ``current`` is how it is now."""

    current: QueueItemRecord | None

    def __str__(self) -> str:
        if self.current is None:
            return "the queue item does not exist"
        return f"queue item {self.current.id} is now {self.current.state}/{self.current.attempt}"


class ProviderIdTaken(VdqError):
    """Another item already stores this provider ID."""

    code = "provider_id_taken"

    def __init__(self, provider_id: str, owner: ProviderRecord | None) -> None:
        super().__init__(f"provider ID {provider_id} is stored by another queue item")
        self.provider_id = provider_id
        self.owner = owner


class Duplicate(VdqError):
    """This provider event was recorded on the item before (its event mark exists)."""

    code = "duplicate_event"


class StoreBusy(VdqError):
    """A transaction DynamoDB kept cancelling for conflicts or throttling: nothing written."""

    status = 503
    code = "contention"


class WriteFailed(VdqError):
    """A batch of new records was not (wholly) stored. ``written`` holds exactly the records
    that were; nothing else was."""

    status = 503
    code = "store_unavailable"

    def __init__(self, written: Sequence[_Table], why: str) -> None:
        super().__init__(f"the store refused the write: {why}")
        self.written = list(written)


def _key_of(raw: dict[str, Any]) -> tuple[str, str]:
    """(pk, sk) of a record as BatchWriteItem takes it (PynamoDB's serialized form)."""
    return (raw["pk"]["S"], raw["sk"]["S"])


@dataclass
class StateWrite:
    """One conditional change of a queue item: SET and REMOVE of named attributes."""

    set: dict[str, Any] = field(default_factory=dict)
    remove: builtins.set[str] = field(default_factory=builtins.set)
    add: dict[str, int] = field(default_factory=dict)

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


_RETRYABLE = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})


def transact(fill: Callable[[TransactWrite], None], tries: int = 10) -> None:
    """Run one TransactWriteItems, built by ``fill``, again when DynamoDB cancelled it only
    for a conflict with another transaction on one of its items or for throttling (neither
    is retried by botocore; every receiver of one email releases the same content record)."""
    delay = 0.02
    for attempt in range(tries):
        try:
            with TransactWrite(connection=QueueItemRecord._get_connection().connection) as tx:
                fill(tx)
            return
        except TransactWriteError as exc:
            codes = {r.code for r in exc.cancellation_reasons or [] if r is not None}
            codes.discard("None")
            if codes and codes <= _RETRYABLE:
                if attempt + 1 < tries:  # full jitter, at most about 5 s in all
                    time.sleep(random.uniform(0, delay))
                    delay = min(delay * 2, 1.0)
                    continue
                raise StoreBusy(f"DynamoDB kept cancelling the write ({', '.join(sorted(codes))})"
                                "; nothing was written, try again") from exc  # fmt: skip
            raise


def _failed(reason: Any) -> bool:
    return reason is not None and reason.code == "ConditionalCheckFailed"


def _current_from(reason: Any) -> QueueItemRecord | None:
    raw = getattr(reason, "raw_item", None)
    return QueueItemRecord.from_raw_data(raw) if raw else None


class Store:
    """Reads and conditional writes of VDQ's records."""

    # ---- creation --------------------------------------------------------------------------

    def put_new(self, records: Sequence[_Table]) -> list[_Table]:
        """Write new records with BatchWriteItem (25 a request), retrying unprocessed ones.

        Returns the records written. On any failure (a throttled request, items still
        unprocessed after the retries, an error answer) raises ``WriteFailed`` naming exactly
        the records that were written before it: a half-applied batch leaves some records of
        a request stored and others not, and the caller must say which.
        """
        written: list[_Table] = []
        connection = QueueItemRecord._get_connection()
        for start in range(0, len(records), 25):
            chunk = {_key_of(r.serialize()): r for r in records[start : start + 25]}
            pending = [r.serialize() for r in chunk.values()]
            delay = 0.05
            for _ in range(8):
                try:
                    response = connection.batch_write_item(put_items=pending)
                except Exception as exc:
                    # An error answer does not say the request was not applied (its answer may
                    # have been lost): read back which of its records exist.
                    written.extend(self._read_back(chunk))
                    raise WriteFailed(written, str(exc)) from exc
                unprocessed = [u["PutRequest"]["Item"] for u in response.get(
                    "UnprocessedItems", {}).get(QueueItemRecord.Meta.table_name, [])]
                left = {_key_of(u) for u in unprocessed}
                written.extend(r for k, r in chunk.items() if k not in left)
                chunk = {k: r for k, r in chunk.items() if k in left}
                if not unprocessed:
                    break
                pending = unprocessed
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            else:
                raise WriteFailed(written, "DynamoDB left items unprocessed after 8 tries")
        return written

    def _read_back(self, chunk: dict[tuple[str, str], _Table]) -> list[_Table]:
        """The records of ``chunk`` that exist (strongly consistent). When even that read
        fails, they are deleted so that none counts as stored unknowingly; a record neither
        read nor deleted is reported as written (the caller then keeps, never loses, it)."""
        by_model: dict[type[_Table], list[tuple[str, str]]] = {}
        for key, record in chunk.items():
            by_model.setdefault(type(record), []).append(key)
        try:
            found: set[tuple[str, str]] = set()
            for model, keys in by_model.items():  # each model reads through its own connection
                for start in range(0, len(keys), 100):
                    for row in model.batch_get(keys[start : start + 100], consistent_read=True):
                        found.add((row.pk, row.sk))
            return [r for k, r in chunk.items() if k in found]
        except Exception:
            try:
                self.delete_new(list(chunk.values()))
                return []
            except Exception:
                return list(chunk.values())

    def delete_new(self, records: Sequence[_Table]) -> None:
        """Delete records that ``put_new`` wrote for a request that was then refused."""
        connection = QueueItemRecord._get_connection()
        for start in range(0, len(records), 25):
            keys = [{"pk": {"S": r.pk}, "sk": {"S": r.sk}} for r in records[start : start + 25]]
            for _ in range(8):
                response = connection.batch_write_item(delete_items=keys)
                keys = [u["DeleteRequest"]["Key"] for u in response.get(
                    "UnprocessedItems", {}).get(QueueItemRecord.Meta.table_name, [])]
                if not keys:
                    break
                time.sleep(0.05)

    # ---- reads -----------------------------------------------------------------------------

    def get_item(self, item_id: str) -> QueueItemRecord | None:
        try:
            return QueueItemRecord.get(item_pk(item_id), STATE_SK, consistent_read=True)
        except DoesNotExist:
            return None

    def get_items(self, item_ids: Iterable[str]) -> dict[str, QueueItemRecord]:
        keys = [(item_pk(i), STATE_SK) for i in dict.fromkeys(item_ids)]
        found = QueueItemRecord.batch_get(keys, consistent_read=True) if keys else []
        return {r.id: r for r in found}

    def get_content(self, content_id: str) -> dict[str, Any] | None:
        try:
            record = ContentRecord.get(content_pk(content_id), CONTENT_SK, consistent_read=True)
        except DoesNotExist:
            return None
        return decode_content(record.data)

    def history(self, item_id: str) -> list[HistoryRecord]:
        """The item's history entries, oldest first."""
        return unpack_history(
            HistoryRecord.query(
                item_pk(item_id), HistoryRecord.sk.startswith("H#"), consistent_read=True
            )
        )

    def get_attachment(self, attachment_id: str) -> AttachmentRecord | None:
        try:
            return AttachmentRecord.get(attachment_pk(attachment_id), FILE_SK,
                                        consistent_read=True)
        except DoesNotExist:
            return None

    def get_attachments(self, attachment_ids: Iterable[str]) -> list[AttachmentRecord]:
        keys = [(attachment_pk(a), FILE_SK) for a in dict.fromkeys(attachment_ids)]
        # Strongly consistent: a send can follow the enqueue that wrote these by milliseconds.
        return list(AttachmentRecord.batch_get(keys, consistent_read=True)) if keys else []

    def get_refs(self, content_id: str) -> ContentRefsRecord | None:
        try:
            return ContentRefsRecord.get(content_pk(content_id), REFS_SK, consistent_read=True)
        except DoesNotExist:
            return None

    def find_by_provider_id(self, provider_id: str) -> ProviderRecord | None:
        try:
            return ProviderRecord.get(provider_pk(provider_id), MAP_SK, consistent_read=True)
        except DoesNotExist:
            return None

    # ---- provider-ID mapping: orphans (events that arrived before any item stored the ID) --

    def add_orphan(self, provider_id: str, seen: ProviderRecord | None, orphan: dict[str, Any],
                   expiration: int, limit: int) -> bool:  # fmt: skip
        """Keep ``orphan`` on the mapping of ``provider_id``, which no item holds yet.

        Conditional on the mapping being as ``seen`` (one read-modify-write of the JSON list);
        False when it changed meanwhile (an item stored the ID, or another orphan came first).
        """
        old = seen.orphans if seen is not None else None
        orphans = json.loads(old) if old else []
        if any(o.get("event_id") == orphan.get("event_id") for o in orphans):
            return True
        orphans = [*orphans, orphan][-limit:]
        record = ProviderRecord(provider_pk(provider_id), MAP_SK,
                                orphans=json.dumps(orphans, separators=(",", ":")),
                                expiration=expiration)  # fmt: skip
        unchanged = (
            ProviderRecord.pk.does_not_exist() if seen is None else ProviderRecord.orphans == old
        )
        try:
            record.save(condition=ProviderRecord.item_id.does_not_exist() & unchanged)
        except PutError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def adopt_orphans(self, provider_id: str, item_id: str, attempt: int) -> list[dict[str, Any]]:
        """Give the mapping of ``provider_id`` its item and drop its TTL; returns the orphans it
        holds (they stay until ``clear_orphans``, so a crash in between loses none).

        ``ProviderIdTaken`` when another item holds the mapping.
        """
        record = ProviderRecord(provider_pk(provider_id), MAP_SK)
        condition = ProviderRecord.item_id.does_not_exist() | (ProviderRecord.item_id == item_id)
        try:
            record.update(
                actions=[ProviderRecord.item_id.set(item_id),
                         ProviderRecord.attempt.set(attempt),
                         ProviderRecord.expiration.remove()],
                condition=condition,
            )
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                raise ProviderIdTaken(provider_id, self.find_by_provider_id(provider_id)) from None
            raise
        return json.loads(record.orphans) if record.orphans else []

    def clear_orphans(self, provider_id: str, item_id: str) -> None:
        record = ProviderRecord(provider_pk(provider_id), MAP_SK)
        try:
            record.update(actions=[ProviderRecord.orphans.remove()],
                          condition=ProviderRecord.item_id == item_id)  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise

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
        order of reading) is a cursor. ``below`` bounds an ascending read from above.
        """
        if start_after is not None and below is not None:
            raise ValueError("query_index takes start_after or below, not both")
        gsi = {
            resources.ACTIVE_INDEX.name: QueueItemRecord.active_index,
            resources.SENT_INDEX.name: QueueItemRecord.sent_index,
            resources.TIMERS_INDEX.name: QueueItemRecord.timers_index,
        }[index.name]
        sort_attr = getattr(QueueItemRecord, index.sort_key)
        condition = None
        if start_after is not None:
            condition = sort_attr < start_after if descending else sort_attr > start_after
        elif below is not None:
            condition = sort_attr < below
        rows = gsi.query(
            partition, condition, scan_index_forward=not descending, limit=limit, page_size=limit
        )
        return [(row.pk.removeprefix("QI#"), getattr(row, index.sort_key)) for row in rows]

    # ---- state changes ---------------------------------------------------------------------

    def claim(
        self, item_id: str, attempt: int, sources: Iterable[str], write: StateWrite
    ) -> QueueItemRecord:
        """Move an item whose state is one of ``sources`` and whose attempt is ``attempt``.

        One UpdateItem returning the new item; ``Moved`` when the condition fails.
        """
        probe = QueueItemRecord(item_pk(item_id), STATE_SK)
        condition = QueueItemRecord.state.is_in(*sources) & (QueueItemRecord.attempt == attempt)
        try:
            probe.update(actions=write.actions(), condition=condition)
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                raise Moved(self.get_item(item_id)) from None
            raise
        return probe

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
    ) -> None:
        """Apply ``write`` to ``item`` if it is still as read (state, attempt, provider ID),
        with its history entries (and the provider-ID mapping, and an event mark) in one
        transaction.

        ``Moved`` when the item changed first; ``ProviderIdTaken`` when the mapping exists (also
        when it holds only orphans: vdq.results adopts them); ``Duplicate`` when the event of
        ``mark`` was recorded on the item before. ``release``: the item enters a done state and
        its content's files count one open item less, in the same transaction (a crash after
        the commit can neither lose nor repeat the release).
        """
        puts: list[tuple[_Table, Any]] = [(h, None) for h in pack_history(history)]
        puts.extend((r, None) for r in extra)
        mapping_at = marker_at = None
        if provider_id is not None:
            mapping_at = len(puts)
            mapping = ProviderRecord(provider_pk(provider_id), MAP_SK, item_id=item.id,
                                     attempt=int(item.attempt))  # fmt: skip
            puts.append((mapping, ProviderRecord.pk.does_not_exist()))
        actions, condition = write.actions(), _expected(item)
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
                puts.append((mark.record(), EventMarkRecord.pk.does_not_exist()))
        def fill(tx: TransactWrite) -> None:
            if check_record and mark is not None:
                tx.condition_check(EventMarkRecord, item_pk(item.id), f"EV#{mark.digest}",
                                   condition=EventMarkRecord.pk.does_not_exist())  # fmt: skip
            for record, put_condition in puts:
                tx.save(record, condition=put_condition, return_values="ALL_OLD")
            tx.update(item, actions, condition=condition, return_values="ALL_OLD")
            if release is not None:
                tx.update(ContentRefsRecord(content_pk(release.content_id), REFS_SK),
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
                return reason if _failed(reason) else None

            if check_record and reasons and _failed(reasons[0]):
                raise Duplicate(f"event of {item.id} was recorded before its cancel") from exc
            state_reason = failed(len(puts))
            if state_reason is not None:
                current = _current_from(state_reason) or self.get_item(item.id)
                if mark is not None and current is not None and mark.digest in (current.seen or ()):
                    raise Duplicate(f"event {mark.digest} of {item.id} was seen") from exc
                raise Moved(current) from None
            if failed(marker_at) is not None:
                digest = mark.digest if mark else ""
                raise Duplicate(f"event {digest} of {item.id} was seen") from exc
            mapping_reason = failed(mapping_at)
            if mapping_reason is not None:
                raw = mapping_reason.raw_item
                owner = ProviderRecord.from_raw_data(raw) if raw else None
                raise ProviderIdTaken(provider_id or "", owner) from None
            raise
        for name, value in write.set.items():
            setattr(item, name, value)
        for name in write.remove:
            setattr(item, name, None)
        for name, n in write.add.items():
            setattr(item, name, (getattr(item, name) or 0) + n)
        if in_set and mark is not None:
            item.seen = {*(item.seen or ()), mark.digest}

    def store_provider_id(
        self,
        item_id: str,
        provider_id: str,
        history: Sequence[HistoryRecord] = (),
        *,
        attempt: int,
        map_provider_id: bool = True,
    ) -> bool:
        """Store ``provider_id`` (with its mapping and ``history``) on an item that stores none
        and is still at ``attempt``, changing nothing else: the send worker's record after a
        status update moved the item.

        One transaction. False when the item already stores a provider ID or has moved on to
        another attempt (nothing written); ``ProviderIdTaken`` when the mapping exists (also
        when it holds only orphans).
        """
        puts: list[tuple[_Table, Any]] = [(h, None) for h in pack_history(history)]
        if map_provider_id:
            mapping = ProviderRecord(provider_pk(provider_id), MAP_SK, item_id=item_id,
                                     attempt=attempt)  # fmt: skip
            puts.append((mapping, ProviderRecord.pk.does_not_exist()))
        probe = QueueItemRecord(item_pk(item_id), STATE_SK)
        # A cancelled item takes the ID of the attempt before its cancel: the results of that
        # attempt still reach it (the seed's ignored sources).
        condition = ((QueueItemRecord.attempt == attempt)
                     | (QueueItemRecord.state == "cancelled")) & (
            QueueItemRecord.provider_id.does_not_exist()
        )  # fmt: skip

        def fill(tx: TransactWrite) -> None:
            for record, put_condition in puts:
                tx.save(record, condition=put_condition, return_values="ALL_OLD")
            tx.update(probe, [QueueItemRecord.provider_id.set(provider_id)],
                      condition=condition)  # fmt: skip

        try:
            transact(fill)
        except TransactWriteError as exc:
            reasons = exc.cancellation_reasons or []
            if len(reasons) > len(puts) and _failed(reasons[len(puts)]):
                return False
            mapping_reason = reasons[len(puts) - 1] if len(reasons) >= len(puts) else None
            if map_provider_id and mapping_reason is not None and _failed(mapping_reason):
                raw = mapping_reason.raw_item
                owner = ProviderRecord.from_raw_data(raw) if raw else None
                raise ProviderIdTaken(provider_id, owner) from None
            raise
        return True

    def append_history(
        self, entries: Sequence[HistoryRecord], *, mark: EventMark | None = None
    ) -> None:
        """History entries that change no state (events that leave an item as it is).

        With ``mark``, one transaction that also stores the event's mark as a record of its own,
        conditional on the mark being neither there nor in the item's ``seen`` set
        (``Duplicate``): the state item is not written, so events that change nothing (opens,
        clicks, late events) never grow it.
        """
        records = pack_history(entries)
        if mark is None:
            if len(records) == 1:
                records[0].save()
            elif records:
                self.put_new(records)
            return
        unseen = QueueItemRecord.id.exists() & ~QueueItemRecord.seen.contains(mark.digest)
        def fill(tx: TransactWrite) -> None:
            tx.condition_check(QueueItemRecord, item_pk(mark.item_id), STATE_SK,
                               condition=unseen)  # fmt: skip
            tx.save(mark.record(), condition=EventMarkRecord.pk.does_not_exist())
            for record in records:
                tx.save(record)

        try:
            transact(fill)
        except TransactWriteError as exc:
            # PynamoDB sends condition checks first, then puts.
            reasons = exc.cancellation_reasons or []
            if not any(_failed(r) for r in reasons[:2]):
                raise
            if _failed(reasons[0]) and self.get_item(mark.item_id) is None:
                raise Moved(None) from None
            raise Duplicate(f"event {mark.digest} of {mark.item_id} was seen") from exc

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

    # ---- content references (attachment cleanup) -------------------------------------------

    def release_content(
        self, content_id: str, now_iso: str, shard: str, count: int = 1
    ) -> ContentRefsRecord:
        """``count`` items of the content were reserved and never created: count them off and
        put the content in the purge index (the purge checks the count)."""
        refs = ContentRefsRecord(content_pk(content_id), REFS_SK)
        actions = Release(content_id, shard, now_iso).actions()
        actions[0] = ContentRefsRecord.open_items.add(-count)
        refs.update(actions=actions)
        return refs

    def reserve_content(self, content_id: str, count: int) -> bool:
        """Count ``count`` new items of a content; False if its files were purged."""
        refs = ContentRefsRecord(content_pk(content_id), REFS_SK)
        try:
            refs.update(
                actions=[
                    ContentRefsRecord.open_items.add(count),
                    ContentRefsRecord.idle_since.remove(),
                    ContentRefsRecord.purge_pk.remove(),
                    ContentRefsRecord.purge_sk.remove(),
                ],
                condition=ContentRefsRecord.purged_at.does_not_exist(),
            )
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def confirm_refs(self, content_id: str) -> None:
        """The enqueue that wrote a content's refs wrote its items: no longer pending."""
        refs = ContentRefsRecord(content_pk(content_id), REFS_SK)
        try:
            refs.update(
                actions=[ContentRefsRecord.pending.remove(), ContentRefsRecord.purge_pk.remove(),
                         ContentRefsRecord.purge_sk.remove()],
                condition=ContentRefsRecord.pending.exists(),
            )  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise

    def settle_pending(self, refs: ContentRefsRecord) -> None:
        """An enqueue died before confirming its items: count off those that were never
        stored (read strongly consistent), once."""
        assert refs.pending is not None
        item_ids = json.loads(refs.pending)
        missing = len(item_ids) - len(self.get_items(item_ids))
        try:
            refs.update(
                actions=[ContentRefsRecord.open_items.add(-missing),
                         ContentRefsRecord.pending.remove()],
                condition=ContentRefsRecord.pending == refs.pending,
            )  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise

    def mark_purged(self, content_id: str, now_iso: str) -> bool:
        """Mark a content's files purged, if no item of it is open; True when its files may be
        deleted (also when an earlier purge marked it and died before deleting them: the
        content stays in the purge index until ``unqueue_purge``)."""
        refs = ContentRefsRecord(content_pk(content_id), REFS_SK)
        try:
            refs.update(
                actions=[ContentRefsRecord.purged_at.set(ContentRefsRecord.purged_at | now_iso)],
                condition=(ContentRefsRecord.open_items <= 0)
                & (ContentRefsRecord.purged_at.does_not_exist()
                   | ContentRefsRecord.purge_pk.exists()),
            )  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def unqueue_purge(self, content_id: str) -> None:
        """Take a content out of the purge index: its files are deleted, or it has open items
        again (a later release puts it back)."""
        refs = ContentRefsRecord(content_pk(content_id), REFS_SK)
        try:
            refs.update(
                actions=[ContentRefsRecord.purge_pk.remove(), ContentRefsRecord.purge_sk.remove()],
                condition=(ContentRefsRecord.open_items > 0) | ContentRefsRecord.purged_at.exists(),
            )
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise

    def idle_contents(self, shard: str, before: str, limit: int) -> Iterator[str]:
        for row in ContentRefsRecord.purge_index.query(
            shard, ContentRefsRecord.purge_sk < before, limit=limit
        ):
            yield row.pk.removeprefix("CT#")
