"""What the schedules run: SMS polling and timeouts, the lease and re-publish sweeps, the purge.

Each check reads the timers index (sparse, sharded, keys only) for timers that passed, reads
each item strongly consistent and acts only if the item is still as the timer says: the index
is eventually consistent, so an entry can be stale. One item's failure (a Twilio error, a lost
race) is logged and the run goes on.

- SMS (only with a Twilio account: ``TWILIO_ACCOUNT_SID``, or the secret of a deploy, which
  names it): awaiting SMS carry an ``await`` timer keyed on the claim that sent them, so an SMS
  sent long after it was queued (scheduled, paced, retried) has its whole window. The timeout
  check fetches the status one last time and applies ``timeout`` when it is still not final.
  Polling mode (no ``TWILIO_WEBHOOK_URL``) also fetches each awaiting SMS by its SID, oldest
  first, at most ``VDQ_SMS_POLL_BATCH`` a run. The secret is read only when an SMS is due. A
  fetched status with Twilio's opt-out error suppresses the number, as a callback does.
- Dead letters: a send message SQS moved to its lane's dead-letter queue (its delivery failed
  ``MAX_RECEIVE_COUNT`` times) is the last word of its attempt: an item still waiting for that
  attempt (queued, delayed) is errored with why; one still ``sending`` past its claim's lease
  is errored "outcome unknown" (its holder may have reached the provider; within the lease the
  message waits for a later run: an accepted message's check or first result records it
  first); one awaiting without a timer gets its timeout's. A check dead in the results
  queue's is done here (vdq.results.checks). The message is deleted once handled (every write
  conditional: a repeat changes nothing).
- Lease timers of items claimed by a release before the send message held the lease: a
  ``sending`` item whose lease passed moves to ``errored`` (outcome unknown); an email still
  ``awaiting`` moves its timer to ``mailwait``, keyed on its claim, for the email timeout.
- Strays: an item enqueued for now is written without a publish timer; one still queued
  without any a grace period later is given it (vdq.schedules.strays).
- Re-publish sweep: a ``queued``/``delayed`` item whose publish timer passed (its send message
  was never claimed) is published again, after pushing the timer on conditionally, so two
  sweeps never publish the same item twice. Not while the item's lane has a backlog: then an
  unclaimed item is most likely still waiting in it, and a copy would only lengthen the backlog
  (every grace period, for every waiting item). A lost publish goes out once the lane drains.
- Scheduled sends: due-time buckets of long waits are published ahead of their time, delayed
  until it (vdq.intake.scheduling).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from vdq.core import resources
from vdq.core.clock import iso, parse_iso
from vdq.core.errors import InvalidTransition, VdqError
from vdq.core.observability import logger, metrics
from vdq.schedules import strays
from vdq.store import QueueItemRecord
from vdq.workflow import unpublished
from vdq.workflow.lanes import PRIORITIES, priority_of
from vdq.workflow.table import State
from vdq.workflow.transitions import (
    TIMER_AWAIT,
    TIMER_EMAIL_AWAIT,
    TIMER_LEASE,
    TIMER_PUBLISH,
    Step,
    apply,
    email_wait_since,
    missing_send_entry,
    publish_send,
    shard_timer_partition,
    sms_wait_since,
    timer_partition,
)

if TYPE_CHECKING:  # the results module (and twilio with it) loads only for the SMS checks
    from vdq.results import matching as results
    from vdq.runtime import Runtime

ACTOR = "schedule"
SWEEP_BATCH = 200  # items per timer kind per run
# Pages of passed lease timers a run goes through: awaiting emails move on (one write each),
# so a run reads the next page behind them, up to this many (a sending item is never hidden
# behind more than LEASE_PAGES x SWEEP_BATCH awaiting emails a minute).
LEASE_PAGES = 10
# Pages of passed email timeouts a run goes through (each a transaction and a look for orphan
# events): 1,000 a minute, so that lost SES events at volume do not outgrow the sweep.
EMAIL_TIMEOUT_PAGES = 5
LEASE_RESULT = (
    "outcome unknown: the send attempt did not finish within its lease of {s} s; "
    "the provider may have accepted the message, so a retry may send it twice"
)
TIMEOUT_RESULT = "no final status from Twilio within {h:g} hours of sending (last status: {last})"
EMAIL_TIMEOUT_RESULT = (
    "no final event from SES within {h:g} hours of sending the message (its events may be "
    "lost: check the configuration set's event destination); delivery is not confirmed"
)

# Tasks by name; a plain EventBridge "Scheduled Event" without one runs MINUTE.
MINUTE = ("sms", "sweep")


@dataclass
class Report:
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n


def run(tasks: tuple[str, ...] | list[str], runtime: Runtime) -> dict[str, int]:
    report = Report()
    for task in tasks:
        if task == "sms":
            sms_checks(runtime, report)
        elif task == "sweep":
            release_scheduled(runtime, report)
            lease_sweep(runtime, report)
            stray_sweep(runtime, report)  # before the re-publish sweep sends what it arms
            republish_sweep(runtime, report)
            email_timeouts(runtime, report)
            held_items(runtime, report)
            dead_letters(runtime, report)
            watch_more(runtime, report)
        elif task == "purge":
            purge(runtime, report)
        else:
            raise VdqError(f"unknown schedule task {task!r}")
    if any(report.counts.values()):  # a run that found nothing to do is every idle minute's
        logger.info("schedule %s: %s", ",".join(tasks), report.counts)
    return report.counts


def due(kind: str, before: str, runtime: Runtime, limit: int,
        lane: str | None = None) -> list[str]:  # fmt: skip
    """Ids of items whose ``kind`` timer (in ``lane``: publish timers) is below ``before``,
    oldest first, across shards."""
    return [item_id for item_id, _ in due_rows(kind, before, runtime, limit, lane)]


def due_rows(kind: str, before: str, runtime: Runtime, limit: int, lane: str | None = None,
             after: str | None = None) -> list[tuple[str, str]]:  # fmt: skip
    """(id, timer key) of the ``limit`` oldest ``kind`` timers below ``before`` (and past the
    key ``after``: a cursor), across shards. Every timer of those shards between ``after``
    and the last key returned is among them."""
    store, shards = runtime.store, runtime.settings.index_shards
    rows = []
    for k in range(shards):
        rows.extend(store.query_index(resources.TIMERS_INDEX,
                                      shard_timer_partition(kind, k, lane), below=before,
                                      start_after=after, limit=limit))  # fmt: skip
    return heapq.nsmallest(limit, rows, key=lambda r: r[1])


def _timer_due(item: QueueItemRecord, kind: str, before: str, runtime: Runtime) -> bool:
    """The item (read consistently) still has a ``kind`` timer below ``before`` (a publish
    timer in its lane's partition, or the shared one it had before lanes had their own). In
    any of the kind's shards: a timer written before VDQ_INDEX_SHARDS was raised (as
    vdq:peakSendRate raises it) is in its shard of the count then, which ``due_rows`` reads."""
    lanes = {None, priority_of(item)}
    expected = {shard_timer_partition(kind, k, lane)
                for k in range(runtime.settings.index_shards) for lane in lanes}  # fmt: skip
    return item.timer_pk in expected and (item.timer_sk or "") < before


# ---- SMS -------------------------------------------------------------------------------------


def sms_checks(runtime: Runtime, report: Report) -> None:
    s = runtime.settings
    if not s.sms_checks_enabled:
        return
    from vdq.providers.twilio import get_twilio

    twilio = get_twilio(runtime)
    now = runtime.clock.now()
    window_start = iso(now - timedelta(hours=s.twilio_sms_timeout_hours))
    done: set[str] = set()  # timed out (or moved on): not polled again this run

    def timeout(item_id: str) -> None:
        if timeout_item(item_id, twilio, window_start, runtime, report):
            done.add(item_id)

    for item_id in due(TIMER_AWAIT, window_start, runtime, s.sms_poll_batch):
        _guard(report, item_id, lambda i=item_id: timeout(i))
    if s.twilio_polling:
        for item_id in due(TIMER_AWAIT, iso(now), runtime, s.sms_poll_batch):
            if item_id not in done:
                _guard(report, item_id, lambda i=item_id: poll_item(i, twilio, runtime, report))


def _guard(report: Report, item_id: str, work: Any) -> None:
    try:
        work()
    except Exception:
        report.add("failed")
        logger.exception("schedule step for %s failed; the next run tries again", item_id)


def _fetch(item: QueueItemRecord, twilio: Any) -> results.ProviderUpdate:
    from vdq.results import matching as results

    status = twilio.fetch(item.provider_id)
    return results.twilio_update(item.provider_id or "", status.status, status.error_code,
                                 status.error_message, item_hint=item.id)  # fmt: skip


def poll_item(item_id: str, twilio: Any, runtime: Runtime, report: Report) -> None:
    from vdq.results import matching as results

    item = runtime.store.get_item(item_id)
    if item is None or item.state != State.AWAITING.value or not item.provider_id:
        return
    update = _fetch(item, twilio)
    report.add("polled")
    if results.TRANSITION_FOR.get(update.status) not in ("succeed", "error"):
        return  # still in flight: nothing new to record on an awaiting item
    report.add(f"poll_{results.apply_update(item, update, runtime)}")


def timeout_item(item_id: str, twilio: Any, window_start: str, runtime: Runtime,
                 report: Report) -> bool:  # fmt: skip
    """The last fetch and the timeout of an SMS whose window passed; False when it has not
    (the item needs no more this run)."""
    from vdq.results import matching as results

    item = runtime.store.get_item(item_id)
    if item is None or item.state != State.AWAITING.value:
        return True
    since = sms_wait_since(item)
    if since >= window_start:
        rekey_sms_timer(item, since, window_start, runtime, report)
        return False
    last = "unknown"
    if item.provider_id:
        try:
            update = _fetch(item, twilio)
        except Exception as exc:  # the window passed either way; say why it is unconfirmed
            logger.warning("last status fetch of %s failed: %s", item.id, exc)
            last = f"unknown, the last fetch failed: {exc}"
        else:
            last = update.name
            if results.TRANSITION_FOR.get(update.status) in ("succeed", "error"):
                report.add(f"final_{results.apply_update(item, update, runtime)}")
                return True
    hours = runtime.settings.twilio_sms_timeout_hours
    step = Step("timeout", actor=ACTOR, source="schedule", attempt=int(item.attempt),
                result=TIMEOUT_RESULT.format(h=hours, last=last),
                expect=frozenset({State.AWAITING.value}))  # fmt: skip
    try:
        outcome = apply(item, step, runtime)
    except InvalidTransition:
        return True  # moved on meanwhile
    report.add(f"timeout_{outcome.kind}")
    return True


def rekey_sms_timer(item: QueueItemRecord, since: str, window_start: str, runtime: Runtime,
                    report: Report) -> None:  # fmt: skip
    """An awaiting SMS whose timer passed before its window: the release before keyed the timer
    on the queueing. It moves to the claim (conditional on the item and timer as read), so the
    check does not read the item again every run until its window passes."""
    if not _timer_due(item, TIMER_AWAIT, window_start, runtime):
        return
    partition = timer_partition(TIMER_AWAIT, item.id, runtime.settings.index_shards,
                                priority_of(item))  # fmt: skip
    if runtime.store.move_timer(item, partition, f"{since}#{item.id}"):
        report.add("sms_timers_moved")


# ---- email timeout ----------------------------------------------------------------------------


def email_timeouts(runtime: Runtime, report: Report) -> None:
    """Awaiting emails whose window (from the claim that sent them (await_email), or
    from SES's acceptance for one that awaited before this) passed with no final event."""
    hours = runtime.settings.email_timeout_hours
    window_start = iso(runtime.clock.now() - timedelta(hours=hours))
    sweep_pages(TIMER_EMAIL_AWAIT, window_start, EMAIL_TIMEOUT_PAGES, runtime, report,
                lambda i: timeout_email(i, window_start, runtime, report))  # fmt: skip


def timeout_email(item_id: str, window_start: str, runtime: Runtime, report: Report) -> None:
    item = runtime.store.get_item(item_id)
    if item is None or item.state != State.AWAITING.value:
        return
    if not _timer_due(item, TIMER_EMAIL_AWAIT, window_start, runtime):
        return
    from vdq.results import matching as results

    if results.replay_waiting_orphans(item, runtime):
        report.add("email_orphans_replayed")
        item = runtime.store.get_item(item_id)
        if item is None or item.state != State.AWAITING.value:
            return
    hours = runtime.settings.email_timeout_hours
    step = Step("timeout", actor=ACTOR, source="schedule", attempt=int(item.attempt),
                result=EMAIL_TIMEOUT_RESULT.format(h=hours),
                expect=frozenset({State.AWAITING.value}))  # fmt: skip
    try:
        outcome = apply(item, step, runtime)
    except InvalidTransition:
        return  # a final event came first
    report.add(f"email_timeout_{outcome.kind}")


# ---- sweeps ----------------------------------------------------------------------------------


def lease_sweep(runtime: Runtime, report: Report) -> None:
    """The lease timers of items claimed by a release before the send message held the lease
    (none is written now: this drains those left), up to LEASE_PAGES pages of passed ones,
    each page read on from the last key of the one before: the index is eventually
    consistent, so a page just handled can still be in it (and an item whose step failed stays
    until the next run), and a stuck send behind them must still be reached."""
    now = iso(runtime.clock.now())
    sweep_pages(TIMER_LEASE, now, LEASE_PAGES, runtime, report,
                lambda i: expire_lease(i, now, runtime, report))  # fmt: skip


def sweep_pages(kind: str, before: str, pages: int, runtime: Runtime, report: Report,
                act: Callable[[str], None]) -> None:  # fmt: skip
    """``act`` on each item whose ``kind`` timer passed ``before``, oldest first, up to
    ``pages`` pages of SWEEP_BATCH, each page read on from the last key of the one before."""
    seen: set[str] = set()
    after: str | None = None
    for _ in range(pages):
        rows = due_rows(kind, before, runtime, SWEEP_BATCH, after=after)
        if not rows:
            return
        after = rows[-1][1]
        for item_id, _ in rows:
            if item_id not in seen:
                seen.add(item_id)
                _guard(report, item_id, lambda i=item_id: act(i))


def expire_lease(item_id: str, now: str, runtime: Runtime, report: Report) -> None:
    item = runtime.store.get_item(item_id)
    if item is None or not _timer_due(item, TIMER_LEASE, now, runtime):
        return
    if item.state == State.AWAITING.value and item.method == "email":
        await_email(item, runtime, report)
        return
    if item.state != State.SENDING.value:
        return
    outcome = outcome_unknown(item, runtime)
    if outcome is not None:
        report.add(f"lease_{outcome}")


def outcome_unknown(item: QueueItemRecord, runtime: Runtime) -> str | None:
    """Error a ``sending`` item whose attempt is over without an answer recorded (its claim's
    holder died after it): the provider may have taken the message. The kind of outcome, None
    when the item moved on first."""
    result = LEASE_RESULT.format(s=runtime.settings.lease_seconds)
    step = Step("error", actor=ACTOR, source="schedule", attempt=int(item.attempt), result=result,
                expect=frozenset({State.SENDING.value}))  # fmt: skip
    try:
        outcome = apply(item, step, runtime, history=missing_send_entry(item))
    except InvalidTransition:
        return None  # the worker recorded its outcome first
    if outcome.kind == "moved":
        metrics.add_metric(name=resources.METRIC_LEASES_EXPIRED, unit="Count", value=1)
    return outcome.kind


def await_email(item: QueueItemRecord, runtime: Runtime, report: Report) -> None:
    """An email SES accepted, still awaiting its final event when its lease passed: its timer
    moves to the email timeout's, keyed on its claim (conditional on the item and timer as
    read: a final event or another sweep first wins)."""
    partition = timer_partition(TIMER_EMAIL_AWAIT, item.id, runtime.settings.index_shards,
                                priority_of(item))  # fmt: skip
    if runtime.store.move_timer(item, partition, f"{email_wait_since(item)}#{item.id}"):
        report.add("lease_email_awaits")


def release_scheduled(runtime: Runtime, report: Report) -> None:
    """Long scheduled sends whose time is near go to their lanes (vdq.intake.scheduling)."""
    from vdq.intake.scheduling import release_due

    try:
        release_due(runtime, report)
    except Exception:
        report.add("failed")
        logger.exception("releasing scheduled sends failed; the next run tries again")


def stray_sweep(runtime: Runtime, report: Report) -> None:
    """Items enqueued for now whose message may not have gone out (vdq.schedules.strays),
    each lane's backlog asked once a run."""
    backlogs: dict[str, int] = {}
    strays.arm_strays(runtime, report, lambda lane: lane_backlog(lane, runtime, backlogs))


def republish_sweep(runtime: Runtime, report: Report) -> None:
    """Each lane's passed publish timers, read from the lane's own partitions (high first),
    a batch a lane: a lane with a backlog is only counted, none of its items read."""
    now = iso(runtime.clock.now())
    backlogs: dict[str, int] = {}
    for lane in PRIORITIES:
        item_ids = due(TIMER_PUBLISH, now, runtime, SWEEP_BATCH, lane)
        if not item_ids:
            continue
        if lane_backlog(lane, runtime, backlogs):
            # The lane is busy: no item needs to be read to know it waits.
            report.add("republish_waiting", len(item_ids))
            logger.info("%d publish timers of the %s lane passed while it has a backlog (%d): "
                        "not re-published until it drains", len(item_ids), lane,
                        backlogs[lane])  # fmt: skip
            continue
        for item_id in item_ids:
            _guard(report, item_id,
                   lambda i=item_id: republish(i, now, runtime, report, backlogs))  # fmt: skip


def held_items(runtime: Runtime, report: Report) -> None:
    """What releases cut short left parked (vdq.results.guard.resume_releases), and warnings
    the rates no longer reach (recheck_warnings): each a step of its own, whose failure is
    counted and left to the next run."""
    from vdq.results import guard

    for step in (guard.resume_releases, guard.recheck_warnings):
        try:
            step(runtime, report)
        except Exception:
            report.add("failed")
            logger.exception("the guard's %s failed; the next run tries again", step.__name__)


def lane_backlog(priority: str, runtime: Runtime, backlogs: dict[str, int]) -> int:
    """Sends waiting in a lane's queue, asked once a run; unknown counts as none (the claim
    drops a copy that was not needed)."""
    if priority not in backlogs:
        try:
            backlogs[priority] = runtime.send_queue.backlog(priority)
        except Exception:
            logger.exception("backlog of the %s send queue unknown; re-publishing", priority)
            backlogs[priority] = 0
    return backlogs[priority]


def republish(item_id: str, now: str, runtime: Runtime, report: Report,
              backlogs: dict[str, int] | None = None) -> None:  # fmt: skip
    item = runtime.store.get_item(item_id)
    if item is None or item.state not in (State.QUEUED.value, State.DELAYED.value):
        return
    if not _timer_due(item, TIMER_PUBLISH, now, runtime):
        return
    # While the item's lane has a backlog, its send is most likely still waiting in it.
    backlog = lane_backlog(priority_of(item), runtime, {} if backlogs is None else backlogs)
    if backlog:
        report.add("republish_waiting")
        logger.info("publish timer of %s passed while %d sends wait in its lane: not "
                    "re-published until it drains", item.id, backlog)  # fmt: skip
        return
    s = runtime.settings
    next_due = iso(runtime.clock.now() + timedelta(seconds=s.publish_grace_seconds))
    # In the lane's own partition: a timer a release before wrote in the normal lane's (a
    # give-back's) moves to it.
    partition = timer_partition(TIMER_PUBLISH, item.id, s.index_shards, priority_of(item))
    if not runtime.store.move_timer(item, partition, f"{next_due}#{item.id}"):
        return  # claimed, moved or re-published by another sweep first
    if publish_send(item, runtime):
        report.add("republished")
        logger.info("re-published %s (attempt %s): its send was not claimed in time", item.id,
                    item.attempt)  # fmt: skip


# ---- dead letters ----------------------------------------------------------------------------

DEAD_LETTER_ROUNDS = 5  # receives of up to ten messages from each dead-letter queue a run
DEAD_LETTER_RESULT = (
    "its send message failed {n} deliveries and was dead-lettered (the send function failed "
    "on it each time: see its log); nothing was sent for this attempt"
)


def dead_letters(runtime: Runtime, report: Report) -> None:
    """The send lanes' dead-letter queues, and the checks in the results queue's (see the
    module's docstring)."""
    s = runtime.settings
    lanes = {s.send_dead_letter_queue_url, s.high_send_dead_letter_queue_url,
             s.bulk_send_dead_letter_queue_url} - {""}  # fmt: skip
    for url in sorted(lanes):
        _drain(url, runtime, report, dead_send)
    if s.results_dead_letter_queue_url:
        _drain(s.results_dead_letter_queue_url, runtime, report, dead_result)


def _drain(url: str, runtime: Runtime, report: Report,
           handle: Callable[[dict[str, Any], Runtime, Report], bool]) -> None:  # fmt: skip
    sqs = runtime.client("sqs")
    for _ in range(DEAD_LETTER_ROUNDS):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                  AttributeNames=["ApproximateReceiveCount"]).get("Messages", [])
        if not got:
            return
        for message in got:
            try:
                handled = handle(message, runtime, report)
            except Exception:
                report.add("failed")
                logger.exception("dead letter %s not handled; the next run tries again",
                                 message.get("MessageId"))  # fmt: skip
                continue
            if handled:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def dead_send(message: dict[str, Any], runtime: Runtime, report: Report) -> bool:
    """One dead send message: its attempt's last word (True: handled, delete it)."""
    from vdq.workflow.sendqueue import SendMessage

    try:
        sent = SendMessage.parse(message.get("Body") or "")
    except (ValueError, KeyError, TypeError):
        logger.error("dead letter %s is no send message: dropped", message.get("MessageId"))
        return True
    item = runtime.store.get_item(sent.item_id)
    if item is None or int(item.attempt) != sent.attempt:
        report.add("dead_dropped")
        return True
    if item.state == State.SENDING.value:
        lease_end = parse_iso(item.claimed_at or item.updated_at) + timedelta(
            seconds=runtime.settings.lease_seconds)
        if runtime.clock.now() < lease_end:
            # The provider may have taken it, and its check (due within the lease) or its
            # first result records it: the message waits for a later run past the lease.
            report.add("dead_waits")
            return False
        report.add(f"dead_{outcome_unknown(item, runtime) or 'moved'}")
    elif item.state in (State.QUEUED.value, State.DELAYED.value):
        n = int((message.get("Attributes") or {}).get("ApproximateReceiveCount") or 0)
        step = Step("error", actor=ACTOR, source="schedule", attempt=sent.attempt,
                    result=DEAD_LETTER_RESULT.format(n=n or "its"),
                    expect=frozenset({State.QUEUED.value, State.DELAYED.value}))  # fmt: skip
        try:
            report.add(f"dead_{apply(item, step, runtime).kind}")
        except InvalidTransition:
            report.add("dead_moved")
    elif item.state == State.AWAITING.value:
        from vdq.results import checks

        sent_check = checks.Sent(item.id, sent.attempt, item.provider_id or "", item.updated_at)
        if checks.decide(item, sent_check, runtime, strong=True):
            report.add("dead_awaits")
    else:
        report.add("dead_dropped")
    return True


def dead_result(message: dict[str, Any], runtime: Runtime, report: Report) -> bool:
    """A dead message of the results queue: a check is done here (True: delete it); anything
    else (an SES event, a lookup) stays for an operator (the queue's alarm)."""
    from vdq.results import checks

    try:
        data = json.loads(message.get("Body") or "")
    except ValueError:
        return False
    if not isinstance(data, dict) or data.get("kind") != checks.KIND:
        return False
    try:
        report.add("dead_checks")
        checks.handle(data, runtime)
    except ValueError:
        logger.error("dead check %s is malformed: dropped", message.get("MessageId"))
    return True


# ---- purge -----------------------------------------------------------------------------------


def purge(runtime: Runtime, report: Report) -> None:
    """The daily watch of open items (vdq.workflow.retention.watch_open: their contents, three
    runs can fail before one would expire; and ``lost_messages``), then the file-age purge
    (vdq.workflow.attachments.purge_idle), when files are not kept forever (a files age or a
    retention is set: vdq.workflow.retention.files_age_seconds)."""
    from vdq.workflow.attachments import purge_idle
    from vdq.workflow.retention import files_age_seconds, watch_open

    _watch(watch_open, runtime, report, "tomorrow's run")
    if files_age_seconds(runtime.settings) is None:
        return

    report.add("files_purged", purge_idle(runtime))


def watch_more(runtime: Runtime, report: Report) -> None:
    """A pass of the daily watch that ran out of time goes on (vdq.workflow.retention)."""
    from vdq.workflow.retention import watch_more as more

    _watch(more, runtime, report, "the next minute")


def _watch(step: Callable[..., int], runtime: Runtime, report: Report, next_run: str) -> None:
    """Run a pass (or the rest of one) of the watch, each open item it reads looked at by
    ``lost_messages`` (the strays' places and each lane's backlog read once a run)."""
    places: dict[str, dict[str, str | None]] = {}
    backlogs: dict[str, int] = {}
    try:
        extended = step(runtime, lambda item: lost_messages(item, runtime, report, places,
                                                            backlogs))  # fmt: skip
        if extended:
            report.add("contents_extended", extended)
    except Exception:
        report.add("failed")
        logger.exception("the watch of open items failed; %s goes on", next_run)


def lost_messages(item: QueueItemRecord, runtime: Runtime, report: Report,
                  places: dict[str, dict[str, str | None]] | None = None,
                  backlogs: dict[str, int] | None = None) -> None:  # fmt: skip
    """An open item (as the daily watch read it, eventually consistent) whose messages were
    all lost: a queue's consumer stopped for longer than the queue keeps messages (the results
    queue's check: ``RESULTS_RETENTION_DAYS``), or a message deleted by mistake.

    - a ``sending`` item past its lease and the results queue's retention (its check, due
      within the lease, may wait that long in a backlog: until then it is late, not lost) is
      errored, outcome unknown (``outcome_unknown``, on a strong read);
    - an ``awaiting`` email without a timer past its lease gets its timeout's timer (the
      check's rule, vdq.results.checks.decide: a check that comes later finds it and writes
      nothing);
    - a queued item without a timer or a hold gets its publish timer (vdq.schedules.strays:
      one whose index entry came after that schedule's cursor passed its time, or one the
      schedule has not armed in a lane without a backlog; one still ahead of the cursor in a
      lane with a backlog is most likely waiting in it, and is the schedule's). ``places``,
      ``backlogs``: the strays cursors and the lanes' backlogs read so far in the run.

    Each conditional on the item as read, so a result recorded first wins."""
    from vdq.results import checks

    if unpublished.stray(item):
        waited = runtime.clock.now() - parse_iso(item.updated_at)
        if (waited.total_seconds() > runtime.settings.publish_grace_seconds
                and (strays.passed(item, runtime, {} if places is None else places)
                     or not lane_backlog(priority_of(item), runtime,
                                         {} if backlogs is None else backlogs))
                and unpublished.arm(item, runtime)):  # fmt: skip
            report.add("watch_strays_armed")
        return
    since = item.claimed_at or item.updated_at
    lease_end = parse_iso(since) + timedelta(seconds=runtime.settings.lease_seconds)
    if runtime.clock.now() < lease_end:
        return  # its holder, check or send message may still come
    if item.state == State.SENDING.value:
        if runtime.clock.now() < lease_end + timedelta(days=resources.RESULTS_RETENTION_DAYS):
            return  # its check may be in the results queue's backlog
        current = runtime.store.get_item(item.id)
        # The claim whose lease was measured, not one taken since (its holder may be sending):
        # a new claim is the next run's to judge.
        if (current is not None and current.state == State.SENDING.value
                and (int(current.attempt), current.claimed_at, current.updated_at)
                == (int(item.attempt), item.claimed_at, item.updated_at)):  # fmt: skip
            report.add(f"watch_lease_{outcome_unknown(current, runtime) or 'moved'}")
    elif item.state == State.AWAITING.value and item.method == "email" and not item.timer_pk:
        sent = checks.Sent(item.id, int(item.attempt), item.provider_id or "", item.updated_at)
        if checks.decide(item, sent, runtime, strong=True):
            report.add("watch_timers_written")
