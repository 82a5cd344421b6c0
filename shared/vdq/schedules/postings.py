"""The table's stream, posted and counted: what the searches by time, sender and provider ID
read (postings), and how many items entered each state per hour (counters).

The stream mapping has a tumbling window (vdq.core.resources.STREAM_TUMBLING_WINDOW_SECONDS):
Lambda hands each invocation the shard's id and the state the previous invocation of the
window returned. Each invocation folds its records into that state (``fold``: pure but for a
read of the item when a provider's entry spilled to a history record), and the window's last
invocation writes it (``flush``): a posting per hour touched, a done posting per minute
touched (what the sent list reads), a counter record per hour and kind (all, per producer,
per sender identity), each ADD with the shard's checkpoint in the same write
(vdq.store.postings). So a record is counted exactly once:

- a batch that fails is given again with the state of before it (nothing of it was kept);
- a record given again (Lambda processes a record at least once, and a repeat perhaps out of
  order) is at or below the highest sequence number the window's state has folded, or, at the
  start of a window, the last one a window of the shard wrote (``CK#<shard>``, read once a
  window and set after its writes), and is skipped;
- a final invocation given again (it failed after some writes, or its answer was lost) finds
  its checkpoints set and skips what it wrote, and writes the rest;
- a window that ends early (its state past what Lambda keeps) is written as a window of its
  own, and the next goes on after its last sequence number;
- a shard that splits gives its children new ids: checkpoints of their own, in order after
  their parent's (Lambda finishes a parent shard first);
- a batch the mapping gives up on (its retries spent) after its invocation wrote the window is
  not counted again by its repair: the invocation marks its batch's first and last sequence
  number before the window's writes and again after them (vdq.store.postings' flush markers,
  which name the producers the guard's look is for), and the repair (vdq.schedules.repair)
  writes the batch's postings and counts only when no invocation holding the batch began
  writing its window.

What is counted, by method, for the hour of the change (the item's ``updated_at``): items
queued (new), sent (a provider took it: its ID was stored), succeeded (delivered), errored,
cancelled, unconfirmed, and the provider's permanent bounces, complaints and rejections; per
producer (the item's ``created_by``) and per sender identity (its sender), those that tell a
reputation: sent, succeeded, bounce, complaint, reject (an SMS's as ``sms.sent``, ...: the
rates are an email's).

A window that counted a producer's bounces or complaints has the reputation guard look at that
producer's rates (vdq.results.judging), after its counts are written: per window of a shard, not
per message, and again when the window is given again (the look is idempotent). A record given
again, skipped since it was counted, has its producer looked at too when it holds a bounce or a
complaint of email: a window whose look failed after its writes is given again with the state of
before it, which, for a window of one batch, is none, and its records are all skipped then.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from vdq.core.observability import logger
from vdq.results import judging
from vdq.store.flushes import Flush
from vdq.store.history import entry_data, more_entries
from vdq.store.postings import (
    ALL,
    DONE_STATES,
    LANES,
    METHODS,
    Accepted,
    Done,
    Entered,
    Entry,
    Tallies,
    counter_kind,
    counter_sk,
    decode_done,
    decode_entries,
    done_sk,
    hour_of,
    provider_hash,
    sender_hash,
    shard_tag,
)
from vdq.workflow.views import entry_signals

if TYPE_CHECKING:
    from vdq.runtime import Runtime

STATE_SK = "STATE"
# The states whose entering is counted, and the signals of provider entries.
COUNTED_STATES = ("succeeded", "errored", "cancelled", "unconfirmed")
COUNTED_SIGNALS = ("bounce", "complaint", "reject")
# What the per-producer and per-identity records count: the reputation guard's figures.
REPUTATION = ("sent", "succeeded", "bounce", "complaint", "reject")
DAY = 86_400
COUNTER_DAYS = 40  # the counts API reads 30 days back
POSTING_MARGIN_DAYS = 3
SHARD_CHECKPOINT_DAYS = 2  # a stream keeps a record 24 hours
# A window's state is written early past this size (Lambda keeps at most 1 MB a shard).
MAX_STATE_BYTES = 400_000
STATE_KEY = "vdq"
NO_PRODUCER = "-"
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}")  # a stored time, to the ms


def _plain(image: Mapping[str, Any]) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeDeserializer

    deserialize = TypeDeserializer().deserialize
    return {k: deserialize(v) for k, v in image.items()}


@dataclass
class Window:
    """What a window of one shard has seen so far: the counts of each counter record (with the
    first and last sequence number that added to it), each hour's posting entries and each
    minute's done entries."""

    counts: dict[str, dict[str, Any]] = field(default_factory=dict)  # "<hour>|<sk>" -> ...
    postings: dict[str, dict[str, Any]] = field(default_factory=dict)  # hour -> ...
    shard: str = "-"  # the shard's tag (the counter records it writes, its checkpoints)
    # The highest sequence number the window has folded (kept across a write that ended it
    # early): Lambda may hand a record of the window on again, even out of order.
    seen: int = -1
    done: dict[str, dict[str, Any]] = field(default_factory=dict)  # "<day>T<HH:MM>" -> ...
    # The producers whose bounces or complaints of email records given again (skipped, counted
    # before) hold, and whether any such record does: the guard looks at them with the window's.
    again: list[str] = field(default_factory=list)
    again_account: bool = False

    # ---- Lambda's state -------------------------------------------------------------------

    def state(self) -> dict[str, str]:
        """The state to hand back to Lambda (a map of strings)."""
        if not self.counts and not self.postings and not self.done and self.seen < 0:
            return {}
        data = {"c": self.counts, "p": self.postings, "s": self.seen, "d": self.done}
        if self.again or self.again_account:
            data.update(g=self.again, a=self.again_account)
        return {STATE_KEY: json.dumps(data, separators=(",", ":"))}

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None, shard: str) -> Window:
        text = (state or {}).get(STATE_KEY)
        if not isinstance(text, str):
            return cls(shard=shard)
        data = json.loads(text)
        seen = data.get("s")
        return cls(dict(data.get("c") or {}), dict(data.get("p") or {}), shard,
                   seen if isinstance(seen, int) else -1, dict(data.get("d") or {}),
                   [str(p) for p in data.get("g") or []], data.get("a") is True)  # fmt: skip

    # ---- folding ----------------------------------------------------------------------------

    def count(self, hour: str, sk: str, sequence: str, names: Iterable[str]) -> None:
        names = list(names)
        if not names:
            return
        slot = self.counts.setdefault(f"{hour}|{sk}", {"f": sequence, "l": sequence, "n": {}})
        slot["l"] = sequence
        for name in names:
            slot["n"][name] = slot["n"].get(name, 0) + 1

    def post(self, hour: str, sequence: str, entry: Entry) -> None:
        _append(self.postings, hour, sequence, entry.encode())

    def post_done(self, sequence: str, entry: Done) -> None:
        _append(self.done, entry.done_at[:16], sequence, entry.encode())

    def size(self) -> int:
        return sum(len(json.dumps(v)) for v in (self.counts, self.postings, self.done))


def _append(slots: dict[str, dict[str, Any]], key: str, sequence: str, entry: bytes) -> None:
    slot = slots.setdefault(key, {"f": sequence, "l": sequence, "e": ""})
    slot["l"] = sequence
    slot["e"] = base64.b64encode(base64.b64decode(slot["e"]) + entry).decode()


@dataclass(frozen=True)
class Change:
    """What one stream record says happened to one item, for the hour ``at`` falls in."""

    item: dict[str, Any]
    at: str
    states: tuple[str, ...] = ()  # states entered
    signals: tuple[str, ...] = ()  # provider signals recorded
    queued: bool = False
    provider_id: str | None = None  # newly stored
    done: Done | None = None  # it entered a done state


def change_of(record: Mapping[str, Any],
              lookup: Callable[[str], dict[str, Any] | None]) -> Change | None:  # fmt: skip
    """The change a record of the mapping's filter makes: a state item's INSERT or MODIFY, or
    a history record (a provider's entry that did not fit on the state item: ``lookup`` reads
    its item). None for anything else."""
    data = record.get("dynamodb") or {}
    new = _plain(data.get("NewImage") or {})
    old = _plain(data.get("OldImage") or {})
    sk = str(new.get("sk") or "")
    event = record.get("eventName")
    if sk == STATE_SK and event == "INSERT" and new.get("id"):
        return Change(new, str(new.get("queued_at") or new.get("updated_at") or ""), queued=True)
    if sk == STATE_SK and event == "MODIFY" and new.get("id"):
        before, after = old.get("state"), new.get("state")
        states = (after,) if after != before and after in COUNTED_STATES else ()
        signals: set[str] = set()
        base = str(new.get("queued_at") or "") or None  # a coded entry's time counts from it
        for text in _new_entries(old.get("recent"), new.get("recent")):
            try:
                entry = entry_data(text, base)
            except ValueError:
                continue
            signals |= entry_signals(entry.get("name"), entry.get("text"))
        stored = new.get("provider_id") if new.get("provider_id") != old.get("provider_id") \
            else None  # fmt: skip
        done = None
        # Every release writes done_at with a done state, and a lane it knows; the sent list
        # reads the item itself for the page, so a fallback here only places the entry.
        done_at = next((str(t) for t in (new.get("done_at"), new.get("updated_at"))
                        if _TIME.match(str(t or ""))), "")  # fmt: skip
        method, lane = str(new.get("method") or "email"), str(new.get("priority") or "normal")
        if after in DONE_STATES and before not in DONE_STATES and done_at and method in METHODS:
            done = Done(str(new["id"]), done_at, method, lane if lane in LANES else "normal",
                        str(after))  # fmt: skip
        return Change(new, str(new.get("updated_at") or ""), tuple(states),
                      tuple(s for s in COUNTED_SIGNALS if s in signals),
                      provider_id=str(stored) if stored else None, done=done)  # fmt: skip
    if sk.startswith("H#") and event == "INSERT":
        item_id = str(new.get("pk") or "").removeprefix("QI#")
        entries = [{"name": new.get("name"), "text": new.get("text"), "at": new.get("at")}]
        with contextlib.suppress(ValueError):  # a record no release wrote: its own entry only
            entries += more_entries(new["more"]) if new.get("more") else []
        signals = set()
        for entry in entries:
            signals |= entry_signals(entry.get("name"), entry.get("text"))
        found = tuple(s for s in COUNTED_SIGNALS if s in signals)
        item = lookup(item_id) if found else None
        if item is None:
            return None
        return Change(item, str(new.get("at") or ""), signals=found)
    return None


def _new_entries(old: Any, new: Any) -> list[str]:
    """The entries a write appended to the state item's ``recent`` (entries are only ever
    appended; anything else, every entry not there before)."""
    before, after = list(old or []), list(new or [])
    if after[: len(before)] == before:
        return [str(t) for t in after[len(before):]]
    return [str(t) for t in after if t not in before]


def fold(window: Window, records: Iterable[Mapping[str, Any]],
         lookup: Callable[[str], dict[str, Any] | None]) -> int:  # fmt: skip
    """Fold a batch of the window's records into ``window``; returns how many changed it. A
    record at or below the highest sequence number folded already is one given again: it was
    counted, and is skipped, but for the producer the guard looks at (``look_again``)."""
    folded = 0
    for record in records:
        sequence = str((record.get("dynamodb") or {}).get("SequenceNumber") or "")
        if not sequence.isdigit():
            continue
        if int(sequence) <= window.seen:
            look_again(window, record, lookup)
            continue
        window.seen = int(sequence)
        change = change_of(record, lookup)
        if change is None or len(change.at) < 13:
            continue
        folded += 1
        item, hour = change.item, hour_of(change.at)
        method = str(item.get("method") or "email")
        producer = str(item.get("created_by") or NO_PRODUCER)
        identity = str(item.get("sender") or "").strip().lower()
        happened = [*(("queued",) if change.queued else ()),
                    *(("sent",) if change.provider_id else ()),
                    *change.states, *change.signals]  # fmt: skip
        window.count(hour, counter_sk(ALL, None, window.shard), sequence,
                     [f"{method}.{name}" for name in happened])  # fmt: skip
        # An SMS's figures are kept apart: a rate is an email's (vdq.results.reputation).
        reputation = [name if method == "email" else f"{method}.{name}"
                      for name in happened if name in REPUTATION]  # fmt: skip
        window.count(hour, counter_sk("p", producer, window.shard), sequence, reputation)
        if identity:
            window.count(hour, counter_sk("i", identity, window.shard), sequence, reputation)
        if change.queued:
            queued_at = str(item.get("queued_at") or change.at)
            scheduled = str(item.get("send_at") or "") > queued_at
            window.post(hour_of(queued_at), sequence, Entered(
                str(item["id"]), method, str(item.get("priority") or "normal"), scheduled,
                sender_hash(identity)))  # fmt: skip
        if change.provider_id:
            window.post(hour, sequence, Accepted(str(item["id"]),
                                                 provider_hash(change.provider_id)))
        if change.done is not None:
            window.post_done(sequence, change.done)
    return folded


def look_again(window: Window, record: Mapping[str, Any],
               lookup: Callable[[str], dict[str, Any] | None]) -> None:  # fmt: skip
    """Keep, for the guard's look, the producer of a record given again whose change holds a
    bounce or a complaint of email (what ``guard_targets`` finds in the counts it made then):
    the window that counted it may have failed before its look."""
    change = change_of(record, lookup)
    if change is None or len(change.at) < 13:
        return
    email = str(change.item.get("method") or "email") == "email"
    if not email or not {"bounce", "complaint"} & set(change.signals):
        return
    producer = str(change.item.get("created_by") or NO_PRODUCER)
    if producer not in window.again:
        window.again.append(producer)
    window.again_account = True


def guard_targets(window: Window) -> tuple[list[str], bool]:
    """The producers whose counts in the window hold bounces or complaints of email, and
    whether the account's do, with those of the records given again (``look_again``): what the
    reputation guard looks at."""
    producers: set[str] = set(window.again)
    account = window.again_account
    for key, slot in window.counts.items():
        kind, name = counter_kind(key.split("|", 1)[1])
        names = slot["n"]
        if kind == "p" and name is not None and (names.get("bounce") or names.get("complaint")):
            producers.add(name)
        elif kind == ALL and (names.get("email.bounce") or names.get("email.complaint")):
            account = True
    return sorted(producers), account


def flush(window: Window, tallies: Tallies, *, retention_days: int,
          now: int) -> dict[str, int]:  # fmt: skip
    """Write what the window saw: its postings, then its counts, each once, then the shard's
    checkpoint. Returns how many records were written and how many were found written before
    (a replay)."""
    written = skipped = 0
    wrote_any = bool(window.counts or window.postings or window.done)
    keep = (max(retention_days, 30) + POSTING_MARGIN_DAYS) * DAY
    for hour, slot in sorted(window.postings.items()):
        entries = decode_entries(base64.b64decode(slot["e"]))
        if tallies.put_posting(hour, window.shard, slot["f"], slot["l"], entries,
                               _hour_epoch(hour) + keep):  # fmt: skip
            written += 1
        else:
            skipped += 1
    for minute, slot in sorted(window.done.items()):
        done = decode_done(base64.b64decode(slot["e"]), minute[:10])
        # Kept as long as the postings; for good when items are (retention 0).
        expiration = _hour_epoch(minute[:13]) + keep if retention_days > 0 else None
        if tallies.put_done(minute[:7], done_sk(minute, window.shard, slot["f"]), done,
                            slot["l"], expiration):  # fmt: skip
            written += 1
        else:
            skipped += 1
    for key, slot in sorted(window.counts.items()):
        hour, sk = key.split("|", 1)
        if tallies.add_counts(hour, sk, window.shard, slot["f"], slot["l"], slot["n"],
                              _hour_epoch(hour) + COUNTER_DAYS * DAY):  # fmt: skip
            written += 1
        else:
            skipped += 1
    if wrote_any and window.seen >= 0:
        tallies.set_shard_checkpoint(window.shard, window.seen, now + SHARD_CHECKPOINT_DAYS * DAY)
    window.counts.clear()
    window.postings.clear()
    window.done.clear()
    return {"written": written, "replayed": skipped}


def _first_and_last(records: Iterable[Mapping[str, Any]]) -> tuple[str, str] | None:
    """The first and last sequence number of an invocation's records (None: it has none)."""
    found = [int(s) for r in records
             if (s := str((r.get("dynamodb") or {}).get("SequenceNumber") or "")).isdigit()]
    return (str(min(found)), str(max(found))) if found else None


def _hour_epoch(hour: str) -> int:
    return int(datetime.strptime(hour, "%Y-%m-%dT%H").replace(tzinfo=UTC).timestamp())


def consume(event: Mapping[str, Any], runtime: Runtime, tallies: Tallies | None = None, *,
            mark: bool = True, write: bool = True, marked: Flush | None = None,
            ) -> dict[str, Any]:  # fmt: skip
    """One invocation of the stream mapping: fold its records into the window's state, and
    write the window when it ends. Returns what Lambda takes back: ``state`` (required with a
    tumbling window), and what was written.

    ``mark``: the invocation that writes the window marks its records' first and last sequence
    number before and after the writes, with whom the guard's look is for (a repair's own shard
    needs no mark). ``write`` False: a repair of a batch whose window the mapping wrote already
    (``marked``: that window's marker): folded for the reputation guard's look, which is for
    the marker's producers too (the window's batches before the one repaired), nothing written.

    An event without a window (no ``shardId``: the mapping of a release before this one, a
    replay by hand) has no shard to keep a checkpoint for: its postings are written (a replay
    writes the same ones), its counts are not, since nothing could tell a repeat."""
    tallies = tallies or Tallies(runtime.client("dynamodb"), runtime.settings.table_name)
    shard_id = event.get("shardId")
    window = Window.from_state(event.get("state"), shard_tag(str(shard_id or "-")))

    def lookup(item_id: str) -> dict[str, Any] | None:
        found = runtime.store.get_item(item_id)
        return None if found is None else {
            "id": found.id, "method": found.method, "created_by": found.created_by,
            "sender": found.sender}  # fmt: skip

    records = event.get("Records") or []
    if records and window.seen < 0 and shard_id is not None:
        # A window's first batch: what an earlier window of the shard wrote is not folded
        # again (a repeat at the head of this window would take its records' counts down).
        window.seen = tallies.shard_checkpoint(window.shard)
    folded = fold(window, records, lookup)
    final = bool(event.get("isFinalInvokeForWindow") or event.get("isWindowTerminatedEarly"))
    if shard_id is None:
        window.counts.clear()
        window.seen = -1  # no shard to keep a checkpoint for
        final = True
    if final or window.size() > MAX_STATE_BYTES:
        if not final:
            logger.info("window state of shard %s past %d bytes: written early", window.shard,
                        MAX_STATE_BYTES)  # fmt: skip
        producers, account = guard_targets(window)
        window.again.clear()
        window.again_account = False
        if marked is not None:
            producers = sorted({*producers, *marked.producers})
            account = account or marked.account
        now = int(runtime.clock.now().timestamp())
        # A batch of deletions alone (TTL's, handed on for the archive, a marker's own among
        # them) that leaves the window nothing to write is not marked: it counts nothing, and
        # its marker would expire in its turn and be marked again, for ever.
        idle = not (window.counts or window.postings or window.done) and all(
            r.get("eventName") == "REMOVE" for r in records)  # fmt: skip
        batch = _first_and_last(records) if mark and write and shard_id is not None \
            and not idle else None  # fmt: skip
        expiration = now + SHARD_CHECKPOINT_DAYS * DAY
        if batch is not None:
            tallies.begin_flush(window.shard, *batch, expiration, producers, account)
        if write:
            wrote = flush(window, tallies, retention_days=runtime.settings.retention_days,
                          now=now)  # fmt: skip
        else:
            wrote = {"written": 0, "replayed": 0}
        if batch is not None:
            tallies.end_flush(window.shard, *batch, expiration)
        if producers or account:
            judging.evaluate(runtime, producers, account=account, tallies=tallies)
        return {"state": {} if final else window.state(), "folded": folded, **wrote}
    return {"state": window.state(), "folded": folded, "written": 0, "replayed": 0}

