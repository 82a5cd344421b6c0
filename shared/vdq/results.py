"""Provider results: SES events and Twilio statuses, matched to their queue item and applied.

Every result becomes a ``ProviderUpdate`` (``vdq.provider_events``: provider, message ID,
normalised status, text, a deterministic event id). Matching, cheapest first:

1. the item the provider returned the key of (SES tag, Twilio ``queue_item``) when it stores
   this provider ID: the mapping would name the same item (ID and mapping are written in one
   transaction), so this costs one GetItem;
2. the provider-ID mapping (strongly consistent);
3. the keyed item when it stores no provider ID yet: the ID is stored with the result; an item
   that stores another ID is logged and left alone;
4. nothing: an SES event is kept as an orphan on the mapping record (TTL) and applied when an
   item stores that ID; a Twilio status becomes a deferred lookup on the results queue.

Each update is written with an event mark in the same transaction, so a duplicate or replayed
delivery changes nothing the second time and costs no extra request.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any, TypeVar

from vdq import suppression, tracking
from vdq.clock import iso, parse_iso
from vdq.errors import VdqError
from vdq.observability import logger
from vdq.provider_events import (
    BadEvent,
    ProviderUpdate,
    parse_lookup,
    parse_ses_event,
    parse_twilio_callback,
)
from vdq.provider_events import twilio_update as twilio_update  # re-exported (vdq.schedules)
from vdq.retention import mapping_expiration
from vdq.runtime import Runtime
from vdq.store import Duplicate, Moved, ProviderIdTaken, ProviderRecord, QueueItemRecord, StateWrite
from vdq.transitions import (
    KEEP,
    MAX_TRIES,
    Step,
    apply,
    clip_result,
    event_mark,
    history_entry,
    item_now,
    send_entry,
)
from vdq.workflow import State

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

ORPHAN_TTL_SECONDS = 7 * 86_400
MAX_ORPHANS = 25
LOOKUP_FIRST_DELAY = 30
LOOKUP_MAX_DELAY = 900  # SQS's longest DelaySeconds
LOOKUP_KIND = "vdq.deferred_lookup"


# ---- applying an update to a matched item ----------------------------------------------------


def apply_update(item: QueueItemRecord, update: ProviderUpdate, runtime: Runtime, *,
                 store_id: bool = False, attempt: int | None = None) -> str:  # fmt: skip
    """Apply ``update`` to ``item``; returns what happened (moved, ignored, late, event,
    duplicate, refused). ``store_id``: the item stores no provider ID yet; store the update's.
    ``attempt``: the item's attempt that the provider took the message for, when the match
    says (the mapping, the tags, the callback URL); otherwise the item's current one."""
    for _ in range(MAX_TRIES):
        event_attempt = _event_attempt(item, update, attempt)
        outcome = _apply_once(item, update, runtime, store_id=store_id, attempt=event_attempt)
        if outcome != "stale":
            return outcome
        # The item moved on to another attempt between the read and the write: decide again.
        fresh = runtime.store.get_item(item.id)
        if fresh is None:
            return "dropped"
        item, attempt, store_id = fresh, event_attempt, False
    raise VdqError(f"{update.provider} update {update.event_id}: the item kept changing")


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
                store_id: bool, attempt: int) -> str:  # fmt: skip
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
    if transition is None:
        return _storing_id(item.id, int(item.attempt), provider_id, runtime,
                           lambda mapped: _record_event(item, update, runtime, provider_id,
                                                        mapped, older=older))  # fmt: skip
    step = Step(
        transition,
        actor=update.provider,
        source="provider",
        text=update.text,
        result=update.text if update.writes_result else KEEP,
        attempt=int(item.attempt),
        late="record",
        expect=frozenset({State.SENDING.value}) if transition == "await" else PROVIDER_SOURCES,
        event_id=update.event_id,
        provider_id=provider_id,
    )
    history = _deferred_send_entry(item)
    outcome = _storing_id(item.id, int(item.attempt), provider_id, runtime,
                          lambda mapped: apply(item, replace(step, map_provider_id=mapped),
                                               runtime, history=history))  # fmt: skip
    logger.info("%s %s for %s: %s", update.provider, update.name, item.id, outcome.kind)
    return outcome.kind


def _deferred_send_entry(item: QueueItemRecord) -> list[Any] | None:
    """The claim's ``send`` entry, for an update that moves a ``sending`` item: a worker that
    died after the provider took the message never writes it, and the lease sweep skips an
    item that left ``sending``. Its key is deterministic, so the worker writing it too is
    harmless."""
    if item.state != State.SENDING.value or not item.claimed_at:
        return None
    return [send_entry(item)]


def _record_event(item: QueueItemRecord, update: ProviderUpdate, runtime: Runtime,
                  provider_id: str | None, mapped: bool, *,
                  older: bool = False) -> str:  # fmt: skip
    """An update that moves no state: history (and, for a delay of the current attempt, the
    result) only. ``older``: the update belongs to an attempt the item has left."""
    store = runtime.store
    current: QueueItemRecord | None = item
    for _ in range(MAX_TRIES):
        if current is None:
            return "event"
        now = item_now(current, runtime)
        mark = event_mark(current.id, update.event_id)
        entry = history_entry(current.id, now, actor=update.provider, source="provider",
                              kind="late" if older else "event", name=update.name,
                              from_state=current.state,
                              to_state=current.state, attempt=int(current.attempt),
                              text=update.text)  # fmt: skip
        write = StateWrite(set={"updated_at": iso(now)})
        current_attempt = not older and int(current.attempt) == int(item.attempt)
        if (update.status == "deferred" and current_attempt
                and current.state in (State.SENDING, State.AWAITING)):  # fmt: skip
            write.set["result"] = clip_result(update.text)
        if provider_id is not None:
            write.set["provider_id"] = provider_id
        try:
            if len(write.set) == 1:
                store.append_history([entry], mark=mark, expiration=current.expiration)
            else:
                store.commit(current, write, [entry], mark=mark,
                             provider_id=provider_id if mapped else None,
                             mapping_expiration=mapping_expiration(now, runtime.settings))
        except Duplicate:
            return "duplicate"
        except Moved as moved:
            current = moved.current
            continue
        return "event"
    return "event"


T = TypeVar("T")


def _storing_id(item_id: str, item_attempt: int, provider_id: str | None, runtime: Runtime,
                attempt: Callable[[bool], T]) -> T:  # fmt: skip
    """Run ``attempt(True)`` (which also writes the provider-ID mapping); when the mapping
    exists and holds only orphans (or already names this item), adopt it, run
    ``attempt(False)`` and apply the orphans to the item."""
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
    result = attempt(False)
    replay_orphans(item_id, provider_id, orphans, runtime)
    return result


def replay_orphans(item_id: str, provider_id: str, orphans: list[dict[str, Any]],
                   runtime: Runtime) -> None:  # fmt: skip
    """Apply the orphans of ``provider_id`` to the item that now stores it, oldest first."""
    if not orphans:
        return
    failed = False
    for data in sorted(orphans, key=lambda o: o.get("at") or ""):
        item = runtime.store.get_item(item_id)
        if item is None:
            return
        try:
            apply_update(item, ProviderUpdate.from_json(data), runtime)
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
    replay_orphans(item.id, item.provider_id, orphans, runtime)
    return bool(orphans)


# ---- matching --------------------------------------------------------------------------------

Miss = Callable[[ProviderUpdate, ProviderRecord | None], "str | None"]


def match_and_apply(update: ProviderUpdate, runtime: Runtime, on_miss: Miss) -> str:
    """Find the update's item (see the module docstring) and apply it; ``on_miss`` handles an
    update no item matches and returns None when it lost a race (then matching runs again)."""
    store = runtime.store
    for _ in range(MAX_TRIES):
        keyed = store.get_item(update.item_hint) if update.item_hint else None
        if keyed is not None and keyed.provider_id == update.provider_id:
            return apply_update(keyed, update, runtime)
        mapping = store.find_by_provider_id(update.provider_id)
        if mapping is not None and mapping.item_id:
            item = keyed if keyed is not None and keyed.id == mapping.item_id else (
                store.get_item(mapping.item_id)
            )
            if item is None:
                logger.error("provider ID %s maps to missing item %s", update.provider_id,
                             mapping.item_id)  # fmt: skip
                return "dropped"
            mapped_attempt = int(mapping.attempt) if mapping.attempt is not None else None
            if (mapped_attempt is None and item.provider_id != update.provider_id
                    and item.state != State.CANCELLED.value):  # fmt: skip
                # A mapping from before attempts were recorded, whose item has moved on to
                # another ID: it belongs to an attempt the item has left.
                mapped_attempt = 0
            return apply_update(item, update, runtime, attempt=mapped_attempt)
        if (keyed is not None and update.attempt_hint is None and int(keyed.attempt) > 1
                and keyed.state != State.CANCELLED.value):  # fmt: skip
            # The update cannot say which attempt it belongs to (a status callback URL from
            # before attempts were signed): never give its ID to a later attempt. (A cancelled
            # item absorbs the results of every attempt before its cancel.)
            keyed = None
        if keyed is not None:
            if keyed.provider_id is not None and keyed.state == State.CANCELLED.value:
                # A result of an attempt before the cancel: the cancelled item absorbs it
                # (state kept, result written) and keeps the ID it stores.
                return apply_update(keyed, update, runtime, attempt=int(keyed.attempt))
            if keyed.provider_id is not None:
                logger.warning(
                    "%s %s names item %s, which stores provider ID %s: not applied",
                    update.provider, update.provider_id, keyed.id, keyed.provider_id,
                )
                return "refused"
            try:
                return apply_update(keyed, update, runtime, store_id=True)
            except ProviderIdTaken:
                continue  # another item stored the ID meanwhile: match again
        outcome = on_miss(update, mapping)
        if outcome is not None:
            return outcome
    raise VdqError(f"{update.provider} update {update.event_id}: matching kept losing races")


def handle_ses_event(event: dict[str, Any], runtime: Runtime) -> str:
    """One SES event (the JSON SNS delivers raw to the results queue)."""
    update = parse_ses_event(event)
    suppression.learn_from_ses_event(event, runtime)  # before matching: also for orphans
    found = tracking.strategy_for(runtime).find_queue_item(event)
    if found:
        item_id, attempt = found
        update = replace(update, item_hint=item_id,
                         attempt_hint=int(attempt) if attempt is not None else None)  # fmt: skip
    return match_and_apply(update, runtime, lambda u, seen: keep_orphan(u, seen, runtime))


def keep_orphan(update: ProviderUpdate, seen: ProviderRecord | None,
                runtime: Runtime) -> str | None:  # fmt: skip
    expiration = int(runtime.clock.now().timestamp()) + ORPHAN_TTL_SECONDS
    if not runtime.store.add_orphan(update.provider_id, seen, update.to_json(), expiration,
                                    MAX_ORPHANS):  # fmt: skip
        return None
    logger.warning("%s %s for %s matches no item yet: kept as an orphan", update.provider,
                   update.name, update.provider_id)  # fmt: skip
    return "orphan"


# ---- Twilio: callbacks and deferred lookups --------------------------------------------------


def handle_twilio_callback(params: dict[str, str], item_key: str | None, runtime: Runtime, *,
                           attempt: str | None = None) -> str:  # fmt: skip
    """One authentic Twilio status callback (the signature was checked by the caller, and
    covers ``item_key`` and ``attempt``, the status callback URL's query)."""
    update = parse_twilio_callback(params, item_key)
    suppression.learn_from_twilio_error(params.get("To"), params.get("ErrorCode"), runtime,
                                        where="in a status callback")
    if item_key and attempt is not None and tracking.is_attempt(attempt):
        update = replace(update, attempt_hint=int(attempt))
    now = iso(runtime.clock.now())
    return match_and_apply(update, runtime,
                           lambda u, _seen: defer_lookup(u, runtime, 0, now))  # fmt: skip


def lookup_message(update: ProviderUpdate, tries: int, first_seen: str) -> dict[str, Any]:
    return {"kind": LOOKUP_KIND, "update": update.to_json(), "tries": tries,
            "first_seen": first_seen}  # fmt: skip


def defer_lookup(update: ProviderUpdate, runtime: Runtime, tries: int, first_seen: str) -> str:
    """Look again later (a delayed message on the results queue), until the SMS timeout window
    has passed; then give up with an error in the log."""
    s = runtime.settings
    deadline = parse_iso(first_seen) + timedelta(hours=s.twilio_sms_timeout_hours)
    if runtime.clock.now() >= deadline:
        logger.error("Twilio %s %s matched no queue item within %s hours: dropped",
                     update.provider_id, update.name, s.twilio_sms_timeout_hours)  # fmt: skip
        return "dropped"
    # The exponent is capped: 2 to the power of a huge count would compute for ever.
    delay = min(LOOKUP_MAX_DELAY, LOOKUP_FIRST_DELAY * 2 ** min(tries, 16))
    runtime.client("sqs").send_message(
        QueueUrl=s.results_queue_url,
        MessageBody=json.dumps(lookup_message(update, tries + 1, first_seen)),
        DelaySeconds=delay,
    )
    logger.info("Twilio %s %s matches no item yet: lookup %d in %d s", update.provider_id,
                update.name, tries + 1, delay)  # fmt: skip
    return "deferred"


def handle_deferred_lookup(message: dict[str, Any], runtime: Runtime) -> str:
    update, tries, first_seen = parse_lookup(message)
    def again(u: ProviderUpdate, _seen: ProviderRecord | None) -> str | None:
        return defer_lookup(u, runtime, tries, first_seen)

    return match_and_apply(update, runtime, again)


def _json_object(body: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, nested past the parser, a huge number
        raise BadEvent(f"the {what} is not JSON") from None
    if not isinstance(data, dict):
        raise BadEvent(f"the {what} is not a JSON object")
    return data


def handle_results_message(body: str, runtime: Runtime) -> str:
    """One message of the results queue: an SES event (raw or in an SNS envelope) or a
    deferred lookup (which VDQ sends to the queue itself, never through SNS)."""
    data = _json_object(body, "message")
    if data.get("kind") == LOOKUP_KIND:
        return handle_deferred_lookup(data, runtime)
    if data.get("Type") == "Notification" and isinstance(data.get("Message"), str):
        return handle_ses_event(_json_object(data["Message"], "SNS message"), runtime)
    return handle_ses_event(data, runtime)

