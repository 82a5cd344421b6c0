"""POST /queue-items/{id}/transitions/{name}: gates, sources, dry runs, attempts, history."""

from __future__ import annotations

import pytest

from tests.support.aws import drain
from tests.support.operator import (
    allow_any_permission_set,
    call,
    dynamodb_requests,
    email,
    groups_for,
    move,
    sms,
)
from vdq.store import Moved
from vdq.workflow import table as workflow

OPERATOR_SUBJECT = "7d8c2f10-1b2a-4c5d-9e8f-0a1b2c3d4e5f"  # the sample event's caller
SERVER_TRANSITIONS = sorted(n for n, t in workflow.TRANSITIONS.items() if t.permission is None)


def _transition(item_id, name, dry_run=None, groups=("vdq-operators",)):
    query = {} if dry_run is None else {"dry_run": "true" if dry_run else "false"}
    return call("transition", params={"id": item_id, "name": name}, query=query, groups=groups)


def claim(runtime, item_id, attempt):
    """The worker's claim of ``attempt`` (as a send message of it makes it)."""
    from vdq.dispatch import send
    from vdq.workflow.sendqueue import SendMessage

    send.claim(SendMessage(item_id, attempt), runtime.clock.now(), runtime)


def _errored(runtime):
    [item] = sms(runtime)
    move(runtime, item.id, "send", "error")
    return runtime.store.get_item(item.id)


@pytest.mark.parametrize("name", ["retry", "cancel"])
def test_each_required_permission_removed_in_turn_is_a_403(aws, runtime, name):
    allow_any_permission_set(runtime)
    item = _errored(runtime)
    required = {*workflow.TRANSITION_GATES, workflow.TRANSITIONS[name].permission}
    assert len(required) == 4
    for missing in sorted(required):
        answer = _transition(item.id, name, groups=groups_for(required - {missing}))
        assert answer.status == 403, (missing, answer.body)
        assert missing in answer.body["error"]["message"]
        assert runtime.store.get_item(item.id).state == "errored"
    answer = _transition(item.id, name, groups=groups_for(required))
    assert answer.status == 200, answer.body
    assert answer.body["item"]["state"] == workflow.TRANSITIONS[name].target.value


@pytest.mark.parametrize("name", SERVER_TRANSITIONS)
def test_the_six_server_transitions_are_refused_to_every_user(aws, runtime, name):
    assert len(SERVER_TRANSITIONS) == 6
    [item] = sms(runtime)  # queued: a source of send and error
    for groups in (["vdq-admins"], ["vdq-operators", "vdq-admins", "vdq-viewers"]):
        answer = _transition(item.id, name, groups=groups)
        assert answer.status == 403 and answer.code == "forbidden"
    assert runtime.store.get_item(item.id).state == "queued"


def test_a_transition_reads_an_id_in_lower_case_as_its_item(aws, runtime):
    item = _errored(runtime)
    answer = _transition(item.id.lower(), "retry")
    assert answer.status == 200, answer.body
    assert answer.body["item"]["id"] == item.id and answer.body["to_state"] == "queued"


def test_no_identity_is_401_unknown_item_or_transition_is_404(aws, runtime):
    item = _errored(runtime)
    answer = call("transition", params={"id": item.id, "name": "retry"}, query={},
                  anonymous=True)  # fmt: skip
    assert answer.status == 401
    assert _transition("01JDQ5V7X3K9Q2M4N6P8R0S2T4", "retry").status == 404
    answer = _transition(item.id, "explode")
    assert answer.status == 404 and "explode" in answer.body["error"]["message"]


@pytest.mark.parametrize("name,setup,state", [
    ("retry", "queued", "queued"),
    ("cancel", "succeeded", "succeeded"),
    ("retry", "sending", "sending"),
    ("cancel", "awaiting", "awaiting"),
])  # fmt: skip
def test_a_transition_with_no_source_in_the_state_is_a_409_naming_it(
    aws, runtime, name, setup, state
):
    [item] = sms(runtime)
    steps = {"queued": (), "succeeded": ("send", "succeed"), "sending": ("send",),
             "awaiting": ("send", "await")}[setup]  # fmt: skip
    move(runtime, item.id, *steps)
    for dry_run in (None, True):
        answer = _transition(item.id, name, dry_run=dry_run)
        assert answer.status == 409 and answer.code == "invalid_transition"
        assert answer.body["error"]["details"]["state"] == state
        assert repr(state) in answer.body["error"]["message"]


def test_the_409_for_an_awaiting_email_names_when_its_timeout_moves_it(aws, runtime):
    # SES's acceptance writes no timer; the send's check gives an email still awaiting then
    # its timeout's timer, keyed on the claim (vdq.results.checks): the time the refusal names
    # is the claim's plus the timeout, before and after the check.
    from datetime import timedelta

    from vdq.core.clock import iso, parse_iso
    from vdq.results import checks

    [item] = email(runtime, "ada@example.org")
    move(runtime, item.id, "send")
    move(runtime, item.id, "await", provider_id="0100-ses-hint")
    stored = runtime.store.get_item(item.id)
    assert stored.state == "awaiting" and stored.timer_pk is None
    hours = runtime.settings.email_timeout_hours
    until = iso(parse_iso(stored.claimed_at) + timedelta(hours=hours))
    answer = _transition(item.id, "cancel")
    assert answer.status == 409
    assert f"becomes unconfirmed at {until}" in answer.body["error"]["message"]
    runtime.clock.advance(runtime.settings.check_seconds)
    sent = checks.Sent(item.id, 1, "0100-ses-hint", stored.updated_at)
    checks.handle({"kind": checks.KIND, "sent": [sent.as_json()]}, runtime)
    stored = runtime.store.get_item(item.id)
    assert stored.timer_sk == f"{stored.claimed_at}#{item.id}"
    answer = _transition(item.id, "cancel")
    assert f"becomes unconfirmed at {until}" in answer.body["error"]["message"]


def test_the_409_for_an_awaiting_sms_names_its_timeout_from_the_claim(aws, runtime):
    # An SMS's window runs from the claim that sent it, not from its queueing: one sent an
    # hour after it was queued is resolved an hour later than its queueing says.
    from datetime import timedelta

    from vdq.core.clock import iso, parse_iso

    [item] = sms(runtime)
    runtime.clock.advance(3600)
    move(runtime, item.id, "send")
    move(runtime, item.id, "await", provider_id="SM" + "5" * 32)
    stored = runtime.store.get_item(item.id)
    hours = runtime.settings.twilio_sms_timeout_hours
    until = iso(parse_iso(stored.claimed_at) + timedelta(hours=hours))
    answer = _transition(item.id, "cancel")
    assert answer.status == 409
    assert f"becomes unconfirmed at {until}" in answer.body["error"]["message"]


def test_retry_starts_a_new_attempt_clears_delay_and_result_and_publishes(aws, runtime):
    [item] = sms(runtime)
    move(runtime, item.id, "send", "delay", result="throttled")
    drain(aws)
    before = runtime.store.get_item(item.id)
    assert before.state == "delayed" and before.retry_delay == 30 and before.result
    answer = _transition(item.id, "retry")
    assert answer.status == 200
    after = runtime.store.get_item(item.id)
    assert (after.state, after.attempt) == ("queued", before.attempt + 1)
    assert after.retry_delay is None and after.result is None
    assert answer.body["item"]["attempt"] == after.attempt
    assert drain(aws) == [{"id": item.id, "attempt": after.attempt, "to": item.receiver,
                           "pace": f"twilio#{item.sender}",
                           "queued": item.queued_at}]  # fmt: skip
    # A send message of the older attempt drops itself: its claim fails.
    with pytest.raises(Moved):
        claim(runtime, item.id, before.attempt)
    entry = runtime.store.history(item.id)[-1]
    assert (entry.name, entry.actor, entry.source) == ("retry", OPERATOR_SUBJECT, "operator")
    assert (entry.from_state, entry.to_state) == ("delayed", "queued")


def test_retry_from_errored_clears_the_result(aws, runtime):
    item = _errored(runtime)
    assert item.result
    assert _transition(item.id, "retry").status == 200
    assert runtime.store.get_item(item.id).result is None


@pytest.mark.parametrize("steps", [(), ("send", "delay"), ("send", "error")])
def test_cancel_starts_a_new_attempt_so_a_pending_send_is_dropped(aws, runtime, steps):
    [item] = sms(runtime)
    move(runtime, item.id, *steps)
    drain(aws)
    before = runtime.store.get_item(item.id)
    answer = _transition(item.id, "cancel")
    assert answer.status == 200 and answer.body["from_state"] == before.state
    after = runtime.store.get_item(item.id)
    assert (after.state, after.attempt) == ("cancelled", before.attempt + 1)
    assert after.retry_delay is None and after.timer_pk is None and after.active_pk is None
    assert drain(aws) == []  # cancel publishes nothing
    with pytest.raises(Moved):  # the send published at enqueue (or by delay) drops itself
        claim(runtime, item.id, before.attempt)
    entry = runtime.store.history(item.id)[-1]
    assert (entry.name, entry.actor) == ("cancel", OPERATOR_SUBJECT)


@pytest.mark.parametrize("name", ["retry", "cancel"])
def test_a_dry_run_checks_and_changes_nothing(aws, runtime, name):
    item = _errored(runtime)
    drain(aws)
    history = len(runtime.store.history(item.id))
    answer = _transition(item.id, name, dry_run=True)
    assert answer.status == 200
    assert answer.body["dry_run"] is True
    assert answer.body["to_state"] == workflow.TRANSITIONS[name].target.value
    after = runtime.store.get_item(item.id)
    assert (after.state, after.attempt, after.result) == (item.state, item.attempt, item.result)
    assert len(runtime.store.history(item.id)) == history
    assert drain(aws) == []
    assert _transition(item.id, name, dry_run=True, groups=["vdq-viewers"]).status == 403


def test_a_retry_costs_two_dynamodb_requests(aws, runtime, monkeypatch):
    item = _errored(runtime)
    with dynamodb_requests(monkeypatch) as counts:
        assert _transition(item.id, "retry").status == 200
    # Its history entry rides on the state item: one UpdateItem, not a transaction.
    assert counts == {"GetItem": 1, "UpdateItem": 1}


def test_a_cancelled_item_stays_cancelled_when_a_late_result_arrives(aws, runtime):
    [item] = sms(runtime)
    assert _transition(item.id, "cancel").status == 200
    outcome = move(runtime, item.id, "succeed")
    assert outcome.kind == "ignored" and runtime.store.get_item(item.id).state == "cancelled"
