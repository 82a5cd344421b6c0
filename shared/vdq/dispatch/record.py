"""What a send's outcome writes: SES's or Twilio's acceptance (``accepted``: the provider ID,
with its mapping where events cannot name their item, and ``await``), or why nothing was sent
(``failed``: an automatic retry of a transient email error, or errored). Each is one write of
the item as its claim left it, conditional on it; when a status update or an operator moved
the item first, what they set is kept and this outcome goes to history (``late``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vdq.core import resources
from vdq.core.errors import InvalidTransition
from vdq.core.observability import logger, metrics
from vdq.dispatch import mime
from vdq.dispatch.outbound import MissingContent
from vdq.providers import (
    AmbiguousProviderError,
    PermanentProviderError,
    ProviderError,
    TransientProviderError,
)
from vdq.results import suppression
from vdq.store import ProviderIdTaken, QueueItemRecord
from vdq.workflow import transitions
from vdq.workflow.retention import mapping_expiration
from vdq.workflow.table import State
from vdq.workflow.transitions import Step, history_entry

if TYPE_CHECKING:
    from vdq.runtime import Runtime

ACTOR = "worker"
# What was recorded (vdq.dispatch.send's outcomes).
ACCEPTED = "accepted"
DELAYED = "delayed"
ERRORED = "errored"
KEPT = "kept"



def failed(item: QueueItemRecord, exc: Exception, runtime: Runtime) -> str:
    """Record why the claimed item was not sent: a retry later, or errored."""
    if isinstance(exc, TransientProviderError):
        if item.method == "email":
            return retry_later(item, exc, runtime)
        return fail(item, f"{exc}; not sent, and SMS has no automatic retry", runtime)
    if isinstance(exc, AmbiguousProviderError):
        return fail(item, ambiguous_result(exc), runtime)
    if isinstance(exc, PermanentProviderError | MissingContent | mime.Unsendable):
        return fail(item, str(exc) + suppression.learn_from_send_error(item, exc, runtime),
                    runtime)
    # The traceback goes to the log only: ``result`` is shown to operators and producers.
    logger.error("send of %s failed", item.id, exc_info=exc)
    text = (f"internal error in the send worker: {type(exc).__name__}: {exc} (the traceback "
            "is in the send function's log)")  # fmt: skip
    result = f"{item.result}\n{text}" if item.result else text
    return fail(item, result, runtime)


def ambiguous_result(exc: ProviderError) -> str:
    return (f"outcome unknown: {exc}. {exc.provider} may have accepted the message; a retry "
            "may send it twice")  # fmt: skip


# The worker's own failure applies only while its claim holds the item (``sending``): one a
# provider result moved on meanwhile (awaiting, done) proves the provider took the message (an
# answer lost, the SDK's retry refused), so a delay would send it again under a new attempt,
# and keep the old attempt's ID where the new one's belongs. Recorded as late instead.
WORKER_SOURCES = frozenset({State.SENDING.value})


def retry_delay(retries: int, runtime: Runtime) -> int:
    """Seconds before automatic retry ``retries`` (0-based): 16 s doubling, capped at 600 s."""
    s = runtime.settings
    return min(s.retry_backoff_max_seconds, s.retry_backoff_seconds * 2**retries)


def retry_later(item: QueueItemRecord, exc: ProviderError, runtime: Runtime) -> str:
    retries = int(item.retries or 0)
    limit = runtime.settings.max_retries
    if retries >= limit:
        return fail(item, f"{exc}; gave up after {retries} retries", runtime)
    delay = retry_delay(retries, runtime)
    result = f"{exc}; retry {retries + 1} of {limit} in {delay} s"
    step = Step("delay", actor=ACTOR, attempt=int(item.attempt), retry_delay=delay, result=result,
                expect=WORKER_SOURCES)  # fmt: skip
    metrics.add_metric(name=resources.METRIC_SEND_RETRIES, unit="Count", value=1)
    return DELAYED if write(item, step, runtime) else KEPT


def fail(item: QueueItemRecord, result: str, runtime: Runtime) -> str:
    logger.warning("send of %s failed: %s", item.id, result.splitlines()[0] if result else "")
    metrics.add_metric(name=resources.METRIC_SEND_ERRORS, unit="Count", value=1)
    step = Step("error", actor=ACTOR, attempt=int(item.attempt), result=result,
                expect=WORKER_SOURCES)  # fmt: skip
    return ERRORED if write(item, step, runtime) else KEPT


def write(item: QueueItemRecord, step: Step, runtime: Runtime) -> bool:
    """Apply ``step``; False when someone moved the item first (the state they set is kept,
    and this outcome goes to history)."""
    try:
        outcome = transitions.apply(item, step, runtime)
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
    runtime.store.append_history([note])
    return False


def accepted(item: QueueItemRecord, provider_id: str, runtime: Runtime, *,
                    map_provider_id: bool = True) -> str:  # fmt: skip
    """Store the provider's ID (with its mapping) and apply ``await``; when a status update
    moved the item out of ``sending`` first, store only the ID and keep what it set."""
    text = f"accepted by {provider_label(item)} as {provider_id}"
    # The result of an earlier try (a transient error) no longer describes the item.
    step = Step("await", actor=ACTOR, attempt=int(item.attempt), provider_id=provider_id, text=text,
                result=None, map_provider_id=map_provider_id)  # fmt: skip
    try:
        outcome = transitions.apply(item, step, runtime)
        if outcome.kind not in ("stale", "refused"):
            return ACCEPTED
        state = outcome.item.state
    except InvalidTransition as exc:
        state = exc.state
    except ProviderIdTaken as exc:
        return provider_id_taken(item, provider_id, exc, runtime)
    note = history_entry(item.id, runtime.clock.now(), actor=ACTOR, source="server", kind="late",
                         name="await", from_state=state, to_state=state, attempt=int(item.attempt),
                         text=f"{text} after a status update moved the item to {state}; "
                              "state kept")  # fmt: skip
    try:
        stored = runtime.store.store_provider_id(
            item.id, provider_id, [note], attempt=int(item.attempt),
            map_provider_id=map_provider_id,
            mapping_expiration=mapping_expiration(runtime.clock.now(), runtime.settings))
    except ProviderIdTaken as exc:
        return provider_id_taken(item, provider_id, exc, runtime, state=state)
    if not stored:  # the update stored the ID itself (or another): keep it
        runtime.store.append_history([note])
    logger.info("%s of %s stored; the item stays %s", provider_id, item.id, state)
    return KEPT


def provider_id_taken(item: QueueItemRecord, provider_id: str, exc: ProviderIdTaken,
                      runtime: Runtime, *, state: str | None = None) -> str:  # fmt: skip
    owner = exc.owner.item_id if exc.owner is not None else None
    if owner == item.id:
        # A status update found the item by its key and stored the ID (and its mapping) first.
        if state is None:
            return accepted(item, provider_id, runtime, map_provider_id=False)
        return KEPT
    if owner is None and exc.owner is not None:
        return adopt_orphans(item, provider_id, runtime, state=state)
    logger.error("%s returned %s for %s, but queue item %s stores that ID; state kept",
                 provider_label(item), provider_id, item.id, owner)  # fmt: skip
    note = history_entry(item.id, runtime.clock.now(), actor=ACTOR, source="server", kind="late",
                         name="await", attempt=int(item.attempt),
                         text=f"accepted as {provider_id}, which queue item {owner} stores; "
                              "the ID was not stored")  # fmt: skip
    runtime.store.append_history([note])
    return KEPT


def adopt_orphans(item: QueueItemRecord, provider_id: str, runtime: Runtime, *,
                  state: str | None) -> str:  # fmt: skip
    """Events that arrived before any item stored the ID wait on its mapping: store the ID on
    the item, point the mapping at this item, then hand the events to the results code, which
    applies them and clears them (until it does they stay on the mapping: none is lost). The
    ID is stored first: a worker that dies after it leaves an item whose ID finds the mapping
    (the email timeout adopts and applies what waits there); the other way round, it would
    leave an adopted mapping that no item names."""
    if state is None:
        outcome = accepted(item, provider_id, runtime, map_provider_id=False)
    else:
        note = history_entry(item.id, runtime.clock.now(), actor=ACTOR, source="server",
                             kind="late", name="await", from_state=state, to_state=state,
                             attempt=int(item.attempt),
                             text=f"accepted as {provider_id}; state kept")  # fmt: skip
        if not runtime.store.store_provider_id(item.id, provider_id, [note],
                                               attempt=int(item.attempt),
                                               map_provider_id=False):  # fmt: skip
            runtime.store.append_history([note])
        outcome = KEPT
    orphans = runtime.store.adopt_orphans(provider_id, item.id, int(item.attempt),
                                          mapping_expiration(runtime.clock.now(), runtime.settings))
    if orphans:
        replay_orphans(item.id, provider_id, orphans, runtime, attempt=int(item.attempt))
    return outcome


def replay_orphans(item_id: str, provider_id: str, orphans: list[dict[str, Any]],
                   runtime: Runtime, *, attempt: int) -> None:  # fmt: skip
    """Apply the adopted events, as results of ``attempt`` (the results code owns what an
    event means); one that fails stays on the mapping for a later match."""
    from vdq.results import matching as results

    try:
        results.replay_orphans(item_id, provider_id, orphans, runtime, attempt=attempt)
    except Exception:
        logger.exception("early events of %s not applied to %s", provider_id, item_id)


def provider_label(item: QueueItemRecord) -> str:
    return "SES" if item.method == "email" else "Twilio"

