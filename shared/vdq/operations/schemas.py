"""Request and response bodies as pydantic models, for the OpenAPI document only.

Imported by the generator (``python -m vdq.openapi``) at build and test time, never by a
function at run time: the handlers validate input with vdq.messages and vdq.operations.spec.
Every limit and pattern is imported from the code that enforces it, so the document cannot
promise more than the server accepts.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from vdq import ids, messages, segments, suppression
from vdq.lanes import PRIORITIES
from vdq.operations import smsbody, spec
from vdq.operations.upload_schemas import Upload, UploadedAttachmentIn, UploadRequest
from vdq.settings import Settings
from vdq.views import HISTORY_KINDS, HISTORY_SOURCES
from vdq.workflow import State

_DEFAULTS = Settings()
_C = messages.CONTROL_CHARS
# What str.strip() removes, so what the server counts as blank (spelled out: regex engines
# disagree on \s, e.g. about U+001C..U+001F).
_SPACE = "".join(f"\\u{ord(c):04x}" for c in map(chr, range(0x10000)) if c.isspace())
# A single-line field: no control characters; a required one also holds a non-space character.
SINGLE_LINE = f"^[^{_C}]*$"
SINGLE_LINE_REQUIRED = f"^[^{_C}]*[^{_SPACE}{_C}][^{_C}]*$"
# A body (text, html, SMS): any character but NUL; a required one holds a non-space character.
MULTI_LINE_REQUIRED = f"^[^\\x00]*[^{_SPACE}\\x00][^\\x00]*$"
MULTI_LINE = "^[^\\x00]*$"
BASE64 = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
FILENAME = f"^[^/\\\\{_C}]*[^{_SPACE}/\\\\{_C}][^/\\\\{_C}]*$"
EMAIL_FORMAT: dict[str, Any] = {"format": "email"}
_ID_TEXT = "26 characters of Crockford base32 (a ULID)"
_METHOD = Literal["email", "sms"]
HistoryKind = Literal[HISTORY_KINDS]  # type: ignore[valid-type]
HistorySource = Literal[HISTORY_SOURCES]  # type: ignore[valid-type]
Transition = Literal[spec.OPERATOR_TRANSITIONS]  # type: ignore[valid-type]
SmsEncoding = Literal[segments.ENCODINGS]  # type: ignore[valid-type]
SuppressionReason = Literal[suppression.REASON_CODES]  # type: ignore[valid-type]
ErrorCode = str  # the generator replaces the schema with the enum of codes (vdq.openapi)


def _id(description: str) -> Any:
    return Field(description=f"{description} ({_ID_TEXT}).", pattern=ids.PATTERN)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---- requests --------------------------------------------------------------------------------


class Address(_Strict):
    """An email address, with the name shown beside it."""

    email: str = Field(description="The address; the server checks it strictly (no quoted local "
                       "parts, no IP literals, a domain of letters, digits and hyphens).",
                       max_length=messages.MAX_EMAIL, json_schema_extra=EMAIL_FORMAT)
    name: str | None = Field(None, description="The display name; leave it out or null for none.",
                             max_length=messages.MAX_NAME, pattern=SINGLE_LINE)


class Origin(_Strict):
    """What in the producing system caused the message, for finding its items later."""

    type: str = Field(description="The kind of record, e.g. `shop.order`.",
                      max_length=messages.MAX_ORIGIN_PART, pattern=SINGLE_LINE_REQUIRED)
    id: Annotated[str, Field(max_length=messages.MAX_ORIGIN_PART,
                             pattern=SINGLE_LINE_REQUIRED)] | Annotated[
        int, Field(ge=-(2**63), le=2**63 - 1)] = Field(
        description="The record's id; a whole number (64-bit) is stored as its text."
    )


class AttachmentIn(_Strict):
    """A file to send with the email."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "description": (
                "A file to send with the email, base64-encoded. Together the files of one "
                "email may decode to at most VDQ_MAX_ATTACHMENT_BYTES (default "
                f"{_DEFAULTS.max_attachment_bytes:,} bytes; a 422 on `attachments` otherwise), "
                "and the request to about 6 MB (Lambda's limit; a 413 otherwise): upload a "
                "larger file through POST /attachments/uploads. "
                "`content_id` is only for an inline file."
            ),
            # content_id only with inline: true (the server refuses it otherwise).
            "if": {"required": ["content_id"],
                   "properties": {"content_id": {"type": "string"}}},
            "then": {"required": ["inline"], "properties": {"inline": {"const": True}}},
        },
    )  # fmt: skip
    filename: str = Field(description="The file's name as the receiver sees it; a name, not a "
                          "path (no slashes, not `.` or `..`).",
                          max_length=messages.MAX_FILENAME, pattern=FILENAME,
                          json_schema_extra={"not": {"enum": [".", ".."]}})
    content_type: str = Field(description="The file's MIME type.", examples=["application/pdf"],
                              max_length=messages.MAX_CONTENT_TYPE, pattern=messages.MIME_TYPE)
    content_base64: str = Field(description="The file's bytes in standard base64, padded.",
                                pattern=BASE64, json_schema_extra={"contentEncoding": "base64"})
    inline: bool = Field(False, description="Show the file in the HTML body (referenced by "
                         "`cid:<content_id>`) instead of as an attachment.")
    content_id: str | None = Field(
        None, description="The Content-ID an inline file is referenced by (inline files only).",
        pattern=f"^[{messages.CONTENT_ID_CHARS}]{{1,{messages.MAX_CONTENT_ID}}}$",
    )


_AnyAttachment = Annotated[AttachmentIn | UploadedAttachmentIn, Field(
    description="A file: its bytes inline (`content_base64`), or the `upload_id` of a file "
    "uploaded through POST /attachments/uploads.")]
Priority = Literal[PRIORITIES]  # type: ignore[valid-type]
_PRIORITY_TEXT = (
    "The lane the items are sent in: `high` (password resets, codes), `normal`, or `bulk` "
    "(newsletters). Each lane has its own queue and workers, so a bulk backlog never delays a "
    "high item. Any other value is a 400 naming `priority`."
)
_SEND_AT_TEXT = (
    "Send not before this time: an RFC 3339 timestamp with an offset (`Z` or `+hh:mm`; "
    "without one it is a 400 naming `send_at`), at most VDQ_MAX_SCHEDULE_DAYS (default "
    f"{_DEFAULTS.max_schedule_days}) days ahead (later: a 400). A time in the past means now. "
    "The items stay `queued` until then, and an operator may cancel them meanwhile; they are "
    "sent within seconds of the time."
)


def _priority_field() -> Any:
    return Field("normal", description=_PRIORITY_TEXT, examples=["high"])


def _send_at_field() -> Any:
    return Field(None, description=_SEND_AT_TEXT, examples=["2026-12-24T09:00:00+01:00"],
                 json_schema_extra={"format": "date-time", "pattern": _SEND_AT_PATTERN})


_SEND_AT_PATTERN = (r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?"
                    r"([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$")
_RECEIVERS = (f"at most VDQ_MAX_RECEIVERS (default {_DEFAULTS.max_receivers}) distinct "
              "receivers in one request")  # fmt: skip


class EmailRequest(_Strict):
    """An email to queue: one item per distinct receiver across to, cc and bcc."""

    sender: Address = Field(description="Who the email is from (SES must allow the address).")
    to: list[Address] = Field(description=f"The main receivers; {_RECEIVERS} across to, cc and "
                              "bcc.", min_length=1, max_length=_DEFAULTS.max_receivers)
    cc: list[Address] = Field([], description="Receivers in copy, shown to every receiver.",
                              max_length=_DEFAULTS.max_receivers)
    bcc: list[Address] = Field([], description="Receivers in blind copy, shown to nobody.",
                               max_length=_DEFAULTS.max_receivers)
    reply_to: list[Address] = Field([], description="Where replies go (Reply-To).",
                                    max_length=messages.MAX_REPLY_TO)
    subject: str = Field(description="The subject: one line, not blank.",
                         max_length=messages.MAX_SUBJECT, pattern=SINGLE_LINE_REQUIRED)
    text: str = Field(description="The plain-text body: not blank.",
                      max_length=messages.MAX_TEXT, pattern=MULTI_LINE_REQUIRED)
    html: str | None = Field(None, description="The HTML body, sent beside the text.",
                             max_length=messages.MAX_TEXT, pattern=MULTI_LINE)
    attachments: list[_AnyAttachment] = Field(
        [], description="Files to send with the email: inline (base64) or presigned uploads.",
        max_length=messages.MAX_ATTACHMENTS,
    )
    origin: Origin | None = Field(None, description="What caused the email, if anything.")
    list_unsubscribe: bool = Field(False, description="Bulk mail: each receiver's copy carries "
                                   "one-click unsubscribe headers (RFC 8058: List-Unsubscribe "
                                   "with a signed https link, List-Unsubscribe-Post). Using "
                                   "the link puts the address on the suppression list. The "
                                   "`bulk` priority carries them too.")
    priority: Priority = _priority_field()
    send_at: str | None = _send_at_field()


class SmsSender(_Strict):
    """The number an SMS is sent from."""

    cell: str = Field(description="An E.164 number (+ and up to 15 digits) of the Twilio "
                      "account.", pattern=messages.E164, max_length=messages.MAX_CELL)


class SmsReceiver(_Strict):
    """A number to send the SMS to."""

    cell: str = Field(description="An E.164 number (+ and up to 15 digits).",
                      pattern=messages.E164, max_length=messages.MAX_CELL)
    name: str | None = Field(None, description="Who it is, for the operators.",
                             max_length=messages.MAX_NAME, pattern=SINGLE_LINE)


class SmsRequest(_Strict):
    """An SMS to queue: one item per distinct receiver."""

    sender: SmsSender = Field(description="Who the SMS is from.")
    to: list[SmsReceiver] = Field(description=f"The receivers; {_RECEIVERS}.", min_length=1,
                                  max_length=_DEFAULTS.max_receivers)
    body: str = Field(description=smsbody.description(_DEFAULTS.sms_max_segments),
                      max_length=messages.MAX_SMS_BODY, pattern=MULTI_LINE_REQUIRED,
                      json_schema_extra={"anyOf": smsbody.limits(_DEFAULTS.sms_max_segments)})
    media_urls: list[str] = Field(
        [], description="https:// URLs of media to send as MMS.",
        max_length=messages.MAX_MEDIA_URLS,
        json_schema_extra={"items": {"type": "string", "maxLength": messages.MAX_MEDIA_URL,
                                     "pattern": f"^https://[^{_C}]*$",
                                     "description": "An https:// URL Twilio can fetch."}},
    )  # fmt: skip
    origin: Origin | None = Field(None, description="What caused the SMS, if anything.")
    priority: Priority = _priority_field()
    send_at: str | None = _send_at_field()


class ResendRequest(_Strict):
    """The done items to send again."""

    ids: list[str] = Field(
        description="Ids of done items; a repeated id is sent once.", min_length=1,
        max_length=spec.MAX_RESEND_IDS,
        json_schema_extra={"items": {"type": "string", "pattern": ids.PATTERN,
                                     "description": f"A queue item's id ({_ID_TEXT})."}},
    )  # fmt: skip


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


class TwilioStatus(BaseModel):
    """Twilio's status callback form (any other field Twilio adds is accepted)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={
        "additionalProperties": {"type": "string", "description": "Another field of Twilio's."}})
    MessageSid: str = Field(description="The SID of the message.")
    MessageStatus: str = Field(description="Its new status, e.g. `delivered`, `undelivered`.")
    # A form has no null: the field is absent when there is no error.
    ErrorCode: str = Field(None, description="Twilio's error code of a failed message.",  # type: ignore[assignment]
                           json_schema_extra=_no_default)


# ---- responses -------------------------------------------------------------------------------


class EmailParty(BaseModel):
    """The sender or receiver of an email item."""

    model_config = ConfigDict(extra="forbid")
    email: str = Field(description="The address.", json_schema_extra=EMAIL_FORMAT)
    name: str | None = Field(description="The display name, or null.")


class SmsParty(BaseModel):
    """The sender or receiver of an SMS item."""

    model_config = ConfigDict(extra="forbid")
    cell: str = Field(description="The E.164 number.", pattern=messages.E164)
    name: str | None = Field(None, description="The receiver's name, or null (never on a "
                             "sender).")


class OriginOut(BaseModel):
    """What caused the message, as the producer gave it (an id as text)."""

    type: str = Field(description="The kind of record.")
    id: str = Field(description="The record's id.")


class QueueItem(BaseModel):
    """One receiver's message and where it is in the workflow."""

    id: str = _id("The item's id")
    method: _METHOD = Field(description="How it is sent: `email` (SES) or `sms` (Twilio).")
    state: State = Field(description="Where it is in the workflow; cancelled, succeeded and "
                         "unconfirmed are done.")
    sender: EmailParty | SmsParty = Field(description="Who it is from (by method).")
    receiver: EmailParty | SmsParty = Field(description="Who it goes to (by method).")
    result: str | None = Field(description="The provider's last answer or the error, or null.")
    attempt: int = Field(description="The attempt, from 1; a retry starts the next one.", ge=1)
    retry_delay: int | None = Field(description="Seconds until an automatic retry of a delayed "
                                    "item, or null.", ge=0)
    queued_at: datetime = Field(description="When the item was queued (UTC).")
    updated_at: datetime = Field(description="When the item last changed (UTC).")
    done_since: datetime = Field(description="When it entered a done state; for an active "
                                 "item, when it was queued (the sort key of the sent list).")
    done_at: datetime | None = Field(description="When it entered a done state, or null.")
    origin: OriginOut | None = Field(description="What caused the message, or null.")
    provider_id: str | None = Field(description="SES message ID or Twilio SID, once known.")
    resent_from: str | None = Field(description="The item this one is a resend of, or null.",
                                    pattern=ids.PATTERN)
    encoding: SmsEncoding | None = Field(
        description="SMS: how the body is sent, `GSM-7` or `UCS-2` (counted at enqueue); null "
        "for an email.")
    segments: int | None = Field(description="SMS: the segments the body takes, which Twilio "
                                 "bills for each receiver; null for an email.", ge=1)
    priority: Priority = Field(description="The lane it is sent in: `high`, `normal` or "
                               "`bulk`.")
    send_at: datetime | None = Field(description="Not sent before this time (UTC), as the "
                                     "request's `send_at` asked; null: sent when queued.")


class SuppressedReceiver(BaseModel):
    """A receiver of the request that is on the suppression list."""

    receiver: str = Field(description="The receiver, as the list compares it (an address in "
                          "lower case, or an E.164 number).")
    reason: SuppressionReason = Field(description="Why it is suppressed.")
    since: datetime = Field(description="Since when (UTC).")


class Items(BaseModel):
    """The items a request created, in receiver order."""

    items: list[QueueItem] = Field(description="The new items.")
    suppressed: list[SuppressedReceiver] | None = Field(
        None, description="postEmails and postSms: the receivers on the suppression list. "
        "Their items are queued all the same and end `cancelled`, unsent, with a result that "
        "says why and since when.")


class ItemPage(BaseModel):
    """One page of a list."""

    items: list[QueueItem] = Field(description="The items of this page, in the list's order.")
    cursor: str | None = Field(description="Pass it as `cursor` to get the next page; null at "
                               "the end.", pattern=spec.cursor.PATTERN)


class AttachmentOut(BaseModel):
    """A file of the item's content."""

    id: str = _id("The attachment's id")
    filename: str = Field(description="The file's name.")
    content_type: str = Field(description="The file's MIME type.")
    size: int = Field(description="The file's size in bytes.", ge=0)
    inline: bool = Field(description="Shown in the HTML body rather than attached.")
    content_id: str | None = Field(description="The Content-ID of an inline file, or null.")
    download_path: str = Field(description="The path of getAttachment for this file.",
                               examples=["/attachments/01JD0000000000000000000000"])
    purged: bool = Field(description="The file was deleted by cleanup (a download is a 410).")


class HistoryEntry(BaseModel):
    """One thing that happened to the item."""

    at: datetime = Field(description="When (UTC).")
    actor: str = Field(description="Who: a user's subject, `ses`, `twilio` or `vdq`.")
    source: HistorySource = Field(description="What kind of actor: the server's send path, a "
                                  "provider's event, an operator or a schedule.")
    kind: HistoryKind = Field(description="`transition`: the state changed; `ignored`: a "
                              "transition accepted without a change; `late`: one that came "
                              "too late to apply; `event`: a provider event recorded; "
                              "`action`: an operator action such as a resend.")
    name: str = Field(description="The transition (`send`, `retry`, ...) or event name.")
    from_state: State | None = Field(description="The state before, or null.")
    to_state: State | None = Field(description="The state after, or null.")
    attempt: int | None = Field(description="The attempt it belongs to, or null.")
    text: str | None = Field(description="The provider's answer or a note, or null.")


class AddressOut(BaseModel):
    """An address as the content stores it."""

    email: str = Field(description="The address.", json_schema_extra=EMAIL_FORMAT)
    name: str | None = Field(None, description="The display name, when one was given.")


class EmailContent(BaseModel):
    """What every receiver of an email request gets."""

    model_config = ConfigDict(extra="forbid")
    subject: str = Field(description="The subject.")
    text: str = Field(description="The plain-text body.")
    html: str | None = Field(description="The HTML body, or null.")
    to: list[AddressOut] = Field(description="The `to` list, as the email shows it.")
    cc: list[AddressOut] = Field(description="The `cc` list, as the email shows it.")
    reply_to: list[AddressOut] = Field(description="Where replies go.")


class SmsContent(BaseModel):
    """What every receiver of an SMS request gets."""

    model_config = ConfigDict(extra="forbid")
    body: str = Field(description="The message.")
    media_urls: list[str] = Field(description="Media sent with it.", json_schema_extra={
        "items": {"type": "string", "description": "An https:// URL."}})


class ItemDetail(QueueItem):
    """One item with its content, attachments and history."""

    content: EmailContent | SmsContent = Field(description="The content, by the item's method "
                                               "(bcc is never shown).")
    attachments: list[AttachmentOut] = Field(description="The files of an email, in order.")
    history: list[HistoryEntry] = Field(description="What happened to it, oldest first: the "
                                        "first 100 entries.")
    history_cursor: str | None = Field(description="When the history has more entries: pass it "
                                       "as `cursor` to getItemHistory for the next page; null "
                                       "when `history` holds them all.",
                                       pattern=spec.cursor.PATTERN)


class HistoryPage(BaseModel):
    """One page of an item's history."""

    entries: list[HistoryEntry] = Field(description="The entries of this page, oldest first.")
    cursor: str | None = Field(description="Pass it as `cursor` to get the next page; null at "
                               "the end.", pattern=spec.cursor.PATTERN)


class TransitionResult(BaseModel):
    """What the transition did (or, with dry_run, would do)."""

    transition: Transition = Field(description="The transition run.")
    dry_run: bool = Field(description="Nothing was changed.")
    from_state: State = Field(description="The item's state before.")
    to_state: State = Field(description="Its state after.")
    item: QueueItem = Field(description="The item as it is now (before, with dry_run).")


class WindowUsage(BaseModel):
    """One limit and its current window."""

    limit: Literal["per_second", "per_minute", "per_day"] = Field(description="Which limit.")
    quota: int = Field(description="Queue items the window allows.", ge=1)
    used: int = Field(description="Queue items enqueued in the current window.")
    remaining: int = Field(description="What the window still allows.", ge=0)
    resets_at: datetime = Field(description="When the current window ends (UTC); a day "
                                "window ends at midnight UTC.")


class ProducerUsage(BaseModel):
    """A producer's quota and what it used of it."""

    producer: str = Field(description="The client id, or `group:<name>`.")
    at: datetime = Field(description="When this was read (UTC).")
    limits: list[WindowUsage] = Field(description="One entry per limit set for the producer.")


class Health(BaseModel):
    """Readiness (the local stack adds the state of each of its parts)."""

    model_config = ConfigDict(extra="allow")
    status: Literal["ok", "starting"] = Field(description="`ok` when ready.")


class OpenApiDocument(BaseModel):
    """An OpenAPI 3.1 document."""

    model_config = ConfigDict(extra="allow")
    openapi: str = Field(description="The OpenAPI version.")


class ErrorDetail(BaseModel):
    """What went wrong."""

    code: ErrorCode = Field(description="What kind of error (the enum lists each).")
    message: str = Field(description="For a person: what went wrong and what to do.")
    details: dict[str, Any] | None = Field(None, description="Facts a program can use: "
                                           "`field` names a bad input, `id`/`ids` the items.")


class Error(BaseModel):
    """Every error: from the functions and from API Gateway alike."""

    error: ErrorDetail = Field(description="The error.")


class PartialDetails(BaseModel):
    """Which receivers were queued and which were not."""

    accepted: list[str] = Field(description="Ids of the items stored: they will be sent.",
                                json_schema_extra={"items": {
                                    "type": "string", "pattern": ids.PATTERN,
                                    "description": f"An item's id ({_ID_TEXT})."}})
    rejected: list[str] = Field(description="The receivers (email addresses or cells) not "
                                "queued: send these again.", json_schema_extra={"items": {
                                    "type": "string",
                                    "description": "An email address or an E.164 cell."}})


class PartialErrorDetail(BaseModel):
    """A request that queued some of its receivers."""

    code: Literal["partially_enqueued"] = Field(description="Some items were stored.")
    message: str = Field(description="For a person: what happened.")
    details: PartialDetails = Field(description="The items stored and the receivers not.")


class PartiallyEnqueued(BaseModel):
    """503 of an enqueue that stored some items before the store failed."""

    error: PartialErrorDetail = Field(description="The error.")


class TwilioInbound(BaseModel):
    """Twilio's incoming-message form (any other field Twilio adds is accepted)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={
        "additionalProperties": {"type": "string", "description": "Another field of Twilio's."}})
    From: str = Field(description="The number that sent the message (E.164).")
    Body: str = Field(description="The message text; a keyword is one word, any case.")
    OptOutType: str = Field(None, description="Advanced Opt-Out: STOP, START or HELP.",  # type: ignore[assignment]
                            json_schema_extra=_no_default)


_RECEIVER_TEXT = ("An email address (compared in lower case; each +label variant is an address "
                  "of its own) or an E.164 number.")


class SuppressionRequest(_Strict):
    """A receiver to put on the suppression list."""

    receiver: str = Field(description=_RECEIVER_TEXT, min_length=1,
                          max_length=messages.MAX_EMAIL, pattern=spec.RECEIVER_PATTERN)
    text: str | None = Field(None, description="Why, for the history (one line).",
                             min_length=1, max_length=500, pattern=SINGLE_LINE)


class Suppression(BaseModel):
    """A receiver VDQ does not send to."""

    receiver: str = Field(description=_RECEIVER_TEXT)
    channel: _METHOD = Field(description="`email` for an address, `sms` for a number.")
    reason: SuppressionReason = Field(description="Why: `bounce` (SES permanent bounce), "
                                      "`complaint`, `ses_suppression_list` (SES's account "
                                      "list), `sms_opt_out` (STOP, Twilio 21610), "
                                      "`unsubscribe` (one-click), `operator`.")
    text: str | None = Field(description="What the feed said (the bounce, the keyword), or "
                             "the operator's note.")
    since: datetime = Field(description="Since when (UTC).")
    actor: str = Field(description="Who put it there: ses, twilio, receiver, or the operator.")


class SuppressionPage(BaseModel):
    """One page of the suppression list."""

    suppressions: list[Suppression] = Field(description="By receiver.")
    cursor: str | None = Field(description="Pass it as `cursor` to get the next page; null at "
                               "the end.", pattern=spec.cursor.PATTERN)


class SuppressionChange(BaseModel):
    """The suppression that holds after an add."""

    suppression: Suppression = Field(description="The receiver's suppression.")
    added: bool = Field(description="False when it was suppressed already.")


class SuppressionRemoved(BaseModel):
    """The suppression that was removed."""

    suppression: Suppression = Field(description="What it was.")


class SuppressionEvent(BaseModel):
    """One entry of a receiver's suppression history."""

    at: datetime = Field(description="When (UTC).")
    actor: str = Field(description="Who did it: ses, twilio, receiver, or the operator.")
    action: Literal["added", "removed", "noted"] = Field(description="What happened.")
    reason: SuppressionReason | None = Field(description="Why, for an addition.")
    text: str | None = Field(description="What the feed or the operator said.")


class SuppressionHistory(BaseModel):
    """A receiver's suppression and its history."""

    receiver: str = Field(description=_RECEIVER_TEXT)
    suppression: Suppression | None = Field(description="The suppression now, or null.")
    history: list[SuppressionEvent] = Field(description="Oldest first.")


MODELS: tuple[type[BaseModel], ...] = (
    EmailRequest, SmsRequest, ResendRequest, TwilioStatus, Items, ItemPage, ItemDetail, HistoryPage,
    TransitionResult, Health, OpenApiDocument, Error, PartiallyEnqueued, UploadRequest, Upload,
    TwilioInbound, SuppressionRequest, SuppressionPage, SuppressionChange, SuppressionRemoved,
    SuppressionHistory, ProducerUsage,
)  # fmt: skip
