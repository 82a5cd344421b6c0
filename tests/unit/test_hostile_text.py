"""Hostile text at enqueue: what is accepted can always be sent, and what cannot be sent is
refused up front with a 422 naming the field (never a worker traceback in ``result``)."""

from __future__ import annotations

import base64
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vdq import api
from vdq.core.errors import BadRequest, PayloadTooLarge, ValidationError
from vdq.dispatch import mime
from vdq.intake import messages
from vdq.store import encode_content

LINE_BREAKS = ["\r", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
               "\u2029"]  # fmt: skip
SINGLE_LINE_FIELDS = {
    "subject": lambda v: {"subject": f"Hi{v}there"},
    "sender.name": lambda v: {"sender": {"email": "shop@example.com", "name": f"Shop{v}"}},
    "to[0].name": lambda v: {"to": [{"email": "a@example.org", "name": f"Ada{v}x"}]},
    "cc[0].name": lambda v: {"cc": [{"email": "c@example.org", "name": f"C{v}"}]},
    "reply_to[0].name": lambda v: {"reply_to": [{"email": "r@example.org", "name": f"R{v}"}]},
    "origin.type": lambda v: {"origin": {"type": f"order{v}", "id": "1"}},
    "origin.id": lambda v: {"origin": {"type": "order", "id": f"1{v}"}},
    "attachments[0].filename": lambda v: {
        "attachments": [
            {"filename": f"a{v}.txt", "content_type": "text/plain", "content_base64": "aGk="}
        ]
    },
}


def email(**changes):
    body = {"sender": {"email": "shop@example.com"}, "to": [{"email": "a@example.org"}],
            "subject": "Hello", "text": "Line one\nLine two"}  # fmt: skip
    body.update(changes)
    return body


def build(parsed: messages.Email) -> bytes:
    """The MIME message the worker builds for an accepted email (vdq.dispatch.send's inputs)."""
    files = [mime.File(a.filename, a.content_type, a.content, a.inline, a.content_id)
             for a in parsed.attachments]  # fmt: skip
    return mime.build_email(sender=parsed.sender.email, sender_name=parsed.sender.name,
                            content=parsed.content(), files=files)  # fmt: skip


@pytest.mark.parametrize("field", sorted(SINGLE_LINE_FIELDS))
@pytest.mark.parametrize("brk", LINE_BREAKS, ids=[f"U+{ord(b[-1]):04X}" for b in LINE_BREAKS])
def test_a_line_break_of_any_kind_in_a_single_line_field_is_refused_naming_it(field, brk):
    with pytest.raises(ValidationError) as err:
        messages.parse_email(email(**SINGLE_LINE_FIELDS[field](brk)))
    assert err.value.field == field and err.value.status == 422
    assert "line breaks" in err.value.message


@pytest.mark.parametrize("field", ["to[0].name", "body", "origin.id"])
def test_a_line_break_in_an_sms_single_line_field_is_refused(field):
    body = {"sender": {"cell": "+15005550006"}, "to": [{"cell": "+14155550100"}], "body": "hi"}
    if field == "to[0].name":
        body["to"][0]["name"] = "Ada\u2028Bcc"
    elif field == "origin.id":
        body["origin"] = {"type": "order", "id": "1\x85"}
    else:
        body["body"] = "two\u2028lines\nare fine in a body"
        assert messages.parse_sms(body).body == body["body"]
        return
    with pytest.raises(ValidationError) as err:
        messages.parse_sms(body)
    assert err.value.field == field


@pytest.mark.parametrize("field,changes", [
    ("subject", {"subject": "Hi \ud800"}),
    ("text", {"text": "body \udfff"}),
    ("html", {"html": "<p>\ud83d</p>"}),
    ("to[0].name", {"to": [{"email": "a@example.org", "name": "\udc00"}]}),
    ("origin.type", {"origin": {"type": "\ud800", "id": "1"}}),
    ("attachments[0].filename", {"attachments": [
        {"filename": "\ud800.txt", "content_type": "text/plain", "content_base64": "aGk="}]}),
])  # fmt: skip
def test_a_lone_surrogate_anywhere_is_refused_naming_the_field(field, changes):
    with pytest.raises(ValidationError) as err:
        messages.parse_email(email(**changes))
    assert err.value.field == field and "surrogate" in err.value.message


def test_a_lone_surrogate_in_a_json_body_is_refused_before_any_field_is_read():
    """The REST edge walks the whole body: a surrogate in a key or a value nobody reads."""
    with pytest.raises(ValidationError) as err:
        api.json_body({"body": json.dumps({"to": [{"email": "a@b.org", "x": "\ud800"}]})})
    assert err.value.field == "to[0].x" and err.value.status == 422
    with pytest.raises(ValidationError) as err:
        api.json_body({"body": '{"\\udc00": 1}'})
    assert err.value.field == "\\udc00"


def test_paired_surrogates_and_other_unicode_are_text_and_are_sent():
    parsed = messages.parse_email(email(subject="Grüße 👋 \u00a0\u200b", text="👋 \u2028 fine",
                                        html="<p>\U0010ffff</p>"))  # fmt: skip
    assert b"Subject:" in build(parsed)


single_line = st.text(st.characters(codec="utf-8"), min_size=1, max_size=60)
any_text = st.text(max_size=60)  # includes surrogates and every control character


@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))  # fmt: skip
@given(subject=any_text, name=any_text, sender_name=any_text, filename=any_text, text=any_text,
       html=st.none() | any_text, origin=any_text)  # fmt: skip
def test_whatever_enqueue_accepts_the_worker_can_build(subject, name, sender_name, filename, text,
                                                       html, origin):  # fmt: skip
    body = email(subject=subject, text=text, html=html,
                 sender={"email": "shop@example.com", "name": sender_name},
                 to=[{"email": "a@example.org", "name": name}],
                 origin={"type": "order", "id": origin},
                 attachments=[{"filename": filename, "content_type": "text/plain",
                               "content_base64": "aGk="}])  # fmt: skip
    if html is None:
        del body["html"]
    try:
        parsed = messages.parse_email(body)
    except ValidationError:
        return
    raw = build(parsed)
    assert raw.isascii()


def test_text_that_cannot_be_stored_in_one_item_is_refused_naming_the_field_and_the_limit():
    noise = "".join(random.Random(7).choices("abcdefghijklmnopqrstuvwxyz0123456789 ", k=600_000))
    with pytest.raises(ValidationError) as err:
        messages.parse_email(email(text=noise))
    assert err.value.field == "text"
    assert str(messages.MAX_STORED_CONTENT) in err.value.message
    with pytest.raises(ValidationError) as err:
        messages.parse_email(email(text="short", html=noise))
    assert err.value.field == "html"


def test_a_long_body_that_compresses_below_the_item_limit_is_accepted():
    repetitive = "<p>Your order has shipped.</p>\n" * 30_000  # 930,000 characters
    parsed = messages.parse_email(email(html=repetitive))
    stored = encode_content({**parsed.content(), "attachments": []})
    assert len(stored) <= messages.stored_content_size(parsed) <= messages.MAX_STORED_CONTENT


@pytest.mark.parametrize("characters", [600_000, 740_000, 760_000, 800_000])
def test_the_size_check_agrees_with_what_the_store_writes(characters):
    """Near the limit the check measures the store's own encoding: what it accepts fits one item
    and what it refuses would not have (hex noise: about 4 bits a character)."""
    noise = "".join(random.Random(3).choices("0123456789abcdef", k=characters))
    content = messages.Email(sender=messages.Address("shop@example.com"),
                             to=(messages.Address("a@example.org"),), subject="Hello",
                             text=noise).content()  # fmt: skip
    stored = len(encode_content({**content, "attachments": []}))
    if stored <= messages.MAX_STORED_CONTENT:
        parsed = messages.parse_email(email(text=noise))
        assert stored <= messages.stored_content_size(parsed) <= messages.MAX_STORED_CONTENT
    else:
        with pytest.raises(ValidationError) as err:
            messages.parse_email(email(text=noise))
        assert f"takes {stored} bytes" in err.value.message


@pytest.mark.parametrize("raw,words", [
    ("[" * 100_000, "nests more than 32 levels"),
    ('{"a":' * 40 + "1" + "}" * 40, "nests more than 32 levels"),
    ('{"n": ' + "1" * 5000 + "}", "number too long"),
    ('{"n": NaN}', "NaN is not a JSON value"),
    ('{"a": 1', "not valid JSON: Expecting ',' delimiter at line 1 column 8"),
])  # fmt: skip
def test_every_malformed_body_is_a_400_naming_the_problem(raw, words):
    with pytest.raises(BadRequest) as err:
        api.json_body({"body": raw})
    assert err.value.status == 400 and words in err.value.message
    assert "Exceeds" not in err.value.message and "int_max_str_digits" not in err.value.message


def test_a_body_over_the_gateway_limit_is_a_413_and_bad_utf8_says_so_plainly():
    with pytest.raises(PayloadTooLarge) as err:
        api.json_body({"body": " " * (api.MAX_BODY_BYTES + 1)})
    assert err.value.status == 413
    with pytest.raises(BadRequest) as bad:
        api.json_body({"body": base64.b64encode(b'{"a": "\xff"}').decode(),
                       "isBase64Encoded": True})  # fmt: skip
    assert bad.value.message == "the body is not UTF-8 text"
