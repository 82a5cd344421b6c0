"""Request bodies checked against their declarations (vdq.intake.fields): the check of each kind of
value, and ``check``, which walks a body's fields. Every error names the field (``to[1].email``)
and nothing is written before all of the input has passed.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from typing import Any

from vdq.core import ids, text
from vdq.core.errors import ValidationError
from vdq.core.text import CONTROL_CHARS, E164, E164_STORED, MESSAGING_SERVICE_SID
from vdq.intake import encoded_words
from vdq.intake.fields import (
    CONTENT_ID_CHARS,
    LIST_NAME,
    MAX_CELL,
    MAX_EMAIL,
    MAX_FILENAME,
    MAX_MESSAGING_SERVICE_SID,
    MIME_TYPE,
    SES_REFUSED_EXTENSIONS,
    Body,
    Field,
    Limits,
    OneOf,
)
from vdq.workflow.lanes import parse_priority

_E164 = re.compile(E164)
_E164_STORED = re.compile(E164_STORED)
_MESSAGING_SERVICE_SID = re.compile(MESSAGING_SERVICE_SID)
_LOCAL = re.compile(r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}$")
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
_CONTENT_TYPE = re.compile(MIME_TYPE)
_CONTENT_ID = re.compile(f"[{CONTENT_ID_CHARS}]+")
_CONTROL = re.compile(f"[{CONTROL_CHARS}]")
# A lone surrogate is not a character: it cannot be encoded as UTF-8, so it cannot be sent.
_SURROGATE = re.compile("[\ud800-\udfff]")
# An https:// URL: maybe a user@, a host name (maybe with a port; no IP literal in brackets),
# then a path, query or fragment; no spaces or control characters. The document's pattern too
# (vdq.operations.bodies), so what it declares valid is what the server takes.
_NOT_HOST = f"/?#@\\[\\]\\s{CONTROL_CHARS}"
HTTPS_URL = (f"^https://(?:[^{_NOT_HOST}]*@)?[^:{_NOT_HOST}][^{_NOT_HOST}]*"
             f"(?:[/?#][^\\s{CONTROL_CHARS}]*)?$")  # fmt: skip
_HTTPS_URL = re.compile(HTTPS_URL)
_LIST_NAME = re.compile(LIST_NAME)


# ---- values of each kind ---------------------------------------------------------------------


def check_object(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(path, "must be an object")
    return value


def known_keys(value: Mapping[str, Any], path: str, allowed: set[str]) -> None:
    unknown = sorted(set(value) - allowed)
    if unknown:
        prefix = f"{path}." if path else ""
        raise ValidationError(f"{prefix}{unknown[0]}", "is not a known field")


def string(
    value: Any, path: str, *, max_len: int, required: bool = True, single_line: bool = True
) -> str | None:
    if value is None:
        if required:
            raise ValidationError(path, "is required")
        return None
    if not isinstance(value, str):
        raise ValidationError(path, "must be a string")
    if required and not value.strip():
        raise ValidationError(path, "must not be empty")
    if len(value) > max_len:
        raise ValidationError(path, f"must be at most {max_len} characters")
    check_text(value, path, single_line=single_line)
    return value


def check_text(value: str, path: str, *, single_line: bool) -> None:
    """ValidationError unless ``value`` is text that can be sent (and, if asked, one line whose
    RFC 2047 encoded words decode to one line too)."""
    text.check_text(value, path, single_line=single_line)
    if single_line and "=?" in value:
        encoded_words.check_line(value, path)


def email_address(value: Any, path: str) -> str:
    text = string(value, path, max_len=MAX_EMAIL)
    assert text is not None
    local, at, domain = text.rpartition("@")
    labels = domain.split(".")
    if (
        not at
        or not _LOCAL.match(local)
        or local.startswith(".")
        or local.endswith(".")
        or ".." in local
        or len(labels) < 2
        or not all(_LABEL.match(label) for label in labels)
        or labels[-1].isdigit()
    ):
        raise ValidationError(path, f"{text!r} is not a valid email address")
    return text


def cell(value: Any, path: str, *, stored: bool = False) -> str:
    """An E.164 number; ``stored``: any such form, as a number stored before the North
    American rule may be (a lookup of it), else a +1 number must be of the plan."""
    if isinstance(value, str) and _MESSAGING_SERVICE_SID.match(value.strip()):
        # Twilio takes one in From: say where it goes rather than that it is too long.
        raise ValidationError(path, f"{value!r} is a Twilio Messaging Service SID, not a phone "
                                    "number: give it as sender.messaging_service_sid")
    text = string(value, path, max_len=MAX_CELL)
    assert text is not None
    if not (_E164_STORED if stored else _E164).match(text):
        if text.startswith("+1") and text[1:].isascii() and text[1:].isdigit():
            raise ValidationError(path, f"{text!r} is not a North American number: after +1 "
                                  "it has 10 digits, its area code and exchange each starting "
                                  "2-9 (+1 NPA NXX XXXX)")  # fmt: skip
        # ASCII digits alone are most often a number without its + and country code.
        bare = text.isascii() and text.isdigit()
        more = ": it starts with + and the country code" if bare else ""
        raise ValidationError(path, f"{text!r} is not an E.164 phone number (+ and digits)"
                              f"{more}")  # fmt: skip
    return text


def filename(value: Any, path: str, *, required: bool = True) -> str | None:
    """A file name (not a path) that can go in a header, of a type SES sends."""
    name = string(value, path, max_len=MAX_FILENAME, required=required)
    if name is not None and ("/" in name or "\\" in name or name in (".", "..")):
        raise ValidationError(path, "must be a file name, not a path")
    # Windows drops trailing dots and spaces: "a.exe." is run as a.exe.
    _, dot, extension = (name or "").rstrip(". ").rpartition(".")
    if dot and extension.lower() in SES_REFUSED_EXTENSIONS:
        raise ValidationError(path, f"SES refuses attachments named *.{extension.lower()} (its "
                                    "unsupported attachment types): rename or archive the file")
    return name


def _bounded(f: Field, value: Any, path: str) -> Any:
    """A field with one error for any value out of type or bounds (``f.message``)."""
    low, high = f.min_length or 0, f.max_length or 0
    if not isinstance(value, str) or not low <= len(value) <= high:
        raise ValidationError(path, (f.message or "").format_map(f._asdict()))
    return value


def _line(f: Field, value: Any, path: str, limits: Limits, *, one: bool = True) -> Any:
    if f.message is not None and value is not None:
        check_text(_bounded(f, value, path), path, single_line=one)
        return value
    assert f.max_length is not None
    return string(value, path, max_len=f.max_length, required=f.required, single_line=one)


def _display_name(f: Field, value: Any, path: str, limits: Limits) -> Any:
    """A line that names an address: the email package writes what an encoded word in it
    decodes to unquoted, so address syntax there would change the header's addresses."""
    text = _line(f, value, path, limits)
    encoded_words.check_name(text or "", path)
    return text


def _text(f: Field, value: Any, path: str, limits: Limits) -> Any:
    return _line(f, value, path, limits, one=False)


def _sms_body(f: Field, value: Any, path: str, limits: Limits) -> Any:
    from vdq.intake import segments

    text = _text(f, value, path, limits)
    segments.check(text or "", path, limits["sms_max_segments"])
    return text


def _email(f: Field, value: Any, path: str, limits: Limits) -> Any:
    return email_address(value, path)


def _cell(f: Field, value: Any, path: str, limits: Limits) -> Any:
    return cell(value, path)


def _messaging_service(f: Field, value: Any, path: str, limits: Limits) -> Any:
    text = string(value, path, max_len=MAX_MESSAGING_SERVICE_SID)
    if not _MESSAGING_SERVICE_SID.match(text or ""):
        raise ValidationError(path, "must be a Twilio Messaging Service SID: MG and 32 hex "
                                    "digits")  # fmt: skip
    return text


def _receiver(f: Field, value: Any, path: str, limits: Limits) -> Any:
    """An email address or an E.164 number (as given: the suppression list normalizes it)."""
    if isinstance(value, str) and "@" in value:
        return email_address(value, path)
    return cell(value, path)


def _filename(f: Field, value: Any, path: str, limits: Limits) -> Any:
    return filename(value, path, required=f.required)


def _mime(f: Field, value: Any, path: str, limits: Limits) -> Any:
    assert f.max_length is not None
    text = string(value, path, max_len=f.max_length)
    assert text is not None
    if not _CONTENT_TYPE.match(text):
        raise ValidationError(path, f"{text!r} is not a MIME type")
    return text


def _base64(f: Field, value: Any, path: str, limits: Limits) -> Any:
    if not isinstance(value, str):
        raise ValidationError(path, "is required and must be a string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError(path, "is not valid base64") from None


def _bool(f: Field, value: Any, path: str, limits: Limits) -> Any:
    """True or false. A null reads as false, but where absence already does (a ``default`` of
    False, as ``inline`` has): there it is refused as any other non-boolean."""
    if value is None and f.default is None:
        return False
    if not isinstance(value, bool):
        raise ValidationError(path, "must be true or false")
    return value


def _content_id(f: Field, value: Any, path: str, limits: Limits) -> Any:
    assert f.max_length is not None
    text = string(value, path, max_len=f.max_length, required=False)
    if text is not None and not _CONTENT_ID.fullmatch(text):
        raise ValidationError(path, "may hold only letters, digits and @.-_")
    return text


# A SHA-256 digest in base64, as S3's x-amz-checksum-sha256 takes it: 43 characters and "=".
SHA256_BASE64 = r"^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$"
_SHA256 = re.compile(SHA256_BASE64[1:-1], re.ASCII)


def _sha256(f: Field, value: Any, path: str, limits: Limits) -> Any:
    if value is None:
        return None
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise ValidationError(path, "must be the file's SHA-256 digest in base64 (44 characters "
                              "ending in =), as `openssl dgst -sha256 -binary FILE | base64` "
                              "prints it")  # fmt: skip
    return value


def _upload_id(f: Field, value: Any, path: str, limits: Limits) -> Any:
    if not isinstance(value, str) or not ids.is_id(value):
        raise ValidationError(path, "must be the upload_id of an upload")
    return value


def _item_id(f: Field, value: Any, path: str, limits: Limits) -> Any:
    return _bounded(f, value, path)


# A JSON number with a fraction is read as a float: whole numbers below 2^53 are exact (from
# 2^53 on, two written numbers read as one float: 9007199254740993.0 as 9007199254740992).
_EXACT_FLOAT = 2**53


def _origin_id(f: Field, value: Any, path: str, limits: Limits) -> Any:
    # A whole number of 64 bits (as the document says), also as JSON writes it with a fraction
    # of zero (1042.0 is the integer 1042 to JSON Schema): stored as its text, exactly.
    if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT_FLOAT:
        value = int(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) or not -(2**63) <= value < 2**63:
            raise ValidationError(path, "must be a string, or a whole number of 64 bits (one "
                                        "written with a fraction, below 2^53)")  # fmt: skip
        value = str(value)
    return _line(f, value, path, limits)


def _https_url(f: Field, value: Any, path: str, limits: Limits) -> Any:
    """An https:// URL with a host and no spaces (what Twilio fetches; it refuses others at
    send, when the item could only fail): the document's pattern, ``HTTPS_URL``."""
    text = _line(f, value, path, limits)
    if not _HTTPS_URL.match(text):
        raise ValidationError(path, "must be an https:// URL with a host name, and no spaces")
    return text


def list_name(value: Any, path: str = "list") -> str | None:
    """A mailing list's name (``LIST_NAME``), or None for none."""
    if value is None:
        return None
    if not isinstance(value, str) or not _LIST_NAME.fullmatch(value):
        raise ValidationError(path, "must be a list name: 1 to 64 lower-case letters, digits "
                                    "and . _ -, starting with a letter or digit")  # fmt: skip
    return value


def _list_name(f: Field, value: Any, path: str, limits: Limits) -> Any:
    return list_name(value, path)


def _priority(f: Field, value: Any, path: str, limits: Limits) -> Any:
    return parse_priority(value, path)


def _send_at(f: Field, value: Any, path: str, limits: Limits) -> Any:
    from datetime import UTC, datetime

    from vdq.intake.scheduling import parse_send_at

    now = limits.get("now") or datetime.now(UTC)
    return parse_send_at(value, now, limits["max_schedule_days"], path)


def limit(bound: int | str | None, limits: Limits) -> int | None:
    """A bound as declared, or the limit it names (a setting) as the check was given it."""
    return limits[bound] if isinstance(bound, str) else bound


def _integer(f: Field, value: Any, path: str, limits: Limits) -> Any:
    if isinstance(value, float) and value.is_integer():  # 534.0 is the integer 534 to JSON
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(path, f"is required and must be a whole number of {f.unit}")
    low, high = limit(f.minimum, limits), limit(f.maximum, limits)
    if (low is not None and value < low) or (high is not None and value > high):
        setting = f" (VDQ_{f.maximum.upper()})" if isinstance(f.maximum, str) else ""
        raise ValidationError(path, f"must be {low} to {high} {f.unit}{setting}")
    return value


def _list(f: Field, value: Any, path: str, limits: Limits) -> Any:
    most = limit(f.max_items, limits)
    if f.message is not None and (not isinstance(value, list)
                                  or not 0 < len(value) <= (most or 0)):  # fmt: skip
        raise ValidationError(path, f.message.format_map(f._asdict()))
    if value is None:
        if f.required:
            raise ValidationError(path, "is required")
        return []
    if not isinstance(value, list):
        raise ValidationError(path, "must be a list")
    if f.required and not value:
        raise ValidationError(path, "must name at least one receiver")
    if most is not None and len(value) > most:
        raise ValidationError(path, f"must have at most {most} entries")
    return [field_value(f.of, v, f"{path}[{i}]", limits) for i, v in enumerate(value)]


def _object(f: Field, value: Any, path: str, limits: Limits) -> Any:
    if value is None and not f.required:
        return None
    if isinstance(f.of, OneOf):
        data = check_object(value, path)
        chosen = f.of.with_key if data.get(f.of.key) is not None else f.of.without_key
        if chosen is f.of.with_key:
            for other in f.of.without_key.fields:
                if other.name in data and other.name not in chosen.names():
                    raise ValidationError(f"{path}.{other.name}", f.of.conflict)
        return check(chosen, data, path, limits)
    return check(f.of, value, path, limits)


Check = Callable[[Field, Any, str, Limits], Any]
# Each kind's check: the value as the field reads it (a null or absent field as None), or a
# ValidationError naming the field. The generator describes the same kinds.
KINDS: dict[str, Check] = {
    "line": _line, "display_name": _display_name, "text": _text, "sms_body": _sms_body,
    "email": _email, "cell": _cell, "messaging_service": _messaging_service,
    "receiver": _receiver, "filename": _filename, "mime": _mime, "base64": _base64,
    "bool": _bool, "content_id": _content_id, "upload_id": _upload_id, "item_id": _item_id,
    "sha256": _sha256,
    "origin_id": _origin_id, "https_url": _https_url, "priority": _priority,
    "list_name": _list_name,
    "send_at": _send_at, "integer": _integer, "list": _list, "object": _object,
}  # fmt: skip


def field_value(f: Field, value: Any, path: str, limits: Limits) -> Any:
    return KINDS[f.kind](f, value, path, limits)


def check(body: Body, value: Any, path: str = "", limits: Limits | None = None, *,
          after: Mapping[str, Callable[[Any], None]] | None = None) -> Any:  # fmt: skip
    """``value`` checked against ``body``: what ``body.build`` makes of its fields' values (or
    the dict of them). The fields are checked in order, those ``body.first`` names before the
    others; ``after[name]`` sees a field's value once it passed (a check across fields)."""
    first = body.first
    limits = limits or {}
    data = check_object(value, path or "body")
    known_keys(data, path, body.names())
    ordered = sorted(body.fields, key=lambda f: first.index(f.name) if f.name in first
                     else len(first))  # fmt: skip
    out: dict[str, Any] = {}
    for f in ordered:
        where = f"{path}.{f.name}" if path else f.name
        out[f.name] = field_value(f, data.get(f.name, f.default), where, limits)
        if f.requires is not None and out[f.name] is not None:
            other, wanted, error = f.requires
            if out.get(other) != wanted:
                raise ValidationError(where, error)
        if f.required_without is not None and isinstance(out[f.name], str) \
                and not out[f.name].strip():  # fmt: skip
            out[f.name] = None  # blank beside the other field is none: checked below
        if after and f.name in after:
            after[f.name](out[f.name])
    for f in body.fields:
        if f.required_without is not None and out[f.name] is None \
                and not out[f.required_without]:  # fmt: skip
            where = f"{path}.{f.name}" if path else f.name
            given = data.get(f.name) is not None
            raise ValidationError(where, f"{'must not be empty' if given else 'is required'} "
                                  f"when there are no {f.required_without}")
    return body.build(out) if body.build else out
