"""The records of VDQ's one table: their keys, PynamoDB models and indexes, and ``bind``."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

from pynamodb.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    ListAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)
from pynamodb.indexes import GlobalSecondaryIndex, KeysOnlyProjection
from pynamodb.models import Model

from vdq.core import resources

STATE_SK = "STATE"
CONTENT_SK = "CONTENT"
REFS_SK = "REFS"
FILE_SK = "FILE"
MAP_SK = "MAP"
# The ``cx`` of an item whose content never expires (written without a retention).
NEVER = 9_999_999_999
SCHEDULED_PREFIX = "SCHED#"  # pk of the due-time buckets of long scheduled sends, by shard


def shard(key: str, shards: int) -> int:
    """The write shard of a sparse index entry: a stable hash of the item (or content) id."""
    return int(hashlib.blake2b(key.encode(), digest_size=4).hexdigest(), 16) % shards


def item_pk(item_id: str) -> str:
    return f"QI#{item_id}"


def content_pk(content_id: str) -> str:
    """The partition of a content's records (content, REFS): its own, or its origin's."""
    ulid, _, origin = content_id.partition(ORIGIN_MARK)
    return f"{ORIGIN_PREFIX}{origin}" if origin else f"CT#{ulid}"


# A request with an origin stores its content in one of the origin's partitions, one record a
# request (sort key ``C#<ulid>``, newest last), so the search by origin is a Query of each and
# costs no write of its own. Its content id says which: ``<ulid>.<origin key>-<shard>`` (the
# shard one hex digit, so every such id is as long: a record's size does not vary by it). One
# origin can be a whole campaign sent at the provider's rate: at 1,000 emails a second its
# contents take ~2,000 write units a second, twice one partition's limit, so they are spread
# over ORIGIN_SHARDS partitions by a hash of the request's ulid (a quarter of the limit each at
# 4,000). Fixed, not a setting: the search reads every shard. Contents written before the
# shards (``<ulid>.<origin key>``) stay in the origin's unsharded partition, read as well.
ORIGIN_PREFIX = "CO#"
ORIGIN_MARK = "."
ORIGIN_SHARD_MARK = "-"
ORIGIN_SHARDS = 16  # one hex digit


def origin_key(origin_type: str, origin_id: str) -> str:
    """The partition key part of an origin (type, id): 65 bits of its hash, base32."""
    digest = hashlib.blake2b(f"{origin_type}\x1f{origin_id}".encode(), digest_size=9).digest()
    return base64.b32encode(digest).decode().rstrip("=").lower()[:13]


def origin_content_id(ulid: str, origin_type: str, origin_id: str) -> str:
    part = f"{origin_key(origin_type, origin_id)}{ORIGIN_SHARD_MARK}{shard(ulid, ORIGIN_SHARDS):x}"
    return f"{ulid}{ORIGIN_MARK}{part}"


def origin_partitions(origin_type: str, origin_id: str) -> list[str]:
    """Every partition an origin's contents can be in: its shards, and the one of contents
    written before them."""
    key = f"{ORIGIN_PREFIX}{origin_key(origin_type, origin_id)}"
    return [key] + [f"{key}{ORIGIN_SHARD_MARK}{n:x}" for n in range(ORIGIN_SHARDS)]


def content_key(content_id: str) -> tuple[str, str]:
    """(pk, sk) of a content's record."""
    ulid, _, origin = content_id.partition(ORIGIN_MARK)
    return (content_pk(content_id), f"C#{ulid}" if origin else CONTENT_SK)


def refs_key(content_id: str) -> tuple[str, str]:
    """(pk, sk) of a content's REFS record (its open items), beside the content."""
    ulid, _, origin = content_id.partition(ORIGIN_MARK)
    return (content_pk(content_id), f"R#{ulid}" if origin else REFS_SK)


def content_id_of(pk: str, sk: str) -> str:
    """The content id of a record keyed by ``content_key`` or ``refs_key``."""
    if pk.startswith(ORIGIN_PREFIX):
        return f"{sk.split('#', 1)[1]}{ORIGIN_MARK}{pk.removeprefix(ORIGIN_PREFIX)}"
    return pk.removeprefix("CT#")


def attachment_pk(attachment_id: str) -> str:
    return f"AT#{attachment_id}"


def provider_pk(provider_id: str) -> str:
    return f"PID#{provider_id}"


# Suppressions live in a fixed number of partitions, keyed by receiver inside each, so that one
# is read by key (its partition is a hash of the receiver) and all are listed without an index.
# Fixed, not a setting: changing it would move every record.
SUPPRESSION_SHARDS = 8


def suppression_pk(receiver: str) -> str:
    return f"SUP#{shard(receiver, SUPPRESSION_SHARDS)}"


def suppression_sk(receiver: str, list_name: str | None = None) -> str:
    """A receiver's deployment-wide entry, or its unsubscribe from one list (right after it:
    a list name holds no ``#``, an address's domain none either)."""
    return f"R#{receiver}" if list_name is None else f"R#{receiver}#L#{list_name}"


def suppression_history_pk(receiver: str) -> str:
    return f"SUPH#{receiver}"


def suppression_mark_sk(event_id: str) -> str:
    """The mark of a provider event on a receiver's suppression (in its history partition,
    beside the entries, ``H#...``): 64 bits of digest, as an item's event marks."""
    return "EV#" + hashlib.blake2b(event_id.encode(), digest_size=8).hexdigest()


class _Table(Model):
    """Keys shared by every record kind. Meta is filled in by ``bind``."""

    class Meta:
        table_name = "vdq"
        region: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # PynamoDB caches a connection, with the indexes it knows, on the class it was asked
        # on. A kind without one of its own would inherit _Table's, whose schema has no index.
        super().__init_subclass__(**kwargs)
        cls._connection = None

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    # The table's TTL attribute (epoch seconds): DynamoDB deletes the record some time after,
    # and every read treats a record past it as gone (vdq.workflow.retention).
    expiration = NumberAttribute(attr_name=resources.TABLE_TTL_ATTRIBUTE, null=True)


class _ActiveIndex(GlobalSecondaryIndex["QueueItemRecord"]):
    class Meta:
        index_name = resources.ACTIVE_INDEX.name
        projection = KeysOnlyProjection()

    active_pk = UnicodeAttribute(hash_key=True)
    active_sk = UnicodeAttribute(range_key=True)


class _TimersIndex(GlobalSecondaryIndex["QueueItemRecord"]):
    class Meta:
        index_name = resources.TIMERS_INDEX.name
        projection = KeysOnlyProjection()

    timer_pk = UnicodeAttribute(hash_key=True)
    timer_sk = UnicodeAttribute(range_key=True)


class _ReceiverIndex(GlobalSecondaryIndex["QueueItemRecord"]):
    class Meta:
        index_name = resources.RECEIVER_INDEX.name
        projection = KeysOnlyProjection()

    rx = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)


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
    # Absent when false, as every attribute at its default: a state item is rewritten by every
    # transition, and each KB it stays under is a write unit saved per write.
    has_files = BooleanAttribute(null=True)
    # Its content counts its open items (REFS): it has files, or other items share it.
    # Only items of contents written before contents expired from birth (vdq.workflow.retention).
    counted = BooleanAttribute(null=True)
    # The expiration its content has at least (epoch seconds; vdq.workflow.retention): present
    # on items whose content expires from birth, absent on those of a content counted (REFS).
    cx = NumberAttribute(null=True)
    result = UnicodeAttribute(null=True)
    retries = NumberAttribute(null=True)  # automatic retries of the operator attempt; absent: 0
    retry_delay = NumberAttribute(null=True)
    queued_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    # Items written before the compact state record stored ``queued_at`` again here; it is
    # derived now (vdq.workflow.views.item_json) and read only from those.
    done_since = UnicodeAttribute(null=True)
    done_at = UnicodeAttribute(null=True)
    claimed_at = UnicodeAttribute(null=True)  # the current claim; removed when it is done
    # The current claim's ``send`` entry is a record of its own (the state item had no room
    # for it); absent: on the state item. Set and removed by each claim.
    claim_apart = BooleanAttribute(null=True)
    # 1 once a record of the item's history or an event mark was written beside the state item
    # without its expiration, before or with that record (vdq.store.expiry.unstamped); 0 from
    # birth. The stream stamps such records when the item is done, and reads for them only
    # when this says there are some. Absent on items of a release before it: read for them.
    apart = NumberAttribute(attr_name="ap", null=True)
    provider_id = UnicodeAttribute(null=True)
    origin_type = UnicodeAttribute(null=True)
    origin_id = UnicodeAttribute(null=True)
    created_by = UnicodeAttribute(null=True)
    resent_from = UnicodeAttribute(null=True)
    priority = UnicodeAttribute(null=True)  # the lane (vdq.workflow.lanes); absent: normal
    # List mail: the list its unsubscribe link leaves (vdq.results.unsubscribe); absent: not
    # list mail.
    list_name = UnicodeAttribute(attr_name="list", null=True)
    send_at = UnicodeAttribute(null=True)  # not sent before this time (vdq.intake.scheduling)
    # Parked by the reputation guard (vdq.store.holds): why, while its producer is held.
    held = UnicodeAttribute(null=True)
    # SMS: "GSM-7" | "UCS-2" of the body (vdq.intake.segments); absent for media alone
    encoding = UnicodeAttribute(null=True)
    segments = NumberAttribute(null=True)  # SMS: the segments Twilio bills for the body (0: none)
    seen = UnicodeSetAttribute(null=True)  # digests of the provider events recorded (EventMark)
    # The history entries its state writes carried, while they fit (vdq.store.history): JSON.
    recent = ListAttribute(of=UnicodeAttribute, null=True)
    # Sparse index keys: present only while the item belongs to the index.
    active_pk = UnicodeAttribute(null=True)
    active_sk = UnicodeAttribute(null=True)
    timer_pk = UnicodeAttribute(null=True)
    timer_sk = UnicodeAttribute(null=True)
    # The receiver index's key (vdq.store.search.receiver_key): written at enqueue, never moved.
    rx = UnicodeAttribute(null=True)
    # The start of the subject (email) or body (SMS), for lists that show it without reading
    # the content (vdq.store.search.EXCERPT_CHARS).
    sj = UnicodeAttribute(null=True)

    active_index = _ActiveIndex()
    timers_index = _TimersIndex()
    receiver_index = _ReceiverIndex()


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


class EventMarkRecord(_Table):
    """A provider event recorded on an item, when its ``seen`` set is full (or the event
    changed no state): the record's existence is the mark."""


@dataclass(frozen=True)
class Release:
    """One item of a counted content entered a done state: its open count goes down, and a
    content with files joins the purge index (the purge checks the count before deleting)."""

    content_id: str
    shard: str
    now_iso: str
    files: bool = True

    def actions(self) -> list[Any]:
        actions: list[Any] = [ContentRefsRecord.open_items.add(-1),
                              ContentRefsRecord.idle_since.set(self.now_iso)]  # fmt: skip
        if self.files:
            actions += [ContentRefsRecord.purge_pk.set(self.shard),
                        ContentRefsRecord.purge_sk.set(f"{self.now_iso}#{self.content_id}")]
        return actions


class ContentRecord(_Table):
    method = UnicodeAttribute()
    data = BinaryAttribute(legacy_encoding=False)  # compressed JSON (encode_content)
    created_at = UnicodeAttribute()
    # A resend made the content of one item shared: its REFS record counts its items now.
    shared = BooleanAttribute(null=True)
    # A content in its origin's partition lists the request's items (space-separated ids):
    # the search by origin reads them from here.
    items = UnicodeAttribute(null=True)


class ContentRefsRecord(_Table):
    open_items = NumberAttribute(default=0)
    # JSON list of the item ids an enqueue is writing, until it confirms them: see
    # vdq.intake.enqueue.pending_refs and Store.settle_pending.
    pending = UnicodeAttribute(null=True)
    # The purge settled a pending count: the items' stamps were refused until then, so the
    # purge stamps the content itself (a purge killed before that finds this on its next run).
    unstamped = BooleanAttribute(null=True)
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


class SuppressionRecord(_Table):
    """A receiver VDQ does not send to (vdq.results.suppression): why, since when, who put it
    there; with ``list_name``, only the list mail of that list (an unsubscribe)."""

    receiver = UnicodeAttribute()  # normalised: lower-case address or E.164 number
    channel = UnicodeAttribute()  # "email" | "sms"
    reason = UnicodeAttribute()  # vdq.results.suppression.REASONS
    text = UnicodeAttribute(null=True)
    since = UnicodeAttribute()
    actor = UnicodeAttribute()
    list_name = UnicodeAttribute(attr_name="list", null=True)  # absent: every email or SMS


class SuppressionEventRecord(_Table):
    """One entry of a receiver's suppression history (added, removed, a HELP received)."""

    at = UnicodeAttribute()
    actor = UnicodeAttribute()
    action = UnicodeAttribute()  # "added" | "removed" | "noted"
    reason = UnicodeAttribute(null=True)
    text = UnicodeAttribute(null=True)
    list_name = UnicodeAttribute(attr_name="list", null=True)  # the entry of that list


class SuppressionMarkRecord(_Table):
    """A provider event applied to a receiver's suppression (vdq.results.suppression): the
    record's existence is the mark, until its expiration."""


class ScheduledRecord(_Table):
    """Queue items of one request whose send waits longer than SQS can delay a message: key
    ``SCHED#<shard>`` / ``<send_at>#<count>#<content id>#<n>`` (vdq.store.scheduled), so the
    schedule reads only the buckets that fell due (a key condition on time) and publishes their
    items without reading them.
    Never deleted by the schedule: the table's TTL removes it, at no charge."""

    send_at = UnicodeAttribute()
    priority = UnicodeAttribute()
    item_ids = UnicodeAttribute()  # space-separated ids, each at this attempt
    attempt = NumberAttribute(null=True)  # absent: 1 (a request's first); set by a retry's


def scheduled_partition(priority: str, shard_: int) -> str:
    """The partition of a lane's buckets in one shard, with its own cursor: the sweep releases
    the high lane's due buckets first, so a bulk backlog never holds them back. The normal
    lane's is ``SCHED#<shard>``, the partition of every bucket before lanes had their own."""
    if priority == "normal":
        return f"{SCHEDULED_PREFIX}{shard_}"
    return f"{SCHEDULED_PREFIX}{priority}#{shard_}"


SCHEDULED_CURSOR_SK = "~cursor"  # sorts after every time: no read of buckets returns it


class ScheduledCursorRecord(_Table):
    """How far the schedule has published a shard's buckets: the sort key of the last one."""

    position = UnicodeAttribute()


class ShardCountRecord(_Table):
    """The most write shards of the sparse indexes any function of the table has run with
    (vdq.store.shards)."""

    shards = NumberAttribute()


MODELS: tuple[type[_Table], ...] = (
    QueueItemRecord,
    HistoryRecord,
    ContentRecord,
    ContentRefsRecord,
    AttachmentRecord,
    ProviderRecord,
    EventMarkRecord,
    SuppressionRecord,
    SuppressionEventRecord,
    SuppressionMarkRecord,
    ScheduledRecord,
    ScheduledCursorRecord,
    ShardCountRecord,
)


def bind(table_name: str, region: str | None = None) -> None:
    """Point every model at ``table_name``. Called once per process (and per test).

    A model keeps its connection when nothing changed: each new connection builds a botocore
    session and loads the DynamoDB service model again (tens of milliseconds).
    """
    if _Table.Meta.table_name == table_name and _Table.Meta.region == region:
        return
    _Table.Meta.table_name = table_name  # every kind shares _Table's Meta
    _Table.Meta.region = region
    models: tuple[type[_Table], ...] = (_Table, *MODELS)
    for model in models:
        model._connection = None
