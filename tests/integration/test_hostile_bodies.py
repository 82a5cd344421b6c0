"""Hostile request bodies at the REST handlers (API Gateway proxy events, moto): each is refused
with a 4xx naming the field and changes nothing (no record, no message), or, where accepted,
is stored as sent."""

from __future__ import annotations

import json

import boto3
import pytest
from functions.enqueue import handler as enqueue_handler

from tests.support.aws import TABLE, drain
from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from tests.unit.test_hostile_text import build
from vdq import messages

EMAIL = {"sender": {"email": "shop@example.com"}, "to": [{"email": "ada@example.org"}],
         "subject": "Hi", "text": "Text"}  # fmt: skip
ATTACHMENT = {"filename": "a.txt", "content_type": "text/plain", "content_base64": "aGk="}


def post(body: object, path: str = "emails", headers: dict[str, str] | None = None):
    text = body if isinstance(body, str) else json.dumps(body)
    event = api_event(f"apigw_post_{path}", body=text, groups=["vdq-senders"], headers=headers)
    answer = enqueue_handler.handler(event, LambdaContext())
    return answer["statusCode"], json.loads(answer["body"])


def records() -> int:
    return boto3.client("dynamodb").scan(TableName=TABLE, Select="COUNT")["Count"]


def refused(aws, body: object, status: int, field: str) -> dict:
    """``body`` is refused with ``status`` naming ``field``; nothing is stored or published."""
    answer_status, answer = post(body)
    assert (answer_status, answer["error"]["details"]["field"]) == (status, field), answer
    assert records() == 0 and drain(aws) == []
    return answer["error"]


# ---- RFC 2047 encoded words in header fields ---------------------------------------------------

# A mail reader (and Python's email package, which builds the message) decodes an encoded word
# wherever a header holds text: a line break inside one is a line break in the header.
ENCODED_BREAKS = {
    "Q CRLF": "=?UTF-8?Q?Hi=0D=0ABcc:_victim@example.net?=",
    "B CRLF": "=?utf-8?b?SGkNCkJjYzogdmljdGltQGV4YW1wbGUubmV0?=",
    "q LF": "News =?us-ascii?q?=0AX-Evil:_1?= today",
    "NUL": "=?UTF-8?Q?a=00b?=",
    "U+2028": "=?UTF-8?B?YeKAqGI=?=",
}
HEADER_FIELDS = {
    "subject": lambda v: {"subject": v},
    "sender.name": lambda v: {"sender": {"email": "shop@example.com", "name": v}},
    "to[0].name": lambda v: {"to": [{"email": "ada@example.org", "name": v}]},
    "cc[0].name": lambda v: {"cc": [{"email": "c@example.org", "name": v}]},
    "reply_to[0].name": lambda v: {"reply_to": [{"email": "r@example.org", "name": v}]},
    "attachments[0].filename": lambda v: {"attachments": [{**ATTACHMENT, "filename": v}]},
}


@pytest.mark.parametrize("field", sorted(HEADER_FIELDS))
@pytest.mark.parametrize("word", sorted(ENCODED_BREAKS))
def test_a_line_break_in_an_encoded_word_of_a_header_field_is_refused(aws, runtime, field, word):
    """Was accepted (201): the worker's message then held ``Bcc: victim@example.net`` as a
    header line of its own (header injection past the single-line check)."""
    body = {**EMAIL, **HEADER_FIELDS[field](ENCODED_BREAKS[word])}
    error = refused(aws, body, 422, field)
    assert "encoded word" in error["message"]


def test_an_encoded_word_without_control_characters_is_accepted_and_sent_as_one_header():
    """A producer may send a subject it encoded itself: it stays one Subject header."""
    parsed = messages.parse_email({**EMAIL, "subject": "=?UTF-8?B?w5xiZXIgdW5z?=",
                                   "sender": {"email": "shop@example.com",
                                              "name": "=?ISO-8859-1?Q?Andr=E9?="}})  # fmt: skip
    head = build(parsed).split(b"\r\n\r\n")[0].split(b"\r\n")
    names = [line.split(b":")[0] for line in head if not line.startswith((b" ", b"\t"))]
    assert sorted(names) == [b"Content-Transfer-Encoding", b"Content-Type", b"From",
                             b"MIME-Version", b"Subject", b"To"]  # fmt: skip
