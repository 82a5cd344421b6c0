"""Provider results that suppress the receiver of the item they match, when the payload names
no receiver of its own: an SES complaint for an address on the account's suppression list,
Twilio's opt-out error (21610) in a polled or last-fetched message and in a callback without
``To``. Against moto, with the samples in events/."""

from __future__ import annotations

from dataclasses import replace

import pytest
from functions.webhook import handler as webhook

from tests.support.events import load_event
from tests.support.fake_twilio import fake_twilio
from tests.support.results import (
    SAMPLE_ACCOUNT_SID,
    SAMPLE_AUTH_TOKEN,
    SAMPLE_ITEM,
    SAMPLE_WEBHOOK_URL,
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
from vdq.dispatch import record
from vdq.runtime import Runtime
from vdq.schedules import sweeps as schedules
from vdq.store import QueueItemRecord

HOUR = 3600
MESSAGE_ID = "0100019-suppression-list-complaint-000000"
SID = "SM3c9e1f0a7b2d4e6f8a0b1c2d3e4f5a6b"  # the opt-out samples' message


def make_runtime(settings, clock, **changes):
    rt = Runtime(settings=replace(settings, twilio_account_sid=SAMPLE_ACCOUNT_SID,
                                  twilio_auth_token=SAMPLE_AUTH_TOKEN, **changes),
                 clock=clock)  # fmt: skip
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    return rt


@pytest.fixture
def rt(aws, settings, clock):
    yield make_runtime(settings, clock, twilio_webhook_url=SAMPLE_WEBHOOK_URL)
    Runtime.reset_default()


@pytest.fixture
def polling(aws, settings, clock):
    yield make_runtime(settings, clock, twilio_webhook_url=None)
    Runtime.reset_default()


def results(*bodies):
    answer = webhook.handler(sqs_event(*bodies), LambdaContext("webhook"))
    assert answer == {"batchItemFailures": []}


# ---- SES: a complaint for an address on the account's suppression list -----------------------


def list_complaint(item: QueueItemRecord, *, recipients: str) -> dict:
    """The sample (``complaintSubType: OnAccountSuppressionList``) for ``item``; its
    ``complainedRecipients`` kept, null or absent."""
    body = ses_event("complaint_suppression_list", message_id=MESSAGE_ID, item_id=item.id)
    if recipients == "absent":
        del body["complaint"]["complainedRecipients"]
    elif recipients == "null":
        body["complaint"]["complainedRecipients"] = None
    return body


@pytest.mark.parametrize("recipients", ["kept", "null", "absent"])
def test_a_suppression_list_complaint_errors_the_item_and_suppresses_its_receiver(
        rt, recipients):  # fmt: skip
    # SES accepted the email but did not attempt delivery: as its Bounce of the same subtype,
    # the item is errored (not sent), not left awaiting until the email timeout.
    item = to_awaiting(new_email(rt), rt, MESSAGE_ID)
    results(list_complaint(item, recipients=recipients))
    stored = rt.store.get_item(item.id)
    assert stored.state == "errored"
    assert "suppression list" in stored.result and "not" in stored.result
    assert ("transition", "error") in kinds(rt, item.id)
    record = rt.store.get_suppression(item.receiver)
    assert (record.reason, record.actor) == ("ses_suppression_list", "ses")


def test_a_suppression_list_complaint_for_no_item_yet_suppresses_once_an_item_stores_the_id(rt):
    # Kept as an orphan (it names no one to suppress), applied when the worker stores the ID.
    item = new_email(rt)
    body = list_complaint(item, recipients="absent")
    del body["mail"]["tags"]["vdq_item"], body["mail"]["tags"]["vdq_attempt"]
    results(body)
    assert rt.store.get_suppression(item.receiver) is None
    item = to_sending(item, rt)
    record.accepted(item, MESSAGE_ID, rt)  # adopts the orphan
    assert rt.store.get_item(item.id).state == "errored"
    assert rt.store.get_suppression(item.receiver).reason == "ses_suppression_list"


def test_an_ordinary_complaint_after_delivery_keeps_the_item_succeeded(rt):
    item = to_awaiting(new_email(rt), rt, MESSAGE_ID)
    results(ses_event("delivery", message_id=MESSAGE_ID, item_id=item.id))
    results(ses_event("complaint", message_id=MESSAGE_ID, item_id=item.id))
    assert rt.store.get_item(item.id).state == "succeeded"
    assert rt.store.get_suppression(item.receiver).reason == "complaint"


@pytest.mark.parametrize("recipients", ["null", "absent", "unreadable"])
def test_an_ordinary_complaint_that_names_no_recipient_suppresses_the_items_receiver(
        rt, recipients):  # fmt: skip
    # A complaint whose recipient SES (or the ISP's redacted report) does not name is still
    # a complaint about the email the item sent: its receiver is not sent to again.
    item = to_awaiting(new_email(rt), rt, MESSAGE_ID)
    results(ses_event("delivery", message_id=MESSAGE_ID, item_id=item.id))
    body = ses_event("complaint", message_id=MESSAGE_ID, item_id=item.id)
    if recipients == "absent":
        del body["complaint"]["complainedRecipients"]
    elif recipients == "null":
        body["complaint"]["complainedRecipients"] = None
    else:
        body["complaint"]["complainedRecipients"] = [{"emailAddress": "redacted"}]
    results(body)
    assert rt.store.get_item(item.id).state == "succeeded"
    record = rt.store.get_suppression(item.receiver)
    assert record is not None and (record.reason, record.actor) == ("complaint", "ses")


@pytest.mark.parametrize("recipients", ["null", "absent", "unreadable"])
def test_a_permanent_bounce_that_names_no_recipient_suppresses_the_items_receiver(
        rt, recipients):  # fmt: skip
    item = to_awaiting(new_email(rt), rt, MESSAGE_ID)
    body = ses_event("bounce_permanent", message_id=MESSAGE_ID, item_id=item.id)
    if recipients == "absent":
        del body["bounce"]["bouncedRecipients"]
    elif recipients == "null":
        body["bounce"]["bouncedRecipients"] = None
    else:
        body["bounce"]["bouncedRecipients"] = [{"emailAddress": None}]
    results(body)
    assert rt.store.get_item(item.id).state == "errored"
    record = rt.store.get_suppression(item.receiver)
    assert record is not None and (record.reason, record.actor) == ("bounce", "ses")


def test_a_transient_bounce_suppresses_no_one(rt):
    item = to_awaiting(new_email(rt), rt, MESSAGE_ID)
    body = ses_event("bounce_transient", message_id=MESSAGE_ID, item_id=item.id)
    del body["bounce"]["bouncedRecipients"]
    results(body)
    assert rt.store.get_suppression(item.receiver) is None


def test_a_not_spam_report_that_names_no_recipient_suppresses_no_one(rt):
    item = to_awaiting(new_email(rt), rt, MESSAGE_ID)
    body = ses_event("complaint", message_id=MESSAGE_ID, item_id=item.id)
    del body["complaint"]["complainedRecipients"]
    body["complaint"]["complaintFeedbackType"] = "not-spam"
    results(body)
    assert rt.store.get_suppression(item.receiver) is None


# ---- Twilio: the opt-out error without the number in the payload ----------------------------


def test_a_polled_message_failed_with_the_opt_out_error_suppresses_the_number(polling, clock):
    twilio = polling.overrides["twilio"] = FakeTwilio()
    item = to_awaiting(new_sms(polling), polling, SID)
    clock.advance(1)
    twilio.statuses = {SID: Status("failed", 21610, "Attempt to send to unsubscribed recipient")}
    schedules.run(["sms"], polling)
    assert twilio.fetched == [SID]
    assert polling.store.get_item(item.id).state == "errored"
    record = polling.store.get_suppression(item.receiver)
    assert (record.reason, record.actor) == ("sms_opt_out", "twilio")


def test_the_message_resource_twilio_answers_a_fetch_with_feeds_the_suppression(polling, clock):
    # The sample is the Message resource as Twilio's API returns it (error_code a number),
    # read by the real twilio client.
    http = fake_twilio(polling)
    resource = load_event("twilio_message_failed_opt_out")
    item = to_awaiting(new_sms(polling, resource["to"]), polling, resource["sid"])
    http.answer(200, resource)
    clock.advance(1)
    schedules.run(["sms"], polling)
    assert http.requests[-1].url.endswith(f"/Messages/{resource['sid']}.json")
    assert polling.store.get_item(item.id).state == "errored"
    assert polling.store.get_suppression(resource["to"]).reason == "sms_opt_out"


def test_the_timeouts_last_fetch_with_the_opt_out_error_suppresses_the_number(rt, clock):
    twilio = rt.overrides["twilio"] = FakeTwilio()
    item = to_awaiting(new_sms(rt), rt, SID)
    twilio.statuses = {SID: Status("failed", 21610, "Attempt to send to unsubscribed recipient")}
    clock.advance(rt.settings.twilio_sms_timeout_hours * HOUR + 1)
    schedules.run(["sms"], rt)
    assert twilio.fetched == [SID]
    assert rt.store.get_item(item.id).state == "errored"
    assert rt.store.get_suppression(item.receiver).reason == "sms_opt_out"


def opt_out_callback(item_id: str | None = None) -> dict:
    """The opt-out callback sample, signed for a status callback URL naming ``item_id``."""
    from urllib.parse import parse_qsl, urlencode

    from twilio.request_validator import RequestValidator

    event = load_event("twilio_status_failed_opt_out")
    if item_id is not None:
        event["queryStringParameters"] = {"queue_item": item_id}
        event["multiValueQueryStringParameters"] = {"queue_item": [item_id]}
        url = f"{SAMPLE_WEBHOOK_URL}?{urlencode({'queue_item': item_id})}"
        signature = RequestValidator(SAMPLE_AUTH_TOKEN).compute_signature(
            url, dict(parse_qsl(event["body"])))  # fmt: skip
        event["headers"] = {**event["headers"], "X-Twilio-Signature": signature}
    return event


def test_the_opt_out_callback_sample_is_signed_as_twilio_signs_it(rt):
    event = opt_out_callback()
    assert event["queryStringParameters"] == {"queue_item": SAMPLE_ITEM}
    assert "To=" not in event["body"]  # as Twilio's documented example
    assert webhook.handler(event, LambdaContext("webhook"))["statusCode"] == 204


def test_an_opt_out_callback_without_to_suppresses_the_receiver_of_the_item_it_names(rt):
    item = to_awaiting(new_sms(rt), rt, SID)
    assert webhook.handler(opt_out_callback(item.id), LambdaContext("webhook"))["statusCode"] == 204
    assert rt.store.get_item(item.id).state == "errored"
    record = rt.store.get_suppression(item.receiver)
    assert (record.reason, record.actor) == ("sms_opt_out", "twilio")


def test_an_opt_out_callback_with_to_suppresses_the_number_once(rt, monkeypatch):
    from vdq.results import suppression

    calls = []
    real = suppression.suppress
    monkeypatch.setattr(suppression, "suppress", lambda *a, **k: calls.append(a) or real(*a, **k))
    item = to_awaiting(new_sms(rt), rt, SID)
    event = opt_out_callback(item.id)
    from urllib.parse import parse_qsl, urlencode

    from twilio.request_validator import RequestValidator

    form = {**dict(parse_qsl(event["body"])), "To": item.receiver}
    event["body"] = urlencode(form)
    url = f"{SAMPLE_WEBHOOK_URL}?{urlencode({'queue_item': item.id})}"
    event["headers"]["X-Twilio-Signature"] = RequestValidator(SAMPLE_AUTH_TOKEN).compute_signature(
        url, form)  # fmt: skip
    assert webhook.handler(event, LambdaContext("webhook"))["statusCode"] == 204
    assert rt.store.get_suppression(item.receiver).reason == "sms_opt_out"
    assert calls == [(item.receiver, "sms_opt_out")]


# ---- a provider event suppresses once: its redelivery does not undo a removal ----------------


def remove_by_operator(receiver: str) -> None:
    from tests.support.operator import call

    removed = call("remove_suppression", params={"receiver": receiver},
                   groups=("vdq-suppressions",))  # fmt: skip
    assert removed.status == 200


@pytest.mark.parametrize("recipients", ["named", "absent"])
def test_a_redelivered_bounce_after_an_operators_removal_suppresses_no_one(rt, clock,
                                                                           recipients):
    # SQS delivers a message at least once, and an operator may redrive a dead-letter queue:
    # the bounce was applied the first time, and the operator lifted it since.
    item = to_awaiting(new_email(rt), rt, MESSAGE_ID)
    body = ses_event("bounce_permanent", message_id=MESSAGE_ID, item_id=item.id)
    if recipients == "absent":  # the receiver of the item it matches is suppressed
        del body["bounce"]["bouncedRecipients"]
    else:
        body["bounce"]["bouncedRecipients"] = [{"emailAddress": item.receiver,
                                                "diagnosticCode": "smtp; 550 5.1.1 no such user"}]
    results(body)
    assert rt.store.get_suppression(item.receiver).reason == "bounce"
    clock.advance(1)
    remove_by_operator(item.receiver)

    results(body)  # redelivered
    assert rt.store.get_suppression(item.receiver) is None
    assert rt.store.get_item(item.id).state == "errored"
    assert [e.action for e in rt.store.suppression_history(item.receiver)] == [
        "added", "removed"]


def test_a_redelivered_bounce_for_a_receiver_suppressed_before_it_suppresses_no_one(rt, clock):
    # Applied the first time to a receiver a complaint had suppressed already: that is its
    # one application, and the operator's removal since holds.
    from vdq.results import suppression

    item = to_awaiting(new_email(rt), rt, MESSAGE_ID)
    suppression.suppress(item.receiver, "complaint", actor="ses", text=None, runtime=rt)
    body = ses_event("bounce_permanent", message_id=MESSAGE_ID, item_id=item.id)
    body["bounce"]["bouncedRecipients"] = [{"emailAddress": item.receiver}]
    results(body)
    clock.advance(1)
    remove_by_operator(item.receiver)
    results(body)
    assert rt.store.get_suppression(item.receiver) is None


def test_a_redelivered_opt_out_callback_after_start_suppresses_no_one(rt, clock):
    from vdq.results import suppression

    item = to_awaiting(new_sms(rt), rt, SID)
    event = opt_out_callback(item.id)
    assert webhook.handler(event, LambdaContext("webhook"))["statusCode"] == 204
    assert rt.store.get_suppression(item.receiver).reason == "sms_opt_out"
    clock.advance(1)
    assert suppression.handle_inbound_sms({"From": item.receiver, "Body": "START"},
                                          rt) == "removed"  # fmt: skip
    assert webhook.handler(event, LambdaContext("webhook"))["statusCode"] == 204  # Twilio again
    assert rt.store.get_suppression(item.receiver) is None


def test_another_bounce_after_a_removal_suppresses_again(rt, clock):
    # Only the event applied before is spent: a new bounce of the address is news.
    item = to_awaiting(new_email(rt), rt, MESSAGE_ID)
    first = ses_event("bounce_permanent", message_id=MESSAGE_ID, item_id=item.id)
    first["bounce"]["bouncedRecipients"] = [{"emailAddress": item.receiver}]
    results(first)
    clock.advance(1)
    remove_by_operator(item.receiver)
    later = to_awaiting(new_email(rt, item.receiver), rt, "0100019-a-later-message-000000")
    second = ses_event("bounce_permanent", message_id=later.provider_id, item_id=later.id)
    second["bounce"]["bouncedRecipients"] = [{"emailAddress": item.receiver}]
    results(second)
    assert rt.store.get_suppression(item.receiver).reason == "bounce"
