"""The send worker against moto: SES v2 from moto, Twilio through a fake HTTP client."""

from __future__ import annotations

import base64
import email
import json
from dataclasses import replace
from email import policy
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from functions.send import handler as send_handler
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends

import vdq
from tests.support.aws import checks, drain, run_checks
from tests.support.events import load_event
from tests.support.fake_twilio import fake_twilio
from tests.support.lambda_context import LambdaContext
from vdq.dispatch import send
from vdq.providers import TransientProviderError
from vdq.providers.ses import get_ses
from vdq.results import matching as results
from vdq.workflow.transitions import Step, apply

SENDER = "shop@example.com"
WEBHOOK = "https://hooks.example.com/twilio/status?tenant=7&queue_item=stale"




@pytest.fixture
def rt(aws, runtime, clock):
    boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
    runtime.settings = replace(runtime.settings, ses_configuration_set="vdq-events",
                               twilio_webhook_url=WEBHOOK)  # fmt: skip
    # A provider call takes time: the record is written after the claim, as in production.
    get_ses(runtime).client.meta.events.register(
        "provide-client-params.sesv2.SendEmail", lambda **_: clock.advance(0.05)
    )
    return runtime


@pytest.fixture
def ses_requests(rt):
    """The parameters of every SES SendEmail call the worker makes."""
    calls = []
    client = get_ses(rt).client
    client.meta.events.register(
        "provide-client-params.sesv2.SendEmail", lambda params, **_: calls.append(dict(params))
    )
    return calls


def sent_emails():
    return ses_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sent_messages


def email_items(rt, **kwargs):
    defaults = dict(to=[{"email": "ada@example.org", "name": "Ada Lovelace"}],
                    cc=["grace@example.org"], bcc=["hidden@example.org"],
                    reply_to=["help@example.com"], html="<p>Hello <b>Ada</b></p>")  # fmt: skip
    defaults.update(kwargs)
    to = defaults.pop("to")
    return vdq.add_email({"email": SENDER, "name": "Shop"}, to, "Your order shipped",
                         "Hello Ada", runtime=rt, **defaults)  # fmt: skip


def bodies(aws):
    return {m["id"]: json.dumps(m) for m in drain(aws)}


def history(rt, item_id):
    return [(h.name, h.from_state, h.to_state) for h in rt.store.history(item_id)]


# ---- email ------------------------------------------------------------------------------------


def test_email_is_sent_through_ses_and_stays_sending_until_its_result_or_check(
        aws, rt, ses_requests):  # fmt: skip
    items = email_items(rt)
    messages = bodies(aws)
    ada = items[0]
    for item in items:
        assert send.process_body(messages[item.id], rt) == send.ACCEPTED

    # SES's acceptance writes nothing: the item stays sending, and the check of each send (on
    # the results queue, five minutes later) names its SES message ID (vdq.results.checks).
    stored = rt.store.get_item(ada.id)
    assert (stored.state, stored.attempt, stored.provider_id, stored.timer_pk) == (
        "sending", 1, None, None)
    sent = checks(aws)
    assert [(i, a) for i, a, _, _ in sent] == [(i.id, 1) for i in items]
    assert sorted(p for _, _, p, _ in sent) == sorted(m.id for m in sent_emails())
    assert history(rt, ada.id) == [("send", "queued", "sending")]
    # No result came by the check: it records the acceptance (ID, entry at SES's answer, the
    # timeout's timer) in one write.
    run_checks(aws, rt)
    [(_, _, ada_id, accepted_at)] = [c for c in sent if c[0] == ada.id]
    stored = rt.store.get_item(ada.id)
    assert (stored.state, stored.provider_id) == ("awaiting", ada_id)
    assert stored.timer_pk.startswith("mailwait#")
    # Its SES events carry the item's tags, so the ID gets no mapping record (2 write units).
    assert rt.store.find_by_provider_id(ada_id) is None
    assert history(rt, ada.id) == [("send", "queued", "sending"), ("await", "sending", "awaiting")]
    accepted = rt.store.history(ada.id)[-1]
    assert (accepted.text, accepted.at, accepted.actor) == (
        f"accepted by SES as {ada_id}", accepted_at, "worker")

    # Each item's envelope names only its receiver; the headers show the request.
    assert [m.destinations[0] for m in sent_emails()] == [
        "ada@example.org", "grace@example.org", "hidden@example.org"]  # fmt: skip
    assert [r["Destination"] for r in ses_requests] == [
        {"ToAddresses": [i.receiver]} for i in items]  # fmt: skip
    raw = sent_emails()[2].raw_data
    message = email.message_from_string(raw, policy=policy.default)
    assert message["To"] == "Ada Lovelace <ada@example.org>"
    assert message["Cc"] == "grace@example.org"
    assert message["Reply-To"] == "help@example.com"
    assert message["From"] == "Shop <shop@example.com>"
    assert "Bcc" not in message and "hidden@example.org" not in raw
    assert message.get_body(("plain",)).get_content().strip() == "Hello Ada"
    assert "<b>Ada</b>" in message.get_body(("html",)).get_content()


def test_the_ses_call_carries_the_tracking_tags_and_configuration_set(aws, rt, ses_requests):
    [item] = email_items(rt, cc=[], bcc=[])
    send.process_body(bodies(aws)[item.id], rt)
    [request] = ses_requests
    assert request["ConfigurationSetName"] == "vdq-events"
    assert request["EmailTags"] == [{"Name": "vdq_item", "Value": item.id},
                                    {"Name": "vdq_attempt", "Value": "1"}]  # fmt: skip
    assert request["FromEmailAddress"] == SENDER


def test_the_no_op_tracking_strategy_sends_no_tags(aws, rt, ses_requests):
    rt.settings = replace(rt.settings,
                          email_tracking_strategy="vdq.results.tracking.EmailTrackingStrategy")
    [item] = email_items(rt, cc=[], bcc=[])
    assert send.process_body(bodies(aws)[item.id], rt) == send.ACCEPTED
    assert "EmailTags" not in ses_requests[0]
    # Its events name only the SES message ID: they find the item through the mapping.
    stored = rt.store.get_item(item.id)
    assert rt.store.find_by_provider_id(stored.provider_id).item_id == item.id


def test_attachments_and_inline_images_are_built_into_the_message(aws, rt):
    files = [
        {"filename": "invoice.pdf", "content_type": "application/pdf",
         "content_base64": base64.b64encode(b"%PDF-1.4 invoice").decode()},
        {"filename": "logo.png", "content_type": "image/png", "inline": True,
         "content_id": "logo@shop", "content_base64": base64.b64encode(b"\x89PNG logo").decode()},
    ]  # fmt: skip
    [item] = email_items(rt, cc=[], bcc=[], attachments=files,
                         html='<p>Hi <img src="cid:logo@shop"></p>')  # fmt: skip
    assert send.process_body(bodies(aws)[item.id], rt) == send.ACCEPTED
    message = email.message_from_string(sent_emails()[0].raw_data, policy=policy.default)
    parts = {p.get_filename(): p for p in message.walk() if p.get_filename()}
    assert parts["invoice.pdf"].get_content() == b"%PDF-1.4 invoice"
    assert parts["invoice.pdf"].get_content_disposition() == "attachment"
    logo = parts["logo.png"]
    assert logo["Content-ID"] == "<logo@shop>" and logo.get_content_disposition() == "inline"
    assert logo.get_content() == b"\x89PNG logo"
    related = next(p for p in message.walk() if p.get_content_type() == "multipart/related")
    assert [p.get_content_type() for p in related.iter_parts()] == ["text/html", "image/png"]


def test_an_attachment_whose_file_was_purged_errors_with_a_clear_result(aws, rt):
    files = [{"filename": "invoice.pdf", "content_type": "application/pdf",
              "content_base64": base64.b64encode(b"%PDF").decode()}]  # fmt: skip
    [item] = email_items(rt, cc=[], bcc=[], attachments=files)
    content = rt.store.get_content(item.content_id)
    [record] = rt.store.get_attachments(content["attachments"])
    record.update(actions=[type(record).purged_at.set("2026-01-01T00:00:00.000000Z")])
    assert send.process_body(bodies(aws)[item.id], rt) == send.ERRORED
    stored = rt.store.get_item(item.id)
    assert stored.state == "errored" and "invoice.pdf was deleted" in stored.result
    assert sent_emails() == []


def test_content_is_read_when_the_message_does_not_carry_it(aws, rt):
    [item] = email_items(rt, cc=[], bcc=[])
    bare = json.dumps({"id": item.id, "attempt": 1})
    assert send.process_body(bare, rt) == send.ACCEPTED
    assert "Your order shipped" in sent_emails()[0].raw_data


def test_missing_content_errors_the_item_without_calling_ses(aws, rt):
    [item] = email_items(rt, cc=[], bcc=[])
    from vdq.store import ContentRecord, content_key

    ContentRecord(*content_key(item.content_id)).delete()
    assert send.process_body(json.dumps({"id": item.id, "attempt": 1}), rt) == send.ERRORED
    stored = rt.store.get_item(item.id)
    assert "content" in stored.result and "no longer exists" in stored.result
    assert sent_emails() == []


def test_stored_content_whose_subject_would_inject_a_header_errors_without_calling_ses(aws, rt):
    """Content stored before enqueue refused encoded line breaks (or by another path) is never
    written as a message with a Bcc line of its own."""
    [item] = email_items(rt, cc=[], bcc=[])
    message = json.loads(bodies(aws)[item.id])
    message["content"] = {**message.get("content", {}),
                          "subject": "=?UTF-8?Q?Hi=0D=0ABcc:_victim@example.net?="}  # fmt: skip
    assert send.process_body(json.dumps(message), rt) == send.ERRORED
    stored = rt.store.get_item(item.id)
    assert stored.state == "errored" and "subject" in stored.result
    assert "cannot be sent safely" in stored.result
    assert sent_emails() == [] and drain(aws) == []


def test_ses_permanent_rejection_errors_the_item_with_the_ses_text(aws, rt):
    items = vdq.add_email("unverified@example.com", ["ada@example.org"], "Hi", "Hello",
                          runtime=rt)  # fmt: skip
    assert send.process_body(bodies(aws)[items[0].id], rt) == send.ERRORED
    stored = rt.store.get_item(items[0].id)
    assert stored.state == "errored" and (stored.retries or 0) == 0  # absent: none
    assert stored.result.startswith("SES (MessageRejected): ")
    assert "unverified@example.com" in stored.result
    assert drain(aws) == []  # no retry is published


# ---- duplicates and old attempts ---------------------------------------------------------------


def test_a_duplicate_delivery_calls_the_provider_once(aws, rt):
    [item] = email_items(rt, cc=[], bcc=[])
    body = bodies(aws)[item.id]
    assert send.process_body(body, rt) == send.ACCEPTED
    # Sending until its first result or its check: a copy waits for the claim's lease.
    assert send.process_body(body, rt) == send.WAITING
    run_checks(aws, rt)
    assert send.process_body(body, rt) == send.DROPPED
    assert len(sent_emails()) == 1
    assert rt.store.get_item(item.id).state == "awaiting"


def test_a_message_for_an_older_attempt_is_dropped(aws, rt):
    [item] = email_items(rt, cc=[], bcc=[])
    old = bodies(aws)[item.id]
    apply(item.id, Step("error", actor="vdq", result="publish failed"), rt)
    apply(item.id, Step("retry", actor="op", source="operator"), rt)
    new = bodies(aws)[item.id]
    assert json.loads(new)["attempt"] == 2
    assert send.process_body(old, rt) == send.DROPPED
    assert sent_emails() == []
    assert send.process_body(new, rt) == send.ACCEPTED
    assert len(sent_emails()) == 1


def test_a_message_for_a_cancelled_item_is_dropped(aws, rt):
    [item] = email_items(rt, cc=[], bcc=[])
    body = bodies(aws)[item.id]
    apply(item.id, Step("cancel", actor="op", source="operator"), rt)
    assert send.process_body(body, rt) == send.DROPPED
    assert rt.store.get_item(item.id).state == "cancelled"
    assert sent_emails() == []


def test_a_message_for_an_unknown_item_is_dropped(aws, rt):
    assert send.process_body(json.dumps({"id": "01JDZ7K3M4N5P6Q7R8S9T0V1W2", "attempt": 1}),
                             rt) == send.DROPPED  # fmt: skip


# ---- transient errors and the retry schedule -----------------------------------------------------


class FailingSes:
    def __init__(self, error, clock=None):
        self.error, self.clock = error, clock
        self.calls = 0

    def send_raw(self, **_):
        self.calls += 1
        if self.clock is not None:
            self.clock.advance(0.05)
        raise self.error


class RecordingQueue:
    def __init__(self):
        self.messages = []

    def publish(self, messages):
        self.messages.extend(messages)
        return {}


def test_transient_errors_retry_on_the_celery_schedule_then_error_after_12(aws, rt, clock):
    [item] = email_items(rt, cc=[], bcc=[])
    body = bodies(aws)[item.id]
    ses = FailingSes(TransientProviderError("SES", "Maximum sending rate exceeded.",
                                            code="TooManyRequestsException"), clock)  # fmt: skip
    rt.overrides["ses_provider"] = ses
    queue = RecordingQueue()
    rt.overrides["send_queue"] = queue
    rt.__dict__.pop("send_queue", None)

    delays = []
    while True:
        outcome = send.process_body(body, rt)
        stored = rt.store.get_item(item.id)
        if outcome != send.DELAYED:
            break
        assert stored.state == "delayed" and stored.retry_delay == queue.messages[-1].delay_seconds
        message = queue.messages[-1]
        assert message.attempt == stored.attempt == len(delays) + 2
        delays.append(message.delay_seconds)
        clock.advance(message.delay_seconds)
        body = message.body()

    assert delays == [16, 32, 64, 128, 256, 512, 600, 600, 600, 600, 600, 600]
    assert outcome == send.ERRORED and ses.calls == 13
    assert stored.state == "errored" and stored.retries == 12
    assert "gave up after 12 retries" in stored.result and "TooManyRequests" in stored.result
    assert len(queue.messages) == 12  # no publish after the last failure
    steps = history(rt, item.id)
    assert steps[:3] == [("send", "queued", "sending"), ("delay", "sending", "delayed"),
                         ("send", "delayed", "sending")]  # fmt: skip
    assert steps[-1] == ("error", "sending", "errored")
    assert len(steps) == 26


def test_a_delayed_item_that_is_sent_on_retry_awaits(aws, rt, clock):
    [item] = email_items(rt, cc=[], bcc=[])
    body = bodies(aws)[item.id]
    rt.overrides["ses_provider"] = FailingSes(TransientProviderError("SES", "503", code=503))
    assert send.process_body(body, rt) == send.DELAYED
    del rt.overrides["ses_provider"]
    clock.advance(16)
    # The published retry (moto holds it for 16 real seconds): the item's new attempt.
    retry = {"id": item.id, "attempt": 2}
    assert send.process_body(json.dumps(retry), rt) == send.ACCEPTED
    assert [(i, a) for i, a, _, _ in checks(aws)] == [(item.id, 2)]
    run_checks(aws, rt)
    stored = rt.store.get_item(item.id)
    assert stored.state == "awaiting" and stored.attempt == 2 and stored.result is None


# ---- ambiguous and unexpected failures ---------------------------------------------------------


def test_a_read_timeout_errors_the_item_and_warns_of_a_double_send(aws, rt):
    from botocore.exceptions import ReadTimeoutError

    [item] = email_items(rt, cc=[], bcc=[])
    client = get_ses(rt).client

    def timeout(**_):
        raise ReadTimeoutError(endpoint_url="https://email.us-east-1.amazonaws.com")

    client.meta.events.register("before-send.sesv2.SendEmail", timeout)
    assert send.process_body(bodies(aws)[item.id], rt) == send.ERRORED
    stored = rt.store.get_item(item.id)
    assert stored.state == "errored"
    assert "may have accepted" in stored.result and "may send it twice" in stored.result
    assert drain(aws) == []


def test_an_unexpected_exception_is_named_in_result_without_a_traceback(aws, rt):
    [item] = email_items(rt, cc=[], bcc=[])
    rt.overrides["ses_provider"] = FailingSes(RuntimeError("the MIME library broke"))
    assert send.process_body(bodies(aws)[item.id], rt) == send.ERRORED
    stored = rt.store.get_item(item.id)
    assert stored.state == "errored"
    assert "RuntimeError: the MIME library broke" in stored.result
    assert "Traceback" not in stored.result and "File " not in stored.result
    [entry] = [h for h in rt.store.history(item.id) if h.name == "error"]
    assert "Traceback" not in entry.text  # the log keeps it, not what producers can read


# ---- SMS ------------------------------------------------------------------------------------


def test_an_mms_of_media_alone_is_sent_to_twilio_without_a_body(aws, rt):
    http = fake_twilio(rt)
    [item] = vdq.add_sms("+15005550006", ["+14155550100"],
                         media_urls=["https://cdn.example.com/a.png"], runtime=rt)  # fmt: skip
    assert send.process_body(bodies(aws)[item.id], rt) == send.ACCEPTED
    [request] = http.requests
    assert "Body" not in request.data
    assert request.data["MediaUrl"] == ["https://cdn.example.com/a.png"]
    assert rt.store.get_item(item.id).state == "sending"


def test_sms_is_sent_through_twilio_with_the_status_callback_and_awaits(aws, rt):
    http = fake_twilio(rt)
    [item] = vdq.add_sms("+15005550006", ["+14155550100"], "Your code is 493021",
                         media_urls=["https://cdn.example.com/a.png"], runtime=rt)  # fmt: skip
    assert send.process_body(bodies(aws)[item.id], rt) == send.ACCEPTED
    [request] = http.requests
    assert request.method == "POST" and request.url.endswith("/Messages.json")
    assert request.data["From"] == "+15005550006" and request.data["To"] == "+14155550100"
    assert request.data["Body"] == "Your code is 493021"
    assert request.data["MediaUrl"] == ["https://cdn.example.com/a.png"]
    assert request.data["StatusCallback"] == (
        f"https://hooks.example.com/twilio/status?tenant=7&queue_item={item.id}&attempt=1")
    # Twilio's acceptance writes nothing: the status callbacks name the item and attempt, and
    # the first stores the SID with the acceptance's entry; the check names it meanwhile.
    stored = rt.store.get_item(item.id)
    assert (stored.state, stored.provider_id, stored.timer_pk) == ("sending", None, None)
    [(_, attempt, sid, _)] = checks(aws)
    assert attempt == 1 and sid.startswith("SM")
    results.handle_twilio_callback({"MessageSid": sid, "MessageStatus": "sent"}, item.id, rt,
                                   attempt="1")  # fmt: skip
    stored = rt.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == ("awaiting", sid)
    assert stored.timer_pk.startswith("await#")
    assert rt.store.find_by_provider_id(sid) is None  # no mapping: callbacks name the item
    [*_, accepted, event] = rt.store.history(item.id)
    assert (accepted.name, accepted.text) == ("await", f"accepted by Twilio as {sid}")
    assert (event.kind, event.name, event.from_state) == ("event", "sent", "awaiting")


@pytest.mark.parametrize(("hours", "validity"), [(2.0, 5400), (24.0, 36000), (0.005, 9)])
def test_an_sms_may_wait_in_twilios_queue_only_until_well_before_its_timeout(
        aws, rt, hours, validity):  # fmt: skip
    """Found with Twilio's documented queue: a message may wait there 10 hours by default and
    is then still sent, while VDQ times an SMS out after 2: an operator's resend of the
    `unconfirmed` item (last status: queued) made the receiver get it twice. The message now
    asks Twilio to drop it (error 30036) before VDQ's last look: half the timeout, or all but
    its last 30 minutes, at most Twilio's 36,000 seconds."""
    rt.settings = replace(rt.settings, twilio_sms_timeout_hours=hours)
    http = fake_twilio(rt)
    [item] = vdq.add_sms("+15005550006", ["+14155550100"], "hi", runtime=rt)
    send.process_body(bodies(aws)[item.id], rt)
    # (the fake clock moves 50 ms a request: the claim is a moment before the create)
    assert validity - 1 <= int(http.requests[0].data["ValidityPeriod"]) <= validity


def test_the_validity_counts_from_the_claim_that_starts_the_timeout():
    """Review found the timeout counts from the claim and the validity from Twilio's create:
    a send that waited for its pace after the claim (or a timeout under an hour) left the
    message valid past VDQ's last look. The validity is taken from what is left."""
    from vdq.providers.twilio import validity_seconds

    assert validity_seconds(2.0, elapsed=600) == 4800  # 6,600 s left: all but 30 minutes
    assert validity_seconds(0.01, elapsed=20) == 8  # 16 s left: half of it
    assert validity_seconds(0.001, elapsed=10) == 1  # past it already: Twilio's least


def test_sms_without_a_webhook_url_sends_no_status_callback(aws, rt):
    rt.settings = replace(rt.settings, twilio_webhook_url=None)
    http = fake_twilio(rt)
    [item] = vdq.add_sms("+15005550006", ["+14155550100"], "hi", runtime=rt)
    send.process_body(bodies(aws)[item.id], rt)
    assert "StatusCallback" not in http.requests[0].data


@pytest.mark.parametrize("status", [400, 503])
def test_a_twilio_error_errors_the_sms_without_a_retry(aws, rt, status):
    http = fake_twilio(rt)
    http.answer(status, {"code": 21211 if status == 400 else 20500, "status": status,
                         "message": "The 'To' number +14155550100 is not valid."})  # fmt: skip
    [item] = vdq.add_sms("+15005550006", ["+14155550100"], "hi", runtime=rt)
    assert send.process_body(bodies(aws)[item.id], rt) == send.ERRORED
    stored = rt.store.get_item(item.id)
    assert stored.state == "errored" and (stored.retries or 0) == 0  # absent: none
    assert "is not valid" in stored.result
    assert ("21211" in stored.result) == (status == 400)
    assert drain(aws) == [] and len(http.requests) == 1


# ---- a status update that arrives before the ID is stored ---------------------------------------


class CallbackFirst:
    """Twilio whose status callback is processed before its create call returns."""

    def __init__(self, runtime, step_for, item_id=None):
        self.runtime, self.step_for, self.item_id = runtime, step_for, item_id

    def send(self, from_, to, body, media_urls, status_callback, validity=None):
        self.runtime.clock.advance(0.05)
        item_id = self.item_id or parse_qs(urlsplit(status_callback).query)["queue_item"][0]
        apply(item_id, self.step_for("SM" + "f" * 32), self.runtime)
        return "SM" + "f" * 32


class StatusFirst:
    """Twilio whose status callback (its URL's key and attempt) is handled by the results code
    before its create call returns."""

    def __init__(self, runtime, status, **params):
        self.runtime, self.status, self.params = runtime, status, params

    def send(self, from_, to, body, media_urls, status_callback, validity=None):
        self.runtime.clock.advance(0.05)
        query = parse_qs(urlsplit(status_callback).query)
        results.handle_twilio_callback(
            {"MessageSid": "SM" + "f" * 32, "MessageStatus": self.status, **self.params},
            query["queue_item"][0], self.runtime, attempt=query["attempt"][0])
        self.runtime.clock.advance(0.05)
        return "SM" + "f" * 32


def test_an_early_final_status_stores_the_sid_and_the_acceptance_before_the_worker_returns(
        aws, rt):  # fmt: skip
    rt.overrides["twilio"] = StatusFirst(rt, "undelivered", ErrorCode="30003")
    [item] = vdq.add_sms("+15005550006", ["+14155550100"], "hi", runtime=rt)
    assert send.process_body(bodies(aws)[item.id], rt) == send.ACCEPTED  # wrote nothing
    stored = rt.store.get_item(item.id)
    assert stored.state == "errored" and "30003" in stored.result
    assert stored.provider_id == "SM" + "f" * 32
    assert history(rt, item.id) == [("send", "queued", "sending"), ("await", "sending", "awaiting"),
                                    ("error", "awaiting", "errored")]  # fmt: skip
    assert run_checks(aws, rt) == ["checked 1, 0 given their timeout's timer"]
    assert rt.store.get_item(item.id).updated_at == stored.updated_at


def test_an_early_status_that_stores_the_sid_leaves_the_check_nothing_to_do(aws, rt):
    rt.overrides["twilio"] = StatusFirst(rt, "sent")
    [item] = vdq.add_sms("+15005550006", ["+14155550100"], "hi", runtime=rt)
    assert send.process_body(bodies(aws)[item.id], rt) == send.ACCEPTED
    stored = rt.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == ("awaiting", "SM" + "f" * 32)
    assert stored.timer_pk.startswith("await#")
    run_checks(aws, rt)
    assert rt.store.get_item(item.id).updated_at == stored.updated_at


# A polled SMS (no status callback comes) keeps the worker's acceptance write: when an update
# moved the item first, what it set is kept (vdq.dispatch.record).


def test_an_early_final_status_keeps_its_state_and_result_and_the_id_is_stored(aws, rt):
    rt.settings = replace(rt.settings, twilio_webhook_url=None)
    [item] = vdq.add_sms("+15005550006", ["+14155550100"], "hi", runtime=rt)
    rt.overrides["twilio"] = CallbackFirst(rt, lambda sid: Step(
        "error", actor="twilio", source="provider", result="undelivered (30003)"), item.id)
    assert send.process_body(bodies(aws)[item.id], rt) == send.KEPT
    stored = rt.store.get_item(item.id)
    assert stored.state == "errored" and stored.result == "undelivered (30003)"
    assert stored.provider_id == "SM" + "f" * 32
    assert rt.store.find_by_provider_id(stored.provider_id) is None  # an SMS has none
    names = [(h.name, h.kind) for h in rt.store.history(item.id)]
    assert ("send", "transition") in names and ("await", "late") in names


def test_an_early_status_that_stored_the_id_itself_is_kept(aws, rt):
    rt.settings = replace(rt.settings, twilio_webhook_url=None)
    [item] = vdq.add_sms("+15005550006", ["+14155550100"], "hi", runtime=rt)
    rt.overrides["twilio"] = CallbackFirst(rt, lambda sid: Step(
        "await", actor="twilio", source="provider", provider_id=sid, result="sent"), item.id)
    assert send.process_body(bodies(aws)[item.id], rt) == send.KEPT
    stored = rt.store.get_item(item.id)
    assert stored.state == "awaiting" and stored.result == "sent"
    assert ("send", "queued", "sending") in history(rt, item.id)


def test_an_id_stored_by_an_update_that_kept_sending_still_awaits(aws, rt):
    rt.settings = replace(rt.settings, twilio_webhook_url=None)
    [item] = vdq.add_sms("+15005550006", ["+14155550100"], "hi", runtime=rt)

    class StoresIdFirst:
        def send(self, from_, to, body, media_urls, status_callback, validity=None):
            assert rt.store.store_provider_id(item.id, "SM" + "e" * 32, attempt=1)
            return "SM" + "e" * 32

    rt.overrides["twilio"] = StoresIdFirst()
    assert send.process_body(bodies(aws)[item.id], rt) == send.ACCEPTED
    stored = rt.store.get_item(item.id)
    assert stored.state == "awaiting" and stored.timer_pk.startswith("await#")


# ---- the handler and the request budget ---------------------------------------------------------


def test_the_handler_processes_an_sqs_batch_and_reports_bad_records(aws, rt):
    [item] = email_items(rt, cc=[], bcc=[])
    event = load_event("sqs_send_message")
    good = event["Records"][0]
    good["body"] = bodies(aws)[item.id]
    bad = {**good, "messageId": "bad-1", "body": "{not json"}
    event["Records"] = [good, bad]
    response = send_handler.handler(event, LambdaContext())
    assert response == {"batchItemFailures": [{"itemIdentifier": "bad-1"}]}
    assert rt.store.get_item(item.id).state == "sending"  # until its first result or check
    assert [(i, a) for i, a, _, _ in checks(aws)] == [(item.id, 1)]


def test_one_email_send_costs_one_dynamodb_request(aws, rt):
    from vdq.store import QueueItemRecord

    [item] = email_items(rt, cc=[], bcc=[])
    body = bodies(aws)[item.id]
    calls = []
    events = QueueItemRecord._get_connection().connection.client.meta.events
    handler = lambda model, **_: calls.append(model.name)  # noqa: E731
    events.register("before-call.dynamodb", handler)
    try:
        assert send.process_body(body, rt) == send.ACCEPTED
    finally:
        events.unregister("before-call.dynamodb", handler)
    # The claim (with its history entry on the state item); SES's acceptance rides on the
    # check the send publishes (SQS), not on a write.
    assert calls == ["UpdateItem"]


def test_ses_events_that_arrived_before_the_id_are_applied_when_it_is_stored(aws, rt):
    from vdq.results import matching as results

    message_id = "010001927b2d6c1e-early-000000"

    class FixedIdSes:
        def send_raw(self, **_):
            rt.clock.advance(0.05)
            return message_id

    rt.overrides["ses_provider"] = FixedIdSes()
    # Events without the item's key (no tags) are the ones that can arrive as orphans.
    rt.settings = replace(rt.settings,
                          email_tracking_strategy="vdq.results.tracking.EmailTrackingStrategy")
    [item] = email_items(rt, cc=[], bcc=[])
    delivered = results.ProviderUpdate("ses", message_id, "delivered", "Delivery",
                                       "delivered to ada@example.org", f"ses:Delivery:{message_id}",
                                       at="2026-01-01T00:00:01.000Z")  # fmt: skip
    assert results.keep_orphan(delivered, None, rt) == "orphan"
    assert send.process_body(bodies(aws)[item.id], rt) == send.ACCEPTED
    stored = rt.store.get_item(item.id)
    assert stored.provider_id == message_id and stored.state == "succeeded"
    mapping = rt.store.find_by_provider_id(message_id)
    assert mapping.item_id == item.id and not mapping.orphans


# ---- the claim ----------------------------------------------------------------------------------


def test_two_claims_at_the_same_instant_make_one_claim(aws, rt):
    """Two send functions claim one attempt in the same microsecond (their clocks agree, or
    stand still as here): one claim wins, the other finds the attempt claimed. The winner knows
    its own claim by its entry's random key, never by its time (which botocore resending a
    claim after a lost answer must still recognise)."""
    from vdq.store import Moved
    from vdq.workflow.lanes import message_for

    [item] = email_items(rt, cc=[], bcc=[])
    now = rt.clock.now()
    claimed = send.claim(message_for(item), now, rt)
    assert claimed.state == "sending" and claimed.claimed_at == claimed.updated_at
    with pytest.raises(Moved) as moved:
        send.claim(message_for(item), now, rt)
    assert moved.value.current.state == "sending"
    [entry] = [h for h in rt.store.history(item.id) if h.name == "send"]
    assert entry.sk.startswith(f"H#{claimed.claimed_at}#send1-")


def test_a_claim_sent_again_after_a_lost_answer_is_its_own(aws, rt):
    """botocore sends an UpdateItem again when its answer is lost: the claim's condition then
    fails on its own write, which the store recognises by the entry it appended (the same
    request again), and no other claim's."""
    from vdq.store import Moved, StateWrite
    from vdq.store.history import history_entry

    [item] = email_items(rt, cc=[], bcc=[])
    now = rt.clock.now()

    def claim(key: str):
        write = StateWrite(set={"state": "sending", "claimed_at": "x", "updated_at": "x"})
        entry = history_entry(item.id, now, actor="worker", source="server", kind="transition",
                              name="send", from_state="queued", to_state="sending", attempt=1,
                              key=key)  # fmt: skip
        return rt.store.claim(item.id, 1, "queued", write, entry, item.queued_at)

    assert claim("send1-aaaa").state == "sending"
    assert claim("send1-aaaa").state == "sending"  # the same request: the claim is its own
    with pytest.raises(Moved):
        claim("send1-bbbb")  # another claim's, at the same instant
