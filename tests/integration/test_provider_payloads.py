"""Every documented payload shape the providers send reaches its item, through the handler the
local stack and Lambda run: SES's event publishing examples of every type, the older
notification format (``notificationType``), SNS envelopes with and without raw message
delivery, SNS's own subscription messages, Twilio's status callbacks and the Message resource a
fetch answers with. None answers a 5xx or fails its SQS record, and none is dropped without
its outcome: each moves the item or is written in its history (or says in the log what it is).
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest
from functions.webhook import handler as webhook

from tests.support.events import EVENTS, load_event
from tests.support.fake_twilio import fake_twilio
from tests.support.results import (
    SAMPLE_ACCOUNT_SID,
    SAMPLE_AUTH_TOKEN,
    SAMPLE_WEBHOOK_URL,
    LambdaContext,
    kinds,
    new_email,
    new_sms,
    to_awaiting,
    to_sending,
    twilio_event,
)
from vdq.core.clock import iso
from vdq.dispatch import record
from vdq.results import checks
from vdq.results.matching import SES_TOPIC_VALIDATION
from vdq.runtime import Runtime
from vdq.schedules import sweeps as schedules

MSG = "010001927b2d6c1e-payload-shapes-000000"
SID = "SM" + "c" * 32

# What each SES sample does to an email awaiting its outcome: its state after, and the
# (kind, name) of the history entry that records it (None: it tells nothing new).
SES_SAMPLES = {
    "send": ("awaiting", None),  # the worker recorded the acceptance itself
    "delivery": ("succeeded", ("transition", "succeed")),
    "bounce_permanent": ("errored", ("transition", "error")),
    "bounce_transient": ("errored", ("transition", "error")),
    "complaint": ("awaiting", ("event", "Complaint")),
    "complaint_suppression_list": ("errored", ("transition", "error")),
    "reject": ("errored", ("transition", "error")),
    "rendering_failure": ("errored", ("transition", "error")),
    "delivery_delay": ("awaiting", ("event", "DeliveryDelay")),
    "open": ("awaiting", ("event", "Open")),
    "click": ("awaiting", ("event", "Click")),
    "subscription": ("awaiting", ("event", "Subscription")),
    "notification_bounce": ("errored", ("transition", "error")),
    "notification_complaint": ("awaiting", ("event", "Complaint")),
    "notification_delivery": ("succeeded", ("transition", "succeed")),
}
# Samples of what reaches the results queue and is no SES event.
NOT_EVENTS = ("ses_notification_subscription_succeeded", "ses_topic_validation",
              "sns_subscription_confirmation", "sns_unsubscribe_confirmation")  # fmt: skip


@pytest.fixture
def rt(aws, settings, clock):
    rt = Runtime(settings=replace(settings, twilio_account_sid=SAMPLE_ACCOUNT_SID,
                                  twilio_auth_token=SAMPLE_AUTH_TOKEN,
                                  twilio_webhook_url=SAMPLE_WEBHOOK_URL), clock=clock)
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    yield rt
    Runtime.reset_default()


def deliver(record_body: str, caplog) -> None:
    """One results-queue message through the webhook function: no failed record, no error."""
    event = load_event("sqs_ses_delivery")
    event["Records"][0]["body"] = record_body
    caplog.clear()
    with caplog.at_level(logging.INFO):
        answer = webhook.handler(event, LambdaContext("webhook"))
    assert answer == {"batchItemFailures": []}
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


def sample_body(name: str) -> str:
    return load_event(f"sqs_{name}")["Records"][0]["body"]


def ses_payload(name: str, item_id: str) -> dict:
    """The SES event of sample ``sqs_ses_<name>`` (raw or out of its SNS envelope), for
    ``MSG`` and, when it carries tags (event publishing does), tagged with ``item_id``."""
    data = json.loads(sample_body(f"ses_{name}"))
    event = json.loads(data["Message"]) if data.get("Type") == "Notification" else data
    event["mail"]["messageId"] = MSG
    if "tags" in event["mail"]:
        event["mail"]["tags"].update(vdq_item=[item_id], vdq_attempt=["1"])
    return event


def in_envelope(event: dict) -> str:
    """``event`` as SNS delivers it without raw message delivery (the sample's envelope)."""
    envelope = json.loads(sample_body("sns_ses_delivery"))
    return json.dumps({**envelope, "Message": json.dumps(event)})


def test_every_ses_sample_is_listed_with_what_it_does():
    names = {p.stem.removeprefix("sqs_ses_") for p in Path(EVENTS).glob("sqs_ses_*.json")}
    assert names == set(SES_SAMPLES) | {n.removeprefix("ses_") for n in NOT_EVENTS
                                        if n.startswith("ses_")}  # fmt: skip


@pytest.mark.parametrize("delivery", ["raw", "sns envelope"])
@pytest.mark.parametrize("name", sorted(SES_SAMPLES))
def test_each_documented_ses_event_reaches_its_awaiting_email(rt, caplog, name, delivery):
    item = to_awaiting(new_email(rt), rt, MSG)  # its ID mapped: untagged notifications match
    before = kinds(rt, item.id)
    event = ses_payload(name, item.id)
    deliver(json.dumps(event) if delivery == "raw" else in_envelope(event), caplog)
    state, entry = SES_SAMPLES[name]
    stored = rt.store.get_item(item.id)
    assert stored.state == state
    after = kinds(rt, item.id)
    if entry is None:
        assert after == before
    else:
        assert after[-1] == entry


def test_an_older_format_notification_for_a_tagged_email_applies_at_its_timeout(
        rt, clock, caplog):  # fmt: skip
    # Identity notifications carry no tags, and a tagged email's ID has no mapping: the event
    # waits as an orphan on the ID, and the email timeout applies it instead of timing out.
    item = to_sending(new_email(rt), rt)
    record.accepted(item, MSG, rt, map_provider_id=False)
    deliver(json.dumps(ses_payload("notification_delivery", item.id)), caplog)
    assert "kept as an orphan" in caplog.text
    assert rt.store.get_item(item.id).state == "awaiting"
    clock.advance(rt.settings.check_seconds)  # the send's check: its timeout's timer
    sent = checks.Sent(item.id, 1, MSG, iso(clock.now()))
    checks.handle({"kind": checks.KIND, "sent": [sent.as_json()]}, rt)
    clock.advance(rt.settings.email_timeout_hours * 3600)
    schedules.run(["sweep"], rt)
    stored = rt.store.get_item(item.id)
    assert stored.state == "succeeded" and "250 2.0.0 OK" in stored.result


@pytest.mark.parametrize("raw", [True, False], ids=["raw delivery", "sns envelope"])
def test_every_ses_sample_through_the_topic_and_the_local_stacks_results_poller(aws, rt, raw,
                                                                             caplog):  # fmt: skip
    """As the local stack runs them: published to an SNS topic (moto's), delivered to the
    results queue with or without raw message delivery, polled as Lambda's event source
    mapping does and handled by functions/webhook."""
    import boto3

    from vdq.core import resources
    from vdq.local.functions import Functions
    from vdq.local.pollers import Poller

    sns, sqs = boto3.client("sns"), aws["sqs"]
    url = aws["queues"][resources.RESULTS_QUEUE]
    topic = sns.create_topic(Name="vdq-test-ses-events")["TopicArn"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]  # fmt: skip
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn,
                  Attributes={"RawMessageDelivery": "true" if raw else "false"})  # fmt: skip
    sns.publish(TopicArn=topic, Message=SES_TOPIC_VALIDATION)
    items = {}
    for n, name in enumerate(sorted(SES_SAMPLES)):
        message_id = f"0100-shape-{n:02d}"
        items[name] = to_awaiting(new_email(rt, f"r{n}@example.org"), rt, message_id)
        event = ses_payload(name, items[name].id)
        event["mail"]["messageId"] = message_id
        sns.publish(TopicArn=topic, Message=json.dumps(event))
    poller = Poller(sqs, url, "webhook", Functions(), resources.RESULTS_BATCH_SIZE)
    with caplog.at_level(logging.INFO):
        while poller.poll_once():
            pass
    assert poller.failures == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert "validated the SNS topic" in caplog.text
    assert {n: rt.store.get_item(i.id).state for n, i in items.items()} == {
        n: state for n, (state, _) in SES_SAMPLES.items()}  # fmt: skip


# ---- Twilio ----------------------------------------------------------------------------------

# MessageStatus values Twilio documents for outbound messages (and inbound ones, which an
# account-level callback URL may bring), and what each does to an awaiting SMS.
CALLBACK_STATUSES = {
    "accepted": "awaiting", "scheduled": "awaiting", "queued": "awaiting",
    "sending": "awaiting", "sent": "awaiting", "delivered": "succeeded", "read": "succeeded",
    "undelivered": "errored", "partially_delivered": "errored", "failed": "errored",
    "canceled": "errored", "receiving": "awaiting", "received": "awaiting",
}  # fmt: skip


@pytest.mark.parametrize("with_to", [True, False], ids=["with To", "without To"])
@pytest.mark.parametrize("status", sorted(CALLBACK_STATUSES))
def test_each_twilio_callback_status_reaches_its_awaiting_sms(rt, status, with_to):
    item = to_awaiting(new_sms(rt), rt, SID)
    before = kinds(rt, item.id)
    params = {"ErrorCode": "30003"} if CALLBACK_STATUSES[status] == "errored" else {}
    params["MessagingServiceSid"] = "MG" + "1" * 32
    event = twilio_event(status, sid=SID, item_id=item.id, **params)
    if not with_to:
        from urllib.parse import parse_qsl, urlencode

        from twilio.request_validator import RequestValidator

        form = {k: v for k, v in parse_qsl(event["body"]) if k != "To"}
        event["body"] = urlencode(form)
        event["headers"]["X-Twilio-Signature"] = RequestValidator(
            SAMPLE_AUTH_TOKEN).compute_signature(
            f"{SAMPLE_WEBHOOK_URL}?{urlencode({'queue_item': item.id})}", form)  # fmt: skip
    assert webhook.handler(event, LambdaContext("webhook"))["statusCode"] == 204
    assert rt.store.get_item(item.id).state == CALLBACK_STATUSES[status]
    assert len(kinds(rt, item.id)) == len(before) + 1  # moved, or an event in its history


# Message resource statuses a fetch can answer for an outbound message.
FETCHED_STATUSES = {
    "accepted": "awaiting", "scheduled": "awaiting", "queued": "awaiting",
    "sending": "awaiting", "sent": "awaiting", "delivered": "succeeded", "read": "succeeded",
    "undelivered": "errored", "partially_delivered": "errored", "failed": "errored",
    "canceled": "errored",
}  # fmt: skip


@pytest.mark.parametrize("status", sorted(FETCHED_STATUSES))
def test_each_fetched_message_resource_status_is_applied_in_polling_mode(rt, clock, status):
    rt.settings = replace(rt.settings, twilio_webhook_url=None)
    http = fake_twilio(rt)
    resource = load_event("twilio_message_failed_opt_out")
    item = to_awaiting(new_sms(rt, "+14155550123"), rt, resource["sid"])
    final = FETCHED_STATUSES[status] != "awaiting"
    http.answer(200, {**resource, "to": item.receiver, "status": status,
                      "error_code": 30003 if FETCHED_STATUSES[status] == "errored" else None,
                      "error_message": None})  # fmt: skip
    clock.advance(1)
    counts = schedules.run(["sms"], rt)
    assert counts.get("failed") is None, counts
    assert rt.store.get_item(item.id).state == FETCHED_STATUSES[status]
    assert counts.get("polled") == 1 and bool(counts.get("poll_moved")) == final
