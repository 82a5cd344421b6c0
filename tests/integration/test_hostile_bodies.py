"""Hostile request bodies at the REST handlers (API Gateway proxy events, moto): each is refused
with a 4xx naming the field and changes nothing (no record, no message), or, where accepted,
is stored as sent."""

from __future__ import annotations

import base64
import email
import email.policy
import json
import tracemalloc

import boto3
import pytest
from functions.enqueue import handler as enqueue_handler

from tests.support.aws import TABLE, drain
from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from tests.unit.test_hostile_text import build
from tests.unit.test_request_bodies import _document_takes
from vdq import api
from vdq.core.errors import BadRequest, ValidationError
from vdq.intake import messages

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
    "lower hex": "=?utf-8?q?a=0d=0aX-Evil:_1?=",
    "language": "=?us-ascii*en?Q?a=0AX-Evil:_1?=",
    "unknown charset": "=?x-unknown?B?YQ0KWC1FdmlsOiAx?=",
    "UTF-16": "=?utf-16-le?b?DQAKAA==?=",
    "in a word": "Re:=?UTF-8?Q?=0A?=X-Evil: 1",
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


# ---- bodies as wide as a request may be ---------------------------------------------------------


@pytest.mark.parametrize("entry", ["0", "{}", '""', "[[[[[[[[0]]]]]]]]"])
def test_walking_a_wide_body_takes_memory_of_its_depth_not_of_its_width(entry):
    """A 6 MB body of 300,000+ small values: the walk that looks for lone surrogates and nesting
    held a path string and a tuple for every value at once (about 150 bytes each: 400 MB more
    for a 6 MB body, past the enqueue function's 512 MB, a 502)."""
    data = json.loads('{"x": [' + ",".join([entry] * 300_000) + "]}")
    api.check_json(["warm"])  # its imports, once
    tracemalloc.start()
    try:
        api.check_json(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000, f"{peak} bytes"


@pytest.mark.parametrize("raw,field", [
    ('{"a": [1, {"b": "\\ud800"}]}', "a[1].b"),
    ('[[{"\\udc00": 1}]]', "[0][0].\\udc00"),
    ('"\\ud800"', "body"),
])  # fmt: skip
def test_the_walk_names_where_a_lone_surrogate_is(raw, field):
    with pytest.raises(ValidationError) as err:
        api.json_body({"body": raw})
    assert err.value.field == field


@pytest.mark.parametrize("depth,refused", [(33, False), (34, True)])
def test_nesting_is_refused_past_32_levels_below_the_top(depth, refused):
    raw = "[" * depth + "]" * depth
    if refused:
        with pytest.raises(BadRequest, match="nests more than 32 levels"):
            api.json_body({"body": raw})
    else:
        assert api.json_body({"body": raw}) == json.loads(raw)


# ---- numbers ------------------------------------------------------------------------------------


def raw_email(origin_id: str) -> str:
    return json.dumps(EMAIL)[:-1] + f', "origin": {{"type": "order", "id": {origin_id}}}}}'


@pytest.mark.parametrize("number", [
    "9007199254740993.0",  # was stored as "9007199254740992": a float holds 53 bits
    "9007199254740992.0",
    "1e20",  # was stored as "100000000000000000000": over the 64 bits the document promises
    str(2**70), str(-(2**63) - 1), "1e309", "1.5", "-0.5",
])  # fmt: skip
def test_an_origin_id_number_that_is_not_exactly_a_64_bit_integer_is_refused(aws, runtime,
                                                                             number):  # fmt: skip
    error = refused(aws, raw_email(number), 422, "origin.id")
    assert "64" in error["message"]


@pytest.mark.parametrize("number,stored", [
    ("1042", "1042"), ("1042.0", "1042"), ("-0.0", "0"), ("9007199254740991.0", "9007199254740991"),
    (str(2**63 - 1), str(2**63 - 1)), (str(-(2**63)), str(-(2**63))),
])  # fmt: skip
def test_an_origin_id_number_is_stored_exactly(aws, runtime, number, stored):
    status, answer = post(raw_email(number))
    assert status == 201, answer
    assert answer["items"][0]["origin"] == {"type": "order", "id": stored}


# ---- SMS media URLs ----------------------------------------------------------------------------

SMS = {"sender": {"cell": "+15005550006"}, "to": [{"cell": "+14155550100"}], "body": "Code"}


@pytest.mark.parametrize("url", [
    "https://", "https:///x.png", "https://:443/x.png", "https://@/x.png", "https://[::1/x.png",
    "https://example.org/a b.png", "https://example.org/a\u00a0b.png",
    # an IP literal in brackets (the document took "[6DbD..]", which no parser reads)
    "https://[6DbD..]:617313/x.png", "https://[::1]/x.png",
])  # fmt: skip
def test_a_media_url_without_a_host_or_with_spaces_is_refused(aws, runtime, url):
    """Were accepted (201): Twilio refuses such a MediaUrl at send, and the item errored."""
    status, answer = post({**SMS, "media_urls": [url]}, "sms")
    assert (status, answer["error"]["details"]["field"]) == (422, "media_urls[0]"), answer
    assert records() == 0 and drain(aws) == []
    assert not _document_takes(messages.SMS, {**SMS, "media_urls": [url]})


@pytest.mark.parametrize("url", [
    "https://cdn.example.org:8443/m/a%20b.png?v=2#x", "https://user:pw@cdn.example.org/x.png",
    "https://a\uff0fb.example/x.png",  # a full-width solidus: urlsplit refused it (NFKC)
])  # fmt: skip
def test_a_media_url_with_a_host_path_query_and_fragment_is_accepted(aws, runtime, url):
    """The server and the document take the same URLs (one pattern, vdq.intake.validation)."""
    status, answer = post({**SMS, "media_urls": [url]}, "sms")
    assert status == 201, answer
    assert _document_takes(messages.SMS, {**SMS, "media_urls": [url]})


# ---- Idempotency-Key ---------------------------------------------------------------------------


@pytest.mark.parametrize("key", [" ", " key", "key ", "clé", "key-😀", "a\tb", "x" * 256, ""])
def test_an_idempotency_key_the_document_refuses_is_a_400_naming_the_header(aws, runtime, key):
    """The document promises printable ASCII without a space at either end; " ", "clé" and
    "key " were taken (201) and named no field when refused."""
    status, answer = post(EMAIL, headers={"Idempotency-Key": key})
    assert (status, answer["error"]["details"]["field"]) == (400, "Idempotency-Key"), answer
    assert records() == 0 and drain(aws) == []


def test_an_idempotency_key_of_printable_ascii_with_inner_spaces_is_taken(aws, runtime):
    key = "order 1042/" + "~" * 200
    first, again = (post(EMAIL, headers={"Idempotency-Key": key}) for _ in range(2))
    assert first[0] == again[0] == 201
    assert first[1]["items"][0]["id"] == again[1]["items"][0]["id"]


# ---- duplicate keys ----------------------------------------------------------------------------


@pytest.mark.parametrize("raw,key", [
    (json.dumps(EMAIL)[:-1] + ', "subject": "Another"}', "subject"),
    (json.dumps(EMAIL)[:-1] + ', "to": []}', "to"),
    (json.dumps({**EMAIL, "to": [{"email": "ada@example.org"}]})
     .replace('"ada@example.org"', '"ada@example.org", "email": "eve@example.net"'), "email"),
])  # fmt: skip
def test_a_key_given_twice_in_one_object_is_a_400_naming_it(aws, runtime, raw, key):
    """Was read as the last value (201 with "Another"): a proxy, a log or a client-side check
    that reads the first saw another request than the one sent."""
    status, answer = post(raw)
    assert status == 400, answer
    assert f"'{key}' twice" in answer["error"]["message"]
    assert records() == 0 and drain(aws) == []


# ---- attachment names SES refuses -------------------------------------------------------------


@pytest.mark.parametrize("name", ["setup.exe", "RUN.BAT", "x.tar.vbs", "invoice.pdf.scr",
                                  "a.exe.", "mail.msh1xml"])  # fmt: skip
def test_a_file_name_of_a_type_ses_refuses_is_a_422_at_enqueue(aws, runtime, name):
    """Was accepted (201): SES refuses a message with such an attachment (its "unsupported
    attachment types"), so the item could only fail at send."""
    body = {**EMAIL, "attachments": [{**ATTACHMENT, "filename": name}]}
    error = refused(aws, body, 422, "attachments[0].filename")
    assert "SES" in error["message"]
    assert not _document_takes(messages.EMAIL, body)


def test_an_upload_of_a_type_ses_refuses_is_a_422_before_its_url(aws, runtime):
    body = {"filename": "tool.exe", "content_type": "application/octet-stream", "size": 10}
    status, answer = post(body, "attachment_upload")
    assert (status, answer["error"]["details"]["field"]) == (422, "filename"), answer


@pytest.mark.parametrize("name", ["report.pdf", "exe", "notes.exe.txt", "photo.JPG", "a.js.map"])
def test_other_file_names_are_sent(aws, runtime, name):
    body = {**EMAIL, "attachments": [{**ATTACHMENT, "filename": name}]}
    status, answer = post(body)
    assert status == 201, answer
    assert _document_takes(messages.EMAIL, body)


# ---- display names that an encoded word turns into addresses -----------------------------------


@pytest.mark.parametrize("decoded", ["x <evil@example.net>", "evil@example.net", "a, b", "a;b",
                                     'a"b'])  # fmt: skip
@pytest.mark.parametrize("field", ["sender.name", "to[0].name", "cc[0].name", "reply_to[0].name"])
def test_an_encoded_word_of_address_syntax_in_a_name_is_refused(aws, runtime, decoded, field):
    """Was accepted (201): the email package wrote the decoded name unquoted, so the worker's
    message read ``From: x <evil@example.net> <shop@example.com>`` (a reader takes
    evil@example.net for the sender) or split one address into two."""
    word = f"=?UTF-8?B?{base64.b64encode(decoded.encode()).decode()}?="
    error = refused(aws, {**EMAIL, **HEADER_FIELDS[field](word)}, 422, field)
    assert "encoded word" in error["message"]


def test_a_display_name_may_be_an_encoded_word_of_plain_text_and_stays_one_address():
    body = {**EMAIL, "sender": {"email": "shop@example.com",
                                "name": "=?UTF-8?Q?Andr=C3=A9_M=C3=BCller?="}}  # fmt: skip
    raw = build(messages.parse_email(body))
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert [a.addr_spec for a in parsed["From"].addresses] == ["shop@example.com"]
    assert parsed["From"].addresses[0].display_name == "André Müller"
