"""The local SES and Twilio sandboxes enforce a sending rate, answering as the providers do.

Real providers over loopback: the SES v2 client and the twilio client talk HTTP to the
sandboxes. The sandboxes' buckets run on a fake clock, so no answer depends on timing.
"""

from __future__ import annotations

import contextlib

import boto3
import pytest

from vdq.local.faults import Faults
from vdq.local.ratelimit import RateLimit
from vdq.local.ses_sandbox import UNLIMITED_RATE, SesSandbox
from vdq.local.twilio_sandbox import TwilioSandbox
from vdq.providers import ThrottledProviderError, ses
from vdq.providers.ses import SesProvider
from vdq.providers.twilio import TwilioProvider

SID, TOKEN = "AC" + "1" * 32, "sandbox-token"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class NoTopic:
    def publish(self, **_):
        return {}


def test_a_rate_limit_refuses_past_one_seconds_burst_and_refills_at_the_rate():
    clock = Clock()
    limit = RateLimit(2.0, clock=clock)
    assert [limit.take("a") for _ in range(4)] == [True, True, True, False]
    assert limit.take("b")  # each sender has its own bucket
    clock.now += 0.5
    assert limit.take("a") and not limit.take("a")
    assert (limit.accepted, limit.refused) == (5, 2)
    assert RateLimit(None).take("a")  # no rate: no limit


@pytest.fixture
def ses_sandbox():
    sandbox = SesSandbox(NoTopic(), "arn:aws:sns:us-east-1:123456789012:t", Faults(),
                         rate=2.0).start()  # fmt: skip
    sandbox.rate = RateLimit(2.0, clock=Clock())
    yield sandbox
    sandbox.stop()


def ses_provider(url: str) -> SesProvider:
    # The provider's own client settings (no retry of its own), on the sandbox's endpoint.
    return SesProvider(boto3.client("sesv2", endpoint_url=url, config=ses._CLIENT_CONFIG))


def test_the_ses_sandbox_reports_its_rate_and_throttles_as_ses_does(ses_sandbox):
    ses = ses_provider(ses_sandbox.url)
    assert ses.max_send_rate() == 2.0
    raw = b"From: a@example.com\r\nTo: b@example.org\r\nSubject: hi\r\n\r\nhello\r\n"
    for _ in range(3):
        assert ses.send_raw(sender="a@example.com", receiver="b@example.org", raw=raw)
    with pytest.raises(ThrottledProviderError) as refused:
        ses.send_raw(sender="a@example.com", receiver="b@example.org", raw=raw)
    assert refused.value.rate_exceeded and "Maximum sending rate exceeded" in str(refused.value)
    assert len(ses_sandbox.sent) == 3 and ses_sandbox.rate.refused == 1


def test_an_ses_sandbox_without_a_rate_takes_everything_and_says_so():
    sandbox = SesSandbox(NoTopic(), "arn:aws:sns:us-east-1:123456789012:t", Faults()).start()
    try:
        assert ses_provider(sandbox.url).max_send_rate() == UNLIMITED_RATE
    finally:
        sandbox.stop()


def test_the_twilio_sandbox_throttles_each_sender_with_429_20429():
    sandbox = TwilioSandbox(SID, TOKEN, Faults(), rate=1.0).start()
    sandbox.rate = RateLimit(1.0, clock=Clock())
    try:
        twilio = TwilioProvider(lambda: (SID, TOKEN), api_url=sandbox.url)
        assert twilio.send("+15005550006", "+15552230001", "one")
        assert twilio.send("+15005550006", "+15552230001", "two")
        with pytest.raises(ThrottledProviderError) as refused:
            twilio.send("+15005550006", "+15552230002", "two")
        assert refused.value.code == 20429
        assert twilio.send("+15005550007", "+15552230003", "another sender")
    finally:
        sandbox.stop()


def test_the_ses_client_makes_one_request_per_send_and_no_retry_of_its_own(ses_sandbox):
    # A retried SendEmail can send twice (after a read timeout); throttling is the worker's.
    requests = []
    provider = ses.SesProvider.from_settings(None)
    client = boto3.client("sesv2", endpoint_url=ses_sandbox.url,
                          config=provider.client.meta.config)  # fmt: skip
    client.meta.events.register("before-send.sesv2.SendEmail", lambda **_: requests.append(1))
    raw = b"From: a@example.com\r\nTo: b@example.org\r\nSubject: hi\r\n\r\nhello\r\n"
    for _ in range(4):
        with contextlib.suppress(ThrottledProviderError):
            SesProvider(client).send_raw(sender="a@example.com", receiver="b@example.org",
                                         raw=raw)  # fmt: skip
    assert len(requests) == 4 and ses_sandbox.rate.refused == 1
