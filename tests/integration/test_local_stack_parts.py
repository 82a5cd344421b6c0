"""Parts of the local stack under moto: the SQS poller behaves as Lambda's event source mapping
(partial batch failures, redrive to the DLQ), and the front verifies tokens as the authorizer."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
from moto import mock_aws

from vdq.core import resources
from vdq.local import resources as local_resources
from vdq.local.front import make_token, verify_token
from vdq.local.pollers import Poller


class FakeFunctions:
    """Fails every message whose body says so, as a handler returning batchItemFailures."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def available(self, name: str) -> bool:
        return True

    def invoke(self, name: str, event: dict[str, Any], lane: str = "") -> dict[str, Any]:
        self.events.append(event)
        failed = [r["messageId"] for r in event["Records"] if json.loads(r["body"])["fail"]]
        return {"batchItemFailures": [{"itemIdentifier": m} for m in failed]}


def _depth(sqs: Any, url: str) -> int:
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(
        attrs["ApproximateNumberOfMessagesNotVisible"])  # fmt: skip


def test_the_poller_deletes_successes_and_redrives_a_failing_message_to_the_dlq():
    with mock_aws():
        made = local_resources.create(boto3.session.Session(), visibility_seconds=0)
        sqs = boto3.client("sqs")
        send, dlq = made.queues[resources.SEND_QUEUE], made.queues["send-dlq"]
        sqs.send_message(QueueUrl=send, MessageBody=json.dumps({"fail": False}))
        sqs.send_message(QueueUrl=send, MessageBody=json.dumps({"fail": True}))
        functions = FakeFunctions()
        poller = Poller(sqs, send, "send", functions, resources.SEND_BATCH_SIZE)
        for _ in range(resources.MAX_RECEIVE_COUNT + 3):
            poller.poll_once()
            time.sleep(0.01)
        record = functions.events[0]["Records"][0]
        assert record["eventSource"] == "aws:sqs" and record["eventSourceARN"].endswith("send")
        assert "ApproximateReceiveCount" in record["attributes"]
        assert _depth(sqs, send) == 0
        [moved] = sqs.receive_message(QueueUrl=dlq)["Messages"]
        assert json.loads(moved["Body"]) == {"fail": True}
        receives = sum(1 for e in functions.events for r in e["Records"]
                       if json.loads(r["body"])["fail"])  # fmt: skip
        assert receives == resources.MAX_RECEIVE_COUNT


def test_ses_events_reach_the_results_queue_raw_through_the_topic():
    with mock_aws():
        made = local_resources.create(boto3.session.Session(), visibility_seconds=30)
        boto3.client("sns").publish(TopicArn=made.topic_arn, Message='{"eventType": "Delivery"}')
        got = boto3.client("sqs").receive_message(QueueUrl=made.queues[resources.RESULTS_QUEUE])
        assert json.loads(got["Messages"][0]["Body"]) == {"eventType": "Delivery"}


def test_the_ses_sandbox_publishes_only_the_event_types_the_configuration_set_subscribes():
    """As the deployed configuration set does (vdq.core.resources.SES_EVENTS): SES's Send, which
    comes first for every email, is not subscribed, so a delivered email publishes its Delivery
    alone."""
    import requests
    from vdq.local.faults import Faults
    from vdq.local.ses_sandbox import SesSandbox

    class Sns:
        published: list[str] = []

        def publish(self, **kwargs: Any) -> None:
            self.published.append(json.loads(kwargs["Message"])["eventType"])

    class AtOnce:  # each event published as it is planned, not after its delay
        def call(self, delay: float, publish: Any) -> None:
            publish()

        def pending(self) -> int:
            return 0

        def stop(self) -> None:
            pass

    sandbox = SesSandbox(Sns(), "arn:aws:sns:us-east-1:123456789012:t", Faults(),
                         later=AtOnce()).start()  # fmt: skip
    published, ids = {}, []
    try:
        for local in ("success", "bounce", "complaint"):
            Sns.published.clear()
            mail = {"FromEmailAddress": "shop@example.com", "Destination": {
                "ToAddresses": [f"{local}@simulator.amazonses.com"]}, "Content": {"Simple": {
                    "Subject": {"Data": "s"}, "Body": {"Text": {"Data": "t"}}}}}  # fmt: skip
            answer = requests.post(f"{sandbox.url}/v2/email/outbound-emails", json=mail,
                                   timeout=10)  # fmt: skip
            assert answer.status_code == 200
            published[local] = list(Sns.published)
            ids.append(answer.json()["MessageId"])
    finally:
        sandbox.stop()
    assert published == {"success": ["Delivery"], "bounce": ["Bounce"],
                         "complaint": ["Delivery", "Complaint"]}  # fmt: skip
    # Message IDs in SES's form, their send time in them (a search by ID reads it).
    from datetime import UTC, datetime, timedelta

    from vdq.operations.search import ses_sent_at

    for message_id in ids:
        sent = ses_sent_at(message_id)
        assert sent is not None and abs(sent - datetime.now(UTC)) < timedelta(minutes=1)


def test_the_front_passes_claims_only_from_a_token_it_can_verify():
    secret = "s" * 40
    claims = verify_token(secret, "Bearer " + make_token(secret, ["vdq-senders", "vdq-viewers"]))
    assert claims is not None
    assert claims["cognito:groups"] == "vdq-senders,vdq-viewers" and claims["sub"]
    assert verify_token("t" * 40, "Bearer " + make_token(secret, ["vdq-admins"])) is None
    assert verify_token(secret, "Bearer " + make_token(secret, ["x"], hours=-1)) is None
    assert verify_token(secret, None) is None


def test_the_ses_sandbox_refuses_a_web_page_as_the_local_aws_endpoint_does():
    """The SES sandbox is the local SESv2 endpoint and asks for no credentials: a page a
    developer visits could POST a text/plain "SendEmail" (no preflight) and have it publish
    Delivery and Bounce events with tags of its choosing, or, rebound to 127.0.0.1, read every
    email sent locally from /_sandbox/emails. A request with an Origin or under a name that is
    not loopback is refused before anything is sent or published."""
    import requests
    from vdq.local.faults import Faults
    from vdq.local.ses_sandbox import SesSandbox

    class Sns:
        published: list[dict[str, Any]] = []

        def publish(self, **kwargs: Any) -> None:
            self.published.append(kwargs)

    sandbox = SesSandbox(Sns(), "arn:aws:sns:us-east-1:123456789012:t", Faults()).start()
    try:
        url = f"{sandbox.url}/v2/email/outbound-emails"
        mail = json.dumps({"FromEmailAddress": "shop@example.com", "Destination": {
            "ToAddresses": ["bounce@simulator.amazonses.com"]}, "Content": {"Simple": {
                "Subject": {"Data": "s"}, "Body": {"Text": {"Data": "t"}}}}})  # fmt: skip
        page = requests.post(url, data=mail, timeout=10, headers={
            "Origin": "https://evil.example", "Content-Type": "text/plain"})  # fmt: skip
        assert page.status_code == 403
        session = requests.Session()
        for method, target in (("POST", url), ("GET", f"{sandbox.url}/_sandbox/emails")):
            request = requests.Request(method, target, data=mail if method == "POST" else None)
            prepared = request.prepare()
            prepared.headers["Host"] = f"evil.example:{sandbox.server.port}"
            assert session.send(prepared, timeout=10).status_code == 403
        assert sandbox.sent == []
        sdk = requests.post(url, data=mail, timeout=10)  # what boto3 sends: no Origin, loopback
        assert sdk.status_code == 200 and len(sandbox.sent) == 1
    finally:
        sandbox.stop()


def test_the_twilio_sandbox_refuses_a_web_page_reading_the_messages_it_sent():
    """/_sandbox/messages lists every SMS body sent locally (one-time codes included) without
    the account's credentials: a page rebound to 127.0.0.1, or any cross-origin request, is
    refused; a test's or an SDK's request is served."""
    import requests
    from vdq.local.faults import Faults
    from vdq.local.twilio_sandbox import TwilioSandbox

    sandbox = TwilioSandbox("AC" + "0" * 32, "token", Faults()).start()
    try:
        listing = f"{sandbox.url}/_sandbox/messages"
        assert requests.get(listing, timeout=10, headers={
            "Origin": "https://evil.example"}).status_code == 403  # fmt: skip
        prepared = requests.Request("GET", listing).prepare()
        prepared.headers["Host"] = f"rebound.evil.example:{sandbox.server.port}"
        assert requests.Session().send(prepared, timeout=10).status_code == 403
        assert requests.get(listing, timeout=10).json() == {"messages": []}
    finally:
        sandbox.stop()


def test_the_twilio_sandbox_posts_each_webhook_request_on_a_connection_of_its_own():
    """A pooled connection the local front closed at its idle timeout, reused just then, failed
    an inbound STOP with "Remote end closed connection" (found by the end-to-end suite on a
    slow run): a POST is not sent again. Each request now opens its own, as Twilio's do."""
    import requests
    from vdq.local.faults import Faults
    from vdq.local.serving import QuietHandler, Server
    from vdq.local.twilio_sandbox import TwilioSandbox

    seen: list[tuple[int, str | None]] = []

    class Webhook(QuietHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.client_address[1], self.headers.get("Connection")))
            self.answer(200, {})

    webhook = Server("webhook", Webhook).start()
    sandbox = TwilioSandbox("AC" + "0" * 32, "token", Faults()).start()
    try:
        sandbox.inbound_url = f"{webhook.url}/webhooks/twilio/inbound"
        for _ in range(3):
            answer = requests.post(f"{sandbox.url}/_sandbox/inbound",
                                   json={"from": "+14155550177", "body": "STOP"}, timeout=10)
            assert answer.json()["webhook_status"] == 200, answer.text
        assert len({port for port, _ in seen}) == 3, seen
        assert {header for _, header in seen} == {"close"}
    finally:
        sandbox.stop()
        webhook.stop()


def test_the_twilio_sandbox_takes_a_validity_period_only_in_twilios_range():
    """Twilio refuses a ValidityPeriod that is not a whole number of seconds from 1 to 36,000
    (its errors 21624 and 90007); the sandbox does as well, so a value VDQ computed outside
    that range fails locally first."""
    import pytest

    import requests
    from vdq.local.faults import Faults
    from vdq.local.twilio_sandbox import TwilioSandbox
    from vdq.providers import RejectedByProvider
    from vdq.providers.twilio import TwilioProvider

    sid = "AC" + "0" * 32
    sandbox = TwilioSandbox(sid, "token", Faults()).start()
    try:
        twilio = TwilioProvider(lambda: (sid, "token"), api_url=sandbox.url)
        for validity in (1, 5400, 36_000):
            assert twilio.send("+15005550006", "+14155550100", "hi", validity=validity)
        for validity in (0, 36_001, -5):
            with pytest.raises(RejectedByProvider, match="21624"):
                twilio.send("+15005550006", "+14155550100", "hi", validity=validity)
        url = f"{sandbox.url}/2010-04-01/Accounts/{sid}/Messages.json"
        odd = requests.post(url, data={"From": "+15005550006", "To": "+14155550100",
                                       "Body": "hi", "ValidityPeriod": "1.5"},
                            auth=(sid, "token"), timeout=10)  # fmt: skip
        assert (odd.status_code, odd.json()["code"]) == (400, 21624)
        assert len(sandbox.messages) == 3
    finally:
        sandbox.stop()


def test_the_twilio_sandbox_takes_media_alone_and_refuses_neither_text_nor_media():
    """Twilio sends an MMS of MediaUrl alone and refuses a message with neither a Body nor a
    MediaUrl (its error 21619); the sandbox does as well."""
    import pytest

    from vdq.local.faults import Faults
    from vdq.local.twilio_sandbox import TwilioSandbox
    from vdq.providers import RejectedByProvider
    from vdq.providers.twilio import TwilioProvider

    sid = "AC" + "0" * 32
    sandbox = TwilioSandbox(sid, "token", Faults()).start()
    try:
        twilio = TwilioProvider(lambda: (sid, "token"), api_url=sandbox.url)
        sent = twilio.send("+15005550006", "+14155550100", None, ["https://cdn.example.com/a.png"])
        assert sandbox.messages[sent].media == ["https://cdn.example.com/a.png"]
        with pytest.raises(RejectedByProvider, match="21619"):
            twilio.send("+15005550006", "+14155550100", None)
        assert len(sandbox.messages) == 1
    finally:
        sandbox.stop()
