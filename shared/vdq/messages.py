"""Enqueue input: parsing and validation of emails and SMS, one path for the REST API and the
Python API. Every error names the field (``to[1].email``) and nothing is written before all of
the input has passed.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from vdq import ids, segments
from vdq.errors import ValidationError
from vdq.lanes import DEFAULT_PRIORITY, parse_priority

MAX_SUBJECT = 998  # RFC 5322 line length
MAX_TEXT = 1_000_000
MAX_SMS_BODY = 1600  # Twilio's limit for one message
MAX_MEDIA_URLS = 10
MAX_NAME = 256
MAX_ORIGIN_PART = 256
MAX_FILENAME = 255
MAX_EMAIL = 254  # RFC 5321 path length
MAX_CELL = 16  # "+" and 15 digits (E.164)
MAX_REPLY_TO = 50
# Stamping a content and storing a resend's copy write every attachment record in one
# transaction with the content, its count and the copy: DynamoDB's 100 actions leave 97.
MAX_ATTACHMENTS = 97
MAX_CONTENT_TYPE = 255
MAX_CONTENT_ID = 200
MAX_MEDIA_URL = 2048

E164 = r"^\+[1-9][0-9]{1,14}$"
_E164 = re.compile(E164)
_LOCAL = re.compile(r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}$")
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
MIME_TYPE = r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$"
_CONTENT_TYPE = re.compile(MIME_TYPE)
CONTENT_ID_CHARS = "A-Za-z0-9!#$%&'*+/=?^_`{|}~.@-"
_CONTENT_ID = re.compile(f"^[{CONTENT_ID_CHARS}]{{1,{MAX_CONTENT_ID}}}$")
# What may not appear in a single-line field (a header, a name, a filename): C0 and C1 controls
# (CR, LF, VT, FF, NEL U+0085 and the file/group/record separators end a line for Python and
# for mail software) and the Unicode line and paragraph separators U+2028/U+2029. The OpenAPI
# document's patterns use the same class.
CONTROL_CHARS = r"\x00-\x1f\x7f-\x9f\u2028\u2029"
_CONTROL = re.compile(f"[{CONTROL_CHARS}]")
# A lone surrogate is not a character: it cannot be encoded as UTF-8, so it cannot be sent.
_SURROGATE = re.compile("[\ud800-\udfff]")
# The content record is one DynamoDB item (400 KB, attribute names included): the encoded content
# may take this much, leaving room for the item's other attributes.
MAX_STORED_CONTENT = 380_000


@dataclass(frozen=True)
class Address:
    email: str
    name: str | None = None


@dataclass(frozen=True)
class Attachment:
    filename: str
    content_type: str
    content: bytes
    inline: bool = False
    content_id: str | None = None
    upload_id: str | None = None  # a presigned upload (vdq.uploads) holds the file instead


@dataclass(frozen=True)
class Origin:
    type: str
    id: str


@dataclass(frozen=True)
class Email:
    sender: Address
    to: tuple[Address, ...]
    subject: str
    text: str
    cc: tuple[Address, ...] = ()
    bcc: tuple[Address, ...] = ()
    reply_to: tuple[Address, ...] = ()
    html: str | None = None
    attachments: tuple[Attachment, ...] = ()
    origin: Origin | None = None
    list_unsubscribe: bool = False  # carry one-click unsubscribe headers (vdq.unsubscribe)
    priority: str = DEFAULT_PRIORITY  # the lane (vdq.lanes)
    send_at: str | None = None  # stored form (UTC); None: send now (vdq.scheduling)

    def receivers(self) -> list[Address]:
        """One receiver per distinct address across to, cc and bcc, in that order."""
        seen: set[str] = set()
        out = []
        for address in (*self.to, *self.cc, *self.bcc):
            key = address.email.lower()
            if key not in seen:
                seen.add(key)
                out.append(address)
        return out

    def content(self) -> dict[str, Any]:
        """What the content record stores (attachments by reference, added by enqueue)."""
        return {
            "subject": self.subject,
            "text": self.text,
            "html": self.html,
            "to": [_address_json(a) for a in self.to],
            "cc": [_address_json(a) for a in self.cc],
            "reply_to": [_address_json(a) for a in self.reply_to],
            **({"list_unsubscribe": True} if self.list_unsubscribe else {}),
        }


@dataclass(frozen=True)
class SmsReceiver:
    cell: str
    name: str | None = None


@dataclass(frozen=True)
class Sms:
    sender: str
    to: tuple[SmsReceiver, ...]
    body: str
    media_urls: tuple[str, ...] = field(default=())
    origin: Origin | None = None
    priority: str = DEFAULT_PRIORITY
    send_at: str | None = None

    def receivers(self) -> list[SmsReceiver]:
        seen: set[str] = set()
        out = []
        for receiver in self.to:
            if receiver.cell not in seen:
                seen.add(receiver.cell)
                out.append(receiver)
        return out

    def content(self) -> dict[str, Any]:
        return {"body": self.body, "media_urls": list(self.media_urls)}


def _address_json(address: Address) -> dict[str, str]:
    return {"email": address.email, **({"name": address.name} if address.name else {})}


# ---- field parsers ---------------------------------------------------------------------------


def _object(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(path, "must be an object")
    return value


def _known_keys(value: Mapping[str, Any], path: str, allowed: set[str]) -> None:
    unknown = sorted(set(value) - allowed)
    if unknown:
        prefix = f"{path}." if path else ""
        raise ValidationError(f"{prefix}{unknown[0]}", "is not a known field")


def _string(
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
    """ValidationError unless ``value`` is text that can be sent (and, if asked, one line)."""
    found = _SURROGATE.search(value)
    if found:
        raise ValidationError(
            path,
            f"must not contain a lone surrogate "
            f"(U+{ord(found.group()):04X} at {found.start()}): not text",
        )
    if single_line:
        found = _CONTROL.search(value)
        if found:
            raise ValidationError(
                path,
                f"must not contain line breaks or control characters "
                f"(U+{ord(found.group()):04X} at {found.start()})",
            )
    if "\x00" in value:
        raise ValidationError(path, "must not contain NUL characters")


def email_address(value: Any, path: str) -> str:
    text = _string(value, path, max_len=MAX_EMAIL)
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


def _address(value: Any, path: str) -> Address:
    data = _object(value, path)
    _known_keys(data, path, {"email", "name"})
    name = _string(data.get("name"), f"{path}.name", max_len=MAX_NAME, required=False)
    return Address(email_address(data.get("email"), f"{path}.email"), name or None)


def _list(value: Any, path: str, *, required: bool, max_items: int) -> list[Any]:
    if value is None:
        if required:
            raise ValidationError(path, "is required")
        return []
    if not isinstance(value, list):
        raise ValidationError(path, "must be a list")
    if required and not value:
        raise ValidationError(path, "must name at least one receiver")
    if len(value) > max_items:
        raise ValidationError(path, f"must have at most {max_items} entries")
    return value


def _addresses(value: Any, path: str, *, required: bool, max_items: int) -> tuple[Address, ...]:
    items = _list(value, path, required=required, max_items=max_items)
    return tuple(_address(v, f"{path}[{i}]") for i, v in enumerate(items))


def cell(value: Any, path: str) -> str:
    text = _string(value, path, max_len=MAX_CELL)
    assert text is not None
    if not _E164.match(text):
        raise ValidationError(path, f"{text!r} is not an E.164 phone number (+ and digits)")
    return text


def origin(value: Any, path: str = "origin") -> Origin | None:
    if value is None:
        return None
    data = _object(value, path)
    _known_keys(data, path, {"type", "id"})
    kind = _string(data.get("type"), f"{path}.type", max_len=MAX_ORIGIN_PART)
    ident = data.get("id")
    # A whole number, also as JSON writes it with a fraction of zero (1042.0 is the integer
    # 1042 to JSON Schema, so to a client validating against the document).
    if isinstance(ident, float) and ident.is_integer():
        ident = int(ident)
    if isinstance(ident, int) and not isinstance(ident, bool):
        ident = str(ident)
    ident = _string(ident, f"{path}.id", max_len=MAX_ORIGIN_PART)
    assert kind is not None and ident is not None
    return Origin(kind, ident)


def filename(value: Any, path: str, *, required: bool = True) -> str | None:
    """A file name (not a path) that can go in a header."""
    name = _string(value, path, max_len=MAX_FILENAME, required=required)
    if name is not None and ("/" in name or "\\" in name or name in (".", "..")):
        raise ValidationError(path, "must be a file name, not a path")
    return name


def content_type(value: Any, path: str) -> str:
    text = _string(value, path, max_len=MAX_CONTENT_TYPE)
    assert text is not None
    if not _CONTENT_TYPE.match(text):
        raise ValidationError(path, f"{text!r} is not a MIME type")
    return text


def _attachment(value: Any, path: str) -> Attachment:
    """An inline file (``content_base64``) or a reference to a presigned upload (``upload_id``;
    its file name may be given again, its type and size are the upload's)."""
    data = _object(value, path)
    upload_id = data.get("upload_id")
    if upload_id is not None:
        if "content_type" in data or "content_base64" in data:
            wrong = "content_type" if "content_type" in data else "content_base64"
            raise ValidationError(f"{path}.{wrong}", "is set by the upload an upload_id names")
        _known_keys(data, path, {"upload_id", "filename", "inline", "content_id"})
        if not isinstance(upload_id, str) or not ids.is_id(upload_id):
            raise ValidationError(f"{path}.upload_id", "must be the upload_id of an upload")
        name = filename(data.get("filename"), f"{path}.filename", required=False)
        kind, content = "", b""
    else:
        _known_keys(data, path, {"filename", "content_type", "content_base64", "inline",
                                 "content_id"})  # fmt: skip
        name = filename(data.get("filename"), f"{path}.filename")
        kind = content_type(data.get("content_type"), f"{path}.content_type")
        content = _base64(data.get("content_base64"), f"{path}.content_base64")
    inline = data.get("inline", False)
    if not isinstance(inline, bool):
        raise ValidationError(f"{path}.inline", "must be true or false")
    content_id = _string(data.get("content_id"), f"{path}.content_id", max_len=MAX_CONTENT_ID,
                         required=False)
    if content_id is not None and not _CONTENT_ID.match(content_id):
        raise ValidationError(f"{path}.content_id", "may hold only letters, digits and @.-_")
    if content_id is not None and not inline:
        raise ValidationError(f"{path}.content_id", "is only for inline attachments")
    return Attachment(name or "", kind, content, inline, content_id or None, upload_id)


def _base64(encoded: Any, path: str) -> bytes:
    if not isinstance(encoded, str):
        raise ValidationError(path, "is required and must be a string")
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError(path, "is not valid base64") from None


# ---- documents -------------------------------------------------------------------------------


def check_sender(address: str, identities: tuple[str, ...]) -> None:
    """The sender must be an SES identity the deployment sends from: the address itself or its
    domain (as SES authorizes a send, and as the send role's grants allow). Without identities
    (the local stack, tests) any sender passes."""
    if not identities:
        return
    lowered = address.lower()
    if lowered in identities or lowered.rpartition("@")[2] in identities:
        return
    raise ValidationError(
        "sender.email",
        f"{address} is not an SES identity this deployment sends from "
        f"({', '.join(identities)}): the address or its domain must be one",
    )


EMAIL_FIELDS = {"sender", "to", "cc", "bcc", "reply_to", "subject", "text", "html", "attachments",
                "origin", "list_unsubscribe", "priority", "send_at"}  # fmt: skip
SMS_FIELDS = {"sender", "to", "body", "media_urls", "origin", "priority", "send_at"}


def dispatch(body: Mapping[str, Any], now: datetime | None,
             max_schedule_days: int) -> tuple[str, str | None]:  # fmt: skip
    """A request's ``priority`` and ``send_at`` (stored form), each a 400 naming it if bad."""
    from vdq.scheduling import parse_send_at

    priority = parse_priority(body.get("priority"))
    send_at = parse_send_at(body.get("send_at"), now or datetime.now(UTC), max_schedule_days)
    return priority, send_at


def parse_email(
    data: Any, *, max_receivers: int = 1000, max_attachment_bytes: int = 7_000_000,
    sender_identities: tuple[str, ...] = (), now: datetime | None = None,
    max_schedule_days: int = 30,
) -> Email:
    body = _object(data, "body")
    _known_keys(body, "", EMAIL_FIELDS)
    priority, send_at = dispatch(body, now, max_schedule_days)
    sender = _address(body.get("sender"), "sender")
    check_sender(sender.email, sender_identities)
    to = _addresses(body.get("to"), "to", required=True, max_items=max_receivers)
    cc = _addresses(body.get("cc"), "cc", required=False, max_items=max_receivers)
    bcc = _addresses(body.get("bcc"), "bcc", required=False, max_items=max_receivers)
    reply_to = _addresses(body.get("reply_to"), "reply_to", required=False,
                          max_items=MAX_REPLY_TO)
    subject = _string(body.get("subject"), "subject", max_len=MAX_SUBJECT)
    text = _string(body.get("text"), "text", max_len=MAX_TEXT, single_line=False)
    html = _string(body.get("html"), "html", max_len=MAX_TEXT, required=False, single_line=False)
    raw_attachments = _list(body.get("attachments"), "attachments", required=False,
                            max_items=MAX_ATTACHMENTS)
    attachments = tuple(
        _attachment(a, f"attachments[{i}]") for i, a in enumerate(raw_attachments)
    )
    total = sum(len(a.content) for a in attachments)
    if total > max_attachment_bytes:
        raise ValidationError(
            "attachments", f"total {total} bytes is over the limit of {max_attachment_bytes}"
        )
    email = Email(
        sender=sender,
        to=to,
        cc=cc,
        bcc=bcc,
        reply_to=reply_to,
        subject=subject or "",
        text=text or "",
        html=html,
        attachments=attachments,
        origin=origin(body.get("origin")),
        list_unsubscribe=_flag(body.get("list_unsubscribe"), "list_unsubscribe"),
        priority=priority,
        send_at=send_at,
    )
    if len(email.receivers()) > max_receivers:
        raise ValidationError("to", f"at most {max_receivers} receivers in one request")
    _check_stored_size(email)
    return email


def stored_content_size(email: Email) -> int:
    """Bytes the email's content record takes as the store writes it (file ids included): the
    store's own encoding (vdq.store.encode_content) when the size is near the limit; far below
    it, the raw JSON or a fast deflate, which the store's smallest encoding does not exceed
    (measuring bzip2 on a megabyte of HTML takes a second)."""
    from vdq.ids import new_id

    content = {**email.content(), "attachments": [new_id() for _ in email.attachments]}
    raw = json.dumps(content, separators=(",", ":")).encode()
    if len(raw) <= MAX_STORED_CONTENT - 1024:  # compression never adds 1 KB to what fits
        return len(raw)
    quick = len(zlib.compress(raw, 1))
    if quick <= MAX_STORED_CONTENT * 0.9:  # deflate at level 9 stores at most about this
        return quick
    from vdq.store import encode_content

    return len(encode_content(content))


def _flag(value: Any, path: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValidationError(path, "must be true or false")
    return value


def _check_stored_size(email: Email) -> None:
    size = stored_content_size(email)
    if size <= MAX_STORED_CONTENT:
        return
    content = email.content()
    parts = {key: len(json.dumps(content[key]).encode()) for key in
             ("text", "html", "subject", "to", "cc", "reply_to")}  # fmt: skip
    field = max(parts, key=lambda key: parts[key])
    raise ValidationError(
        field,
        f"the email's content takes {size} bytes stored (compressed) and the limit is "
        f"{MAX_STORED_CONTENT}: make the {field} shorter or send a file as an attachment",
    )


def parse_sms(data: Any, *, max_receivers: int = 1000, max_segments: int = 10,
              now: datetime | None = None, max_schedule_days: int = 30) -> Sms:  # fmt: skip
    body = _object(data, "body")
    _known_keys(body, "", SMS_FIELDS)
    priority, send_at = dispatch(body, now, max_schedule_days)
    sender_data = _object(body.get("sender"), "sender")
    _known_keys(sender_data, "sender", {"cell"})
    sender = cell(sender_data.get("cell"), "sender.cell")
    receivers = []
    for i, value in enumerate(_list(body.get("to"), "to", required=True, max_items=max_receivers)):
        entry = _object(value, f"to[{i}]")
        _known_keys(entry, f"to[{i}]", {"cell", "name"})
        name = _string(entry.get("name"), f"to[{i}].name", max_len=MAX_NAME, required=False)
        receivers.append(SmsReceiver(cell(entry.get("cell"), f"to[{i}].cell"), name or None))
    text = _string(body.get("body"), "body", max_len=MAX_SMS_BODY, single_line=False)
    segments.check(text or "", "body", max_segments)
    urls = []
    for i, url in enumerate(
        _list(body.get("media_urls"), "media_urls", required=False, max_items=MAX_MEDIA_URLS)
    ):
        value = _string(url, f"media_urls[{i}]", max_len=MAX_MEDIA_URL)
        assert value is not None
        if not value.startswith("https://"):
            raise ValidationError(f"media_urls[{i}]", "must be an https:// URL")
        urls.append(value)
    return Sms(sender, tuple(receivers), text or "", tuple(urls), origin(body.get("origin")),
               priority, send_at)
