"""Each request body is declared once (vdq.intake.fields): the server checks it and the OpenAPI
document states it from the same declaration. Fed the values at each declared bound and one past it,
the server's check and the committed document agree: what one refuses, so does the other, and the
server takes every value at a bound (the document too, but where its pattern is narrower)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from vdq import openapi
from vdq.core import ids
from vdq.core.errors import ValidationError
from vdq.core.settings import Settings
from vdq.intake import messages, validation
from vdq.intake.fields import Body, Field, OneOf
from vdq.operations import bodies, spec

DOC = json.loads(openapi.DOCUMENT.read_text())
SCHEMAS = DOC["components"]["schemas"]
REGISTRY = Registry().with_resource("urn:vdq", Resource.from_contents(
    {"$schema": "https://json-schema.org/draft/2020-12/schema", "components": DOC["components"]}
))  # fmt: skip
_DEFAULTS = Settings()
LIMITS = {"max_receivers": _DEFAULTS.max_receivers, "max_schedule_days": 30, "now": None,
          "max_attachment_bytes": _DEFAULTS.max_attachment_bytes,
          "sms_max_segments": _DEFAULTS.sms_max_segments}  # fmt: skip
_ADDRESS = {"email": "ada@example.org"}
# A valid body of each kind, with only what it requires (and ``inline`` for a content_id).
SAMPLES: dict[str, dict[str, Any]] = {
    "Address": _ADDRESS,
    "Origin": {"type": "shop.order", "id": "1042"},
    "AttachmentIn": {"filename": "a.txt", "content_type": "text/plain", "content_base64": "aGk=",
                     "inline": True},
    "UploadedAttachmentIn": {"upload_id": ids.new_id(), "inline": True},
    "EmailRequest": {"sender": _ADDRESS, "to": [_ADDRESS], "subject": "Hi", "text": "Hello"},
    "SmsSender": {"cell": "+15005550006"},
    "SmsServiceSender": {"messaging_service_sid": "MG0123456789abcdef0123456789abcdef"},
    "SmsReceiver": {"cell": "+14155550100"},
    "SmsRequest": {"sender": {"cell": "+15005550006"}, "to": [{"cell": "+14155550100"}],
                   "body": "Code"},
    "ResendRequest": {"ids": [ids.new_id()]},
    "SuppressionRequest": {"receiver": "ada@example.org"},
    "UploadRequest": {"filename": "a.pdf", "content_type": "application/pdf", "size": 10},
}
# Kinds whose document pattern is narrower than the server's check: a value at the bound that
# the server takes may be refused by the document (never the other way round).
NARROWER = {"receiver", "item_id", "sms_body"}


def _every_body() -> list[Body]:
    found: list[Body] = []
    for body in bodies.REQUESTS:
        found += [b for b in bodies.nested(body) if b not in found]
    return found


BODIES = _every_body()


def _document_takes(body: Body, value: Any) -> bool:
    schema = {"$ref": f"urn:vdq#/components/schemas/{body.name}"}
    return Draft202012Validator(schema, registry=REGISTRY).is_valid(value)


def _server_error(body: Body, value: Any, limits: dict[str, Any] | None = None) -> str | None:
    """The field the server's check names, or None when it takes the value."""
    try:
        validation.check(body, value, "", {**LIMITS, **(limits or {})})
    except ValidationError as err:
        return err.field
    return None


def _domain(length: int) -> str:
    labels = []
    while length > 64:  # a label of 63 and its dot
        labels.append("d" * 63)
        length -= 64
    return ".".join([*labels, "e" * length])


def _text_of(kind: str, n: int) -> str:
    """A valid value of the kind, ``n`` characters long (none: empty)."""
    if n <= 0:
        return ""
    if kind in ("email", "receiver"):
        return "a" * 64 + "@" + _domain(n - 65)
    if kind == "cell":  # (not +1: a North American number has 10 digits alone)
        return "+4" + "5" * (n - 2)
    if kind == "messaging_service":  # MG and hex digits: valid at 34 characters alone
        return "MG" + "a" * (n - 2)
    if kind == "mime":
        return "a/" + "b" * (n - 2)
    if kind == "https_url":
        return "https://" + "x" * (n - 8)
    return "x" * n


def _entry(f: Field) -> Any:
    """One valid entry of a list field."""
    entry = f.of
    if entry.kind == "object":
        part = entry.of.without_key if isinstance(entry.of, OneOf) else entry.of
        return SAMPLES[part.name]
    return ids.new_id() if entry.kind == "item_id" else _text_of(entry.kind, 16)


def _bounds(f: Field) -> list[tuple[Any, Any]]:
    """(a value at a bound, the value one past it) for each bound the field declares."""
    out = []
    if f.kind == "list":
        most = bodies.at_default(f.max_items)
        if most is not None:
            out.append(([_entry(f)] * most, [_entry(f)] * (most + 1)))
        if f.required:
            out.append(([_entry(f)], []))
    elif f.kind == "integer":
        out += [(bodies.at_default(f.minimum), bodies.at_default(f.minimum) - 1),
                (bodies.at_default(f.maximum), bodies.at_default(f.maximum) + 1)]
    else:
        if f.max_length is not None:
            out.append((_text_of(f.kind, f.max_length), _text_of(f.kind, f.max_length + 1)))
        if f.min_length is not None:  # a receiver is never one character: its shortest
            shortest = "+42" if f.kind == "receiver" else _text_of(f.kind, f.min_length)
            out.append((shortest, _text_of(f.kind, f.min_length - 1)))
    return out


CASES = [(b, f) for b in BODIES for f in b.fields]


def _field(body: Body, name: str) -> Field:
    return next(f for f in body.fields if f.name == name)


def test_every_json_request_body_of_the_api_is_declared_and_has_a_sample():
    named = {op.body for op in spec.OPERATIONS if op.body and op.function != "webhook"}
    assert {b.name for b in bodies.REQUESTS} == named
    assert {b.name for b in BODIES} == set(SAMPLES)
    for body in BODIES:
        assert _document_takes(body, SAMPLES[body.name]), body.name
        assert _server_error(body, SAMPLES[body.name]) is None, body.name


@pytest.mark.parametrize("body", BODIES, ids=lambda b: b.name)
def test_the_document_has_the_declared_fields_and_refuses_what_the_server_refuses(body):
    schema = SCHEMAS[body.name]
    assert list(schema["properties"]) == [f.name for f in body.fields]
    assert schema.get("required", []) == [f.name for f in body.fields if f.required]
    assert schema["additionalProperties"] is False
    unknown = {**SAMPLES[body.name], "zzz": 1}
    assert _server_error(body, unknown) == "zzz" and not _document_takes(body, unknown)
    for f in body.fields:
        left_out = {k: v for k, v in SAMPLES[body.name].items() if k != f.name}
        # Beside an entry of the list it may stand without, a field is not required.
        beside = {f.required_without: [_entry(_field(body, f.required_without))]} \
            if f.required_without else {}  # fmt: skip
        if f.required or f.required_without:
            assert _server_error(body, left_out) == f.name, f.name
            assert not _document_takes(body, left_out), f.name
        if not f.required and f.name != "inline":  # the sample's content_id needs inline
            assert _server_error(body, {**left_out, **beside}) is None, f.name
            assert _document_takes(body, {**left_out, **beside}), f.name
        if not f.required and {"type": "null"} in schema["properties"][f.name].get("anyOf", []):
            # Where the document allows a null, the server takes one.
            given = {**SAMPLES[body.name], f.name: None, **beside}
            assert _server_error(body, given) is None, f.name
        if f.required_without:  # nor with an empty list
            empty = {**left_out, f.required_without: []}
            assert _server_error(body, empty) == f.name and not _document_takes(body, empty)


@pytest.mark.parametrize("body,f", [(b, f) for b, f in CASES if _bounds(f)],
                         ids=lambda v: v.name if isinstance(v, Body | Field) else str(v))
def test_at_each_declared_bound_the_server_and_the_document_agree(body, f):
    # SMS bodies at the length bound: counted against enough segments to reach it (the
    # document's segment limit has its own test, in test_openapi_contract).
    limits = {"sms_max_segments": 11} if f.kind == "sms_body" else {}
    for at, past in _bounds(f):
        inside = {**SAMPLES[body.name], f.name: at}
        outside = {**SAMPLES[body.name], f.name: past}
        assert _server_error(body, inside, limits) is None, (f.name, "at the bound")
        if f.kind not in NARROWER:
            assert _document_takes(body, inside), (f.name, "at the bound")
        named = _server_error(body, outside, limits)
        assert named is not None and named.startswith(f.name), (f.name, named)
        assert not _document_takes(body, outside), (f.name, "past the bound")


def test_a_limit_that_is_a_setting_is_read_at_check_time_and_documented_at_its_default():
    to = next(f for f in messages.EMAIL.fields if f.name == "to")
    assert to.max_items == "max_receivers"
    assert SCHEMAS["EmailRequest"]["properties"]["to"]["maxItems"] == _DEFAULTS.max_receivers
    email = {**SAMPLES["EmailRequest"], "to": [_ADDRESS] * 3}
    assert _server_error(messages.EMAIL, email, {"max_receivers": 2}) == "to"
    assert _server_error(messages.EMAIL, email, {"max_receivers": 3}) is None
    assert "default 1000" in SCHEMAS["EmailRequest"]["properties"]["to"]["description"]


@pytest.mark.parametrize("body,other", [(messages.EMAIL, "subject"), (messages.SMS, "body")],
                         ids=lambda v: getattr(v, "name", v))  # fmt: skip
def test_priority_and_send_at_are_checked_first_so_their_400_wins_over_a_422(body, other):
    assert body.first == ("priority", "send_at")
    bad = {**SAMPLES[body.name], other: "", "send_at": "tomorrow"}
    with pytest.raises(ValidationError) as err:
        validation.check(body, bad, "", LIMITS)
    assert (err.value.field, err.value.status) == ("send_at", 400)
    with pytest.raises(ValidationError) as err:
        validation.check(body, {**bad, "priority": "urgent"}, "", LIMITS)
    assert (err.value.field, err.value.status) == ("priority", 400)


_ONE_LINE = {"line", "display_name", "filename", "origin_id", "https_url"}
_TEXT = {"line", "display_name", "text", "sms_body", "filename", "origin_id"}


@pytest.mark.parametrize("body,f", [(b, f) for b, f in CASES if f.kind in _TEXT],
                         ids=lambda v: v.name if isinstance(v, Body | Field) else str(v))
def test_text_the_server_refuses_the_document_refuses_too(body, f):
    valid = _text_of(f.kind, 12)
    # Inside the value: Python's $ (the validator's engine, not ECMA-262's) also matches
    # before a final newline.
    refused = [valid[:10] + "\x00" + valid[10:]]  # no string holds a NUL
    if f.kind in _ONE_LINE:  # a single-line field: no line break or other control character
        refused += [valid[:10] + c + valid[10:] for c in ("\n", "\r", "\u2028", "\x85")]
    blank = ["   ", "\x1c\t"]  # what str.strip() removes
    if f.required or f.required_without:  # a required one is not blank
        refused += blank
    for value in refused:
        given = {**SAMPLES[body.name], f.name: value}
        assert _server_error(body, given) == f.name, (f.name, value)
        assert not _document_takes(body, given), (f.name, value)
    if f.required_without:  # beside an entry of the other list, a blank one is taken
        other = [_entry(_field(body, f.required_without))]
        for value in blank:
            given = {**SAMPLES[body.name], f.name: value, f.required_without: other}
            assert _server_error(body, given) is None, (f.name, value)
            assert _document_takes(body, given), (f.name, value)
    assert _server_error(body, {**SAMPLES[body.name], f.name: valid}) is None
    assert _document_takes(body, {**SAMPLES[body.name], f.name: valid})
