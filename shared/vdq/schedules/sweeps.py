"""What the schedules run: each task by name (``run``), and the sweeps of the minute and the day.

The tasks: ``sms`` (vdq.schedules.sms: SMS timeouts and polling), ``sweep`` every minute
(scheduled sends, lease timers (vdq.schedules.leases), strays, re-publishes, email timeouts, the
reputation guard's parked items, dead letters (vdq.schedules.dead_letters) and what the daily
watch left), ``purge`` once a day (the watch of open items, the file-age purge). Each reads
the timers index (vdq.schedules.timers) for timers that passed, reads each item strongly
consistent and acts only if the item is still as the timer says. One item's failure (a Twilio
error, a lost race) is logged and the run goes on (vdq.schedules.report).

- Strays: an item enqueued for now is written without a publish timer; one still queued
  without any a grace period later is given it (vdq.schedules.strays).
- Re-publish sweep: a ``queued``/``delayed`` item whose publish timer passed (its send message
  was never claimed) is published again, after pushing the timer on conditionally, so two
  sweeps never publish the same item twice. Not while the item's lane has a backlog: then an
  unclaimed item is most likely still waiting in it, and a copy would only lengthen the backlog
  (every grace period, for every waiting item). A lost publish goes out once the lane drains.
- Email timeouts: an awaiting email with no final event within VDQ_EMAIL_TIMEOUT_HOURS of
  its claim is timed out (after replaying events that waited for it).
- Scheduled sends: due-time buckets of long waits are published ahead of their time, delayed
  until it (vdq.intake.scheduling).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from vdq.core import resources
from vdq.core.clock import iso, parse_iso
from vdq.core.errors import InvalidTransition, VdqError
from vdq.core.observability import logger
from vdq.schedules import strays, timers
from vdq.schedules.dead_letters import dead_letters
from vdq.schedules.leases import lease_sweep, outcome_unknown
from vdq.schedules.report import ACTOR, Report, guard
from vdq.schedules.sms import sms_checks
from vdq.schedules.timers import due, sweep_pages, timer_due
from vdq.store import QueueItemRecord
from vdq.workflow import unpublished
from vdq.workflow.lanes import PRIORITIES, priority_of
from vdq.workflow.table import State
from vdq.workflow.transitions import (
    TIMER_EMAIL_AWAIT,
    TIMER_PUBLISH,
    Step,
    apply,
    publish_send,
    timer_partition,
)

if TYPE_CHECKING:
    from vdq.runtime import Runtime

# Pages of passed email timeouts a run goes through (each a transaction and a look for orphan
# events): 1,000 a minute, so that lost SES events at volume do not outgrow the sweep.
EMAIL_TIMEOUT_PAGES = 5
EMAIL_TIMEOUT_RESULT = (
    "no final event from SES within {h:g} hours of sending the message (its events may be "
    "lost: check the configuration set's event destination); delivery is not confirmed"
)

# Tasks by name; a plain EventBridge "Scheduled Event" without one runs MINUTE.
MINUTE = ("sms", "sweep")


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
    if not timer_due(item, TIMER_EMAIL_AWAIT, window_start, runtime):
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
        item_ids = due(TIMER_PUBLISH, now, runtime, timers.SWEEP_BATCH, lane)
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
            guard(report, item_id,
                   lambda i=item_id: republish(i, now, runtime, report, backlogs))  # fmt: skip


def held_items(runtime: Runtime, report: Report) -> None:
    """What releases cut short left parked (vdq.results.guard.resume_releases), and warnings
    the rates no longer reach (vdq.results.judging.recheck_warnings): each a step of its own,
    whose failure is counted and left to the next run."""
    from vdq.results import guard, judging

    for step in (guard.resume_releases, judging.recheck_warnings):
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
    if not timer_due(item, TIMER_PUBLISH, now, runtime):
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
