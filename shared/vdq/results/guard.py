"""The reputation guard's holds: a producer at the hold level has its email held (parked, not
sent, not lost) until an operator releases it.

- **Decided** by vdq.results.judging, from the hourly counters: it writes each producer's level
  (``GUARD`` / ``P#<producer>``) through ``holds_of`` when the level changes, and puts the
  level's event through ``publish_event``. The import runs one way (judging imports the guard,
  never the reverse), so the send path, which needs only the holds, loads no judging.
- **Kept** by the send path: ``held`` lists the held producers, read in one Query and kept per
  container for ``VDQ_HOLD_CACHE_SECONDS``. While the list is empty (the usual case) the claim
  is unchanged. Otherwise the claim also asks that the item is not a held producer's; an item
  that is gets parked (vdq.store.holds: one transaction that checks the hold is still on) and
  its send message is done with: nothing cycles through SQS while the hold lasts.
- **Released** by an operator (``release``): the level leaves ``hold`` first (no item can be
  parked after it), then each parked item is unparked with its publish timer armed again (a
  park takes the timer off, so the re-publish sweep leaves a parked item be) and its send
  message published at its attempt, in its lane. A publish lost after the unpark is the
  sweep's to repeat; a message sent twice drops itself at the claim (it takes an attempt
  once). ``cancel``
  cancels the parked items instead (the operator's cancel transition) and keeps the hold.
  After a release the producer's rates count again from the release (its hour's counts at the
  release are a baseline), so the old bounces do not hold it again at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from vdq.core import resources
from vdq.core.clock import iso, parse_iso
from vdq.core.errors import Conflict, NotFound
from vdq.core.observability import logger, metrics
from vdq.results import reputation
from vdq.results.reputation import HOLD, WARN, Figures
from vdq.store.history import history_entry
from vdq.store.holds import ACCOUNT, ACCOUNT_SHOWN, RELEASED, Holds, Level, NotHeld, Parked
from vdq.store.postings import Tallies
from vdq.workflow.lanes import message_for, priority_of
from vdq.workflow.table import State
from vdq.workflow.transitions import TIMER_PUBLISH, item_now, timer_partition

if TYPE_CHECKING:
    from vdq.runtime import Runtime
    from vdq.store import QueueItemRecord

SOURCE = "vdq"
DETAIL_TYPES = {WARN: "Reputation warning", HOLD: "Producer held",
                RELEASED: "Producer hold released"}  # fmt: skip
NO_PRODUCER = "-"  # items of none (the Python API's before it named one): never held
PARKABLE = (State.QUEUED.value, State.DELAYED.value)
# A release or a cancel works through the parked items for at most this long per request (the
# API answers within API Gateway's 29 s); the answer says when more are left.
BUDGET_SECONDS = 20.0
# The minute sweep's share of its run for what releases left parked (resume_releases).
SWEEP_BUDGET_SECONDS = 10.0
PARKED_DAYS = 40  # a parked entry's TTL: past the retention of any item it names

# The held producers as this container last read them: table -> (until, {producer: level}).
_cache: dict[str, tuple[float, dict[str, Level]]] = {}


def holds_of(runtime: Runtime) -> Holds:
    return Holds(runtime.client("dynamodb"), runtime.settings.table_name)


# ---- the send path ---------------------------------------------------------------------------


def held(runtime: Runtime) -> dict[str, Level]:
    """The producers held now, by name: read once per ``VDQ_HOLD_CACHE_SECONDS`` per
    container. Empty when the guard only warns or is off."""
    s = runtime.settings
    if s.reputation_guard != "hold":
        return {}
    now = runtime.clock.now().timestamp()
    found = _cache.get(s.table_name)
    if found is not None and found[0] > now:
        return found[1]
    levels = {lv.producer: lv for lv in holds_of(runtime).levels()
              if lv.held and lv.producer not in (ACCOUNT, NO_PRODUCER)}  # fmt: skip
    _cache[s.table_name] = (now + s.hold_cache_seconds, levels)
    return levels


def forget(runtime: Runtime) -> None:
    """Read the holds again at the next ``held`` (a park found the cache stale)."""
    _cache.pop(runtime.settings.table_name, None)


def held_for(runtime: Runtime, priority: str) -> tuple[str, ...]:
    """The producers whose items a claim in ``priority``'s lane must not take: none for the
    high lane when VDQ_HOLD_EXEMPT_HIGH is set."""
    if priority == "high" and runtime.settings.hold_exempt_high:
        return ()
    return tuple(sorted(held(runtime)))


PARKED, NOT_HELD, MOVED = "parked", "not held", "moved"


def park(item: QueueItemRecord, priority: str, runtime: Runtime) -> str:
    """Park an item of a held producer (as the claim found it: queued or delayed, at its
    attempt): ``PARKED``; ``NOT_HELD`` when its hold ended meanwhile (the holds are read again:
    claim it); ``MOVED`` when the item moved on (its message is done with either way)."""
    producer = str(item.created_by or "")
    level = held(runtime).get(producer)
    if level is None or level.hold_id is None:
        return NOT_HELD
    # One time for the park's entry and its stored ``parked_at``: the release times its entry
    # after ``parked_at``, so a later clock read for the entry could put the release first.
    now = item_now(item, runtime)
    why = f"held since {level.hold_id}: {level.reason}"
    entry = _entry(item, runtime, "held", why, actor="vdq", source="server", at=now)
    try:
        parked = holds_of(runtime).park(
            item.id, int(item.attempt), producer, level.hold_id, why, priority, iso(now),
            int(now.timestamp()) + PARKED_DAYS * 86_400, entry=entry)  # fmt: skip
    except NotHeld:
        logger.info("the hold of %s ended: %s is sent", producer, item.id)
        forget(runtime)
        return NOT_HELD
    if not parked:
        return MOVED
    logger.info("%s parked: %s is held", item.id, producer)
    metrics.add_metric(name=resources.METRIC_SENDS_HELD, unit="Count", value=1)
    return PARKED


def notice(producer: str | None, runtime: Runtime,
           priority: str = "normal") -> dict[str, Any] | None:  # fmt: skip
    """What a request of a held producer is told: its items are accepted and held. None for
    one whose lane the hold does not keep (``held_for``: high, when exempted), which is sent."""
    if not producer or producer not in held_for(runtime, priority):
        return None
    level = held(runtime).get(producer)
    if level is None:
        return None
    return {"producer": producer, "since": level.hold_id, "reason": level.reason,
            "text": "this producer's email is held by the reputation guard: the items are "
                    "stored and sent when an operator releases the hold (or cancelled)"}


# ---- the events ------------------------------------------------------------------------------


def publish_event(level: Level, figures: Figures, runtime: Runtime) -> None:
    """A level's event on the state-events bus: a warning or a hold (vdq.results.judging puts
    those), or a release."""
    bus = runtime.settings.event_bus_name
    if not bus:
        return
    # ``account``: the whole account's level (it holds no one), which the API shows by a name a
    # producer may also have.
    detail = {"producer": shown(level.producer), "account": level.producer == ACCOUNT,
              "level": level.level, "reason": level.reason,
              "hold_id": level.hold_id, "at": level.updated_at,
              "figures": figures.as_counts(), "bounce_rate": figures.bounce_rate,
              "complaint_rate": figures.complaint_rate,
              "released_by": level.released_by}  # fmt: skip
    answer = runtime.client("events").put_events(Entries=[{
        "Source": SOURCE, "DetailType": DETAIL_TYPES[level.level],
        "Detail": json.dumps(detail, separators=(",", ":")), "EventBusName": bus,
    }])  # fmt: skip
    if answer.get("FailedEntryCount"):
        raise RuntimeError(f"EventBridge refused the guard's event: {answer['Entries']}")


# ---- releasing -------------------------------------------------------------------------------


def release(runtime: Runtime, producer: str, actor: str) -> dict[str, Any]:
    """End the producer's hold and send what it parked (as much as one request's budget
    allows: ``more`` says to call again). A producer no longer held with items still parked
    (a release cut short, whose level a later warning or recovery may have replaced) sends
    those: parked, an item has no timer, so nothing else ever would."""
    store = holds_of(runtime)
    current = store.level(producer)
    if current is None or not current.held:
        released = current is not None and current.level == RELEASED
        if not released and not store.parked(producer, limit=1)[0]:
            raise NotFound(f"producer {producer!r} is not held")
    else:
        now = runtime.clock.now()
        hour = now.strftime(reputation.HOUR_FORMAT)
        tallies = Tallies(runtime.client("dynamodb"), runtime.settings.table_name)
        baseline = tallies.named([hour], "p", producer).get(hour, {})
        new = replace(current, level=RELEASED, reason=f"released by {actor}",
                      updated_at=iso(now), since=hour,
                      baseline=Figures.of(baseline).as_counts(), released_by=actor,
                      released_at=iso(now), unsignalled=False)  # fmt: skip
        if not store.set_level(current, new):
            raise Conflict(f"the hold of {producer!r} changed meanwhile; read it and try again")
        forget(runtime)
        publish_event(new, Figures.of(current.figures), runtime)
    why = f"sent again: the hold of {shown(producer)} was released by {actor}"
    return _drain(runtime, producer, _send_again(runtime, actor, "operator", why))


def cancel(runtime: Runtime, producer: str, actor: str) -> dict[str, Any]:
    """Cancel what the producer's hold parked (its hold stays: release it to send new mail)."""
    return _drain(runtime, producer, _cancel(runtime, producer, actor))


def _entry(item: QueueItemRecord, runtime: Runtime, name: str, text: str, *, actor: str,
           source: str, parked: Parked | None = None,
           at: datetime | None = None) -> dict[str, Any]:  # fmt: skip
    """The history entry of what the guard did to the item (else a parked item's wait has no
    explanation once it is sent), serialized for the park's or the unpark's transaction.

    A park writes no ``updated_at``, and the release may run on a clock behind the one that
    parked the item (functions' clocks differ by milliseconds): the release's entry (with
    ``parked``) is timed after the park's, which is its ``parked_at`` (``at``: the later of
    the park's clock and a microsecond past the item's last change)."""
    at = item_now(item, runtime) if at is None else at
    if parked is not None:
        at = max(at, parse_iso(parked.parked_at) + timedelta(microseconds=1),
                 parse_iso(item.updated_at) + timedelta(microseconds=2))  # fmt: skip
    return history_entry(item.id, at, actor=actor, source=source,
                         kind="event", name=name, from_state=item.state, to_state=item.state,
                         attempt=int(item.attempt), text=text).serialize()  # fmt: skip


def _send_again(runtime: Runtime, actor: str, source: str,
                why: str) -> Callable[[QueueItemRecord, Parked], bool]:  # fmt: skip
    """Unpark the item with its publish timer armed, then publish its message: a publish that
    fails (or a crash between the two) leaves the item to the re-publish sweep, never lost.
    ``why`` goes to its history, with ``actor`` and ``source``."""
    s = runtime.settings
    store = holds_of(runtime)

    def send(item: QueueItemRecord, parked: Parked) -> bool:
        lane = priority_of(item)
        due = iso(runtime.clock.now() + timedelta(seconds=s.publish_grace_seconds))
        timer = (timer_partition(TIMER_PUBLISH, item.id, s.index_shards, lane),
                 f"{due}#{item.id}")  # fmt: skip
        entry = _entry(item, runtime, "released", why, actor=actor, source=source,
                       parked=parked)  # fmt: skip
        if not store.unpark(str(item.created_by), parked, timer, entry=entry):
            return False  # it moved meanwhile: nothing to send
        failed = runtime.send_queue.publish([message_for(item)])
        if failed:
            logger.error("publish of held %s failed (the re-publish sweep sends it): %s",
                         item.id, failed[item.id])  # fmt: skip
        return True

    return send


def _cancel(runtime: Runtime, producer: str,
            actor: str) -> Callable[[QueueItemRecord, Parked], bool]:  # fmt: skip
    from vdq.workflow.transitions import Step, apply

    store = holds_of(runtime)

    def cancel_one(item: QueueItemRecord, parked: Parked) -> bool:
        apply(item, Step("cancel", actor=actor, source="operator", attempt=parked.attempt,
                         result=f"cancelled while its producer {producer!r} was held",
                         late="record"), runtime)  # fmt: skip
        store.unpark(producer, parked)  # the cancel moved it: this drops the entry
        return True

    return cancel_one


def resume_releases(runtime: Runtime, report: Any) -> None:
    """Send what producers no longer held still have parked. A release cut short (its
    request timed out, or no one called it again for ``more``) leaves items parked, and a
    parked item has no timer: nothing else would ever send it. So does a guard set to warn
    or off since it held someone: every producer counts as not held. The minute sweep runs
    this: one Query of the level records, and one small Query per producer not held; an item
    parked by a hold that began after the levels were read is left to that hold. A producer
    whose items fail is counted ``failed`` and left to the next run, as a sweep's step is:
    the other producers' items are still sent."""
    store = holds_of(runtime)
    holding = runtime.settings.reputation_guard == "hold"
    read_at = iso(runtime.clock.now())
    deadline = time.monotonic() + SWEEP_BUDGET_SECONDS
    for level in store.levels():
        if ((holding and level.held) or level.producer == ACCOUNT
                or not store.parked(level.producer, limit=1)[0]):  # fmt: skip
            continue
        if time.monotonic() > deadline:
            report.add("releases_resumed_later")
            return
        try:
            why = (f"sent again: {shown(level.producer)} is no longer held (its release was "
                   "cut short)")
            answer = _drain(runtime, level.producer, _send_again(runtime, "schedule",
                                                                 "schedule", why),
                            deadline=deadline, before=read_at)  # fmt: skip
        except Exception:  # another producer's parked items are no reason to stop
            report.add("failed")
            logger.exception("sending what %s still has parked failed; the next run tries "
                             "again", level.producer)  # fmt: skip
            continue
        logger.warning("producer %s is not held but had items parked (a release cut short): "
                       "%d sent, %d dropped, more: %s", level.producer, answer["done"],
                       answer["skipped"], answer["more"])  # fmt: skip
        if answer["done"]:
            report.add("held_items_sent", answer["done"])


def _drain(runtime: Runtime, producer: str, act: Callable[[QueueItemRecord, Parked], bool],
           deadline: float | None = None, before: str | None = None) -> dict[str, Any]:
    """Act on each parked item still as it was parked (the act takes it off the list);
    drop the entry of one that moved on. Until ``deadline`` (monotonic; a request's budget
    from now when None); with ``before``, only on items parked by a hold that began before
    it."""
    store = holds_of(runtime)
    done = skipped = 0
    deadline = time.monotonic() + BUDGET_SECONDS if deadline is None else deadline
    more = False
    for parked in store.all_parked(producer):
        if time.monotonic() > deadline:
            more = True
            break
        if before is not None and parked.hold_id > before:
            continue  # a hold that began since: its release sends it
        item = runtime.store.get_item(parked.item_id)
        if (item is not None and int(item.attempt) == parked.attempt
                and item.state in PARKABLE and act(item, parked)):  # fmt: skip
            done += 1
        else:
            skipped += 1  # cancelled, retried or gone meanwhile: nothing to act on
            store.unpark(producer, parked)
    level = store.level(producer)
    return {"producer": producer, "done": done, "skipped": skipped, "more": more,
            "level": level.as_dict() if level is not None else None}  # fmt: skip


def parked_items(runtime: Runtime, producer: str, *, limit: int = 50,
                 after: str | None = None) -> tuple[list[Parked], str | None]:  # fmt: skip
    return holds_of(runtime).parked(producer, limit=limit, after=after)


def has_parked(runtime: Runtime, level: Level | None) -> bool | None:
    """Whether the producer (``level``: its record) has items parked, whatever its level now:
    a release cut short may leave some behind a warning or an ok. One strongly consistent
    Query of one entry, and only of a producer ever held: a park needs its record at ``hold``,
    and that record keeps its ``hold_id`` or, from a release on, its ``since`` (never dropped
    since), so any other has nothing parked and costs no read. An entry whose item moved on
    (cancelled, retried) counts until a release or a cancel drops it. None when the read
    fails: the rest of the operator's view stands."""
    if (level is None or level.producer in (ACCOUNT, NO_PRODUCER)
            or not (level.hold_id or level.since or level.level in (HOLD, RELEASED))):  # fmt: skip
        return False
    try:
        return bool(holds_of(runtime).parked(level.producer, limit=1)[0])
    except Exception as exc:  # one producer's read is no reason to fail the view
        logger.warning("whether %s has items parked could not be read: %s", level.producer,
                       exc)  # fmt: skip
        return None


def shown(producer: str) -> str:
    """How the API, the log and the events name a producer (the account as ``account``)."""
    return ACCOUNT_SHOWN if producer == ACCOUNT else producer
