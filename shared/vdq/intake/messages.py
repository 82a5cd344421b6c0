"""Enqueue input: emails and SMS, their bodies declared once (vdq.intake.fields) and checked by
vdq.intake.validation, one path for the REST API and the Python API. Every error names the field
(``to[1].email``) and nothing is written before all of the input has passed.

The checks are imported when a body is parsed: the functions that only read a message's
dataclasses (send, results, schedules) do not load them.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vdq.core.errors import ValidationError
from vdq.core.text import CONTROL_CHARS, E164  # noqa: F401  (re-exported)
from vdq.intake.fields import (  # noqa: F401  (the formats: re-exported)
    CONTENT_ID_CHARS,
    MAX_CELL,
    MAX_EMAIL,
    MAX_FILENAME,
    MAX_MESSAGING_SERVICE_SID,
    MIME_TYPE,
    Body,
    Field,
    OneOf,
)
from vdq.results.unsubscribe import DEFAULT_LIST
from vdq.workflow.lanes import DEFAULT_PRIORITY

MAX_SUBJECT = 998  # RFC 5322 line length
MAX_TEXT = 1_000_000
MAX_SMS_BODY = 1600  # Twilio's limit for one message
MAX_MEDIA_URLS = 10
MAX_NAME = 256
MAX_ORIGIN_PART = 256
MAX_REPLY_TO = 50
# Stamping a content and storing a resend's copy write every attachment record in one
# transaction with the content, its count and the copy: DynamoDB's 100 actions leave 97.
MAX_ATTACHMENTS = 97
MAX_CONTENT_TYPE = 255
MAX_CONTENT_ID = 200
MAX_MEDIA_URL = 2048

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
    upload_id: str | None = None  # a presigned upload (vdq.intake.uploads) holds the file instead


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
    list_unsubscribe: bool = False  # carry one-click unsubscribe headers (vdq.results.unsubscribe)
    priority: str = DEFAULT_PRIORITY  # the lane (vdq.workflow.lanes)
    # List mail: the list its unsubscribe link leaves (named, or DEFAULT_LIST for one asked
    # with list_unsubscribe or sent in the bulk lane); None: not list mail.
    list_name: str | None = None
    send_at: str | None = None  # stored form (UTC); None: send now (vdq.intake.scheduling)

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
            **({"list": self.list_name} if self.list_name is not None else {}),
        }


@dataclass(frozen=True)
class SmsReceiver:
    cell: str
    name: str | None = None


@dataclass(frozen=True)
class Sms:
    sender: str
    to: tuple[SmsReceiver, ...]
    body: str | None  # None: an MMS of media alone
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


# ---- the bodies ------------------------------------------------------------------------------

ADDRESS = Body("Address", "An email address, with the name shown beside it.", (
    Field("email", "email", "The address; the server checks it strictly (no quoted local "
          "parts, no IP literals, a domain of letters, digits and hyphens).", required=True,
          max_length=MAX_EMAIL),
    Field("name", "display_name", "The display name; leave it out or null for none.",
          max_length=MAX_NAME),
), build=lambda v: Address(v["email"], v["name"] or None))
ORIGIN = Body("Origin", "What in the producing system caused the message, for finding its "
              "items later.", (
    Field("type", "line", "The kind of record, e.g. `shop.order`.", required=True,
          max_length=MAX_ORIGIN_PART),
    Field("id", "origin_id", "The record's id; a whole number (64-bit) is stored as its text.",
          required=True, max_length=MAX_ORIGIN_PART),
), build=lambda v: Origin(v["type"], v["id"]))
_INLINE = Field("inline", "bool", "Show the file in the HTML body (referenced by "
                "`cid:<content_id>`) instead of as an attachment.", default=False)
_CONTENT_ID = Field("content_id", "content_id", "The Content-ID an inline file is referenced "
                    "by (inline files only).", max_length=MAX_CONTENT_ID,
                    requires=("inline", True, "is only for inline attachments"))
_FILENAME_TEXT = ("The file's name as the receiver sees it; not of a type SES refuses (.exe, "
                  ".bat, .js and the others of its unsupported attachment types: a 422); a "
                  "name, not a path (no slashes, not ")
INLINE_ATTACHMENT = Body("AttachmentIn", (
    "A file to send with the email, base64-encoded. Together the files of one email may decode "
    "to at most VDQ_MAX_ATTACHMENT_BYTES (default {max_attachment_bytes:,} bytes; a 422 on "
    "`attachments` otherwise), and the request to about 6 MB (Lambda's limit; a 413 "
    "otherwise): upload a larger file through POST /attachments/uploads. `content_id` is only "
    "for an inline file."), (
    Field("filename", "filename", _FILENAME_TEXT + "`.` or `..`).", required=True,
          max_length=MAX_FILENAME),
    Field("content_type", "mime", "The file's MIME type.", required=True,
          max_length=MAX_CONTENT_TYPE, example="application/pdf"),  # see content_type
    Field("content_base64", "base64", "The file's bytes in standard base64, padded.",
          required=True),
    _INLINE, _CONTENT_ID,
), build=lambda v: Attachment(v["filename"] or "", v["content_type"], v["content_base64"],
                              v["inline"], v["content_id"] or None))
UPLOADED_ATTACHMENT = Body("UploadedAttachmentIn", (
    "A file PUT through POST /attachments/uploads, named by its upload_id: for files too large "
    "to send inline. Its type and size are the upload's; it counts towards "
    "VDQ_MAX_ATTACHMENT_BYTES with the inline files. A 422 on `attachments[i].upload_id` when "
    "the upload does not exist for this caller (never made, another caller's, already taken "
    "by an email, or expired) or holds another size than declared."), (
    Field("upload_id", "upload_id", "The upload_id that POST /attachments/uploads answered; "
          "the file must be PUT to its URL first. Each upload is taken by one email.",
          required=True),
    Field("filename", "filename", _FILENAME_TEXT + "`.` or `..`); left out, the name the "
          "upload was declared with.", max_length=MAX_FILENAME),
    _INLINE, _CONTENT_ID,
), build=lambda v: Attachment(v["filename"] or "", "", b"", v["inline"], v["content_id"] or None,
                              v["upload_id"]))
ATTACHMENT = OneOf("upload_id", UPLOADED_ATTACHMENT, INLINE_ATTACHMENT,
                   "is set by the upload an upload_id names",
                   "A file: its bytes inline (`content_base64`), or the `upload_id` of a file "
                   "uploaded through POST /attachments/uploads.")
_RECEIVERS = ("at most VDQ_MAX_RECEIVERS (default {max_receivers}) distinct receivers in one "
              "request")
_PRIORITY = Field("priority", "priority", (
    "The lane the items are sent in: `high` (password resets, codes), `normal`, or `bulk` "
    "(newsletters). Each lane has its own queue and workers, so a bulk backlog never delays a "
    "high item. Any other value is a 400 naming `priority`."), example="high")
_SEND_AT = Field("send_at", "send_at", (
    "Send not before this time: an RFC 3339 timestamp with an offset (`Z` or `+hh:mm`; "
    "without one it is a 400 naming `send_at`), at most VDQ_MAX_SCHEDULE_DAYS (default "
    "{max_schedule_days}) days ahead of the server's clock (later: a 422 naming `send_at`). A "
    "time in the past means now. The items stay `queued` until then, and an operator may "
    "cancel them meanwhile; they are sent within seconds of the time, up to 14 times "
    "VDQ_SCHEDULE_BATCH items due at once (later ones a minute later per batch)."),
    example="2026-12-24T09:00:00+01:00")
# A request's priority and send_at are checked first: their errors are a 400, the others' 422.
DISPATCH = ("priority", "send_at")
_ADDRESS = Field("", "object", required=True, of=ADDRESS)
EMAIL = Body("EmailRequest", "An email to queue: one item per distinct receiver across to, cc "
             "and bcc.", (
    Field("sender", "object", "Who the email is from (SES must allow the address).",
          required=True, of=ADDRESS),
    Field("to", "list", f"The main receivers; {_RECEIVERS} across to, cc and bcc.",
          required=True, max_items="max_receivers", of=_ADDRESS),
    Field("cc", "list", "Receivers in copy, shown to every receiver.",
          max_items="max_receivers", of=_ADDRESS),
    Field("bcc", "list", "Receivers in blind copy, shown to nobody.",
          max_items="max_receivers", of=_ADDRESS),
    Field("reply_to", "list", "Where replies go (Reply-To).", max_items=MAX_REPLY_TO,
          of=_ADDRESS),
    Field("subject", "line", "The subject: one line, not blank.", required=True,
          max_length=MAX_SUBJECT),
    Field("text", "text", "The plain-text body: not blank.", required=True,
          max_length=MAX_TEXT),
    Field("html", "text", "The HTML body, sent beside the text.", max_length=MAX_TEXT),
    Field("attachments", "list", "Files to send with the email: inline (base64) or presigned "
          "uploads.", max_items=MAX_ATTACHMENTS,
          of=Field("", "object", required=True, of=ATTACHMENT)),
    Field("origin", "object", "What caused the email, if anything.", of=ORIGIN),
    Field("list_unsubscribe", "bool", "Bulk mail: each receiver's copy carries one-click "
          "unsubscribe headers (RFC 8058: List-Unsubscribe with an opaque https link, "
          "List-Unsubscribe-Post) for the email's `list` (`general` when it names none). The "
          "`bulk` priority carries them too."),
    Field("list", "list_name", "The mailing list the email belongs to (as SES's list "
          "management topics and Postmark's message streams): each receiver's copy carries "
          "one-click unsubscribe headers, and using the link stops this list's mail to the "
          "address, not mail of other lists or of none (a password reset, a receipt). List "
          f"mail that names no list is the list `{DEFAULT_LIST}`. Lower-case letters, digits "
          "and . _ - (any other is a 422 naming `list`).", max_length=64,
          example="newsletter"),
    _PRIORITY, _SEND_AT,
), first=DISPATCH)
SMS_NUMBER_SENDER = Body("SmsSender", "The number an SMS is sent from.", (
    Field("cell", "cell", "An E.164 number (+ and up to 15 digits) of the Twilio account.",
          required=True, max_length=MAX_CELL),
), build=lambda v: v["cell"])
SMS_SERVICE_SENDER = Body("SmsServiceSender", (
    "The Twilio Messaging Service an SMS is sent through: its sender pool picks the number "
    "(Twilio's sticky sender, its opt-out handling). Paced as one sender "
    "(VDQ_TWILIO_SENDER_RATE)."), (
    Field("messaging_service_sid", "messaging_service", "The service's SID: MG and 32 hex "
          "digits.", required=True, max_length=MAX_MESSAGING_SERVICE_SID,
          example="MG0123456789abcdef0123456789abcdef"),
), build=lambda v: v["messaging_service_sid"])
SMS_SENDER = OneOf("messaging_service_sid", SMS_SERVICE_SENDER, SMS_NUMBER_SENDER,
                   "a Messaging Service picks the number: give cell or messaging_service_sid, "
                   "not both",
                   "A number of the Twilio account (`cell`), or a Messaging Service "
                   "(`messaging_service_sid`) whose pool picks one.")
SMS_RECEIVER = Body("SmsReceiver", "A number to send the SMS to.", (
    Field("cell", "cell", "An E.164 number (+ and up to 15 digits); a +1 number has 10 digits "
          "after the +1, its area code and exchange starting 2-9.", required=True,
          max_length=MAX_CELL),
    Field("name", "line", "Who it is, for the operators.", max_length=MAX_NAME),
), build=lambda v: SmsReceiver(v["cell"], v["name"] or None))
SMS = Body("SmsRequest", "An SMS to queue: one item per distinct receiver.", (
    Field("sender", "object", "Who the SMS is from.", required=True, of=SMS_SENDER),
    Field("to", "list", f"The receivers; {_RECEIVERS}.", required=True,
          max_items="max_receivers", of=Field("", "object", required=True, of=SMS_RECEIVER)),
    Field("body", "sms_body", (
        "The message: not blank, but beside `media_urls`, where it may be left out, null or "
        "blank (an MMS of media alone, as Twilio sends one: no segments, no encoding); with "
        "neither, a 422 names `body`. Twilio sends it as GSM-7 when every character is in the "
        "GSM 03.38 alphabet (its extension characters ^ { } \\ [ ~ ] | € and form feed take "
        "two septets), else as UCS-2 (a character outside the BMP takes two code units); one "
        "segment holds 160 septets or 70 code units, each segment of a longer body 153 or 67. "
        "A body over VDQ_SMS_MAX_SEGMENTS (default {sms_max_segments}) segments is a 400 "
        "`too_many_segments`; the anyOf gives, per kind of body, the length that always fits "
        "at the default."), max_length=MAX_SMS_BODY, required_without="media_urls"),
    Field("media_urls", "list", "https:// URLs of media to send as MMS, with a body or "
          "alone.",
          max_items=MAX_MEDIA_URLS, of=Field("", "https_url", "An https:// URL Twilio can "
                                             "fetch.", required=True, max_length=MAX_MEDIA_URL)),
    Field("origin", "object", "What caused the SMS, if anything.", of=ORIGIN),
    _PRIORITY, _SEND_AT,
), first=DISPATCH)  # fmt: skip


def origin(value: Any, path: str = "origin") -> Origin | None:
    """An origin (``{"type": ..., "id": ...}``), or None for none."""
    from vdq.intake.validation import field_value

    result: Origin | None = field_value(Field("origin", "object", of=ORIGIN), value, path, {})
    return result


def content_type(value: Any, path: str) -> str:
    """A MIME type (``type/subtype``), as an attachment's ``content_type`` is checked."""
    from vdq.intake.validation import field_value

    kind: str = field_value(Field(path, "mime", required=True, max_length=MAX_CONTENT_TYPE),
                            value, path, {})  # fmt: skip
    return kind


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


def list_of(named: str | None, list_unsubscribe: bool, priority: str) -> str | None:
    """The list of an email: the one it names; for list mail that names none (asked with
    ``list_unsubscribe``, or in the bulk lane, which carries the headers too) the default;
    None: not list mail."""
    if named is not None:
        return named
    return DEFAULT_LIST if list_unsubscribe or priority == "bulk" else None


def parse_email(
    data: Any, *, max_receivers: int = 1000, max_attachment_bytes: int = 7_000_000,
    sender_identities: tuple[str, ...] = (), now: datetime | None = None,
    max_schedule_days: int = 30,
) -> Email:
    from vdq.intake.validation import check

    def total_size(attachments: list[Attachment]) -> None:
        total = sum(len(a.content) for a in attachments)
        if total > max_attachment_bytes:
            raise ValidationError(
                "attachments", f"total {total} bytes is over the limit of {max_attachment_bytes}"
            )

    limits = {"max_receivers": max_receivers, "now": now, "max_schedule_days": max_schedule_days}
    v = check(EMAIL, data, "", limits, after={
        "sender": lambda a: check_sender(a.email, sender_identities),
        "attachments": total_size})  # fmt: skip
    email = Email(
        sender=v["sender"],
        to=tuple(v["to"]),
        cc=tuple(v["cc"]),
        bcc=tuple(v["bcc"]),
        reply_to=tuple(v["reply_to"]),
        subject=v["subject"],
        text=v["text"],
        html=v["html"],
        attachments=tuple(v["attachments"]),
        origin=v["origin"],
        list_unsubscribe=v["list_unsubscribe"],
        priority=v["priority"],
        send_at=v["send_at"],
        list_name=list_of(v["list"], v["list_unsubscribe"], v["priority"]),
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
    from vdq.core.ids import new_id

    content = {**email.content(), "attachments": [new_id() for _ in email.attachments]}
    raw = json.dumps(content, separators=(",", ":")).encode()
    if len(raw) <= MAX_STORED_CONTENT - 1024:  # compression never adds 1 KB to what fits
        return len(raw)
    quick = len(zlib.compress(raw, 1))
    if quick <= MAX_STORED_CONTENT * 0.9:  # deflate at level 9 stores at most about this
        return quick
    from vdq.store import encode_content

    return len(encode_content(content))


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
    from vdq.intake.validation import check

    limits = {"max_receivers": max_receivers, "now": now, "max_schedule_days": max_schedule_days,
              "sms_max_segments": max_segments}  # fmt: skip
    v = check(SMS, data, "", limits)
    return Sms(v["sender"], tuple(v["to"]), v["body"], tuple(v["media_urls"]), v["origin"],
               v["priority"], v["send_at"])
