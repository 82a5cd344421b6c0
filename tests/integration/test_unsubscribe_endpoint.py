"""The unsubscribe endpoint as mail clients and link scanners meet it: a store that fails is a
503 the client retries, and only a POST that says RFC 8058's `List-Unsubscribe=One-Click`
unsubscribes. Against moto, through the webhook."""

from __future__ import annotations

import base64
import json
from dataclasses import replace

import boto3
import pytest
from functions.webhook import handler as webhook
from moto.core.botocore_stubber import BotocoreStubber

from tests.integration.test_unsubscribe_lists import (
    ADA,
    SENDER,
    click,
    newsletter_token,
    unsubscribe_event,
)
from tests.reliability.harsh import _error
from tests.support.results import LambdaContext
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


def post(token: str, body: str | bytes | None, content_type: str | None = None,
         base64_encoded: bool = False) -> dict:  # fmt: skip
    event = unsubscribe_event("POST", token)
    headers = {k: v for k, v in (event.get("headers") or {}).items()
               if k.lower() != "content-type"}  # fmt: skip
    if content_type is not None:
        headers["Content-Type"] = content_type
    event["headers"] = headers
    event["multiValueHeaders"] = {k: [v] for k, v in headers.items()}
    if base64_encoded and body is not None:
        raw = body if isinstance(body, bytes) else body.encode()
        body = base64.b64encode(raw).decode()
    elif isinstance(body, bytes):
        body = body.decode()
    event["body"], event["isBase64Encoded"] = body, base64_encoded
    return webhook.handler(event, LambdaContext("webhook"))


def multipart(fields: list[tuple[str, str]], boundary: str = "vdq-b0undary") -> bytes:
    parts = [f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n"
             f"{value}\r\n" for name, value in fields]  # fmt: skip
    return ("".join(parts) + f"--{boundary}--\r\n").encode()


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


# ---- RFC 8058: only a POST that says List-Unsubscribe=One-Click unsubscribes ------------------


@pytest.mark.parametrize("body, content_type, base64_encoded", [
    ("List-Unsubscribe=One-Click", "application/x-www-form-urlencoded", False),
    ("List-Unsubscribe=One-Click", "application/x-www-form-urlencoded; charset=utf-8", False),
    ("List-Unsubscribe=One-Click", "application/x-www-form-urlencoded", True),
    ("List-Unsubscribe=One-Click", None, False),  # a client that names no type
    # A client in a web page (a webmail, a mail client's add-on) that posts the pair as a
    # string gets the type fetch() gives a string: text/plain.
    ("List-Unsubscribe=One-Click", "text/plain;charset=UTF-8", False),
    ("List-Unsubscribe=One-Click", "text/plain", True),
    (multipart([("List-Unsubscribe", "One-Click")]),
     "multipart/form-data; boundary=vdq-b0undary", False),
    (multipart([("List-Unsubscribe", "One-Click")]),
     "multipart/form-data; boundary=vdq-b0undary", True),  # API Gateway's binary media
])  # fmt: skip
def test_a_one_click_post_unsubscribes(aws, rt, body, content_type, base64_encoded):
    token = newsletter_token(aws, rt, list="news")
    answer = post(token, body, content_type, base64_encoded)
    assert answer["statusCode"] == 200, answer["body"]
    assert rt.store.get_suppression(ADA, "news").reason == "unsubscribe"


def test_other_fields_beside_the_one_click_pair_are_ignored(aws, rt):
    token = newsletter_token(aws, rt, list="news")
    answer = post(token, "List-Unsubscribe=One-Click&utm_source=client",
                  "application/x-www-form-urlencoded")  # fmt: skip
    assert answer["statusCode"] == 200
    assert rt.store.get_suppression(ADA, "news").reason == "unsubscribe"


@pytest.mark.parametrize("body, content_type", [
    (None, None),  # a link checker's bare POST
    ("", "application/x-www-form-urlencoded"),
    ("List-Unsubscribe=Yes", "application/x-www-form-urlencoded"),
    ("Unsubscribe=One-Click", "application/x-www-form-urlencoded"),
    ("List-Unsubscribe=One-Click", "application/json"),
    ("List-Unsubscribe=Yes", "text/plain"),
    ("Unsubscribe me", "text/plain;charset=UTF-8"),
    ("", "text/plain"),
    (json.dumps({"List-Unsubscribe": "One-Click"}), "application/json"),
    ("List-Unsubscribe=One-Click&List-Unsubscribe=Other", "application/x-www-form-urlencoded"),
    (multipart([("List-Unsubscribe", "No")]).decode(),
     "multipart/form-data; boundary=vdq-b0undary"),
    (multipart([("List-Unsubscribe", "One-Click")]).decode(),
     "multipart/form-data; boundary=another"),  # not its boundary: no field
])  # fmt: skip
def test_a_post_without_the_one_click_body_changes_nothing(aws, rt, body, content_type):
    token = newsletter_token(aws, rt, list="news")
    answer = post(token, body, content_type)
    assert answer["statusCode"] == 400
    # The confirmation page, for a reader whose client posted without the body: its button
    # sends the body.
    assert 'name="List-Unsubscribe" value="One-Click"' in answer["body"]
    assert answer["headers"]["Content-Type"].startswith("text/html")
    assert rt.store.get_suppression(ADA, "news") is None
    assert rt.store.suppression_history(ADA) == []


def test_a_get_shows_the_page_and_changes_nothing(aws, rt):
    token = newsletter_token(aws, rt, list="news")
    for _ in range(3):  # a scanner, a preview, the reader
        page = click(token, "GET")
        assert page["statusCode"] == 200
        assert f'action="{token}"' in page["body"] and 'method="post"' in page["body"]
    assert rt.store.get_suppression(ADA, "news") is None
    assert rt.store.suppression_history(ADA) == []


# ---- a link that is not valid: a page for its reader, not JSON ---------------------------------


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("cut", [10, None])
def test_a_link_that_is_not_valid_answers_a_page_not_json(aws, rt, method, cut):
    # A mail client that wraps a long line, or a reader who copies part of it, opens a link cut
    # short: the reader is told so on a page, as every other answer of the link is.
    token = newsletter_token(aws, rt, list="news")[:-cut] if cut else "not-a-token"
    answer = click(token, method)
    assert answer["statusCode"] == 404
    assert answer["headers"]["Content-Type"].startswith("text/html")
    assert "frame-ancestors 'none'" in answer["headers"]["Content-Security-Policy"]
    assert answer["headers"]["Cache-Control"] == "no-store"
    assert answer["body"].startswith("<!doctype html>") and "not valid" in answer["body"]
    assert "<form" not in answer["body"]  # nothing to confirm
    assert rt.store.get_suppression(ADA, "news") is None
