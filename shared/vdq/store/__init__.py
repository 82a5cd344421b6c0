"""The store: the only code that touches DynamoDB.

One table, every record kind under a prefixed key:

| record        | pk           | sk          | what                                            |
|---------------|--------------|-------------|-------------------------------------------------|
| queue item    | ``QI#<id>``  | ``STATE``   | the small, often-written state of one receiver  |
| history       | ``QI#<id>``  | ``H#<at>#…`` | the "why" timeline past what the state item    |
|               |              |             | holds (``recent``), one record per write        |
| content       | ``CT#<id>``  | ``CONTENT`` | subject, bodies, recipient lists; written once  |
|               | ``CO#<o>``   | ``C#<id>``  | the same for a request with an origin (``o``: a |
|               |              |             | hash of it and a shard of 16), listing the      |
|               |              |             | request's items                                 |
| content refs  | ``CT#<id>``  | ``REFS``    | open items of a content with files or shared    |
|               | ``CO#<o>``   | ``R#<id>``  | (of a content in an origin's partition)         |
| attachment    | ``AT#<id>``  | ``FILE``    | one file's metadata; the bytes live in S3       |
| provider ID   | ``PID#<id>`` | ``MAP``     | SES message ID / Twilio SID -> item; orphans    |
| suppression   | ``SUP#<n>``  | ``R#<to>``  | a receiver not sent to (n: hash of it, 0..7)    |
| its history   | ``SUPH#<to>``| ``H#<at>#…`` | added, removed, noted; outlives a removal      |
|               |              | ``EV#<hash>`` | a provider event applied to it (TTL)          |
| scheduled     | ``SCHED#<n>`` | ``<at>#…`` | a request's items waiting over 15 min to send;  |
|               |              |             | high, bulk lane: pk ``SCHED#<lane>#<n>``        |
| posting       | ``PT#<hour>`` | ``<shard>#<seq>`` | items entered and provider IDs stored in |
|               |              |             | one stream window of one shard (search by time) |
| counter       | ``CNT#<hour>``| ``all#<k>``, | how many items entered each state that hour,  |
|               |              | ``p#…``, ``i#…`` | in all, per producer, per sender identity |
| shard mark    | ``CK#<shard>``| ``CK``      | the last stream sequence number a window of the |
|               |              |             | shard wrote: the next skips a repeat up to it   |
| flush marker  | ``FL#<shard>``| ``<last>#<first>`` | an invocation's batch whose window was   |
|               |              |             | begun, then written: a repair counts it not     |
| repair lease  | ``RL#<batch>``| ``RL``      | one repair of a skipped batch at a time (TTL)   |
| guard level   | ``GUARD``    | ``P#<p>``   | a producer's reputation level (ok, warn, hold,  |
|               |              | ``A#account`` | released), why, since when; the account's    |
| parked        | ``HELD#<p>`` | ``<id>``    | an item a hold kept from its provider           |

By aggregate: ``models`` (the records, their keys and ``bind``), ``items`` (queue items and
their state writes), ``events`` (history appends that change no state, with their event
marks), ``history`` (history entries and event marks), ``contents`` (contents,
attachments, reference counts and purge), ``keys`` (provider-ID mappings and orphans),
``scheduled`` (due-time buckets of long scheduled sends), ``search`` (the receiver index and
the origin partitions), ``postings`` (postings and counters the stream writes), ``holds``
(the reputation guard's levels and parked items), ``tx`` (transactions and batches of new
records), ``suppressions`` (suppressed receivers and their history), ``expiry`` (records
past their expiration, the table's TTL attribute, are gone to every read; stamping an
item's records: vdq.workflow.retention).
``Store`` gathers their reads and writes; every name is importable from here.
"""

from __future__ import annotations

from vdq.store.contents import Contents, decode_content, encode_content
from vdq.store.events import Events
from vdq.store.history import (
    ENTRY_FIELDS,
    MAX_HISTORY_TEXT,
    SEEN_LIMIT,
    EventMark,
    history_entry,
    pack_history,
    unpack_history,
)
from vdq.store.items import Duplicate, Moved, StateWrite
from vdq.store.keys import Keys, ProviderIdTaken
from vdq.store.models import (
    CONTENT_SK,
    FILE_SK,
    MAP_SK,
    MODELS,
    NEVER,
    REFS_SK,
    STATE_SK,
    AttachmentRecord,
    ContentRecord,
    ContentRefsRecord,
    EventMarkRecord,
    HistoryRecord,
    ProviderRecord,
    QueueItemRecord,
    Release,
    ScheduledCursorRecord,
    ScheduledRecord,
    SuppressionEventRecord,
    SuppressionMarkRecord,
    SuppressionRecord,
    attachment_pk,
    bind,
    content_id_of,
    content_key,
    content_pk,
    item_pk,
    origin_content_id,
    origin_key,
    origin_partitions,
    provider_pk,
    refs_key,
    shard,
    suppression_history_pk,
    suppression_mark_sk,
    suppression_pk,
    suppression_sk,
)
from vdq.store.scheduled import Scheduled
from vdq.store.search import Search
from vdq.store.shards import Shards
from vdq.store.suppressions import Suppressions
from vdq.store.tx import StoreBusy, WriteFailed, transact

__all__ = [
    "CONTENT_SK",
    "ENTRY_FIELDS",
    "FILE_SK",
    "MAP_SK",
    "MAX_HISTORY_TEXT",
    "MODELS",
    "NEVER",
    "REFS_SK",
    "SEEN_LIMIT",
    "STATE_SK",
    "AttachmentRecord",
    "ContentRecord",
    "ContentRefsRecord",
    "Duplicate",
    "EventMark",
    "EventMarkRecord",
    "HistoryRecord",
    "Moved",
    "ProviderIdTaken",
    "ProviderRecord",
    "QueueItemRecord",
    "Release",
    "ScheduledCursorRecord",
    "ScheduledRecord",
    "StateWrite",
    "Store",
    "StoreBusy",
    "SuppressionEventRecord",
    "SuppressionMarkRecord",
    "SuppressionRecord",
    "Suppressions",
    "WriteFailed",
    "attachment_pk",
    "bind",
    "content_id_of",
    "content_key",
    "content_pk",
    "decode_content",
    "encode_content",
    "history_entry",
    "item_pk",
    "origin_content_id",
    "origin_key",
    "origin_partitions",
    "pack_history",
    "provider_pk",
    "refs_key",
    "shard",
    "suppression_history_pk",
    "suppression_mark_sk",
    "suppression_pk",
    "suppression_sk",
    "transact",
    "unpack_history",
]


class Store(Contents, Events, Keys, Suppressions, Scheduled, Search, Shards):
    """Reads and conditional writes of VDQ's records (queue items and their history, contents
    and attachments, provider-ID mappings, suppressions), and the searches by receiver and
    origin."""
