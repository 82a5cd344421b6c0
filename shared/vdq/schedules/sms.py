"""The SMS checks (only with a Twilio account: ``TWILIO_ACCOUNT_SID``, or the secret of a
deploy, which names it): timeouts and, in polling mode, status fetches.

Awaiting SMS carry an ``await`` timer keyed on the claim that sent them, so an SMS sent long
after it was queued (scheduled, paced, retried) has its whole window. The timeout check fetches
the status one last time and applies ``timeout`` when it is still not final. Polling mode (no
``TWILIO_WEBHOOK_URL``) also fetches each awaiting SMS by its SID, at most
``VDQ_SMS_POLL_BATCH`` a run; a larger backlog in turn (``poll_rows``), its place kept in one
record, not on each SMS, whose timer stays the timeout's. The secret is read only when an SMS
is due. A fetched status with Twilio's opt-out error suppresses the number, as a callback
does."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from vdq.core.clock import iso
from vdq.core.errors import InvalidTransition
from vdq.core.observability import logger
from vdq.schedules.report import ACTOR, Report, guard
from vdq.schedules.timers import due, due_rows, timer_due
from vdq.store import QueueItemRecord
from vdq.workflow.lanes import priority_of
from vdq.workflow.table import State
from vdq.workflow.transitions import (
    TIMER_AWAIT,
    Step,
    apply,
    sms_wait_since,
    timer_partition,
)

if TYPE_CHECKING:  # the results module (and twilio with it) loads only for the SMS checks
    from vdq.results import matching as results
    from vdq.runtime import Runtime

# Where polling stopped: the timer key of the last SMS a run polled (a schedule place).
POLL_PLACE = "SMSPOLL"
TIMEOUT_RESULT = "no final status from Twilio within {h:g} hours of sending (last status: {last})"


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
        guard(report, item_id, lambda i=item_id: timeout(i))
    if s.twilio_polling:
        rows, place = poll_rows(iso(now), runtime, s.sms_poll_batch)
        for item_id, _ in rows:
            if item_id not in done:
                guard(report, item_id, lambda i=item_id: poll_item(i, twilio, runtime, report))
        if len(rows) == s.sms_poll_batch and rows[-1][1] != place:
            # Kept after the fetches: a run that dies before it leaves them to the next.
            runtime.store.keep_schedule_place(POLL_PLACE, rows[-1][1])


def poll_rows(now: str, runtime: Runtime, limit: int) -> tuple[list[tuple[str, str]], str | None]:
    """(id, timer key) of the awaiting SMS polled this run, and the place read (None: none).

    Up to ``limit`` awaiting SMS: every one, oldest first. More: a backlog is polled in turn,
    from the place where the run before stopped (the key of the last SMS it polled) to the
    newest, then from the oldest on, so each is polled once every ``backlog / limit`` runs
    or so, not only once the older ones are final or timed out."""
    oldest = due_rows(TIMER_AWAIT, now, runtime, limit)
    if len(oldest) < limit:
        return oldest, None  # no backlog: the place is neither read nor moved
    place = runtime.store.schedule_place(POLL_PLACE)
    rows = []
    if place is not None and place < now:  # (a clock that went back: from the oldest)
        rows = due_rows(TIMER_AWAIT, now, runtime, limit, after=place)
    taken = {item_id for item_id, _ in rows}
    rows += [row for row in oldest if row[0] not in taken][: limit - len(rows)]
    return rows, place


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
    if not timer_due(item, TIMER_AWAIT, window_start, runtime):
        return
    partition = timer_partition(TIMER_AWAIT, item.id, runtime.settings.index_shards,
                                priority_of(item))  # fmt: skip
    if runtime.store.move_timer(item, partition, f"{since}#{item.id}"):
        report.add("sms_timers_moved")
