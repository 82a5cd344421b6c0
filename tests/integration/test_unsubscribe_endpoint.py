"""The unsubscribe endpoint as mail clients and link scanners meet it: a store that fails is a
503 the client retries, and only a POST that says RFC 8058's `List-Unsubscribe=One-Click`
unsubscribes. Against moto, through the webhook."""

from __future__ import annotations

from dataclasses import replace

import boto3
import pytest
from moto.core.botocore_stubber import BotocoreStubber

from tests.integration.test_unsubscribe_lists import (
    ADA,
    SENDER,
    click,
    newsletter_token,
)
from tests.reliability.harsh import _error
from vdq.results import unsubscribe
from vdq.runtime import Runtime


@pytest.fixture
def rt(aws, settings, clock):
    boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
    rt = Runtime(settings=replace(settings, unsubscribe_key="endpoint-test-key",
                                  unsubscribe_url="https://api.example.com/v1/unsubscribe/"),
                 clock=clock)  # fmt: skip
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    yield rt
    Runtime.reset_default()


# ---- a store that fails: 503 and Retry-After, never 500 ----------------------------------------


def dynamodb_failing(monkeypatch, status: int, code: str) -> list[str]:
    """Every DynamoDB request answered with ``code`` (every SDK attempt: throttling that
    outlasts botocore's retries, or DynamoDB unavailable), without waiting between them."""
    import time

    original = BotocoreStubber.__call__
    refused: list[str] = []

    def call(stub, event_name, request, **kwargs):
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else str(target)
        if target.startswith("DynamoDB_"):
            refused.append(target.rsplit(".", 1)[-1])
            return _error(status, code, "refused by the test")
        return original(stub, event_name, request, **kwargs)

    monkeypatch.setattr(BotocoreStubber, "__call__", call)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    return refused


@pytest.mark.parametrize("status, code", [
    (400, "ThrottlingException"), (400, "ProvisionedThroughputExceededException"),
    (500, "InternalServerError"), (503, "ServiceUnavailable"),
])  # fmt: skip
def test_a_one_click_post_the_store_refuses_is_a_503_to_retry(aws, rt, monkeypatch, status,
                                                              code):  # fmt: skip
    token = newsletter_token(aws, rt, list="news")
    refused = dynamodb_failing(monkeypatch, status, code)
    answer = click(token)
    assert refused, "the fault did not fire"
    assert answer["statusCode"] == 503
    assert int(answer["headers"]["Retry-After"]) == unsubscribe.RETRY_AFTER_SECONDS > 0
    assert answer["headers"]["Content-Type"].startswith("text/html")
    assert "frame-ancestors 'none'" in answer["headers"]["Content-Security-Policy"]
    assert "try again" in answer["body"].lower() and ADA not in answer["body"]
    monkeypatch.undo()

    assert rt.store.get_suppression(ADA, "news") is None  # nothing was written
    assert click(token)["statusCode"] == 200  # the client's retry
    assert rt.store.get_suppression(ADA, "news").reason == "unsubscribe"


def test_a_key_that_cannot_be_read_is_a_503_too(aws, rt, monkeypatch):
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    token = newsletter_token(aws, rt, list="news")

    def unreadable(settings, **kwargs):
        raise GetParameterError("Secrets Manager throttled the read")

    monkeypatch.setattr(unsubscribe, "key", unreadable)
    for method in ("GET", "POST"):
        answer = click(token, method)
        assert answer["statusCode"] == 503 and "Retry-After" in answer["headers"]
