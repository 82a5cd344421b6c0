"""Provider failures are classified at the adapters: transient, permanent, ambiguous."""

from __future__ import annotations

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ParamValidationError,
    ReadTimeoutError,
)
from twilio.base.exceptions import TwilioRestException
from urllib3.exceptions import MaxRetryError, NewConnectionError, ProtocolError

import requests
from vdq.dispatch.outbound import status_callback_url
from vdq.providers import (
    AmbiguousProviderError,
    PermanentProviderError,
    RejectedByProvider,
    ThrottledProviderError,
    TransientProviderError,
    ses,
    twilio,
)

URL = "https://email.us-east-1.amazonaws.com"


def client_error(code, status, message="m"):
    return ClientError({"Error": {"Code": code, "Message": message},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, "SendEmail")  # fmt: skip


@pytest.mark.parametrize("exc,kind", [
    (client_error("TooManyRequestsException", 429), ThrottledProviderError),
    (client_error("LimitExceededException", 400), TransientProviderError),
    (client_error("Throttling", 400), ThrottledProviderError),
    (client_error("ThrottlingException", 400), ThrottledProviderError),
    (client_error("InternalFailure", 500), TransientProviderError),
    (client_error("Whatever", 503), TransientProviderError),
    (client_error("Whatever", 408), TransientProviderError),
    (client_error("MessageRejected", 400), PermanentProviderError),
    (client_error("MailFromDomainNotVerifiedException", 400), PermanentProviderError),
    (client_error("AccountSuspendedException", 400), PermanentProviderError),
    (client_error("SendingPausedException", 400), PermanentProviderError),
    (client_error("NotFoundException", 404), PermanentProviderError),
    (ConnectTimeoutError(endpoint_url=URL), TransientProviderError),
    (EndpointConnectionError(endpoint_url=URL), TransientProviderError),
    (ReadTimeoutError(endpoint_url=URL), AmbiguousProviderError),
    (ConnectionClosedError(endpoint_url=URL), AmbiguousProviderError),
    (ParamValidationError(report="bad"), PermanentProviderError),
])  # fmt: skip
def test_ses_errors_are_classified(exc, kind):
    error = ses.classify(exc)
    assert type(error) is kind
    assert error.provider == "SES"


def test_throttling_is_its_own_class_and_says_whether_a_slower_pace_helps():
    rate = ses.classify(client_error("TooManyRequestsException", 429,
                                     "Maximum sending rate exceeded."))
    daily = ses.classify(client_error("TooManyRequestsException", 429,
                                      "Daily message quota exceeded."))
    twilio_429 = twilio.classify(TwilioRestException(429, "/Messages.json", "Too Many Requests",
                                                     20429))
    assert isinstance(rate, TransientProviderError)  # nothing was sent
    assert rate.rate_exceeded and twilio_429.rate_exceeded
    assert not daily.rate_exceeded


def test_an_ses_error_keeps_the_code_and_the_text():
    error = ses.classify(client_error("MessageRejected", 400, "Email address is not verified."))
    assert str(error) == "SES (MessageRejected): Email address is not verified."


def refused():
    reason = NewConnectionError(None, "Connection refused")
    return requests.ConnectionError(MaxRetryError(None, "/", reason))


@pytest.mark.parametrize("exc,kind", [
    (TwilioRestException(400, "/Messages.json", "The 'To' number is not valid.", 21211),
     RejectedByProvider),
    (TwilioRestException(401, "/Messages.json", "Authenticate", 20003), RejectedByProvider),
    (TwilioRestException(503, "/Messages.json", "Service unavailable", 20503),
     TransientProviderError),
    # Twilio: a 500 on sending an SMS may have created it ("it is possible for a customer to
    # receive multiple messages" on a retry); so may a gateway's 502 or 504 in front of it.
    (TwilioRestException(500, "/Messages.json", "Internal Server Error", 20500),
     AmbiguousProviderError),
    (TwilioRestException(502, "/Messages.json", "Bad Gateway"), AmbiguousProviderError),
    (TwilioRestException(504, "/Messages.json", "Gateway Timeout"), AmbiguousProviderError),
    (TwilioRestException(429, "/Messages.json", "Too many requests", 20429),
     ThrottledProviderError),
    (TwilioRestException(400, "/Messages.json", "Too many requests", 20429),
     ThrottledProviderError),
    # The sender's queue is full (ten hours at its rate): Twilio asks to send more slowly.
    (TwilioRestException(400, "/Messages.json", "This 'From' number has exceeded the maximum "
                         "number of queued messages", 21611), ThrottledProviderError),
    (requests.ConnectTimeout("connect timed out"), TransientProviderError),
    (refused(), TransientProviderError),
    (requests.ConnectionError(ProtocolError("Connection aborted.")), AmbiguousProviderError),
    (requests.ReadTimeout("read timed out"), AmbiguousProviderError),
    (ValueError("Expecting value"), AmbiguousProviderError),
])  # fmt: skip
def test_twilio_errors_are_classified(exc, kind):
    assert type(twilio.classify(exc)) is kind


def test_a_twilio_rejection_keeps_twilios_code_and_text():
    exc = TwilioRestException(400, "/Messages.json", "The 'To' number is not valid.", 21211)
    assert str(twilio.classify(exc)) == "Twilio (21211): The 'To' number is not valid."


@pytest.mark.parametrize("webhook,expected", [
    ("https://h.example.com/cb", "https://h.example.com/cb?queue_item=ID"),
    ("https://h.example.com/cb?a=1&queue_item=old&b=", "https://h.example.com/cb?a=1&b=&queue_item=ID"),
    ("https://h.example.com/cb?queue_item=x&queue_item=y", "https://h.example.com/cb?queue_item=ID"),
])  # fmt: skip
def test_the_status_callback_url_carries_the_item_key_once(webhook, expected):
    assert status_callback_url(webhook, "ID") == expected
