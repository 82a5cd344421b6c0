"""The schedules against moto with a fake clock: SMS polling and timeouts, sweeps, purge."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest
from functions.schedule import handler as schedule_handler
from functions.webhook import handler as webhook

from tests.support.aws import drain
from tests.support.calls import RECORDER
from tests.support.events import load_event
from tests.support.results import (
    SAMPLE_ACCOUNT_SID,
    SAMPLE_AUTH_TOKEN,
    FakeTwilio,
    LambdaContext,
    Status,
    kinds,
    new_email,
    new_sms,
    ses_event,
    sqs_event,
    to_awaiting,
    to_sending,
)
from vdq.core.clock import iso
from vdq.runtime import Runtime
from vdq.schedules import sweeps as schedules
from vdq.schedules import timers
from vdq.workflow.transitions import Step, apply

HOUR = 3600


def make_runtime(settings, clock, **changes):
    rt = Runtime(settings=replace(settings, **changes), clock=clock)
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    return rt


@pytest.fixture
def twilio():
    return FakeTwilio()


@pytest.fixture
def polling(aws, settings, clock, twilio):
    rt = make_runtime(settings, clock, twilio_account_sid=SAMPLE_ACCOUNT_SID,
                      twilio_auth_token=SAMPLE_AUTH_TOKEN, twilio_webhook_url=None)
    rt.overrides["twilio"] = twilio
    yield rt
    Runtime.reset_default()


@pytest.fixture
def callback_mode(aws, settings, clock, twilio):
    rt = make_runtime(settings, clock, twilio_account_sid=SAMPLE_ACCOUNT_SID,
                      twilio_auth_token=SAMPLE_AUTH_TOKEN,
                      twilio_webhook_url="https://example.com/twilio/status-callback")
    rt.overrides["twilio"] = twilio
    yield rt
    Runtime.reset_default()


def awaiting_sms(rt, clock, n):
    items = []
    for i in range(n):
        items.append(to_awaiting(new_sms(rt, f"+1415555010{i}"), rt, f"SM{i:032d}"))
        clock.advance(10)
    return items


def state(rt, item):
    return rt.store.get_item(item.id).state


# ---- SMS -------------------------------------------------------------------------------------


def test_sms_checks_run_only_with_a_twilio_account(aws, runtime, clock, twilio):
    runtime.overrides["twilio"] = twilio
    (item,) = awaiting_sms(runtime, clock, 1)
    clock.advance(3 * HOUR)
    schedules.run(["sms"], runtime)
    assert twilio.fetched == []
    assert state(runtime, item) == "awaiting"


def test_polling_fetches_each_awaiting_sms_by_sid_oldest_first(polling, clock, twilio):
    a, b, c = awaiting_sms(polling, clock, 3)
    twilio.statuses = {a.provider_id: Status("delivered"),
                       b.provider_id: Status("undelivered", 30003, "Unreachable destination"),
                       c.provider_id: Status("sent")}
    schedules.run(["sms"], polling)
    assert twilio.fetched == [a.provider_id, b.provider_id, c.provider_id]
    assert [state(polling, i) for i in (a, b, c)] == ["succeeded", "errored", "awaiting"]
    assert "30003: Unreachable destination" in polling.store.get_item(b.id).result


def test_polling_is_bounded_per_run(polling, clock, twilio):
    polling.settings = replace(polling.settings, sms_poll_batch=2)
    a, b, _c = awaiting_sms(polling, clock, 3)
    schedules.run(["sms"], polling)
    assert twilio.fetched == [a.provider_id, b.provider_id]


def test_polling_reaches_every_awaiting_sms_of_a_backlog_in_turn(polling, clock, twilio):
    # Three batches in flight: each run goes on where the last stopped, so the newest are
    # fetched within three runs, not only once the oldest are final or timed out.
    polling.settings = replace(polling.settings, sms_poll_batch=2)
    items = awaiting_sms(polling, clock, 6)
    for _ in range(3):
        schedules.run(["sms"], polling)
    assert sorted(twilio.fetched) == sorted(i.provider_id for i in items)


def test_polling_goes_round_to_the_oldest_after_the_newest(polling, clock, twilio):
    polling.settings = replace(polling.settings, sms_poll_batch=2)
    a, b, c = awaiting_sms(polling, clock, 3)
    schedules.run(["sms"], polling)
    schedules.run(["sms"], polling)
    assert twilio.fetched == [a.provider_id, b.provider_id, c.provider_id, a.provider_id]


class Killed(BaseException):
    """The function dies (a timeout, a crash): nothing after it runs."""


def test_a_run_killed_after_its_fetches_leaves_them_to_the_next(polling, clock, twilio):
    polling.settings = replace(polling.settings, sms_poll_batch=2)
    a, b, c, d = awaiting_sms(polling, clock, 4)
    twilio.statuses = {b.provider_id: Killed()}
    with pytest.raises(Killed):
        schedules.run(["sms"], polling)
    twilio.statuses = {}
    twilio.fetched.clear()
    schedules.run(["sms"], polling)
    schedules.run(["sms"], polling)
    assert twilio.fetched == [a.provider_id, b.provider_id, c.provider_id, d.provider_id]


def test_a_twilio_error_on_one_item_does_not_stop_the_run(polling, clock, twilio):
    a, b = awaiting_sms(polling, clock, 2)
    twilio.statuses = {a.provider_id: RuntimeError("Twilio 500"),
                       b.provider_id: Status("delivered")}
    counts = schedules.run(["sms"], polling)
    assert counts["failed"] == 1
    assert (state(polling, a), state(polling, b)) == ("awaiting", "succeeded")


def test_callback_mode_fetches_nothing_before_the_timeout(callback_mode, clock, twilio):
    (item,) = awaiting_sms(callback_mode, clock, 1)
    clock.advance(HOUR)
    schedules.run(["sms"], callback_mode)
    assert twilio.fetched == []
    assert state(callback_mode, item) == "awaiting"


def test_timeout_after_one_last_fetch_moves_to_unconfirmed(callback_mode, clock, twilio):
    (item,) = awaiting_sms(callback_mode, clock, 1)
    clock.advance(2 * HOUR)
    schedules.run(["sms"], callback_mode)
    assert twilio.fetched == [item.provider_id]
    stored = callback_mode.store.get_item(item.id)
    assert stored.state == "unconfirmed"
    assert stored.result == (
        "no final status from Twilio within 2 hours of sending (last status: sent)")
    assert ("transition", "timeout") in kinds(callback_mode, item.id)


def test_last_fetch_with_a_final_status_applies_it_instead_of_the_timeout(callback_mode, clock,
                                                                           twilio):  # fmt: skip
    (item,) = awaiting_sms(callback_mode, clock, 1)
    twilio.statuses = {item.provider_id: Status("delivered")}
    clock.advance(3 * HOUR)
    schedules.run(["sms"], callback_mode)
    assert state(callback_mode, item) == "succeeded"


def test_timeout_when_the_last_fetch_fails(callback_mode, clock, twilio):
    (item,) = awaiting_sms(callback_mode, clock, 1)
    twilio.statuses = {item.provider_id: RuntimeError("Twilio unreachable")}
    clock.advance(3 * HOUR)
    schedules.run(["sms"], callback_mode)
    stored = callback_mode.store.get_item(item.id)
    assert stored.state == "unconfirmed" and "last fetch failed" in stored.result


def test_an_sms_sent_long_after_it_was_queued_gets_its_whole_window_from_the_claim(
        callback_mode, clock, twilio):  # fmt: skip
    # A scheduled SMS, or number N of a campaign paced at its sender's rate, is claimed long
    # after it was queued: its window runs from the claim that sent it, so the first check after
    # Twilio took it neither fetches nor times it out.
    item = new_sms(callback_mode)
    clock.advance(3 * HOUR)
    item = to_awaiting(callback_mode.store.get_item(item.id), callback_mode, "SM" + "3" * 32)
    schedules.run(["sms"], callback_mode)
    assert (state(callback_mode, item), twilio.fetched) == ("awaiting", [])
    clock.advance(2 * HOUR - 1)
    schedules.run(["sms"], callback_mode)
    assert (state(callback_mode, item), twilio.fetched) == ("awaiting", [])
    clock.advance(2)
    schedules.run(["sms"], callback_mode)
    stored = callback_mode.store.get_item(item.id)
    assert stored.state == "unconfirmed" and twilio.fetched == [item.provider_id]
    assert stored.result == (
        "no final status from Twilio within 2 hours of sending (last status: sent)")


def test_a_retried_sms_gets_a_new_window_from_the_claim_that_sent_it(polling, clock, twilio):
    item = to_awaiting(new_sms(polling), polling, "SM" + "1" * 32)
    apply(item.id, Step("error", actor="test", result="undelivered"), polling)
    clock.advance(1.5 * HOUR)
    apply(item.id, Step("retry", actor="ops", source="operator"), polling)
    item = to_awaiting(polling.store.get_item(item.id), polling, "SM" + "2" * 32)
    assert item.attempt == 2
    clock.advance(2 * HOUR - 1)
    schedules.run(["sms"], polling)
    assert state(polling, item) == "awaiting"
    clock.advance(2)
    schedules.run(["sms"], polling)
    assert state(polling, item) == "unconfirmed"


def test_an_awaiting_sms_stored_by_the_release_before_times_out_from_its_claim(
        callback_mode, clock, twilio):  # fmt: skip
    # That release keyed the await timer on the queueing: the first check past
    # that window moves the timer to the claim, fetching nothing, and the timeout comes then.
    from vdq.store import QueueItemRecord

    item = new_sms(callback_mode)
    clock.advance(3 * HOUR)
    item = to_awaiting(callback_mode.store.get_item(item.id), callback_mode, "SM" + "4" * 32)
    item.update(actions=[QueueItemRecord.timer_sk.set(f"{item.queued_at}#{item.id}")])
    schedules.run(["sms"], callback_mode)
    stored = callback_mode.store.get_item(item.id)
    assert (stored.state, twilio.fetched) == ("awaiting", [])
    assert stored.timer_sk == f"{item.claimed_at}#{item.id}"
    clock.advance(2 * HOUR + 1)
    schedules.run(["sms"], callback_mode)
    assert state(callback_mode, item) == "unconfirmed"


# ---- lease timers of items claimed by a release before ---------------------------------------
# The send message is the claim's lease now (vdq.dispatch.send): no claim writes a lease timer.
# A release before wrote one at each claim, which an email SES accepted kept; the sweep still
# drains those: a sending item past its lease is errored, an awaiting email moves to its
# timeout's timer.


def legacy_lease(item, runtime):
    """The lease timer the release before gave an item at its claim (partition ``lease#<k>``
    of no lane, due at the claim plus the lease)."""
    from vdq.core.clock import parse_iso
    from vdq.store import QueueItemRecord
    from vdq.workflow.transitions import TIMER_LEASE, timer_partition

    stored = runtime.store.get_item(item.id)
    due = iso(parse_iso(stored.claimed_at) + timedelta(seconds=runtime.settings.lease_seconds))
    partition = timer_partition(TIMER_LEASE, item.id, runtime.settings.index_shards)
    stored.update(actions=[QueueItemRecord.timer_pk.set(partition),
                           QueueItemRecord.timer_sk.set(f"{due}#{item.id}")])  # fmt: skip
    return runtime.store.get_item(item.id)


def check(items, runtime):
    """The send's check of ``items`` (vdq.results.checks), as the results function gets it."""
    from vdq.results import checks

    sent = [checks.Sent(i.id, int(i.attempt), i.provider_id or "", i.updated_at) for i in items]
    return checks.handle({"kind": checks.KIND, "sent": [s.as_json() for s in sent]}, runtime)


def test_lease_sweep_errors_an_expired_sending_item_with_an_unknown_outcome(aws, runtime, clock):
    item = legacy_lease(to_sending(new_email(runtime), runtime), runtime)
    claimed_at = item.claimed_at
    clock.advance(runtime.settings.lease_seconds - 1)
    schedules.run(["sweep"], runtime)
    assert state(runtime, item) == "sending"
    clock.advance(2)
    counts = schedules.run(["sweep"], runtime)
    assert counts == {"lease_moved": 1}
    stored = runtime.store.get_item(item.id)
    assert stored.state == "errored" and stored.result.startswith("outcome unknown")
    send = next(h for h in runtime.store.history(item.id) if h.name == "send")
    assert send.at == claimed_at
    assert kinds(runtime, item.id) == [("transition", "send"), ("transition", "error")]
    # A later provider event still finds the item by its key and records what happened.
    clock.advance(1)
    answer = webhook.handler(sqs_event(ses_event("delivery", message_id="M-1", item_id=item.id)),
                             LambdaContext())  # fmt: skip
    assert answer == {"batchItemFailures": []}
    assert state(runtime, item) == "errored"
    assert kinds(runtime, item.id)[-1] == ("late", "succeed")


def test_lease_sweep_leaves_an_item_the_worker_recorded(aws, runtime, clock):
    # An email SES accepted kept the claim's lease timer (the release before wrote no index
    # entry when SES accepted it); still awaiting when the lease passes, it moves to the email
    # timeout's timer, keyed on its claim, and stays awaiting.
    item = legacy_lease(to_awaiting(new_email(runtime), runtime, "M-2"), runtime)
    assert item.timer_pk.startswith("lease#")
    clock.advance(runtime.settings.lease_seconds + 1)
    assert schedules.run(["sweep"], runtime) == {"lease_email_awaits": 1}
    stored = runtime.store.get_item(item.id)
    assert stored.state == "awaiting"
    assert stored.timer_pk.startswith("mailwait#")
    assert stored.timer_sk == f"{item.claimed_at}#{item.id}"
    assert schedules.run(["sweep"], runtime) == {}  # moved once


def test_an_email_delivered_before_its_check_never_gets_a_timer(aws, runtime, clock):
    item = to_awaiting(new_email(runtime), runtime, "M-3")
    assert item.timer_pk is None  # SES's acceptance writes none
    clock.advance(10)
    apply(runtime.store.get_item(item.id), Step("succeed", actor="ses", source="provider"),
          runtime)  # fmt: skip
    clock.advance(runtime.settings.check_seconds)
    assert check([item], runtime) == "checked 1, 0 given their timeout's timer"
    stored = runtime.store.get_item(item.id)
    assert stored.state == "succeeded" and stored.timer_pk is None
    assert schedules.run(["sweep"], runtime) == {}


def test_an_email_with_no_final_event_is_unconfirmed_its_timeout_after_the_claim(
        aws, runtime, clock):  # fmt: skip
    item = to_awaiting(new_email(runtime), runtime, "M-4")
    hours = runtime.settings.email_timeout_hours
    clock.advance(runtime.settings.check_seconds)
    assert check([item], runtime) == "checked 1, 1 given their timeout's timer"
    assert check([item], runtime) == "checked 1, 0 given their timeout's timer"  # once
    clock.advance(hours * HOUR - runtime.settings.check_seconds - 1)
    schedules.run(["sweep"], runtime)
    assert state(runtime, item) == "awaiting"
    clock.advance(2)
    assert schedules.run(["sweep"], runtime) == {"email_timeout_moved": 1}
    assert state(runtime, item) == "unconfirmed"


def _awaiting_then_stuck(runtime, clock, monkeypatch, n):
    """Pages of 3; ``n`` emails SES accepted, then a send whose worker died, all past their
    lease (the send's passed after theirs), each with the lease timer of the release before."""
    monkeypatch.setattr(timers, "SWEEP_BATCH", 3)
    waiting = [legacy_lease(to_awaiting(new_email(runtime), runtime, f"M-{k}"), runtime)
               for k in range(n)]  # fmt: skip
    clock.advance(1)
    stuck = legacy_lease(to_sending(new_email(runtime), runtime), runtime)
    clock.advance(runtime.settings.lease_seconds + 1)
    return waiting, stuck


def test_one_run_moves_more_awaiting_emails_than_a_page_and_still_reaches_a_stuck_send(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    waiting, stuck = _awaiting_then_stuck(runtime, clock, monkeypatch, 7)
    counts = schedules.run(["sweep"], runtime)
    assert counts == {"lease_email_awaits": 7, "lease_moved": 1}
    assert all(state(runtime, w) == "awaiting" for w in waiting)
    assert state(runtime, stuck) == "errored"


def test_a_lagging_timers_index_does_not_end_the_lease_sweep_before_a_stuck_send(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    # The index is eventually consistent: right after a page of awaiting emails moved to
    # their timeout's timer, a query can still return their lease entries. The next page must
    # read on past them (they are handled), not stop the run at a page of entries it has seen
    # while passed leases wait behind them.
    waiting, stuck = _awaiting_then_stuck(runtime, clock, monkeypatch, 3)
    store = runtime.store
    query = store.query_index
    snapshot: dict[str, list[tuple[str, str]]] = {}

    def lagging(index, partition, *, start_after=None, below=None, descending=False,
                limit=100):  # fmt: skip
        if not partition.startswith("lease#"):
            return query(index, partition, start_after=start_after, below=below,
                         descending=descending, limit=limit)  # fmt: skip
        if partition not in snapshot:  # what the index holds as the run starts, for the run
            snapshot[partition] = query(index, partition, below="~", limit=1000)
        rows = [r for r in snapshot[partition]
                if (below is None or r[1] < below)
                and (start_after is None or r[1] > start_after)]  # fmt: skip
        return rows[:limit]

    monkeypatch.setattr(store, "query_index", lagging)
    counts = schedules.run(["sweep"], runtime)
    assert counts == {"lease_email_awaits": 3, "lease_moved": 1}
    assert all(state(runtime, w) == "awaiting" for w in waiting)
    assert state(runtime, stuck) == "errored"


def _ses(name, item, message_id):
    answer = webhook.handler(sqs_event(ses_event(name, message_id=message_id, item_id=item.id)),
                             LambdaContext())  # fmt: skip
    assert answer == {"batchItemFailures": []}, answer


def test_one_run_times_out_more_awaiting_emails_than_a_page(aws, runtime, clock, monkeypatch):
    monkeypatch.setattr(timers, "SWEEP_BATCH", 3)
    items = [to_awaiting(new_email(runtime), runtime, f"M-T{n}") for n in range(7)]
    clock.advance(runtime.settings.check_seconds)
    assert check(items, runtime) == "checked 7, 7 given their timeout's timer"
    clock.advance(runtime.settings.email_timeout_hours * HOUR)
    assert schedules.run(["sweep"], runtime) == {"email_timeout_moved": 7}
    assert {state(runtime, item) for item in items} == {"unconfirmed"}


@pytest.mark.parametrize("event", ["delivery_delay", "send"])
def test_an_email_ses_accepted_after_its_worker_died_gets_its_timer_from_its_message(
        aws, runtime, clock, event):  # fmt: skip
    # The worker died after SES took the message, before it recorded it (or published the
    # check): an in-flight event (a DeliveryDelay; or a Send, not subscribed but one from before
    # an upgrade) moves the sending item to awaiting, without a timer; its send message, back
    # after the queue's visibility, gives it the timeout's timer (vdq.dispatch.send) rather
    # than erroring it.
    from vdq.dispatch import send
    from vdq.workflow.sendqueue import SendMessage

    item = new_email(runtime)
    [message] = drain(aws)
    item = to_sending(item, runtime)
    clock.advance(runtime.settings.lease_seconds + 5)  # the event comes after the lease
    _ses(event, item, "M-5")
    assert state(runtime, item) == "awaiting"
    assert send.process(SendMessage.parse(json.dumps(message)), runtime) == send.DROPPED
    assert runtime.store.get_item(item.id).timer_sk == f"{item.claimed_at}#{item.id}"
    clock.advance(runtime.settings.email_timeout_hours * HOUR)
    assert schedules.run(["sweep"], runtime) == {"email_timeout_moved": 1}


@pytest.mark.parametrize("first", ["sweep", "delivery"])
def test_a_delivery_racing_the_move_of_the_timer_leaves_the_email_succeeded_with_no_timer(
        aws, runtime, clock, monkeypatch, first):  # fmt: skip
    item = legacy_lease(to_awaiting(new_email(runtime), runtime, "M-6"), runtime)
    clock.advance(runtime.settings.lease_seconds + 1)
    store = runtime.store
    if first == "delivery":  # between the sweep's read and its conditional move
        move = store.move_timer

        def racing(*args):
            # The webhook's call, inside the schedule function's stack only here: not the
            # schedule role's calls (tests/infra/test_calls_vs_grants.py).
            recording, RECORDER.enabled = RECORDER.enabled, False
            try:
                _ses("delivery", item, "M-6")
            finally:
                RECORDER.enabled = recording
            return move(*args)

        monkeypatch.setattr(store, "move_timer", racing)
        assert schedules.run(["sweep"], runtime) == {}
    else:  # between the Delivery's read and its commit
        commit, ran = store.commit, []

        def racing(*args, **kwargs):
            if not ran:
                # The schedule function's run, inside the webhook's stack only here: its
                # calls are not the webhook role's (tests/infra/test_calls_vs_grants.py).
                recording, RECORDER.enabled = RECORDER.enabled, False
                try:
                    ran.append(schedules.run(["sweep"], runtime))
                finally:
                    RECORDER.enabled = recording
            return commit(*args, **kwargs)

        monkeypatch.setattr(store, "commit", racing)
        _ses("delivery", item, "M-6")
        assert ran == [{"lease_email_awaits": 1}]
    stored = store.get_item(item.id)
    assert (stored.state, stored.timer_pk) == ("succeeded", None)


# ---- re-publish sweep ------------------------------------------------------------------------


def test_republish_sweep_publishes_an_unclaimed_item_again_once(aws, runtime, clock):
    item = new_email(runtime)
    drain(aws)  # the first publish was lost
    clock.advance(runtime.settings.publish_grace_seconds - 1)
    schedules.run(["sweep"], runtime)
    assert drain(aws) == []
    clock.advance(2)
    # Written without a publish timer (vdq.schedules.strays), it is given one, then sent again.
    assert schedules.run(["sweep"], runtime) == {"strays_armed": 1, "republished": 1}
    assert drain(aws) == [{"id": item.id, "attempt": 1, "to": item.receiver, "pace": "ses",
                           "queued": item.queued_at}]
    stored = runtime.store.get_item(item.id)
    next_due = iso(clock.now() + timedelta(seconds=runtime.settings.publish_grace_seconds))
    assert stored.timer_sk == f"{next_due}#{item.id}"
    assert schedules.run(["sweep"], runtime) == {}
    assert drain(aws) == []


def test_republish_sweep_waits_while_the_send_queue_has_a_backlog(aws, runtime, clock):
    lost = new_email(runtime)
    drain(aws)  # this publish was lost
    waiting = new_email(runtime)  # this one waits in the queue behind a slow consumer
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    # Written without publish timers (vdq.schedules.strays), neither is armed while the lane
    # has a backlog: the first found stops the shard's cursor until it drains.
    assert schedules.run(["sweep"], runtime) in ({"strays_waiting": 1},
                                                 {"strays_waiting": 2})  # fmt: skip
    assert [m["id"] for m in drain(aws)] == [waiting.id]  # no copies were added
    # The queue drained: both armed, then published again.
    assert schedules.run(["sweep"], runtime) == {"strays_armed": 2, "republished": 2}
    assert sorted(m["id"] for m in drain(aws)) == sorted([lost.id, waiting.id])


def test_republish_sweep_leaves_claimed_items(aws, runtime, clock):
    item = new_email(runtime)
    to_sending(item, runtime)
    drain(aws)
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    schedules.run(["sweep"], runtime)
    assert drain(aws) == []


# ---- purge and the handler -------------------------------------------------------------------


def test_purge_calls_the_file_age_purge_only_when_files_are_not_kept_forever(aws, runtime,
                                                                            monkeypatch):
    import vdq.workflow.attachments

    calls = []
    monkeypatch.setattr(vdq.workflow.attachments, "purge_idle", lambda rt: calls.append(rt) or 3)
    runtime.settings = replace(runtime.settings, retention_days=0)  # and no files age: keep
    assert schedules.run(["purge"], runtime) == {}
    assert calls == []
    runtime.settings = replace(runtime.settings, max_files_age_seconds=86_400)
    assert schedules.run(["purge"], runtime) == {"files_purged": 3}
    # With a retention, files go with their records even with no files age set.
    runtime.settings = replace(runtime.settings, retention_days=30, max_files_age_seconds=None)
    assert schedules.run(["purge"], runtime) == {"files_purged": 3}
    assert calls == [runtime, runtime]


@pytest.mark.parametrize(("sample", "tasks"), [
    ("eventbridge_schedule_minute", ("sms", "sweep")),
    ("eventbridge_schedule_sms", ("sms",)),
    ("eventbridge_schedule_sweep", ("sweep",)),
    ("eventbridge_schedule_purge", ("purge",)),
])  # fmt: skip
def test_schedule_events_name_their_tasks(sample, tasks):
    assert schedule_handler.tasks_of(load_event(sample)) == tasks


def test_schedule_handler_runs_the_minute_tasks(aws, runtime, clock):
    item = legacy_lease(to_sending(new_email(runtime), runtime), runtime)
    clock.advance(runtime.settings.lease_seconds + 1)
    counts = schedule_handler.handler(load_event("eventbridge_schedule_minute"), LambdaContext())
    assert counts == {"lease_moved": 1}
    assert state(runtime, item) == "errored"
