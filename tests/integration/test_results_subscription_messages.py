"""What reaches the results queue and is no SES event: SNS's subscription messages, SES
validating its topic, an identity notification's subscription. Each is logged as what it is
(never as an error), answered without a failed record (no DLQ), and no URL it names is fetched.
"""

from __future__ import annotations

import json
import logging
import socket

import pytest
from functions.webhook import handler as webhook

from tests.support.events import load_event
from tests.support.results import LambdaContext


@pytest.fixture
def no_network(monkeypatch):
    """Every connection attempt is recorded and refused (nothing here may fetch a URL)."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return attempts


def sample_body(name: str) -> str:
    return load_event(f"sqs_{name}")["Records"][0]["body"]


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


def test_an_sns_subscription_confirmation_is_logged_with_its_url_and_never_fetched(
        runtime, caplog, no_network):  # fmt: skip
    body = sample_body("sns_subscription_confirmation")
    url = json.loads(body)["SubscribeURL"]
    deliver(body, caplog)
    [record] = [r for r in caplog.records if "SubscriptionConfirmation" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert url in record.getMessage() and "vdq-ses-events" in record.getMessage()
    assert "an SES event needs" not in caplog.text
    assert no_network == []


def test_an_sns_unsubscribe_confirmation_says_the_queue_no_longer_gets_the_topic(
        runtime, caplog, no_network):  # fmt: skip
    deliver(sample_body("sns_unsubscribe_confirmation"), caplog)
    [record] = [r for r in caplog.records if "UnsubscribeConfirmation" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "no longer" in record.getMessage()
    assert no_network == []


def test_a_subscribe_url_that_is_not_snss_is_not_logged_as_one_to_visit(runtime, caplog):
    data = json.loads(sample_body("sns_subscription_confirmation"))
    data["SubscribeURL"] = "https://attacker.example/?Action=ConfirmSubscription"
    deliver(json.dumps(data), caplog)
    assert "attacker.example" not in caplog.text
    assert "SubscriptionConfirmation" in caplog.text


@pytest.mark.parametrize("url", [
    # Hosts under amazonaws.com that are no SNS endpoint (anyone can make an S3 bucket named
    # "sns.<anything>" and serve a page there), another port, a user name.
    "https://sns.attacker.s3.amazonaws.com/?Action=ConfirmSubscription",
    "https://sns.attacker.s3-website-us-east-1.amazonaws.com/",
    "https://sns.us-east-1.amazonaws.com:8443/?Action=ConfirmSubscription",
    "https://user@sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription",
])  # fmt: skip
def test_a_subscribe_url_of_another_amazonaws_host_is_not_logged_as_one_to_visit(
        runtime, caplog, url):  # fmt: skip
    data = json.loads(sample_body("sns_subscription_confirmation"))
    data["SubscribeURL"] = url
    deliver(json.dumps(data), caplog)
    assert url not in caplog.text and "do not visit it" in caplog.text


@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1", "cn-north-1"])
def test_a_subscribe_url_of_sns_in_any_region_is_logged_to_visit(runtime, caplog, region):
    data = json.loads(sample_body("sns_subscription_confirmation"))
    china = ".cn" if region.startswith("cn-") else ""
    url = (f"https://sns.{region}.amazonaws.com{china}/?Action=ConfirmSubscription"
           f"&TopicArn=arn:aws:sns:{region}:123456789012:vdq-ses-events&Token=2336412f37")
    data["SubscribeURL"] = url
    deliver(json.dumps(data), caplog)
    assert f"visit its SubscribeURL: {url}" in caplog.text


@pytest.mark.parametrize("delivery", ["raw", "sns envelope"])
def test_ses_validating_its_topic_is_logged_as_such(runtime, caplog, delivery):
    body = sample_body("ses_topic_validation")
    if delivery == "raw":
        body = json.loads(body)["Message"]  # raw delivery: the text alone
    deliver(body, caplog)
    assert "validated" in caplog.text


def test_an_identity_notification_subscription_succeeded_is_logged_as_such(runtime, caplog):
    deliver(sample_body("ses_notification_subscription_succeeded"), caplog)
    assert "AmazonSnsSubscriptionSucceeded" in caplog.text
