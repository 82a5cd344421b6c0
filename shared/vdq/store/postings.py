"""Postings and counters: what the table's stream consumer writes once per window of a shard.

A **posting** lists, compactly, the items one stream window of one shard saw enter the queue
(id, method, lane, a hash of the sender) and the provider IDs it saw stored (id, a hash of the
ID), grouped by the hour they belong to: key ``PT#<hour>`` / ``<shard>#<first sequence>``. It
serves the searches an index would make expensive (one index entry is a write unit an item,
a posting holds a window's items in one): by time window, by sender, by provider ID. A window
replayed writes the same key again (never a smaller posting over a larger one); readers drop
an id seen twice.

A **done posting** lists the items one window of one shard saw enter a done state in one
minute (id, the time to the millisecond, method, lane, state): key ``DN#<YYYY-MM>`` /
``<DD>T<HH:MM>#<shard>#<first sequence>``. The sent list reads them newest minute first, a
month a Query (vdq.operations.done_list); an index of done items was a write unit an item.

A **counter** holds how many items entered each state in an hour, in all (``all#<k>``), per
producer (``p#<producer>#<k>``) and per sender identity (``i#<sender>#<k>``), under
``CNT#<hour>``. Each write ADDs a window's counts and sets its shard's checkpoint, the last
stream sequence number counted, on the condition that the checkpoint is before the window's
first: a window counted once is never counted again (a replayed final invocation, a retried
write), and a shard's windows are counted in order. A shard that splits gives its children
new ids, hence checkpoints of their own. ``k`` spreads the checkpoints of many shards over
``COUNTER_SHARDS`` records, so no record grows past a write unit or two.

The flush markers of the windows and the leases of their repairs are ``vdq.store.flushes``.

Entries are 25 bytes: a kind, the item's id (a ULID, 16 bytes: its time is the enqueue time)
and 8 bytes of what the kind says.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from vdq.core import ids
from vdq.store.flushes import Flushes
from vdq.store.tx import batch_get

POSTING_PREFIX = "PT#"
DONE_PREFIX = "DN#"
COUNTER_PREFIX = "CNT#"
# A shard's last sequence number written (``CK#<shard>``): the next window of the shard skips
# a record at or below it (Lambda may hand one on again, out of order).
SHARD_PREFIX = "CK#"
SHARD_SK = "CK"
# Counter records per hour and kind. One holds up to about 30 shards' checkpoints in a write
# unit: raise it with the stream's shard count (the table's size), never lower it.
COUNTER_SHARDS = 1
ALL = "all"
ENTRY_BYTES = 25
SEQUENCE_BYTES = 17  # a stream sequence number (at most 40 digits) as a big-endian integer
ENTERED, ACCEPTED, DONE = b"q", b"p", b"d"
METHODS = ("email", "sms")
LANES = ("normal", "high", "bulk")
DONE_STATES = ("succeeded", "cancelled", "unconfirmed")
DAY_MS = 86_400_000
# Records a Query of the done postings reads at a time: a minute's at modest volume (a record a
# shard's window), where a page without a limit would read a megabyte of the month to show 50.
DONE_QUERY_RECORDS = 64
SCHEDULED = 1


def hour_of(at: str) -> str:
    """The hour bucket of an ISO time: ``YYYY-MM-DDTHH``."""
    return at[:13]


def shard_tag(shard_id: str) -> str:
    """A short, stable name of a stream shard (its id is about 56 characters)."""
    digest = hashlib.blake2b(shard_id.encode(), digest_size=5).digest()
    return base64.b32encode(digest).decode().lower()


def sequence_bytes(sequence: str) -> bytes:
    """A stream sequence number as bytes that sort as the number does."""
    return int(sequence).to_bytes(SEQUENCE_BYTES, "big")


def sender_hash(sender: str) -> bytes:
    return hashlib.blake2b(sender.strip().lower().encode(), digest_size=4).digest()


def provider_hash(provider_id: str) -> bytes:
    return hashlib.blake2b(provider_id.encode(), digest_size=8).digest()


def _id_bytes(item_id: str) -> bytes:
    value = 0
    for c in item_id:
        value = value * 32 + ids.ALPHABET.index(c)
    return value.to_bytes(16, "big")


def _id_text(raw: bytes) -> str:
    value = int.from_bytes(raw, "big")
    chars = []
    for _ in range(ids.LENGTH):
        chars.append(ids.ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


@dataclass(frozen=True)
class Entered:
    """An item entered the queue (its id says when)."""

    item_id: str
    method: str
    priority: str
    scheduled: bool
    sender: bytes  # sender_hash

    def encode(self) -> bytes:
        flags = SCHEDULED if self.scheduled else 0
        return (ENTERED + _id_bytes(self.item_id)
                + bytes([METHODS.index(self.method), LANES.index(self.priority), flags, 0])
                + self.sender)  # fmt: skip


@dataclass(frozen=True)
class Accepted:
    """A provider took an item's message and gave it an ID (``provider``: its hash)."""

    item_id: str
    provider: bytes

    def encode(self) -> bytes:
        return ACCEPTED + _id_bytes(self.item_id) + self.provider


@dataclass(frozen=True)
class Done:
    """An item entered a done state at ``done_at`` (the stored ISO time: the entry keeps it to
    the millisecond, its day is the posting's)."""

    item_id: str
    done_at: str
    method: str
    priority: str
    state: str

    @property
    def position(self) -> str:
        """Where the entry sorts in the sent list (newest first): its time, then its id."""
        return f"{self.done_at[:23]}#{self.item_id}"

    def encode(self) -> bytes:
        ms = int(self.done_at[11:13]) * 3_600_000 + int(self.done_at[14:16]) * 60_000 \
            + int(self.done_at[17:19]) * 1000 + int(self.done_at[20:23])  # fmt: skip
        return (DONE + _id_bytes(self.item_id) + ms.to_bytes(4, "big")
                + bytes([METHODS.index(self.method), LANES.index(self.priority),
                         DONE_STATES.index(self.state), 0]))  # fmt: skip


def decode_done(blob: bytes, day: str) -> list[Done]:
    """The entries of a done posting of ``day`` (``YYYY-MM-DD``: its month and the start of
    its sort key); ValueError for bytes no release wrote."""
    if len(blob) % ENTRY_BYTES:
        raise ValueError(f"a done posting of {len(blob)} bytes is not whole entries")
    out: list[Done] = []
    for start in range(0, len(blob), ENTRY_BYTES):
        raw = blob[start : start + ENTRY_BYTES]
        ms = int.from_bytes(raw[17:21], "big")
        m, lane, state = raw[21], raw[22], raw[23]
        if raw[:1] != DONE or ms >= DAY_MS or m >= len(METHODS) or lane >= len(LANES) \
                or state >= len(DONE_STATES):  # fmt: skip
            raise ValueError("not a done posting entry")
        seconds, milli = divmod(ms, 1000)
        at = (f"{day}T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
              f".{milli:03d}000Z")  # fmt: skip
        out.append(Done(_id_text(raw[1:17]), at, METHODS[m], LANES[lane], DONE_STATES[state]))
    return out


def done_sk(done_at: str, shard: str, first: str) -> str:
    """The sort key of a window's done posting of ``done_at``'s minute (its partition is the
    month's: ``done_at[:7]``)."""
    return f"{done_at[8:16]}#{shard}#{int(first):040d}"


Entry = Entered | Accepted


def encode_entries(entries: Iterable[Entry]) -> bytes:
    return b"".join(e.encode() for e in entries)


def decode_entries(blob: bytes) -> list[Entry]:
    """The entries of a posting; ValueError for bytes no release wrote."""
    if len(blob) % ENTRY_BYTES:
        raise ValueError(f"a posting of {len(blob)} bytes is not whole entries")
    out: list[Entry] = []
    for start in range(0, len(blob), ENTRY_BYTES):
        raw = blob[start : start + ENTRY_BYTES]
        kind, item_id, rest = raw[:1], _id_text(raw[1:17]), raw[17:]
        if kind == ENTERED:
            if rest[0] >= len(METHODS) or rest[1] >= len(LANES):
                raise ValueError("a posting entry of an unknown method or lane")
            out.append(Entered(item_id, METHODS[rest[0]], LANES[rest[1]],
                               bool(rest[2] & SCHEDULED), bytes(rest[4:])))  # fmt: skip
        elif kind == ACCEPTED:
            out.append(Accepted(item_id, bytes(rest)))
        else:
            raise ValueError(f"a posting entry of unknown kind {kind!r}")
    return out


def counter_sk(kind: str, name: str | None, shard: str) -> str:
    """The record of one kind of count (``all``, ``p`` producer, ``i`` sender identity) that a
    shard writes: ``k`` is a hash of the shard's tag."""
    k = int(hashlib.blake2b(shard.encode(), digest_size=2).hexdigest(), 16) % COUNTER_SHARDS
    return f"{ALL}#{k}" if kind == ALL else f"{kind}#{name}#{k}"


def counter_kind(sk: str) -> tuple[str, str | None]:
    """(kind, name) of a counter record's sort key."""
    kind, _, rest = sk.partition("#")
    if kind == ALL:
        return ALL, None
    return kind, rest.rsplit("#", 1)[0]


def checkpoint_name(shard: str) -> str:
    return f"ck.{shard}"


class Tallies(Flushes):
    """The postings' and counters' reads and writes (a boto3 DynamoDB client's calls: their
    attribute names are data, which PynamoDB's models do not take)."""

    # ---- writes (the stream consumer) ---------------------------------------------------

    def put_posting(self, hour: str, shard: str, first: str, last: str, entries: list[Entry],
                    expiration: int) -> bool:  # fmt: skip
        """Write a window's posting of ``hour``; False when one as large is there (a replay).
        ``first``, ``last``: the window's first and last sequence numbers."""
        return self._put(POSTING_PREFIX + hour, f"{shard}#{int(first):040d}",
                         encode_entries(entries), last, expiration)  # fmt: skip

    def put_done(self, month: str, sk: str, entries: list[Done], last: str,
                 expiration: int | None) -> bool:  # fmt: skip
        """Write a window's done posting of a minute of ``month`` (``sk``: ``done_sk``); False
        when one as large is there (a replay). ``expiration`` None: kept for good."""
        return self._put(DONE_PREFIX + month, sk, b"".join(e.encode() for e in entries), last,
                         expiration)  # fmt: skip

    def _put(self, pk: str, sk: str, blob: bytes, last: str, expiration: int | None) -> bool:
        item: dict[str, Any] = {"pk": {"S": pk}, "sk": {"S": sk}, "e": {"B": blob},
                                "last": {"B": sequence_bytes(last)}}  # fmt: skip
        if expiration is not None:
            item["expiration"] = {"N": str(expiration)}
        try:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="attribute_not_exists(pk) OR #last < :last",
                ExpressionAttributeNames={"#last": "last"},
                ExpressionAttributeValues={":last": {"B": sequence_bytes(last)}},
            )  # fmt: skip
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def add_counts(self, hour: str, sk: str, shard: str, first: str, last: str,
                   counts: Mapping[str, int], expiration: int) -> bool:  # fmt: skip
        """ADD ``counts`` to a counter record once: with the shard's checkpoint set to
        ``last``, on the condition that it is before ``first``. False when it is not (these
        counts were added before); nothing changes then."""
        names = {"#ck": checkpoint_name(shard), "#exp": "expiration"}
        values: dict[str, Any] = {":first": {"B": sequence_bytes(first)},
                                  ":last": {"B": sequence_bytes(last)},
                                  ":exp": {"N": str(expiration)}}  # fmt: skip
        adds = []
        for n, (name, count) in enumerate(sorted(counts.items())):
            names[f"#c{n}"] = name
            values[f":c{n}"] = {"N": str(int(count))}
            adds.append(f"#c{n} :c{n}")
        expression = "SET #ck = :last, #exp = :exp" + (" ADD " + ", ".join(adds) if adds else "")
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": COUNTER_PREFIX + hour}, "sk": {"S": sk}},
                UpdateExpression=expression,
                ConditionExpression="attribute_not_exists(#ck) OR #ck < :first",
                ExpressionAttributeNames=names, ExpressionAttributeValues=values,
            )  # fmt: skip
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def shard_checkpoint(self, shard: str) -> int:
        """The last sequence number a window of ``shard`` wrote (-1: none yet); one strongly
        consistent GetItem."""
        found = self._client.get_item(
            TableName=self._table, ConsistentRead=True, ProjectionExpression="#s",
            Key={"pk": {"S": SHARD_PREFIX + shard}, "sk": {"S": SHARD_SK}},
            ExpressionAttributeNames={"#s": "seq"},
        ).get("Item")  # fmt: skip
        if not found or "B" not in found.get("seq", {}):
            return -1
        return int.from_bytes(bytes(found["seq"]["B"]), "big")

    def set_shard_checkpoint(self, shard: str, last: int, expiration: int) -> None:
        """``last`` written for ``shard``, never moving it back (a window given again)."""
        value = {"B": last.to_bytes(SEQUENCE_BYTES, "big")}
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": SHARD_PREFIX + shard}, "sk": {"S": SHARD_SK}},
                UpdateExpression="SET #s = :s, #exp = :exp",
                ConditionExpression="attribute_not_exists(#s) OR #s < :s",
                ExpressionAttributeNames={"#s": "seq", "#exp": "expiration"},
                ExpressionAttributeValues={":s": value, ":exp": {"N": str(expiration)}},
            )  # fmt: skip
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    # ---- reads (the operator API) ---------------------------------------------------------

    def postings(self, hour: str, *, page_bytes: int | None = None
                 ) -> Iterator[tuple[list[Entry], int]]:  # fmt: skip
        """The postings of an hour, one Query page at a time: (their entries, bytes read)."""
        kwargs: dict[str, Any] = {
            "TableName": self._table, "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": POSTING_PREFIX + hour}},
            "ProjectionExpression": "e",
        }  # fmt: skip
        while True:
            answer = self._client.query(**kwargs)
            entries: list[Entry] = []
            size = 0
            for row in answer.get("Items", []):
                blob = bytes(row.get("e", {}).get("B", b""))
                size += len(blob) + 100
                try:
                    entries.extend(decode_entries(blob))
                except ValueError:
                    continue  # not a posting as this release writes one: left out
            yield entries, size
            after = answer.get("LastEvaluatedKey")
            if not after:
                return
            kwargs["ExclusiveStartKey"] = after

    def done_minutes(self, month: str, *, through: str | None = None
                     ) -> Iterator[tuple[list[Done], int]]:  # fmt: skip
        """The done postings of ``month`` (``YYYY-MM``), a whole minute at a time, newest
        minute first (from ``through``, ``DDTHH:MM``, back): (the minute's entries, unsorted,
        bytes read). A Query page of ``DONE_QUERY_RECORDS`` at a time, eventually consistent:
        the stream is seconds behind anyway."""
        values: dict[str, Any] = {":pk": {"S": DONE_PREFIX + month}}
        condition = "pk = :pk"
        if through is not None:
            condition += " AND sk < :before"
            values[":before"] = {"S": through + "~"}  # every record of that minute
        kwargs: dict[str, Any] = {
            "TableName": self._table, "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values, "ScanIndexForward": False,
            "ProjectionExpression": "sk, e", "Limit": DONE_QUERY_RECORDS,
        }  # fmt: skip
        minute, size = "", 0
        entries: list[Done] = []
        while True:
            answer = self._client.query(**kwargs)
            for row in answer.get("Items", []):
                at = row["sk"]["S"][:8]
                if at != minute and minute:
                    yield entries, size
                    entries, size = [], 0
                minute = at
                blob = bytes(row.get("e", {}).get("B", b""))
                size += len(blob) + 100
                try:
                    entries.extend(decode_done(blob, f"{month}-{at[:2]}"))
                except ValueError:
                    continue  # not a posting as this release writes one: left out
            after = answer.get("LastEvaluatedKey")
            if not after:
                if minute:
                    yield entries, size
                return
            kwargs["ExclusiveStartKey"] = after

    def counters(self, hours: Iterable[str], kind: str = ALL) -> dict[str, dict[str, int]]:
        """The counts of each hour (summed over its records of ``kind``; only ``all`` here),
        eventually consistent: a count is minutes behind anyway."""
        keys = [{"pk": {"S": COUNTER_PREFIX + h}, "sk": {"S": f"{ALL}#{k}"}}
                for h in dict.fromkeys(hours) for k in range(COUNTER_SHARDS)]  # fmt: skip
        return self._sums(keys)

    def _sums(self, keys: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
        """The records' counts summed by hour, a hundred keys a BatchGetItem; the keys
        DynamoDB leaves unread are asked again with back-off, and ``StoreBusy`` (503) when
        they stay unread: a missing record would read as counts of 0 (a hold released
        against a baseline of nothing, stats that lost an hour)."""
        out: dict[str, dict[str, int]] = {}
        for start in range(0, len(keys), 100):
            request = {"Keys": keys[start : start + 100]}
            for row in batch_get(self._client, self._table, request):
                hour = row["pk"]["S"].removeprefix(COUNTER_PREFIX)
                _add(out.setdefault(hour, {}), row)
        return out

    def named(self, hours: Iterable[str], kind: str, name: str) -> dict[str, dict[str, int]]:
        """The counts of one producer (``p``) or sender identity (``i``) in each hour (summed
        over its records), eventually consistent: one BatchGetItem a hundred records."""
        keys = [{"pk": {"S": COUNTER_PREFIX + h}, "sk": {"S": f"{kind}#{name}#{k}"}}
                for h in dict.fromkeys(hours) for k in range(COUNTER_SHARDS)]  # fmt: skip
        return self._sums(keys)

    def reputation(self, hour: str) -> dict[tuple[str, str], dict[str, int]]:
        """Every per-producer (``p``) and per-identity (``i``) count of an hour, by (kind,
        name): one Query of the hour's partition."""
        out: dict[tuple[str, str], dict[str, int]] = {}
        kwargs: dict[str, Any] = {
            "TableName": self._table, "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": COUNTER_PREFIX + hour}},
        }  # fmt: skip
        while True:
            answer = self._client.query(**kwargs)
            for row in answer.get("Items", []):
                kind, name = counter_kind(row["sk"]["S"])
                if kind != ALL and name is not None:
                    _add(out.setdefault((kind, name), {}), row)
            after = answer.get("LastEvaluatedKey")
            if not after:
                return out
            kwargs["ExclusiveStartKey"] = after


def _add(into: dict[str, int], row: Mapping[str, Any]) -> None:
    for name, value in row.items():
        if name in ("pk", "sk", "expiration") or name.startswith("ck.") or "N" not in value:
            continue
        into[name] = into.get(name, 0) + int(value["N"])
