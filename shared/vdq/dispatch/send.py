"""The send worker: one send message, one attempt of one queue item, from its claim to the
provider's answer recorded.

**The send message is the attempt's lease.** Nothing else stands behind a claimed item: no
timer, no sweep. SQS deletes the message only once everything it is responsible for is durable
(the item's next state, and the check of an email SES accepted: vdq.results.checks); a worker
that dies leaves its message, which comes back when its visibility runs out. A delivery of the
message that finds its attempt claimed (``sending``) is a duplicate, or its holder died: it
waits, the message handed back until the claim's lease ends (the send function's timeout, after
which no holder is alive, the check's delay, by which an accepted message's check has recorded
it, and five minutes), then errors the item "outcome unknown".

The steps of one message, each with its rules beside it, go down the layers (this module, then
the workflow's transitions, then the store and the providers):

1. ``prepare``: the receiver's suppression (before the claim: nothing is claimed for a receiver
   VDQ does not send to), the invocation's deadline, the claim (which parks instead an email
   of a producer the reputation guard holds: vdq.results.guard), the decision for a message
   whose claim failed (``not_claimed``), the content, the list's unsubscribes and the item's
   turn at the provider's rate (vdq.dispatch.pacing);
2. ``deliver``: the provider call and the record of its answer (in a sending thread);
3. ``settle``: what only the pacer's thread does (a throttling answer slows the pace).

**The provider's acceptance is not written by the worker** when a result will name the item:
an email whose events carry its key (vdq.results.tracking), an SMS whose status callbacks come.
The item stays ``sending`` until its first result stores the provider ID with the ``await``
entry, or the batch's check does (vdq.results.checks); only when the check cannot be
published does the worker write the acceptance itself (``checks.look``), before it returns.
An untagged email (its events find it by the ID's mapping) and a polled SMS (no result comes
by itself) get their acceptance written at once (vdq.dispatch.record).

Requests on the happy path of an email whose content rides in the message: the suppression
check (GetItem), the claim (UpdateItem: it appends its ``send`` history entry and returns the
item, or on failure the item as it was), and the batch's check (an SQS SendMessage for up to
ten sends). Files add one BatchGetItem of their metadata and one S3 read each.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from vdq.core import resources
from vdq.core.clock import iso, parse_iso
from vdq.core.errors import InvalidTransition
from vdq.core.observability import bind_item, logger, metrics
from vdq.dispatch import giveback, pacing, record
from vdq.dispatch.outbound import MissingContent, send_email, send_sms
from vdq.providers import ThrottledProviderError
from vdq.results import checks, guard, suppression, tracking, unsubscribe
from vdq.results.unsubscribe import DEFAULT_LIST
from vdq.store import Moved, QueueItemRecord, StateWrite
from vdq.workflow import transitions
from vdq.workflow.sendqueue import SendMessage
from vdq.workflow.table import DONE_STATES, State
from vdq.workflow.transitions import Step, history_entry

if TYPE_CHECKING:
    from vdq.runtime import Runtime

ACTOR = "worker"

# What ``process`` did with a message.
DROPPED = "dropped"  # claim failed: older attempt, cancelled, done, errored, unknown item
ACCEPTED = record.ACCEPTED  # the provider took it; the item awaits its delivery status
DELAYED = record.DELAYED  # transient email error: a new attempt is published with a delay
ERRORED = record.ERRORED  # the item moved to errored (also: its lease ended, outcome unknown)
KEPT = record.KEPT  # a status update or an operator moved the item first; its state was kept
SUPPRESSED = "suppressed"  # the receiver is suppressed: the item was cancelled, nothing sent
HELD = "held"  # its producer is held (vdq.results.guard): parked, its message done with
PACED = pacing.PACED  # throttled, or its turn at the provider's rate is far: back on the queue
WAITING = "waiting"  # its attempt is claimed, within its lease: the message comes back later

LEASE_RESULT = (
    "outcome unknown: the send attempt did not finish within its lease of {s} s; "
    "the provider may have accepted the message, so a retry may send it twice"
)


def process_body(body: str, runtime: Runtime, *, upcoming: int = 1) -> str:
    """Handle one SQS send message body. Raises only when nothing could be recorded.

    ``upcoming``: this message and those after it in the batch (the pacer reserves for them)."""
    return process(SendMessage.parse(body), runtime, upcoming=upcoming)


def process(message: SendMessage, runtime: Runtime, *, upcoming: int = 1) -> str:
    """One message alone, start to end (a batch of one: vdq.dispatch.sendbatch does the same
    for a batch, and hands a waiting message back to SQS)."""
    ready = prepare(message, runtime, upcoming=upcoming)
    if isinstance(ready, Wait):
        return WAITING
    if isinstance(ready, str):
        return ready
    outcome = settle(deliver(ready, runtime), runtime)
    if ready.sent is not None and not checks.publish([ready.sent], runtime) and checks.look(
            [ready.sent], runtime):  # fmt: skip
        raise RuntimeError(f"the check of {ready.item.id} was neither published nor done")
    return outcome


@dataclass
class Ready:
    """A claimed item whose turn at the provider's rate has come: to be sent now. ``sent`` is
    set when the provider took it (the batch's check names it)."""

    message: SendMessage
    item: QueueItemRecord
    content: dict[str, Any]
    sent: checks.Sent | None = field(default=None)


@dataclass(frozen=True)
class Wait:
    """The message is not to be handled yet: SQS hands it back in ``seconds``."""

    seconds: int


@dataclass(frozen=True)
class Throttled:
    """The provider refused a send for its rate: ``settle`` slows the pacer and gives it back
    (in the thread that owns the pacer: the send function's main thread)."""

    ready: Ready
    error: ThrottledProviderError


# ---- 1. prepare: everything before the provider call -----------------------------------------


def prepare(message: SendMessage, runtime: Runtime, *, upcoming: int = 1,
            deadline: float | None = None) -> Ready | Wait | str:  # fmt: skip
    """The suppression check, the claim, the content and the wait for the item's turn at the
    provider's rate. Returns the item ready to send now (its provider's client made: a sending
    thread only uses it), a ``Wait``, or what was done instead of sending (``DROPPED``,
    ``PACED``, ...). ``deadline``: the invocation's (vdq.dispatch.pacing.reserve_batch)."""
    bind_item(message.item_id)
    # A suppressed receiver (or one unsubscribed from the message's list): the item is
    # cancelled, nothing claimed (vdq.results.suppression).
    checked = list_of(message)
    if suppression.refuse(message.item_id, message.attempt, message.receiver, runtime, checked):
        return SUPPRESSED
    # No time left in the invocation to send and record: the message goes back as it is.
    if deadline is not None and runtime.clock.now().timestamp() > deadline:
        return giveback.unclaimed(message, runtime)
    now = runtime.clock.now()
    try:
        item = claim(message, now, runtime)
    except Moved as moved:
        return not_claimed(message, moved.current, now, runtime)
    if isinstance(item, str):
        return item  # parked: its producer is held
    content: dict[str, Any] = {}
    listed: str | None = None
    try:
        content = message.content or read_content(item, runtime)
        # The list its link leaves: an item stored before lists names it in no message, and
        # its unsubscribes are read now (the check before the claim did not know the list).
        listed = unsubscribe.list_mail(item, content)
        if listed not in (checked, item.list_name):
            suppression.check_list(item, listed, checked, runtime)
        waited = pacing.gate(item, content, runtime, upcoming)  # its turn at the provider's rate
        if waited > suppression.RECHECK_AFTER_WAIT_SECONDS:
            suppression.check_again(item, waited, runtime, listed)
    except pacing.NoSlot as no_slot:
        return giveback.give_back(item, message, no_slot.delay, runtime)
    except suppression.SuppressedMeanwhile as exc:
        # Back on the queue at once, naming its receiver and list: the next delivery's check
        # cancels it, as for any item to a suppressed receiver (a claimed item has no
        # transition to cancelled).
        named = replace(message, receiver=item.receiver, list_name=listed)
        giveback.give_back(item, named, 0, runtime, name="suppressed", result=str(exc),
                           counted=False)  # fmt: skip
        return SUPPRESSED
    except Exception as exc:
        return record.failed(item, exc, runtime)
    ready = Ready(message, item, content)
    warm(ready, runtime)
    return ready


def list_of(message: SendMessage) -> str | None:
    """The list whose unsubscribes stop the message's item. A message published before
    messages named their list is list mail of the default list when it is bulk or its inline
    content asked for the headers, as its headers say (one without its content is checked
    against the entry for all mail only)."""
    if message.list_name is not None or message.receiver is None:
        return message.list_name
    asked = bool((message.content or {}).get("list_unsubscribe"))
    return DEFAULT_LIST if message.priority == "bulk" or asked else None


def claim(message: SendMessage, now: datetime,
          runtime: Runtime) -> QueueItemRecord | str:  # fmt: skip
    """The item, moved to ``sending`` for the message's attempt: the claim, which the send
    message then holds as its lease; ``HELD`` when its producer is held (the item is parked,
    its message done with: vdq.results.guard).

    One UpdateItem, no read first: conditional on the state the attempt waits in (the message
    says ``delayed`` after an automatic retry, else queued) at the message's attempt, and,
    while a producer is held, on the item not being that producer's email; it sets
    ``claimed_at``, removes any timer and any park mark (a move ends it) and appends the
    ``send`` entry. A message that named the other state (published before messages said)
    claims once more with it. A claim refused only for its producer's hold parks the item
    (again once, holds read afresh, when the hold ended meanwhile). ``Moved`` carries the
    item as it was (DynamoDB returns it with the failure), for ``not_claimed``."""
    sources = (State.DELAYED, State.QUEUED) if message.delayed else (State.QUEUED, State.DELAYED)
    write = StateWrite(set={"state": State.SENDING.value, "updated_at": iso(now),
                            "claimed_at": iso(now), "timer_pk": None, "timer_sk": None,
                            "held": None})  # fmt: skip
    # The entry's key is this claim's own (its time and a random part): the store knows its
    # claim by it when botocore sent the write again after a lost answer, and two claims made
    # at the same microsecond never take each other's for their own.
    key = f"send{message.attempt}-{os.urandom(4).hex()}"
    for _ in range(2):  # again once when a hold ended meanwhile
        held = guard.held_for(runtime, message.priority)  # () but while a producer is held
        for source in sources:
            entry = history_entry(message.item_id, now, actor=ACTOR, source="server",
                                  kind="transition", name="send", from_state=source.value,
                                  to_state=State.SENDING.value, attempt=message.attempt,
                                  key=key)  # fmt: skip
            try:
                return runtime.store.claim(message.item_id, message.attempt, source.value,
                                           write, entry, message.queued_at,
                                           not_created_by=held)  # fmt: skip
            except Moved as moved:
                old = moved.current
                if old is None or int(old.attempt) != message.attempt:
                    raise
                if old.method == "email" and old.created_by in held and old.state in (
                        State.QUEUED.value, State.DELAYED.value):  # fmt: skip
                    break  # refused for its producer's hold: parked below
                if source is sources[1] or old.state != sources[1].value:
                    raise
        assert old is not None  # refused for its producer's hold: the item was there
        parked = guard.park(old, message.priority, runtime)
        if parked == guard.PARKED:
            return HELD
        if parked == guard.MOVED:
            break
    raise Moved(old)  # it moved on first (or its hold flickered): the message is done with


def not_claimed(message: SendMessage, item: QueueItemRecord | None, now: datetime,
                runtime: Runtime) -> Wait | str:  # fmt: skip
    """A message whose claim failed, decided from the item as it was (no read):

    - no item, another attempt, or this attempt cancelled, done or errored: the message has
      nothing left to do (an older attempt's, a duplicate's, one whose item moved on): drop;
    - this attempt ``sending``: its claim's lease (``lease``);
    - this attempt ``awaiting``, an email without a timer: its holder recorded SES's answer
      and died before the batch's check was published; the timeout's timer is written here
      (vdq.results.checks' rule), then drop. With a timer, or an SMS (its acceptance writes
      its own): drop."""
    if item is not None and int(item.attempt) == message.attempt:
        if item.state == State.SENDING.value:
            return lease(message, item, now, runtime)
        if item.state == State.AWAITING.value:
            checks.decide(item, checks.Sent(item.id, message.attempt, item.provider_id or "",
                                            iso(now)), runtime, strong=True)  # fmt: skip
    metrics.add_metric(name="SendsDropped", unit="Count", value=1)
    logger.info("send message dropped: %s", why_dropped(message, item))
    return DROPPED


def lease(message: SendMessage, item: QueueItemRecord, now: datetime,
          runtime: Runtime) -> Wait | str:  # fmt: skip
    """A delivery that finds its attempt ``sending``: a duplicate while the holder works, or
    the holder died. Until ``claimed_at`` plus the lease (``Settings.lease_seconds``: the send
    function's timeout, after which no holder is alive, the check's delay and five minutes) it
    waits: the message comes back then (a receive of its ``maxReceiveCount``). An accepted
    message's check (published by its holder before it ended) or first result has moved the
    item on by then. After it, the item is errored "outcome unknown", as the holder may have
    reached the provider; a provider event still finds it by its key (a late result in
    history)."""
    since = item.claimed_at or item.updated_at
    seconds = runtime.settings.lease_seconds
    until = parse_iso(since) + timedelta(seconds=seconds)
    if now < until:
        logger.info("attempt %d of %s is claimed since %s: back in %.0f s", message.attempt,
                    item.id, since, (until - now).total_seconds())  # fmt: skip
        return Wait(max(1, math.ceil((until - now).total_seconds())))
    step = Step("error", actor=ACTOR, attempt=message.attempt,
                result=LEASE_RESULT.format(s=seconds),
                expect=frozenset({State.SENDING.value}))  # fmt: skip
    try:
        outcome = transitions.apply(item, step, runtime,
                                    history=transitions.missing_send_entry(item))  # fmt: skip
    except InvalidTransition:
        return DROPPED  # its holder recorded first
    if outcome.kind == "moved":
        metrics.add_metric(name=resources.METRIC_LEASES_EXPIRED, unit="Count", value=1)
        logger.warning("%s errored: attempt %d outlived its lease", item.id, message.attempt)
        return ERRORED
    return DROPPED


def why_dropped(message: SendMessage, current: QueueItemRecord | None) -> str:
    if current is None:
        return f"queue item {message.item_id} does not exist"
    if current.attempt != message.attempt:
        return (f"message for attempt {message.attempt}, the item is at attempt "
                f"{current.attempt} ({current.state})")  # fmt: skip
    if current.state == State.CANCELLED:
        return f"queue item {current.id} is cancelled"
    if current.state in DONE_STATES or current.state == State.ERRORED:
        return f"attempt {message.attempt} of {current.id} is over: the item is {current.state}"
    return (f"attempt {message.attempt} of {current.id} was claimed before (duplicate "
            f"delivery); the item is {current.state}")  # fmt: skip


def read_content(item: QueueItemRecord, runtime: Runtime) -> dict[str, Any]:
    content = runtime.store.get_content(item.content_id)
    if content is None:
        raise MissingContent(f"the content {item.content_id} of this item no longer exists")
    return content


# ---- 2. deliver: the provider call and the record of its answer -------------------------------


def deliver(ready: Ready, runtime: Runtime) -> str | Throttled:
    """The provider call and the record of its outcome. Safe to run in a thread of its own
    beside other sends: it uses no pacer state (a throttling answer is returned for ``settle``)
    and its store and provider clients are thread-safe. Raises only when nothing could be
    recorded (the message then comes back, and its lease decides)."""
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
        return record.failed(item, exc, runtime)
    deferred = tracking.defers_acceptance(item, runtime)
    if item.method == "email" or deferred:  # the batch's check looks at it again
        ready.sent = checks.Sent(item.id, int(item.attempt), provider_id,
                                 iso(runtime.clock.now()))  # fmt: skip
    if deferred:
        # Nothing is written: the item stays ``sending`` until its first result (which names
        # it and its attempt) stores the ID with the acceptance, or the check does.
        logger.debug("%s accepted %s as %s", record.provider_label(item), item.id, provider_id)
        return ACCEPTED
    try:
        mapped = tracking.maps_provider_id(item, runtime)
        return record.accepted(item, provider_id, runtime, map_provider_id=mapped)
    except Exception:
        # The message comes back and its lease errors the item; the ID in the log lets an
        # operator match it, and a provider event still finds the item by its key.
        logger.exception("%s accepted %s as %s, but the outcome was not recorded",
                         record.provider_label(item), item.id, provider_id)  # fmt: skip
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


# ---- 3. settle: what the pacer's thread does with an outcome ----------------------------------


def settle(outcome: str | Throttled, runtime: Runtime) -> str:
    """What ``deliver`` did; a throttled send slows the fleet's pace and goes back on the
    queue (in the pacer's thread)."""
    if isinstance(outcome, str):
        return outcome
    ready = outcome.ready
    bind_item(ready.item.id)
    return giveback.throttled(ready.item, ready.message, ready.content, outcome.error, runtime)
