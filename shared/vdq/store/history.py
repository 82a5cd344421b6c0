"""History entries and provider-event marks: how a write stores them, and how they are read.

A transactional item costs two write units however small it is, so a state write carries its
own history entries on the state item (``recent``) while they fit: the write is then one
UpdateItem, or a transaction of one item fewer. Entries that do not fit (the item's first
``RECENT_LIMIT`` are kept there, each at most ``RECENT_ENTRY_BYTES``), and entries of writes
that change no state, are history records; the entries of one write share one record. A
provider event's mark (its duplicate check) is a member of the state item's ``seen`` set
rather than a record of its own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from pynamodb.expressions.condition import size

from vdq.core.clock import iso, parse_iso
from vdq.store.models import EventMarkRecord, HistoryRecord, QueueItemRecord, item_pk

ENTRY_FIELDS = ("at", "actor", "source", "kind", "name", "from_state", "to_state", "attempt",
                "text")  # fmt: skip

# The state item holds at most this many entries, each at most this many bytes of JSON: the
# happy path of a message (send, accepted, its final result) and an operator's retry fit, and
# the item stays a few KB whatever happens to it. Both are fixed: a stored item's entries must
# read back whatever a later release sets.
RECENT_LIMIT = 6
RECENT_ENTRY_BYTES = 320


def _entry_json(entry: HistoryRecord) -> dict[str, Any]:
    data = {"sk": entry.sk, **{f: getattr(entry, f) for f in ENTRY_FIELDS}}
    return {k: v for k, v in data.items() if v is not None}


MAX_HISTORY_TEXT = 16_000  # characters of an entry's text


def history_entry(
    item_id: str,
    now: datetime,
    *,
    actor: str,
    source: str,
    kind: str,
    name: str,
    from_state: str | None = None,
    to_state: str | None = None,
    attempt: int | None = None,
    text: str | None = None,
    key: str | None = None,
) -> HistoryRecord:
    """A new entry of ``item_id``'s history at ``now``: its key is the time and ``key`` (a
    fixed one makes an entry two writers may both write one entry), or a random part."""
    at = iso(now)
    return HistoryRecord(
        item_pk(item_id),
        f"H#{at}#{key or os.urandom(3).hex()}",
        at=at,
        actor=actor,
        source=source,
        kind=kind,
        name=name,
        from_state=from_state,
        to_state=to_state,
        attempt=attempt,
        text=text[:MAX_HISTORY_TEXT] if text else None,
    )


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
        record.expiration = last.expiration
        if len(group) > 1:
            record.more = json.dumps([_entry_json(e) for e in group[:-1]], separators=(",", ":"))
        out.append(record)
    return out


# An entry on the state item is a JSON array. Written since the compact state record (v2):
# ``["~<time>#<rest of its key>", "<code>", attempt, text]``, where ``<time>`` is the entry's
# time in microseconds after the item's ``queued_at`` (base 36, "-" before it when a clock ran
# behind) and ``<code>`` six letters for its actor, source, kind, name, from and to state
# (``CODES``); trailing nulls are left out. A delivered email's three entries take about 200
# bytes instead of 435, which keeps its state item under one write unit (1 KB). An entry the
# codes cannot say (an operator's name as its actor, an unknown event name, a time in another
# form) is written as before (v1): its key without the "H#" every history key starts with (the
# time is the key's), then the values of ``ENTRY_FIELDS`` after "at" in that order, trailing
# nulls left out. Entries written as objects (before 2026-12-04, v0) read back as well: see
# ``entry_data``. The tables are part of the stored format: a value gets a new letter, never
# another one, and a letter is never reused.
HISTORY_KEY_PREFIX = "H#"
_POSITIONAL = ENTRY_FIELDS[1:]
V2_MARK = "~"
_NONE = "-"  # a field without a value (a state of an entry that moves none)

# The letters of each coded field, in ``_CODED``'s order.
CODES: dict[str, dict[str, str]] = {
    "actor": {"worker": "w", "ses": "e", "twilio": "x", "schedule": "c", "vdq": "v"},
    "source": {"server": "s", "provider": "p", "operator": "o", "schedule": "c"},
    "kind": {"transition": "t", "ignored": "i", "late": "l", "event": "e", "action": "a"},
    "name": {
        # transitions of the workflow's table
        "send": "s", "await": "a", "delay": "d", "error": "e", "succeed": "u", "timeout": "t",
        "retry": "r", "cancel": "c",
        # a worker's give-backs (vdq.workflow.table.GIVE_BACK_ENTRIES)
        "paced": "p", "throttled": "h", "suppressed": "z",
        # SES event types
        "Send": "S", "Delivery": "D", "Bounce": "B", "Reject": "R", "Rendering Failure": "F",
        "DeliveryDelay": "Y", "Complaint": "C", "Open": "O", "Click": "K", "Subscription": "U",
        # Twilio message statuses
        "queued": "1", "sending": "2", "sent": "3", "delivered": "4", "undelivered": "5",
        "failed": "6", "accepted": "7", "scheduled": "8", "read": "9", "canceled": "0",
        "partially_delivered": "P",
    },
    "from_state": {"queued": "q", "sending": "s", "awaiting": "a", "delayed": "d",
                   "errored": "e", "succeeded": "u", "cancelled": "c", "unconfirmed": "n"},
}
CODES["to_state"] = CODES["from_state"]
_CODED = ("actor", "source", "kind", "name", "from_state", "to_state")
_DECODE = {f: {letter: value for value, letter in CODES[f].items()} for f in _CODED}
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _base36(n: int) -> str:
    if n < 0:
        return "-" + _base36(-n)
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = _DIGITS[r] + out
        if n == 0:
            return out


def _micros(at: str) -> int | None:
    """``at`` in microseconds since the epoch, when it is a time as VDQ stores one."""
    try:
        moment = parse_iso(at)
    except ValueError:
        return None
    if iso(moment) != at:
        return None
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _at_of(micros: int) -> str:
    return iso(_EPOCH + timedelta(microseconds=micros))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _v2(entry: HistoryRecord, base: str | None) -> str | None:
    """``entry`` as a v2 array, or None when the codes cannot say it."""
    if base is None or not entry.sk.startswith(HISTORY_KEY_PREFIX):
        return None
    at, sep, rest = entry.sk[len(HISTORY_KEY_PREFIX):].partition("#")
    start, moment = _micros(base), _micros(at)
    if not sep or start is None or moment is None or entry.at not in (None, at):
        return None
    letters = []
    for f in _CODED:
        value = getattr(entry, f)
        letter = _NONE if value is None else CODES[f].get(value)
        if letter is None or (value is None and f in _NAMED):
            return None
        letters.append(letter)
    attempt = entry.attempt
    values: list[Any] = [f"{V2_MARK}{_base36(moment - start)}#{rest}", "".join(letters),
                         None if attempt is None else int(attempt), entry.text]
    while values[-1] is None:
        values.pop()
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False)


def _compact(entry: HistoryRecord, base: str | None = None) -> str:
    coded = _v2(entry, base)
    if coded is not None:
        return coded
    data = _entry_json(entry)
    if not entry.sk.startswith(HISTORY_KEY_PREFIX):  # not a key VDQ makes: kept whole
        return json.dumps({k: v for k, v in data.items() if k != "at"},
                          separators=(",", ":"), ensure_ascii=False)  # fmt: skip
    values = [entry.sk[len(HISTORY_KEY_PREFIX):], *(data.get(f) for f in _POSITIONAL)]
    while values[-1] is None:
        values.pop()
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False)


_NAMED = ("actor", "source", "kind", "name")  # every entry has them
_NULLABLE = ("from_state", "to_state", "text")


def entry_data(text: str, base: str | None = None) -> dict[str, Any]:
    """An entry as the state item keeps it, read back: its key (``sk``), its time (``at``, the
    key's second part) and its fields that have a value. ``base``: the item's ``queued_at``,
    which a v2 entry's time counts from. Raises ValueError for a text that is not an entry as
    a VDQ release writes one (a hand edit, a cut value), and for a v2 entry without ``base``."""
    try:
        data = json.loads(text)
    except RecursionError as exc:
        raise ValueError("history entry nested too deep") from exc
    if isinstance(data, list) and data and isinstance(data[0], str) and data[0][:1] == V2_MARK:
        data = _from_v2(data, base)
    elif isinstance(data, list):
        if not data or not isinstance(data[0], str) or len(data) > len(_POSITIONAL) + 1:
            raise ValueError("not a history entry")
        fields = {f: v for f, v in zip(_POSITIONAL, data[1:], strict=False) if v is not None}
        data = {"sk": HISTORY_KEY_PREFIX + data[0], **fields}
    return _checked(data)


def _from_v2(data: list[Any], base: str | None) -> dict[str, Any]:
    """A v2 array as an entry object (``_checked`` checks its types)."""
    start = _micros(base) if isinstance(base, str) else None
    if start is None:
        raise ValueError("a v2 history entry needs its item's queued_at")
    if not 2 <= len(data) <= 4 or not isinstance(data[1], str) or len(data[1]) != len(_CODED):
        raise ValueError("not a history entry")
    offset, sep, rest = data[0][len(V2_MARK):].partition("#")
    try:
        moment = start + int(offset, 36)
    except ValueError:
        raise ValueError(f"history entry {data[0]!r} has no time") from None
    if not sep or not (offset.lstrip("-").isalnum() and offset.isascii()):
        raise ValueError(f"history entry {data[0]!r} has no time")
    try:
        at = _at_of(moment)
    except (OverflowError, ValueError):
        raise ValueError(f"history entry {data[0]!r} has a time out of range") from None
    fields: dict[str, Any] = {}
    for f, letter in zip(_CODED, data[1], strict=True):
        if letter == _NONE and f not in _NAMED:
            continue
        if letter not in _DECODE[f]:
            raise ValueError(f"history entry {data[0]!r} has an unknown {f} code {letter!r}")
        fields[f] = _DECODE[f][letter]
    for f, value in zip(("attempt", "text"), data[2:], strict=False):
        if value is not None:
            fields[f] = value
    return {"sk": f"{HISTORY_KEY_PREFIX}{at}#{rest}", **fields}


def more_entries(text: str) -> list[dict[str, Any]]:
    """The entries a history record keeps in ``more`` (objects, as ``pack_history`` writes
    them), each read back as ``entry_data`` reads one; ValueError for anything else."""
    try:
        listed = json.loads(text)
    except RecursionError as exc:
        raise ValueError("history entries nested too deep") from exc
    if not isinstance(listed, list):
        raise ValueError("not a list of history entries")
    return [_checked(data) for data in listed]


def _checked(data: Any) -> dict[str, Any]:
    """``data`` (an entry as an object) with its ``at``, if it is an entry as a release writes
    one; else ValueError."""
    if not isinstance(data, dict) or not set(data) <= {"sk", *ENTRY_FIELDS}:
        raise ValueError("not a history entry")
    sk = data.get("sk")
    parts = sk.split("#") if isinstance(sk, str) else []
    if len(parts) < 2 or not parts[1]:
        raise ValueError(f"history key {sk!r} has no time")
    if data.get("at", parts[1]) != parts[1]:
        raise ValueError(f"history entry {sk!r} has a time other than its key's")
    attempt = data.get("attempt")
    if (any(not isinstance(data.get(f), str) for f in _NAMED)
            or any(not isinstance(data.get(f), str | None) for f in _NULLABLE)
            or isinstance(attempt, bool) or not isinstance(attempt, int | None)):
        raise ValueError(f"history entry {sk!r} has a field of the wrong type")
    return {**data, "at": parts[1]}


def recent_json(entries: Sequence[HistoryRecord], base: str | None = None) -> list[str] | None:
    """``entries`` as the state item keeps them (``_compact``; v2 given ``base``, the item's
    ``queued_at``), or None when one of them is too long to, or would not read back
    (``entry_data``: an entry it refuses is a record)."""
    out = []
    for entry in entries:
        text = _compact(entry, base)
        if len(text.encode()) > RECENT_ENTRY_BYTES:
            return None
        try:
            entry_data(text, base)
        except ValueError:
            return None
        out.append(text)
    return out


def recent_of(item: QueueItemRecord) -> list[str]:
    """The state item's entries as stored (JSON texts: the model types them as attributes)."""
    return [str(text) for text in item.recent or ()]


def add_recent(item: QueueItemRecord, texts: Sequence[str]) -> None:
    """``texts`` appended to the item as read, as the write that appended them left it."""
    item.recent = cast(Any, [*recent_of(item), *texts])


def recent_entries(item: QueueItemRecord) -> list[HistoryRecord]:
    """The history entries kept on the state item."""
    out = []
    for text in recent_of(item):
        data = entry_data(text, item.queued_at)
        out.append(HistoryRecord(item.pk, data.pop("sk"), **data))
    return out


def unpack_history(records: Iterable[HistoryRecord],
                   item: QueueItemRecord | None = None) -> list[HistoryRecord]:  # fmt: skip
    """The entries stored in ``records`` and on the state ``item``, in time order, each once:
    an entry with a fixed key (the claim's ``send``) may be stored by two writers."""
    entries: dict[str, HistoryRecord] = {}
    for entry in recent_entries(item) if item is not None else ():
        entries[entry.sk] = entry
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


# ---- the entries on the state item: what a write appends, and on what condition ------------


class NoRoom(Exception):
    """A state write's entries no longer fit on the state item (another write added some)."""


def fitting(item: QueueItemRecord, entries: Sequence[HistoryRecord]) -> list[str] | None:
    """``entries`` as the state item keeps them, when all fit there (``RECENT_LIMIT``,
    ``RECENT_ENTRY_BYTES``); None when they are to be a record."""
    if not entries or len(item.recent or ()) + len(entries) > RECENT_LIMIT:
        return None
    return recent_json(entries, item.queued_at)


def appended(recent: list[str]) -> Any:
    """Entries are appended to the state item's, never rewritten."""
    return QueueItemRecord.recent.set((QueueItemRecord.recent | []).append(recent))


def room(n: int) -> Any:
    """The state item has room for ``n`` entries more (another write may have added some
    since the read)."""
    return QueueItemRecord.recent.does_not_exist() | (
        size(QueueItemRecord.recent) <= RECENT_LIMIT - n)


def seen_room() -> Any:
    """The state item's ``seen`` set has room for one more mark."""
    return QueueItemRecord.seen.does_not_exist() | (
        size(QueueItemRecord.seen) < SEEN_LIMIT)


def applied(current: QueueItemRecord | None, recent: list[str] | None) -> bool:
    """The state item holds this write's own entry (its key is unique: a time and a random
    part): the write was applied, and its condition failed on a repeat of it. botocore sends an
    UpdateItem again when its answer is lost, and unlike a transaction's, an UpdateItem's repeat
    has no token that makes it answer as the first did."""
    if not recent or current is None:
        return False
    return recent[-1] in recent_of(current)
