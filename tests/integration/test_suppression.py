"""The suppression list against moto: each feed, the worker refusing, the enqueue flag."""

from __future__ import annotations

from dataclasses import replace

import boto3
import pytest
from functions.webhook import handler as webhook

import vdq
from tests.support.aws import checks, drain
from tests.support.fake_twilio import fake_twilio
from tests.support.results import (
    SAMPLE_ACCOUNT_SID,
    SAMPLE_AUTH_TOKEN,
    SAMPLE_WEBHOOK_URL,
    LambdaContext,
    ses_event,
    sqs_event,
    twilio_event,
)
from vdq.api import Caller
from vdq.dispatch import send
from vdq.intake import rest as intake
from vdq.results import suppression
from vdq.runtime import Runtime

SENDER = "shop@example.com"
MESSAGE_ID = "0100019-suppression-test-000000"


@pytest.fixture
def rt(aws, settings, clock):
    boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
    rt = Runtime(settings=replace(settings, twilio_account_sid=SAMPLE_ACCOUNT_SID,
                                  twilio_auth_token=SAMPLE_AUTH_TOKEN,
                                  twilio_webhook_url=SAMPLE_WEBHOOK_URL), clock=clock)  # fmt: skip
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    yield rt
    Runtime.reset_default()


def messages(aws):
    return {m["id"]: m for m in drain(aws)}


def process(aws, rt, item):
    import json

    return send.process_body(json.dumps(messages(aws)[item.id]), rt)


def one_email(rt, to="ada@example.org"):
    [item] = vdq.add_email(SENDER, [to], "Hello", "Hi", runtime=rt)
    return item


def paced(rt):
    """SES paced at 10/s by a worker on a fake wall clock, and a queue that keeps what is
    published: (wall, pacer, queue)."""
    from tests.integration.test_pacing import RecordingQueue, Wall, worker

    wall = Wall()
    rt.settings = replace(rt.settings, ses_max_send_rate=10.0)
    pacer = rt.overrides["pacer"] = worker(rt, wall)
    queue = rt.overrides["send_queue"] = RecordingQueue()
    rt.__dict__.pop("send_queue", None)
    return wall, pacer, queue


def results(rt, *bodies):
    return webhook.handler(sqs_event(*bodies), LambdaContext("webhook"))


# ---- the worker ---------------------------------------------------------------------------


def test_the_worker_cancels_an_item_to_a_suppressed_address_without_calling_ses(aws, rt):
    suppression.suppress("Ada@Example.org", "bounce", actor="ses", text="550 user unknown",
                         runtime=rt)  # fmt: skip
    rt.clock.advance(60)
    item = one_email(rt, "ada@example.org")
    calls = []
    no_ses = type("NoSes", (), {"send_raw": lambda *a, **k: calls.append(a)})
    rt.overrides["ses_provider"] = no_ses()
    assert process(aws, rt, item) == send.SUPPRESSED
    assert calls == []
    stored = rt.store.get_item(item.id)
    assert stored.state == "cancelled" and stored.done_at is not None
    assert "ada@example.org is on the suppression list since 2026-01-01T00:00:00" in stored.result
    assert "a permanent bounce: 550 user unknown" in stored.result
    [entry] = rt.store.history(item.id)
    assert (entry.name, entry.from_state, entry.to_state, entry.actor) == (
        "cancel", "queued", "cancelled", "worker")
    assert "suppression list" in entry.text


@pytest.mark.parametrize("booked", [2.0, 0.1], ids=["long wait", "short wait"])
def test_a_receiver_suppressed_while_the_send_waits_for_its_turn_is_not_sent(aws, rt, booked):
    """The check before the claim is read again after a paced wait longer than a moment: a
    complaint that arrives during the wait stops the send (the item goes back on the queue and
    the next delivery cancels it). After a short wait no second read is made."""
    from vdq.dispatch import pacing

    wall, pacer, queue = paced(rt)
    item = one_email(rt, "ada@example.org")
    pacer.records.reserve(pacing.SES_KEY, booked, wall.now, wall.now, busy=False)

    def complaint_meanwhile(seconds: float) -> None:
        wall.sleep(seconds)
        suppression.suppress("ada@example.org", "complaint", actor="ses", text=None, runtime=rt)

    pacer.sleep = complaint_meanwhile
    calls = []
    rt.overrides["ses_provider"] = type("NoSes", (), {
        "send_raw": lambda *a, **k: calls.append(a) or "0100-1"})()  # fmt: skip
    outcome = send.process_body(queue.messages[0].body(), rt)
    if booked <= suppression.RECHECK_AFTER_WAIT_SECONDS:
        assert outcome == send.ACCEPTED and len(calls) == 1  # the moment's window stays
        return
    assert outcome == send.SUPPRESSED and calls == []
    stored = rt.store.get_item(item.id)
    assert stored.state == "queued" and "while the send waited" in stored.result
    assert send.process_body(queue.messages[-1].body(), rt) == send.SUPPRESSED
    stored = rt.store.get_item(item.id)
    assert stored.state == "cancelled" and calls == []
    assert [h.name for h in rt.store.history(item.id)] == ["send", "suppressed", "cancel"]


def test_a_failed_read_again_after_a_paced_wait_sends_rather_than_errors_the_item(aws, rt,
                                                                                 monkeypatch):
    """The read after a paced wait is a second look at a receiver that passed the check before
    the claim. When that GetItem fails (throttled, a timeout), the item must still be sent, as
    a send whose pacing record cannot be read is (vdq.dispatch.pacing.gate). On eb5de0e the failure
    reaches the worker's catch-all: the item ends errored ("internal error in the send
    worker") and waits for an operator, though nothing says its receiver is suppressed."""
    from vdq.dispatch import pacing

    wall, pacer, queue = paced(rt)
    item = one_email(rt, "ada@example.org")
    pacer.records.reserve(pacing.SES_KEY, 2.0, wall.now, wall.now, busy=False)
    pacer.sleep = wall.sleep
    reads = []
    get_suppression = rt.store.get_suppression

    def second_read_fails(key: str):
        reads.append(key)
        if len(reads) == 2:
            raise RuntimeError("injected: the read was throttled")
        return get_suppression(key)

    monkeypatch.setattr(rt.store, "get_suppression", second_read_fails)
    calls = []
    rt.overrides["ses_provider"] = type("NoSes", (), {
        "send_raw": lambda *a, **k: calls.append(a) or "0100-1"})()  # fmt: skip
    assert send.process_body(queue.messages[0].body(), rt) == send.ACCEPTED
    assert len(reads) == 2 and len(calls) == 1
    # Sent: sending until its first event or its check, which names it.
    assert rt.store.get_item(item.id).state == "sending"
    assert [(i, p) for i, _, p, _ in checks(aws)] == [(item.id, "0100-1")]


def test_a_send_given_back_for_a_suppression_is_not_counted_as_paced(aws, rt, monkeypatch):
    """The dashboard's Provider rate widget shows SendsPaced, "an item given back to wait for
    its turn at the rate" (vdq.core.resources). An item given back because its receiver was
    suppressed during the wait is counted once, as SendsSuppressed when its next delivery
    cancels it; on eb5de0e the give-back also counted it as paced."""
    from vdq.core import resources
    from vdq.core.observability import metrics
    from vdq.dispatch import pacing

    counted: list[str] = []
    monkeypatch.setattr(metrics, "add_metric", lambda name, **_: counted.append(name))
    wall, pacer, queue = paced(rt)
    one_email(rt, "ada@example.org")
    pacer.records.reserve(pacing.SES_KEY, 2.0, wall.now, wall.now, busy=False)

    def complaint_meanwhile(seconds: float) -> None:
        wall.sleep(seconds)
        suppression.suppress("ada@example.org", "complaint", actor="ses", text=None, runtime=rt)

    pacer.sleep = complaint_meanwhile
    assert send.process_body(queue.messages[0].body(), rt) == send.SUPPRESSED
    assert send.process_body(queue.messages[-1].body(), rt) == send.SUPPRESSED
    assert counted.count(resources.METRIC_SENDS_SUPPRESSED) == 1
    assert resources.METRIC_SENDS_PACED not in counted


def test_a_plus_label_variant_is_an_address_of_its_own(aws, rt):
    suppression.suppress("bounce+a1@simulator.amazonses.com", "bounce", actor="ses", text=None,
                         runtime=rt)  # fmt: skip
    other = one_email(rt, "bounce+a2@simulator.amazonses.com")
    assert process(aws, rt, other) == send.ACCEPTED


def test_the_worker_sends_after_the_suppression_is_removed(aws, rt):
    suppression.suppress("ada@example.org", "operator", actor="op", text=None, runtime=rt)
    rt.clock.advance(1)
    suppression.unsuppress("ada@example.org", actor="op", text="asked back", runtime=rt)
    item = one_email(rt)
    assert process(aws, rt, item) == send.ACCEPTED
    actions = [(e.action, e.actor) for e in rt.store.suppression_history("ada@example.org")]
    assert actions == [("added", "op"), ("removed", "op")]


def test_a_duplicate_delivery_of_a_suppressed_item_changes_nothing(aws, rt):
    import json

    item = one_email(rt)
    body = json.dumps(messages(aws)[item.id])
    suppression.suppress("ada@example.org", "complaint", actor="ses", text=None, runtime=rt)
    assert send.process_body(body, rt) == send.SUPPRESSED
    assert send.process_body(body, rt) == send.DROPPED
    assert len(rt.store.history(item.id)) == 1


def test_an_sms_to_an_opted_out_number_is_not_handed_to_twilio(aws, rt):
    http = fake_twilio(rt)
    suppression.suppress("+15552230001", "sms_opt_out", actor="twilio", text=None, runtime=rt)
    [item] = vdq.add_sms("+15552000000", ["+15552230001"], "Hi", runtime=rt)
    assert process(aws, rt, item) == send.SUPPRESSED
    assert http.requests == []
    assert rt.store.get_item(item.id).state == "cancelled"


# ---- the enqueue flag ---------------------------------------------------------------------


def test_enqueue_flags_suppressed_receivers_and_still_queues_them(aws, rt):
    suppression.suppress("grace@example.org", "complaint", actor="ses", text=None, runtime=rt)
    who = Caller("producer", ("vdq-senders",), frozenset({"vdq.add_queueitem"}))
    body = {"sender": {"email": SENDER}, "to": [{"email": "ada@example.org"}],
            "cc": [{"email": "Grace@Example.org"}], "subject": "Hi", "text": "Hello"}  # fmt: skip
    answer = intake.submit("email", body, who, rt)
    assert [i["receiver"]["email"] for i in answer["items"]] == [
        "ada@example.org", "Grace@Example.org"]
    assert answer["suppressed"] == [{"receiver": "grace@example.org", "reason": "complaint",
                                     "since": "2026-01-01T00:00:00.000000Z",
                                     "list": None}]  # fmt: skip
    assert len(messages(aws)) == 2  # both queued: nothing accepted is lost


def test_enqueue_flags_nothing_when_no_receiver_is_suppressed(aws, rt):
    who = Caller("producer", ("vdq-senders",), frozenset({"vdq.add_queueitem"}))
    body = {"sender": {"cell": "+15552000000"}, "to": [{"cell": "+15552230001"}], "body": "Hi"}
    assert intake.submit("sms", body, who, rt)["suppressed"] == []


# ---- SES feeds ----------------------------------------------------------------------------


def test_a_permanent_bounce_suppresses_the_address(aws, rt):
    results(rt, ses_event("bounce_permanent", message_id=MESSAGE_ID))
    record = rt.store.get_suppression("ada@example.org")
    assert (record.reason, record.actor, record.channel) == ("bounce", "ses", "email")
    assert "550 5.1.1 user unknown" in record.text


def test_a_transient_bounce_suppresses_nothing(aws, rt):
    results(rt, ses_event("bounce_transient", message_id=MESSAGE_ID))
    assert rt.store.get_suppression("ada@example.org") is None


def test_a_complaint_suppresses_the_address(aws, rt):
    event = ses_event("complaint", message_id=MESSAGE_ID)
    results(rt, event)
    [who] = event["complaint"]["complainedRecipients"]
    assert rt.store.get_suppression(who["emailAddress"].lower()).reason == "complaint"


def test_a_not_spam_feedback_is_no_complaint(aws, rt):
    event = ses_event("complaint", message_id=MESSAGE_ID, complaintFeedbackType="not-spam")
    results(rt, event)
    [who] = event["complaint"]["complainedRecipients"]
    assert rt.store.get_suppression(who["emailAddress"].lower()) is None


def test_ses_account_suppression_list_bounces_say_so(aws, rt):
    results(rt, ses_event("bounce_permanent", message_id=MESSAGE_ID,
                          bounceSubType="OnAccountSuppressionList"))  # fmt: skip
    assert rt.store.get_suppression("ada@example.org").reason == "ses_suppression_list"


def test_a_second_bounce_keeps_the_first_since(aws, rt):
    results(rt, ses_event("bounce_permanent", message_id=MESSAGE_ID))
    rt.clock.advance(3600)
    results(rt, ses_event("bounce_permanent", message_id=MESSAGE_ID + "2"))
    assert rt.store.get_suppression("ada@example.org").since == "2026-01-01T00:00:00.000000Z"
    assert len(rt.store.suppression_history("ada@example.org")) == 1


# ---- Twilio feeds -------------------------------------------------------------------------


def test_twilio_21610_on_send_suppresses_the_number(aws, rt):
    http = fake_twilio(rt)
    http.answer(400, {"code": 21610, "message": "Attempt to send to unsubscribed recipient",
                      "status": 400})  # fmt: skip
    [item] = vdq.add_sms("+15552000000", ["+15552230004"], "Hi", runtime=rt)
    assert process(aws, rt, item) == send.ERRORED
    assert "+15552230004 is on the suppression list from now on" in rt.store.get_item(
        item.id).result
    assert rt.store.get_suppression("+15552230004").reason == "sms_opt_out"


def test_another_twilio_refusal_suppresses_nothing(aws, rt):
    http = fake_twilio(rt)
    http.answer(400, {"code": 21211, "message": "not a valid phone number", "status": 400})
    [item] = vdq.add_sms("+15552000000", ["+15552230004"], "Hi", runtime=rt)
    assert process(aws, rt, item) == send.ERRORED
    assert rt.store.get_suppression("+15552230004") is None


def test_twilio_21610_in_a_status_callback_suppresses_the_number(aws, rt):
    event = twilio_event("failed", sid="SM" + "b" * 32, item_id=None, ErrorCode="21610",
                         To="+15552230009")  # fmt: skip
    answer = webhook.handler(event, LambdaContext("webhook"))
    assert answer["statusCode"] == 204
    assert rt.store.get_suppression("+15552230009").reason == "sms_opt_out"


def test_a_forged_callback_suppresses_nothing(aws, rt):
    event = twilio_event("failed", sid="SM" + "b" * 32, item_id=None, ErrorCode="21610",
                         To="+15552230009", token="not-the-token")  # fmt: skip
    assert webhook.handler(event, LambdaContext("webhook"))["statusCode"] == 403
    assert rt.store.get_suppression("+15552230009") is None
