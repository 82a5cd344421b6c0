"""A provider update applied to the item it matched: the transition it runs (or the event it
records), written with its event mark, and the orphan events an item adopts with its provider
ID. Matching the update to its item is vdq.results.matching'."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from vdq.core.clock import iso
from vdq.core.errors import InvalidTransition, VdqError
from vdq.core.observability import logger
from vdq.results import suppression, tracking
from vdq.results.events import SES, TWILIO, ProviderUpdate
from vdq.store import Duplicate, Moved, ProviderIdTaken, QueueItemRecord, StateWrite
from vdq.workflow.retention import mapping_expiration
from vdq.workflow.table import State
from vdq.workflow.transitions import (
    KEEP,
    MAX_TRIES,
    Step,
    apply,
    clip_result,
    event_mark,
    history_entry,
    item_now,
    missing_send_entry,
)

if TYPE_CHECKING:
    from vdq.runtime import Runtime

# Normalised statuses (the seed's Anymail and Twilio words) -> the transition they apply.
TRANSITION_FOR = {
    "delivered": "succeed",
    "bounced": "error",
    "rejected": "error",
    "failed": "error",
    "undelivered": "error",
    "queued": "await",
    "sending": "await",
    "sent": "await",
    "deferred": "await",
}
# A final result changes an item only while a provider result can be due; from any other state
# (queued or delayed for a new attempt, errored, succeeded, unconfirmed) it is a late event,
# recorded in history. Cancelled is the workflow's ignored source: state kept, result written.
PROVIDER_SOURCES = frozenset({State.SENDING.value, State.AWAITING.value, State.CANCELLED.value})
LABELS = {SES: "SES", TWILIO: "Twilio"}  # as the worker names them (vdq.dispatch.record)


def apply_update(item: QueueItemRecord, update: ProviderUpdate, runtime: Runtime, *,
                 store_id: bool = False, attempt: int | None = None,
                 adopt: bool = False) -> str:  # fmt: skip
    """Apply ``update`` to ``item``; returns what happened (moved, ignored, late, event,
    duplicate, refused). ``store_id``: the item stores no provider ID yet; store the update's.
    ``attempt``: the item's attempt that the provider took the message for, when the match
    says (the mapping, the tags, the callback URL); otherwise the item's current one.
    ``adopt``: the ID has a mapping record (of orphans): the stored ID gets its mapping, whatever
    the item's kind, which adopts them."""
    if update.suppresses is not None:
        suppress_receiver(item, update, runtime)
    for _ in range(MAX_TRIES):
        event_attempt = _event_attempt(item, update, attempt)
        outcome = _apply_once(item, update, runtime, store_id=store_id, attempt=event_attempt,
                              adopt=adopt)  # fmt: skip
        if outcome != "stale":
            return outcome
        # The item moved between the read and the write: decide again. The update's ID is
        # still its to store only on an item that stores none and takes the update's results:
        # the same attempt, or cancelled since (it absorbs its earlier attempts'), as matching
        # would have decided for the item as it is now.
        fresh = runtime.store.get_item(item.id)
        if fresh is None:
            return "dropped"
        store_id = store_id and fresh.provider_id is None and (
            int(fresh.attempt) == event_attempt or fresh.state == State.CANCELLED.value)
        item, attempt = fresh, event_attempt
    raise VdqError(f"{update.provider} update {update.event_id}: the item kept changing")


def suppress_receiver(item: QueueItemRecord, update: ProviderUpdate, runtime: Runtime) -> None:
    """The receiver of the item a result matched, when the result asks it and named no
    receiver of its own (an SES complaint without ``complainedRecipients``, a Twilio callback
    without ``To``, a fetched message). Before the update is applied: should this fail, the
    update is not applied either, and its redelivery (or the next poll) does both. Once per
    event: a redelivery after an operator's removal or a START suppresses no one again."""
    assert update.suppresses is not None
    suppression.suppress_once(item.receiver, update.suppresses, event_id=update.event_id,
                              actor=update.provider, text=update.text,
                              runtime=runtime)  # fmt: skip


def _event_attempt(item: QueueItemRecord, update: ProviderUpdate, attempt: int | None) -> int:
    if update.attempt_hint is not None and update.item_hint == item.id:
        return int(update.attempt_hint)
    if attempt is not None:
        return int(attempt)
    return int(item.attempt)


def redundant_send_event(item: QueueItemRecord, update: ProviderUpdate, *, older: bool) -> bool:
    """SES's Send event once the worker has recorded the acceptance itself (the item stores
    the message ID, and its history says "accepted by SES as ..."): it tells nothing new, so
    it is not written (two writes and six write units saved per email). A Send that finds
    the item still ``sending`` moves it to ``awaiting`` as before."""
    return (update.provider == "ses" and update.name == "Send" and not older
            and item.provider_id == update.provider_id)  # fmt: skip


def _apply_once(item: QueueItemRecord, update: ProviderUpdate, runtime: Runtime, *,
                store_id: bool, attempt: int, adopt: bool = False) -> str:  # fmt: skip
    # A cancelled item absorbs the results of the attempts before its cancel (the seed's
    # ignored sources: state kept, result written); any other item takes results only for
    # its current attempt, and keeps those of older attempts in history.
    older = attempt != int(item.attempt) and item.state != State.CANCELLED.value
    provider_id = update.provider_id if store_id and not older else None
    transition = None if older else TRANSITION_FOR.get(update.status)
    if transition == "await" and item.state != State.SENDING.value:
        if redundant_send_event(item, update, older=older):
            logger.info("SES Send for %s, which stores %s: nothing new", item.id,
                        update.provider_id)  # fmt: skip
            return "ignored"
        transition = None  # in flight, but the item is past sending: an event in history
    # The attempt's first result while its worker left the acceptance to it (the item is
    # ``sending`` and stores no ID): even one that moves no state (a complaint, an open)
    # proves the acceptance, so it moves the item on to ``awaiting`` and is an event there.
    accepts = transition is None and provider_id is not None and item.state == State.SENDING
    mapping = adopt or tracking.maps_provider_id(item, runtime)
    if transition is None and not accepts:
        return _storing_id(item.id, int(item.attempt), provider_id if mapping else None,
                           runtime, lambda mapped: _record_event(item, update, runtime,
                                                                 provider_id, mapped,
                                                                 attempt=attempt))  # fmt: skip
    step_name = transition or "await"
    step = Step(
        step_name,
        event_name=update.name,
        actor=update.provider,
        source="provider",
        text=update.text,
        # A step that records the acceptance (it stores the ID on a ``sending`` item) clears
        # the result of an earlier try, as the acceptance's own write does (the check's).
        result=(update.text if update.writes_result and not accepts
                else None if provider_id is not None else KEEP),
        attempt=int(item.attempt),
        # An ``await`` that finds the item moved on meanwhile (the check, another event)
        # is decided again from the item as it is now (an event in its history).
        late="raise" if step_name == "await" else "record",
        expect=frozenset({State.SENDING.value}) if step_name == "await" else PROVIDER_SOURCES,
        event_id=update.event_id,
        provider_id=provider_id,
    )
    if provider_id is not None:
        # The first result of an attempt whose worker left the acceptance to it: its write
        # also records the acceptance (vdq.workflow.transitions.acceptance).
        step = replace(step, acceptance=f"accepted by {LABELS[update.provider]} as "
                                        f"{provider_id}", accepted_at=update.accepted_at)
    history = missing_send_entry(item)
    try:
        outcome = _storing_id(item.id, int(item.attempt), provider_id if mapping else None,
                              runtime, lambda mapped: apply(item, replace(
                                  step, map_provider_id=mapped), runtime, history=history))
    except InvalidTransition:
        return "stale"  # (apply_update reads the item again and decides)
    # Every delivered message has its provider events: their line is DEBUG (the item's history
    # holds each of them, with its time and text); what needs a person is logged at WARNING.
    logger.debug("%s %s for %s: %s", update.provider, update.name, item.id, outcome.kind)
    return outcome.kind


def _record_event(item: QueueItemRecord, update: ProviderUpdate, runtime: Runtime,
                  provider_id: str | None, mapped: bool, *, attempt: int) -> str:  # fmt: skip
    """An update that moves no state: history (and, for a delay of the current attempt, the
    result) only. ``attempt``: the item's attempt the update belongs to; one the item has left
    (not a cancelled item's: it absorbs them) makes a late entry under that attempt, so its
    history never shows an earlier attempt's delivery as the current one's."""
    store = runtime.store
    current: QueueItemRecord | None = item
    for _ in range(MAX_TRIES):
        if current is None:
            return "event"
        now = item_now(current, runtime)
        mark = event_mark(current.id, update.event_id)
        older = attempt != int(current.attempt) and current.state != State.CANCELLED.value
        entry = history_entry(current.id, now, actor=update.provider, source="provider",
                              kind="late" if older else "event", name=update.name,
                              from_state=current.state, to_state=current.state,
                              attempt=attempt, text=update.text)  # fmt: skip
        write = StateWrite(set={"updated_at": iso(now)})
        if (update.status == "deferred" and not older
                and current.state in (State.SENDING, State.AWAITING)):  # fmt: skip
            write.set["result"] = clip_result(update.text)
        # The ID is the attempt's: an item that moved on to another attempt meanwhile never
        # gets it (its own attempt's ID comes with its own results), nor one that stored an
        # ID since the read (never replaced, as transitions.apply refuses to).
        stored = provider_id if not older and current.provider_id is None else None
        if stored is not None:
            write.set["provider_id"] = stored
        try:  # both writes only while the item is as read (state and attempt)
            if len(write.set) == 1:
                store.append_history([entry], mark=mark, expiration=current.expiration,
                                     item=current, as_read=True)  # fmt: skip
            else:
                store.commit(current, write, [entry], mark=mark,
                             provider_id=stored if mapped else None,
                             mapping_expiration=mapping_expiration(now, runtime.settings))
        except Duplicate:
            return "duplicate"
        except Moved as moved:
            if (moved.current is not None and moved.current.state == State.CANCELLED.value
                    and current.state != State.CANCELLED.value):  # fmt: skip
                # Cancelled since the read: it absorbs the update (it may take its result),
                # which apply_update decides from the item as it is now.
                return "stale"
            current = moved.current
            continue
        return "event"
    raise VdqError(f"{update.provider} update {update.event_id}: the item kept changing")


T = TypeVar("T")


def _storing_id(item_id: str, item_attempt: int, provider_id: str | None, runtime: Runtime,
                attempt: Callable[[bool], T]) -> T:  # fmt: skip
    """Run ``attempt(True)`` (which also writes the provider-ID mapping); when the mapping
    exists and holds only orphans (or already names this item), adopt it, apply the orphans to
    the item and then run ``attempt(False)``: the orphans arrived before this update, so the
    item ends as the latest says (a cancelled item's result is the latest event's text)."""
    if provider_id is None:
        return attempt(False)
    try:
        return attempt(True)
    except ProviderIdTaken as taken:
        owner = taken.owner or runtime.store.find_by_provider_id(provider_id)
        if owner is not None and owner.item_id not in (None, item_id):
            raise
    orphans = runtime.store.adopt_orphans(provider_id, item_id, item_attempt,
                                          mapping_expiration(runtime.clock.now(), runtime.settings))
    replay_orphans(item_id, provider_id, orphans, runtime, attempt=item_attempt)
    return attempt(False)


def replay_orphans(item_id: str, provider_id: str, orphans: list[dict[str, Any]],
                   runtime: Runtime, *, attempt: int) -> None:  # fmt: skip
    """Apply the orphans of ``provider_id`` to the item that now stores it, oldest first, as
    results of ``attempt``: the one they were adopted for (the ID is that attempt's), whatever
    attempt the item has reached by the time each is applied."""
    if not orphans:
        return
    failed = False
    for data in sorted(orphans, key=lambda o: o.get("at") or ""):
        item = runtime.store.get_item(item_id)
        if item is None:
            return
        try:
            apply_update(item, ProviderUpdate.from_json(data), runtime, attempt=attempt)
        except Exception:
            failed = True  # kept on the mapping; the event mark makes a replay harmless
            logger.exception("orphan %s of %s not applied", data.get("event_id"), item_id)
    if not failed:
        runtime.store.clear_orphans(provider_id, item_id)
    logger.info("applied %d orphan events of %s to %s", len(orphans), provider_id, item_id)


def replay_waiting_orphans(item: QueueItemRecord, runtime: Runtime) -> bool:
    """Apply the events that still wait on the mapping of the item's provider ID (a worker
    died between storing the ID and adopting them); True when there were any."""
    if not item.provider_id:
        return False
    mapping = runtime.store.find_by_provider_id(item.provider_id)
    if mapping is None or not mapping.orphans or mapping.item_id not in (None, item.id):
        return False
    orphans = runtime.store.adopt_orphans(item.provider_id, item.id, int(item.attempt),
                                          mapping_expiration(runtime.clock.now(), runtime.settings))
    replay_orphans(item.id, item.provider_id, orphans, runtime, attempt=int(item.attempt))
    return bool(orphans)
