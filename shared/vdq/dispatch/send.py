"""The send worker: claim a queue item, send it through SES or Twilio, record the outcome.

One send message is one attempt. The claim is one conditional write (``queued``/``delayed`` ->
``sending`` at the message's attempt); a message for an older attempt, a cancelled item or a
duplicate delivery fails it and drops itself before any provider is called. The provider is
called without holding anything; the outcome is then recorded in one transaction with the
``send`` history entry the claim deferred (key ``send<attempt>`` at the claim time, so the lease
sweep writing the same entry cannot duplicate it).

Requests on the happy path of an email whose content rides in the message: the suppression
check (GetItem), the claim (UpdateItem) and the record (TransactWriteItems of state,
provider-ID mapping and history).
Files add one BatchGetItem of their metadata and one S3 read each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from vdq.core.errors import InvalidTransition
from vdq.core.observability import bind_item, logger, metrics
from vdq.dispatch import giveback, mime, pacing
from vdq.dispatch.outbound import MissingContent, send_email, send_sms
from vdq.providers import (
    AmbiguousProviderError,
    PermanentProviderError,
    ProviderError,
    ThrottledProviderError,
    TransientProviderError,
)
from vdq.results import guard, suppression, tracking, unsubscribe
from vdq.results.unsubscribe import DEFAULT_LIST
from vdq.store import HistoryRecord, Moved, ProviderIdTaken, QueueItemRecord
from vdq.workflow import transitions
from vdq.workflow.retention import mapping_expiration
from vdq.workflow.sendqueue import SendMessage
from vdq.workflow.table import State
from vdq.workflow.transitions import Step, history_entry, send_entry

if TYPE_CHECKING:
    from vdq.runtime import Runtime

CLAIM_SOURCES = (State.QUEUED.value, State.DELAYED.value)
ACTOR = "worker"

# What ``process`` did with a message.
DROPPED = "dropped"  # claim failed: older attempt, cancelled, duplicate delivery, unknown item
ACCEPTED = "accepted"  # the provider took it; the item awaits its delivery status
DELAYED = "delayed"  # transient email error: a new attempt is published with a delay
ERRORED = "errored"  # the item moved to errored
KEPT = "kept"  # a status update or an operator moved the item first; its state was kept
SUPPRESSED = "suppressed"  # the receiver is suppressed: the item was cancelled, nothing sent
HELD = "held"  # its producer is held (vdq.results.guard): parked, its message done with
PACED = pacing.PACED  # throttled, or its turn at the provider's rate is far: back on the queue


def process_body(body: str, runtime: Runtime, *, upcoming: int = 1) -> str:
    """Handle one SQS send message body. Raises only when nothing could be recorded.

    ``upcoming``: this message and those after it in the batch (the pacer reserves for them)."""
    return process(SendMessage.parse(body), runtime, upcoming=upcoming)


def process(message: SendMessage, runtime: Runtime, *, upcoming: int = 1) -> str:
    """One send, start to end: ``prepare``, ``deliver``, ``settle``."""
    ready = prepare(message, runtime, upcoming=upcoming)
    if isinstance(ready, str):
        return ready
    return settle(deliver(ready, runtime), runtime)


@dataclass(frozen=True)
class Ready:
    """A claimed item whose turn at the provider's rate has come: to be sent now."""

    message: SendMessage
    item: QueueItemRecord
    entry: HistoryRecord  # the ``send`` history entry the claim deferred
    content: dict[str, Any]


@dataclass(frozen=True)
class Throttled:
    """The provider refused a send for its rate: ``settle`` slows the pacer and gives it back
    (in the thread that owns the pacer: the send function's main thread)."""

    ready: Ready
    error: ThrottledProviderError


def prepare(message: SendMessage, runtime: Runtime, *, upcoming: int = 1) -> Ready | str:
    """Everything before the provider call: the suppression check, the claim, the content and
    the wait for the item's turn at the provider's rate. Returns what was done instead of
    sending (``DROPPED``, ``PACED``, ...) or the item, ready to send now."""
    bind_item(message.item_id)
    checked = list_of(message)
    if suppression.refuse(message.item_id, message.attempt, message.receiver, runtime, checked):
        return SUPPRESSED
    if pacing.past_deadline(runtime):  # no time left to send and record it
        return giveback.unclaimed(message, runtime)
    item = claim(message, runtime)
    if item is None:
        metrics.add_metric(name="SendsDropped", unit="Count", value=1)
        return DROPPED
    if isinstance(item, str):
        return item
    entry = send_entry(item)
    content: dict[str, Any] = {}
    listed: str | None = None
    try:
        content = message.content or read_content(item, runtime)
        # The list its link leaves: an item stored before lists names it in no message.
        listed = unsubscribe.list_mail(item, content)
        suppression.check_list(item, listed, checked, runtime)
        waited = pacing.gate(item, content, runtime, upcoming)  # its turn at the provider's rate
        suppression.check_again(item, waited, runtime, listed)
    except pacing.NoSlot as no_slot:
        return giveback.give_back(item, message, entry, no_slot.delay, runtime)
    except suppression.SuppressedMeanwhile as exc:
        # Back on the queue at once, naming its receiver and list: the next delivery's check
        # cancels it, as for any item to a suppressed receiver (a claimed item has no
        # transition to cancelled).
        named = replace(message, receiver=item.receiver, list_name=listed)
        giveback.give_back(item, named, entry, 0, runtime, name="suppressed", result=str(exc),
                         counted=False)  # fmt: skip
        return SUPPRESSED
    except Exception as exc:
        return failed(Ready(message, item, entry, content), exc, runtime)
    return Ready(message, item, entry, content)


def list_of(message: SendMessage) -> str | None:
    """The list whose unsubscribes stop the message's item. A message published before
    messages named their list is list mail of the default list when it is bulk or its inline
    content asked for the headers, as its headers say (one without its content is checked
    against the entry for all mail only)."""
    if message.list_name is not None or message.receiver is None:
        return message.list_name
    asked = bool((message.content or {}).get("list_unsubscribe"))
    return DEFAULT_LIST if message.priority == "bulk" or asked else None


def deliver(ready: Ready, runtime: Runtime) -> str | Throttled:
    """The provider call and the record of its outcome. Safe to run in a thread of its own
    beside other sends: it uses no pacer state (a throttling answer is returned for ``settle``)
    and its store and provider clients are thread-safe. Raises only when nothing could be
    recorded."""
    item = ready.item
    bind_item(item.id)
    try:
        if item.method == "email":
            provider_id = send_email(item, ready.content, runtime)
        else:
            provider_id = send_sms(item, ready.content, runtime)
    except ThrottledProviderError as exc:
        return Throttled(ready, exc)
    except Exception as exc:
        return failed(ready, exc, runtime)
    try:
        mapped = tracking.maps_provider_id(item, runtime)
        return record_accepted(item, ready.entry, provider_id, runtime, map_provider_id=mapped)
    except Exception:
        # The lease sweep moves the item on later; the ID in the log lets an operator match it.
        logger.exception("%s accepted %s as %s, but the outcome was not recorded",
                         provider_label(item), item.id, provider_id)  # fmt: skip
        raise


def warm(ready: Ready, runtime: Runtime) -> None:
    """Make the clients ``deliver`` will use for ``ready``, in this thread: sending threads then
    only use them (clients are thread-safe; boto3's default session does not make them so). A
    client that cannot be made is left for ``deliver``, which records why."""
    from vdq.providers.ses import get_ses
    from vdq.providers.twilio import get_twilio

    try:
        if ready.item.method == "email":
            get_ses(runtime)
            if ready.content.get("attachments"):
                runtime.files  # noqa: B018  (made now)
        else:
            get_twilio(runtime)
    except Exception:
        logger.debug("the provider's client for %s could not be made yet", ready.item.id)


def settle(outcome: str | Throttled, runtime: Runtime) -> str:
    """What ``deliver`` did; a throttled send slows the fleet's pace and goes back on the
    queue (in the pacer's thread)."""
    if isinstance(outcome, str):
        return outcome
    ready = outcome.ready
    bind_item(ready.item.id)
    return giveback.throttled(ready.item, ready.message, ready.content, ready.entry,
                              outcome.error, runtime)  # fmt: skip


def failed(ready: Ready, exc: Exception, runtime: Runtime) -> str:
    """Record why the claimed item was not sent: a retry later, or errored."""
    item, entry = ready.item, ready.entry
    if isinstance(exc, TransientProviderError):
        if item.method == "email":
            return retry_later(item, entry, exc, runtime)
        return fail(item, entry, f"{exc}; not sent, and SMS has no automatic retry", runtime)
    if isinstance(exc, AmbiguousProviderError):
        return fail(item, entry, ambiguous_result(exc), runtime)
    if isinstance(exc, PermanentProviderError | MissingContent | mime.Unsendable):
        return fail(item, entry, str(exc) + suppression.learn_from_send_error(item, exc, runtime),
                    runtime)
    # The traceback goes to the log only: ``result`` is shown to operators and producers.
    logger.error("send of %s failed", item.id, exc_info=exc)
    text = (f"internal error in the send worker: {type(exc).__name__}: {exc} (the traceback "
            "is in the send function's log)")  # fmt: skip
    result = f"{item.result}\n{text}" if item.result else text
    return fail(item, entry, result, runtime)


# ---- claim -----------------------------------------------------------------------------------


def claim(message: SendMessage, runtime: Runtime) -> QueueItemRecord | str | None:
    """The item, moved to ``sending`` for this message's attempt; None to drop the message;
    ``HELD`` when its producer is held (the item is parked: vdq.results.guard)."""
    now = runtime.clock.now()
    for _ in range(2):  # again once when a hold ended meanwhile
        write = transitions.claim_write(message.item_id, now, runtime)
        held = guard.held_for(runtime, message.priority)  # () but while a producer is held
        try:
            return runtime.store.claim(message.item_id, message.attempt, CLAIM_SOURCES, write,
                                       not_created_by=held)  # fmt: skip
        except Moved as moved:
            current = moved.current
            if not held or current is None or not parkable(message, current, held):
                logger.info("send message dropped: %s", why_dropped(message, current))
                return None
            parked = guard.park(current, message.priority, runtime)
            if parked != guard.NOT_HELD:
                return HELD if parked == guard.PARKED else None
    return None


def parkable(message: SendMessage, current: QueueItemRecord, held: tuple[str, ...]) -> bool:
    """The claim failed only because the item's producer is held."""
    return (current.state in CLAIM_SOURCES and int(current.attempt) == message.attempt
            and current.method == "email" and current.created_by in held)  # fmt: skip


def why_dropped(message: SendMessage, current: QueueItemRecord | None) -> str:
    if current is None:
        return f"queue item {message.item_id} does not exist"
    if current.attempt != message.attempt:
        return (f"message for attempt {message.attempt}, the item is at attempt "
                f"{current.attempt} ({current.state})")  # fmt: skip
    if current.state == State.CANCELLED:
        return f"queue item {current.id} is cancelled"
    return (f"attempt {message.attempt} of {current.id} was claimed before (duplicate "
            f"delivery); the item is {current.state}")  # fmt: skip


# ---- content and dispatch --------------------------------------------------------------------


def read_content(item: QueueItemRecord, runtime: Runtime) -> dict[str, Any]:
    content = runtime.store.get_content(item.content_id)
    if content is None:
        raise MissingContent(f"the content {item.content_id} of this item no longer exists")
    return content


# ---- recording the outcome -------------------------------------------------------------------


def ambiguous_result(exc: ProviderError) -> str:
    return (f"outcome unknown: {exc}. {exc.provider} may have accepted the message; a retry "
            "may send it twice")  # fmt: skip


def retry_delay(retries: int, runtime: Runtime) -> int:
    """Seconds before automatic retry ``retries`` (0-based): 16 s doubling, capped at 600 s."""
    s = runtime.settings
    return min(s.retry_backoff_max_seconds, s.retry_backoff_seconds * 2**retries)


def retry_later(item: QueueItemRecord, entry: HistoryRecord, exc: ProviderError,
                runtime: Runtime) -> str:  # fmt: skip
    retries = int(item.retries or 0)
    limit = runtime.settings.max_retries
    if retries >= limit:
        return fail(item, entry, f"{exc}; gave up after {retries} retries", runtime)
    delay = retry_delay(retries, runtime)
    result = f"{exc}; retry {retries + 1} of {limit} in {delay} s"
    step = Step("delay", actor=ACTOR, attempt=int(item.attempt), retry_delay=delay, result=result)
    metrics.add_metric(name="SendRetries", unit="Count", value=1)
    return DELAYED if record(item, step, entry, runtime) else KEPT


def fail(item: QueueItemRecord, entry: HistoryRecord, result: str, runtime: Runtime) -> str:
    logger.warning("send of %s failed: %s", item.id, result.splitlines()[0] if result else "")
    metrics.add_metric(name="SendErrors", unit="Count", value=1)
    step = Step("error", actor=ACTOR, attempt=int(item.attempt), result=result)
    return ERRORED if record(item, step, entry, runtime) else KEPT


def record(item: QueueItemRecord, step: Step, entry: HistoryRecord, runtime: Runtime) -> bool:
    """Apply ``step`` with the send entry; False when someone moved the item first (the state
    they set is kept, and the send entry and this outcome go to history)."""
    try:
        outcome = transitions.apply(item, step, runtime, history=[entry])
    except InvalidTransition as exc:
        state = exc.state
    else:
        if outcome.kind != "stale":
            return True
        state = outcome.item.state
    logger.info("%s of %s not applied: the item is now %s", step.transition, item.id, state)
    note = history_entry(item.id, runtime.clock.now(), actor=ACTOR, source="server", kind="late",
                         name=step.transition, from_state=state, to_state=state,
                         attempt=int(item.attempt), text=step.result)  # fmt: skip
    runtime.store.append_history([entry, note])
    return False


def record_accepted(item: QueueItemRecord, entry: HistoryRecord, provider_id: str,
                    runtime: Runtime, *, map_provider_id: bool = True) -> str:  # fmt: skip
    """Store the provider's ID (with its mapping) and apply ``await``; when a status update
    moved the item out of ``sending`` first, store only the ID and keep what it set."""
    text = f"accepted by {provider_label(item)} as {provider_id}"
    # The result of an earlier try (a transient error) no longer describes the item.
    step = Step("await", actor=ACTOR, attempt=int(item.attempt), provider_id=provider_id, text=text,
                result=None, map_provider_id=map_provider_id)  # fmt: skip
    try:
        outcome = transitions.apply(item, step, runtime, history=[entry])
        if outcome.kind not in ("stale", "refused"):
            return ACCEPTED
        state = outcome.item.state
    except InvalidTransition as exc:
        state = exc.state
    except ProviderIdTaken as exc:
        return provider_id_taken(item, entry, provider_id, exc, runtime)
    note = history_entry(item.id, runtime.clock.now(), actor=ACTOR, source="server", kind="late",
                         name="await", from_state=state, to_state=state, attempt=int(item.attempt),
                         text=f"{text} after a status update moved the item to {state}; "
                              "state kept")  # fmt: skip
    try:
        stored = runtime.store.store_provider_id(
            item.id, provider_id, [entry, note], attempt=int(item.attempt),
            map_provider_id=map_provider_id,
            mapping_expiration=mapping_expiration(runtime.clock.now(), runtime.settings))
    except ProviderIdTaken as exc:
        return provider_id_taken(item, entry, provider_id, exc, runtime, state=state)
    if not stored:  # the update stored the ID itself (or another): keep it
        runtime.store.append_history([entry, note])
    logger.info("%s of %s stored; the item stays %s", provider_id, item.id, state)
    return KEPT


def provider_id_taken(item: QueueItemRecord, entry: HistoryRecord, provider_id: str,
                      exc: ProviderIdTaken, runtime: Runtime, *,
                      state: str | None = None) -> str:  # fmt: skip
    owner = exc.owner.item_id if exc.owner is not None else None
    if owner == item.id:
        # A status update found the item by its key and stored the ID (and its mapping) first.
        if state is None:
            return record_accepted(item, entry, provider_id, runtime, map_provider_id=False)
        runtime.store.append_history([entry])
        return KEPT
    if owner is None and exc.owner is not None:
        return adopt_orphans(item, entry, provider_id, runtime, state=state)
    logger.error("%s returned %s for %s, but queue item %s stores that ID; state kept",
                 provider_label(item), provider_id, item.id, owner)  # fmt: skip
    note = history_entry(item.id, runtime.clock.now(), actor=ACTOR, source="server", kind="late",
                         name="await", attempt=int(item.attempt),
                         text=f"accepted as {provider_id}, which queue item {owner} stores; "
                              "the ID was not stored")  # fmt: skip
    runtime.store.append_history([entry, note])
    return KEPT


def adopt_orphans(item: QueueItemRecord, entry: HistoryRecord, provider_id: str,
                  runtime: Runtime, *, state: str | None) -> str:  # fmt: skip
    """Events that arrived before any item stored the ID wait on its mapping: store the ID on
    the item, point the mapping at this item, then hand the events to the results code, which
    applies them and clears them (until it does they stay on the mapping: none is lost). The
    ID is stored first: a worker that dies after it leaves an item whose ID finds the mapping
    (the email timeout adopts and applies what waits there); the other way round, it would
    leave an adopted mapping that no item names."""
    if state is None:
        outcome = record_accepted(item, entry, provider_id, runtime, map_provider_id=False)
    else:
        note = history_entry(item.id, runtime.clock.now(), actor=ACTOR, source="server",
                             kind="late", name="await", from_state=state, to_state=state,
                             attempt=int(item.attempt),
                             text=f"accepted as {provider_id}; state kept")  # fmt: skip
        if not runtime.store.store_provider_id(item.id, provider_id, [entry, note],
                                               attempt=int(item.attempt),
                                               map_provider_id=False):  # fmt: skip
            runtime.store.append_history([entry, note])
        outcome = KEPT
    orphans = runtime.store.adopt_orphans(provider_id, item.id, int(item.attempt),
                                          mapping_expiration(runtime.clock.now(), runtime.settings))
    if orphans:
        replay_orphans(item.id, provider_id, orphans, runtime)
    return outcome


def replay_orphans(item_id: str, provider_id: str, orphans: list[dict[str, Any]],
                   runtime: Runtime) -> None:  # fmt: skip
    """Apply the adopted events (the results code owns what an event means); one that fails
    stays on the mapping for a later match."""
    from vdq.results import matching as results

    try:
        results.replay_orphans(item_id, provider_id, orphans, runtime)
    except Exception:
        logger.exception("early events of %s not applied to %s", provider_id, item_id)


def provider_label(item: QueueItemRecord) -> str:
    return "SES" if item.method == "email" else "Twilio"

