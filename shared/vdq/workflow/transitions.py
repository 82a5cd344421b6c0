"""Applying transitions to stored queue items, and their side effects.

Every path (worker, provider results, schedules, operators) changes an item's state through
``apply``: read, decide with the workflow table, write conditionally on the (state, attempt)
read, and when someone moved the item first, decide again from what they wrote, a bounded number
of times. The side effects of a transition (publish a new send, clean up files, announce the
change) live here, beside the workflow, not in the callers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from vdq.core import resources
from vdq.core.clock import iso, parse_iso
from vdq.core.errors import ContentionError, InvalidTransition, NotFound
from vdq.core.observability import logger, metrics
from vdq.store import (  # noqa: F401  (history_entry: re-exported)
    NEVER,
    Duplicate,
    EventMark,
    HistoryRecord,
    Moved,
    QueueItemRecord,
    ScheduledRecord,
    StateWrite,
    history_entry,
    item_pk,
    shard,
)
from vdq.store.models import scheduled_partition
from vdq.store.scheduled import bucket_record
from vdq.workflow import table as workflow
from vdq.workflow.attachments import purge_if_idle, release_for
from vdq.workflow.lanes import DEFAULT_PRIORITY, message_for
from vdq.workflow.retention import content_expiration, expiration_at, mapping_expiration
from vdq.workflow.sendqueue import delay_for, is_long
from vdq.workflow.table import DONE_STATES, Decision, State

if TYPE_CHECKING:
    from vdq.runtime import Runtime

MAX_TRIES = 5
MAX_RESULT = 500  # characters of result kept on the state item; history keeps the whole text


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()  # "leave result as it is"


@dataclass(frozen=True)
class Step:
    """A request to apply one transition to one item."""

    transition: str
    actor: str
    source: str = "server"  # server | provider | operator | schedule
    text: str | None = None  # history text; defaults to the new result
    result: Any = KEEP  # new result text, None to clear, KEEP to leave
    attempt: int | None = None  # act only if the item is still at this attempt
    retry_delay: int | None = None  # delay: seconds until the new publish
    provider_id: str | None = None  # also store this provider ID (and its mapping)
    dry_run: bool = False
    late: Literal["raise", "record"] = "raise"  # no source: raise, or record it in history
    # Act only from these states; any other state is handled as "no source" (see ``late``).
    expect: frozenset[str] | None = None
    # A provider event's id: its effect is written once (an event mark in the same write);
    # a second delivery comes back as Outcome "duplicate" and changes nothing.
    event_id: str | None = None
    # False: store provider_id on the item only (its mapping was written already, or the
    # item needs none: vdq.results.tracking.maps_provider_id).
    map_provider_id: bool = True
    # The provider's acceptance of the attempt, for a step that stores ``provider_id`` on a
    # ``sending`` item that has none (its worker left the record to the first event: the
    # text, "accepted by SES as <id>"): that write also gets the ``await`` entry it would have
    # written, at ``accepted_at`` (the provider's time; the write's own, when unknown or out
    # of the item's order), before the step's own entry; an ``await`` step without text of
    # its own (the check's) writes that entry alone.
    acceptance: str | None = None
    accepted_at: str | None = None
    # An email entering ``awaiting``: its timeout's timer in the same write (the check).
    timed: bool = False
    # The provider's word for the event (history: the name of an event's own entry).
    event_name: str | None = None


@dataclass
class Outcome:
    kind: Literal["moved", "ignored", "stale", "late", "dry_run", "duplicate", "refused"]
    item: QueueItemRecord
    before: State
    decision: Decision | None = None

    @property
    def changed_state(self) -> bool:
        return self.kind == "moved"


def active_partition(item_id: str, shards: int) -> str:
    return f"A#{shard(item_id, shards)}"


def timer_partition(kind: str, item_id: str, shards: int, lane: str | None = None) -> str:
    return shard_timer_partition(kind, shard(item_id, shards), lane)


def shard_timer_partition(kind: str, k: int, lane: str | None = None) -> str:
    """The timers index partition of shard ``k``. Publish timers of the high and bulk lanes
    have partitions of their own (``publish#<lane>#<k>``), so the re-publish sweep reads each
    lane apart and a bulk backlog's passed timers never fill the batch a high item needs;
    the normal lane's, and every other timer (whatever ``lane`` says), is ``<kind>#<k>``."""
    if kind not in LANED_TIMERS or lane is None or lane == DEFAULT_PRIORITY:
        return f"{kind}#{k}"
    return f"{kind}#{lane}#{k}"


TIMER_PUBLISH = "publish"
LANED_TIMERS = frozenset({TIMER_PUBLISH})
# The claim's lease, before the send message held it (vdq.dispatch.send): items claimed by a
# release before still carry one, which the schedule sweeps (vdq.schedules.leases).
TIMER_LEASE = "lease"
# An awaiting SMS: keyed on the claim that sent it (the current attempt's ``send``), so an SMS
# sent long after it was queued (scheduled, paced, retried) has its whole window.
TIMER_AWAIT = "await"
# An awaiting email: keyed on the claim that sent it. SES's acceptance writes no timer: most
# emails get their Delivery or Bounce within seconds. The check the send function publishes
# for every accepted email (vdq.results.checks) gives one still awaiting then this timer.
TIMER_EMAIL_AWAIT = "mailwait"


def email_wait_since(item: QueueItemRecord) -> str:
    """When an awaiting email's timeout window began: its ``mailwait`` timer's key (the claim,
    or SES's acceptance for an email that awaited before the claim's time was the key), else
    its claim."""
    if (item.timer_pk or "").startswith(f"{TIMER_EMAIL_AWAIT}#") and item.timer_sk:
        return item.timer_sk.split("#")[0]
    return item.claimed_at or item.updated_at


def sms_wait_since(item: QueueItemRecord) -> str:
    """When an awaiting SMS's timeout window began: the claim that sent it; for an SMS that
    awaits without a stored claim (claimed by a release before claims were stored), its await
    timer's key, else its queueing."""
    if item.claimed_at:
        return item.claimed_at
    if (item.timer_pk or "").startswith(f"{TIMER_AWAIT}#") and item.timer_sk:
        return item.timer_sk.split("#")[0]
    return item.done_since or item.queued_at  # stored by items written before: the same


def clip_result(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_RESULT:
        return text
    return text[:200] + " … " + text[-(MAX_RESULT - 203) :]


def timer_write(
    write: StateWrite, item_id: str, kind: str | None, due: str | None, shards: int,
    lane: str | None,
) -> None:
    """Set (or, with no ``kind``, remove) the item's timer. ``lane`` is the item's
    (``lanes.priority_of``), which every writer must pass: the partition of a publish timer
    depends on it (``shard_timer_partition``)."""
    if kind is None:
        write.set["timer_pk"] = None
        write.set["timer_sk"] = None
    else:
        write.set["timer_pk"] = timer_partition(kind, item_id, shards, lane)
        write.set["timer_sk"] = f"{due}#{item_id}"


def state_write(item: QueueItemRecord, decision: Decision, step: Step, now: datetime,
                runtime: Runtime) -> StateWrite:  # fmt: skip
    """The attribute changes of applying ``decision`` to ``item``."""
    s = runtime.settings
    write = StateWrite(set={"updated_at": iso(now)})
    if step.result is not KEEP:
        write.set["result"] = clip_result(step.result)
    if step.provider_id is not None:
        write.set["provider_id"] = step.provider_id
    if decision.ignored:
        return write
    name, target = decision.transition.name, decision.target
    write.set["state"] = target.value
    # A hold's park mark (vdq.store.holds) belongs to the state and attempt it parked: any move
    # ends it, or an item retried or delayed again would show a hold that no longer keeps it.
    write.set["held"] = None
    if name in workflow.NEW_ATTEMPT_TRANSITIONS:
        write.add["attempt"] = 1
    if name == "retry":
        # The new attempt gets a new provider ID; the old one stays on its mapping and in
        # history, so its late events are matched to the attempt they belong to.
        write.set.update(retries=None, retry_delay=None, result=None, claimed_at=None,
                         provider_id=None)  # fmt: skip  (retries absent: 0)
        if item.send_at is not None and send_at_ahead(item, now) is None:
            write.set["send_at"] = None  # its time passed: sent at once
    elif name == "cancel":
        write.set["retry_delay"] = None
    elif name == "delay":
        write.set["retry_delay"] = step.retry_delay
        write.add["retries"] = 1
    elif name == "send":
        write.set["claimed_at"] = iso(now)

    lane = item.priority or DEFAULT_PRIORITY  # (lanes.priority_of)
    if target is State.QUEUED:
        # A retry before the item's send_at counts from it, as its enqueue did: the re-publish
        # sweep never sends it early.
        after = send_at_ahead(item, now) if name == "retry" else None
        due = (after or now) + timedelta(seconds=s.publish_grace_seconds)
        timer_write(write, item.id, TIMER_PUBLISH, iso(due), s.index_shards, lane)
    elif target is State.DELAYED:
        due = now + timedelta(seconds=(step.retry_delay or 0) + s.publish_grace_seconds)
        timer_write(write, item.id, TIMER_PUBLISH, iso(due), s.index_shards, lane)
    elif target is State.AWAITING and item.method == "sms":
        since = item.claimed_at or iso(now)
        timer_write(write, item.id, TIMER_AWAIT, since, s.index_shards, lane)
    elif target is State.AWAITING and (item.timer_pk or "").startswith(f"{TIMER_LEASE}#"):
        # Claimed by a release whose claim wrote a lease timer: it moves to the timeout's.
        timer_write(write, item.id, TIMER_EMAIL_AWAIT, email_wait_since(item), s.index_shards,
                    lane)  # fmt: skip
    elif target is State.AWAITING and step.timed:
        timer_write(write, item.id, TIMER_EMAIL_AWAIT, email_wait_since(item), s.index_shards,
                    lane)  # fmt: skip
    elif target is State.AWAITING:
        pass  # no timer: the send's check gives one to an email still awaiting then
    else:  # sending (its send message is its lease), errored, done: no timer
        timer_write(write, item.id, None, None, s.index_shards, lane)

    if target in DONE_STATES and decision.source not in DONE_STATES:
        # The claim is kept while it can matter (the lease, an awaiting item's window).
        write.set.update(active_pk=None, active_sk=None, done_at=iso(now), claimed_at=None)
        # Retention: the item (and the history of this write) expire this long after.
        write.set["expiration"] = expiration_at(now, s)
        # The sent list is the stream's done postings (vdq.store.postings), not an index.
    return write


def send_at_ahead(item: QueueItemRecord, now: datetime) -> datetime | None:
    """The item's send_at while it is still ahead of ``now``: a retry before it keeps the item
    waiting for it (the producer asked for that time; an error before it, such as a refused
    publish, changes nothing of it). None when there is none or it passed."""
    if item.send_at is None:
        return None
    at = parse_iso(item.send_at)
    return at if at > now else None


def retry_text(item: QueueItemRecord, now: datetime) -> str | None:
    """What a retry's history entry says of a scheduled item's time: kept, or passed."""
    if item.send_at is None:
        return None
    if send_at_ahead(item, now) is not None:
        return f"waits for its send_at {item.send_at}: sent then, not now"
    return f"sent now: its send_at {item.send_at} has passed"


def apply(
    item: QueueItemRecord | str,
    step: Step,
    runtime: Runtime,
    *,
    history: list[HistoryRecord] | None = None,
) -> Outcome:
    """Apply ``step`` to an item (a record just read, or an id to read).

    ``history`` adds entries written in the same transaction (the worker's deferred ``send``
    entry). Returns what happened; raises InvalidTransition (unless ``step.late`` is "record"),
    NotFound, or ContentionError after MAX_TRIES lost races.
    """
    store = runtime.store
    current = store.get_item(item) if isinstance(item, str) else item
    item_id = item if isinstance(item, str) else item.id
    for _ in range(MAX_TRIES):
        if current is None:
            raise NotFound(f"queue item {item_id} does not exist")
        before = State(current.state)
        if step.attempt is not None and current.attempt != step.attempt:
            return Outcome("stale", current, before)
        now = item_now(current, runtime)
        mark = event_mark(current.id, step.event_id) if step.event_id else None
        try:
            if step.expect is not None and before.value not in step.expect:
                raise InvalidTransition(current.id, step.transition, before.value)
            decision = workflow.decide(step.transition, before, current.id)
        except InvalidTransition:
            if step.late == "raise":
                raise
            try:  # late for the state and attempt as read: one that moved since decides again
                store.append_history([_entry(current, step, now, "late", None)], mark=mark,
                                     expiration=current.expiration, item=current,
                                     as_read=True)  # fmt: skip
            except Duplicate:
                return Outcome("duplicate", current, before)
            except Moved as moved:
                current = moved.current
                continue
            logger.info("late %s for %s in %s recorded", step.transition, current.id, before)
            return Outcome("late", current, before)
        if step.dry_run:
            return Outcome("dry_run", current, before, decision)
        if step.provider_id is not None and current.provider_id not in (None, step.provider_id):
            # Another attempt's ID (or an event's) is stored: never replace it.
            return Outcome("refused", current, before, decision)
        accepted = acceptance(current, step, now)
        if accepted is not None:
            now = max(now, accepted.at + timedelta(microseconds=1))
        write = state_write(current, decision, step, now, runtime)
        if decision.enters_done:
            content_outlives(current, write, now, runtime)
        kind = "ignored" if decision.ignored else "transition"
        told = step
        if decision.transition.name == "retry" and step.text is None:
            told = replace(step, text=retry_text(current, now))
        entry = _entry(current, told, now, kind, decision)
        if accepted is not None:
            # After the acceptance the item is (in history) awaiting: the step's entry
            # follows from there; one that leaves it awaiting (SES's DeliveryDelay) is an
            # event of it, as it is for an item whose acceptance was written first.
            entry = _entry(current, step, now, kind, decision, from_state=State.AWAITING.value)
            if decision.target is State.AWAITING:
                entry = _entry(current, step, now, "event", None,
                               from_state=State.AWAITING.value,
                               name=step.event_name or step.transition)  # fmt: skip
        entries = [*(history or []), *([accepted.entry] if accepted else []), entry]
        if accepted is not None and decision.target is State.AWAITING and step.text is None:
            entries.pop()  # the acceptance itself (the check's): its entry is the step's
        mapped_id = step.provider_id if step.map_provider_id else None
        release = release_for(current, iso(now), runtime) if decision.enters_done else None
        try:
            store.commit(current, write, entries, provider_id=mapped_id, mark=mark,
                         release=release,
                         mapping_expiration=mapping_expiration(now, runtime.settings))
        except Duplicate:
            return Outcome("duplicate", current, before, decision)
        except Moved as moved:
            current = moved.current
            continue
        outcome = Outcome("ignored" if decision.ignored else "moved", current, before, decision)
        if not decision.ignored:
            after_transition(outcome, step, runtime)
        return outcome
    raise ContentionError(item_id, MAX_TRIES)


def content_outlives(item: QueueItemRecord, write: StateWrite, now: datetime,
                     runtime: Runtime) -> None:  # fmt: skip
    """The done write of an item whose content expires from birth (``cx``) needs the content
    to outlive the item's own expiration: conditional on ``cx`` reaching it, or, done later
    than its content's horizon allows (a long backlog, a resend's copy), after extending the
    content, with the new ``cx`` (vdq.workflow.retention). A crash between the two leaves a
    content that lives longer than it needs to."""
    if item.cx is None:
        return  # a counted content (the stream stamps it)
    # An item kept forever (no retention now) needs a content that never expires, whatever
    # the retention it was written with.
    needed = write.set.get("expiration") or NEVER
    if item.cx >= needed:
        write.at_least["cx"] = int(needed)
        return
    later = content_expiration(now, runtime.settings)
    if runtime.store.extend_content(item.content_id, later):
        write.set["cx"] = later
    else:
        logger.error("content %s of %s is gone before the item is done", item.content_id,
                     item.id)  # fmt: skip


def item_now(item: QueueItemRecord, runtime: Runtime) -> datetime:
    """The time of a change to ``item``: the clock, but always after the item's last change.

    Functions' clocks differ a little, and several changes can fall in one clock tick; history
    is ordered by time, so each item's own timeline must only move forward.
    """
    now = runtime.clock.now()
    last = parse_iso(item.updated_at) + timedelta(microseconds=1)
    return max(now, last)


def send_entry(item: QueueItemRecord) -> HistoryRecord:
    """The ``send`` history entry of the item's claim, for a claim that did not write it (a
    release before claims wrote their entries): its key is the claim's time and attempt, so
    written twice, it is one entry.

    Derived from the item: ``workflow.claim_source`` implies the state the claim took it from
    from its retries.
    """
    assert item.claimed_at is not None
    source = workflow.claim_source(item.retries)
    return history_entry(
        item.id,
        parse_iso(item.claimed_at),
        actor="worker",
        source="server",
        kind="transition",
        name="send",
        from_state=source.value,
        to_state=State.SENDING.value,
        attempt=int(item.attempt),
        key=f"send{item.attempt}",
    )


def missing_send_entry(item: QueueItemRecord) -> list[HistoryRecord]:
    """The claim's ``send`` entry, for a write that moves a ``sending`` item whose state item
    does not hold it: claimed by a release whose claim left the entry to the outcome's
    write, and whose worker died. (A claim now writes its entry itself: on the state item, or
    as a record when the item says ``claim_apart``.)"""
    if item.state != State.SENDING.value or not item.claimed_at or item.claim_apart:
        return []
    from vdq.store.history import recent_entries

    try:
        held = recent_entries(item)
    except ValueError:
        held = []
    if any(e.name == "send" and e.at == item.claimed_at for e in held):
        return []
    return [send_entry(item)]


def event_mark(item_id: str, event_id: str) -> EventMark:
    """The mark of a provider event on its item: 64 bits of digest, unique among one item's
    events (a handful) by a wide margin."""
    digest = hashlib.blake2b(event_id.encode(), digest_size=8).hexdigest()
    return EventMark(item_id, digest)


def _entry(item: QueueItemRecord, step: Step, now: datetime, kind: str,
           decision: Decision | None, *, from_state: str | None = None,
           name: str | None = None) -> HistoryRecord:  # fmt: skip
    text = step.text if step.text is not None else (
        step.result if step.result is not KEEP else None
    )
    source = from_state or item.state
    return history_entry(
        item.id,
        now,
        actor=step.actor,
        source=step.source,
        kind=kind,
        name=name or step.transition,
        from_state=source,
        to_state=decision.target.value if decision else source,
        attempt=int(item.attempt),
        text=text,
    )


@dataclass(frozen=True)
class Acceptance:
    """The ``await`` entry a step writes for the provider's acceptance, and its time."""

    entry: HistoryRecord
    at: datetime


def acceptance(item: QueueItemRecord, step: Step, now: datetime) -> Acceptance | None:
    """The acceptance entry ``step`` writes before its own (``Step.acceptance``): only when it
    stores the provider ID on a ``sending`` item that stores none. Its time is the provider's
    (``accepted_at``) kept within the item's order: after its last change, before now."""
    if (step.acceptance is None or step.provider_id is None or item.provider_id is not None
            or item.state != State.SENDING.value):  # fmt: skip
        return None
    last = parse_iso(item.updated_at) + timedelta(microseconds=1)
    at = now
    if step.accepted_at:
        try:
            at = min(now, max(last, parse_iso(step.accepted_at)))
        except ValueError:
            at = now
    entry = history_entry(item.id, at, actor="worker", source="server", kind="transition",
                          name="await", from_state=State.SENDING.value,
                          to_state=State.AWAITING.value, attempt=int(item.attempt),
                          text=step.acceptance)  # fmt: skip
    return Acceptance(entry, at)


# ---- side effects ----------------------------------------------------------------------------


def after_transition(outcome: Outcome, step: Step, runtime: Runtime) -> None:
    """What follows a transition that was written: publish, clean up."""
    item, decision = outcome.item, outcome.decision
    assert decision is not None
    name = decision.transition.name
    if name == "retry" and item.send_at is not None:  # kept: it waits for its time
        publish_waiting(item, runtime)
    elif name in ("retry", "delay"):
        publish_send(item, runtime, delay_seconds=step.retry_delay or 0)
    if decision.target is State.ERRORED:
        # The deployed "errored items" alarm watches this count (infra/monitoring.py).
        metrics.add_metric(name=resources.METRIC_ITEMS_ERRORED, unit="Count", value=1)
    if decision.enters_done and item.has_files:
        try:
            purge_if_idle(item.content_id, runtime)
        except Exception:
            # The release is stored with the transition; the next purge run deletes the files.
            logger.exception("immediate file purge of %s failed; the purge run retries", item.id)
    # State-change events are published from the table's stream (vdq.workflow.stateevents), at least
    # once, whatever happens to this function after the write.


def publish_waiting(item: QueueItemRecord, runtime: Runtime) -> None:
    """Publish a retried item that waits for its send_at: delayed until then, or, longer than
    SQS can delay, in a due-time bucket of its own at its attempt, which the minute sweep
    releases with the request's (vdq.intake.scheduling). A bucket that could not be written
    leaves the item to its publish timer, which counts from its send_at."""
    assert item.send_at is not None
    now = runtime.clock.now()
    if not is_long(item.send_at, now):
        publish_send(item, runtime, delay_seconds=delay_for(item.send_at, now))
        return
    lane = item.priority or DEFAULT_PRIORITY
    partition = scheduled_partition(lane, shard(item.id, runtime.settings.index_shards))
    attempt = int(item.attempt)
    bucket: ScheduledRecord = bucket_record(partition, f"{item.id}#{attempt}",
                                            item.send_at, lane, item.id, attempt)  # fmt: skip
    try:
        runtime.store.add_bucket(bucket)
    except Exception:
        logger.exception("bucket of retried %s not written: its publish timer sends it",
                         item.id)  # fmt: skip


def publish_send(item: QueueItemRecord, runtime: Runtime, *, delay_seconds: int = 0) -> bool:
    """Publish the item's current attempt in its lane; a refused publish moves the item to
    ``errored``."""
    failed = runtime.send_queue.publish([message_for(item, delay_seconds=delay_seconds)])
    if not failed:
        return True
    error = failed[item.id]
    logger.error("publish of %s failed: %s", item.id, error)
    apply(item, Step("error", actor="vdq", result=error, attempt=int(item.attempt), late="record"),
          runtime)  # fmt: skip
    return False


__all__ = ["KEEP", "Outcome", "Step", "apply", "publish_send", "resources"]
