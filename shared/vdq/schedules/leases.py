"""Sends whose lease ran out: the lease timers a release before the send message held the
lease left, and the last word on an attempt whose holder died.

A ``sending`` item whose lease passed moves to ``errored`` (outcome unknown: the provider may
have taken the message); an email still ``awaiting`` moves its timer to ``mailwait``, keyed on
its claim, for the email timeout."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vdq.core import resources
from vdq.core.clock import iso
from vdq.core.errors import InvalidTransition
from vdq.core.observability import metrics
from vdq.schedules.report import ACTOR, Report
from vdq.schedules.timers import sweep_pages, timer_due
from vdq.store import QueueItemRecord
from vdq.workflow.lanes import priority_of
from vdq.workflow.table import State
from vdq.workflow.transitions import (
    TIMER_EMAIL_AWAIT,
    TIMER_LEASE,
    Step,
    apply,
    email_wait_since,
    missing_send_entry,
    timer_partition,
)

if TYPE_CHECKING:
    from vdq.runtime import Runtime

# Pages of passed lease timers a run goes through: awaiting emails move on (one write each),
# so a run reads the next page behind them, up to this many (a sending item is never hidden
# behind more than LEASE_PAGES x SWEEP_BATCH awaiting emails a minute).
LEASE_PAGES = 10
LEASE_RESULT = (
    "outcome unknown: the send attempt did not finish within its lease of {s} s; "
    "the provider may have accepted the message, so a retry may send it twice"
)


def lease_sweep(runtime: Runtime, report: Report) -> None:
    """The lease timers of items claimed by a release before the send message held the lease
    (none is written now: this drains those left), up to LEASE_PAGES pages of passed ones,
    each page read on from the last key of the one before: the index is eventually
    consistent, so a page just handled can still be in it (and an item whose step failed stays
    until the next run), and a stuck send behind them must still be reached."""
    now = iso(runtime.clock.now())
    sweep_pages(TIMER_LEASE, now, LEASE_PAGES, runtime, report,
                lambda i: expire_lease(i, now, runtime, report))  # fmt: skip


def expire_lease(item_id: str, now: str, runtime: Runtime, report: Report) -> None:
    item = runtime.store.get_item(item_id)
    if item is None or not timer_due(item, TIMER_LEASE, now, runtime):
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
