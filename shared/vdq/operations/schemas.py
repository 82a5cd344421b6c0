"""Response bodies and Twilio's forms as pydantic models, for the OpenAPI document only: the
queue items, their history and transitions, uploads, errors and the webhooks' forms (the counts
and producers' bodies are in ``schemas_counts``, the suppression list's in
``schemas_suppressions``).

Imported by the generator (``python -m vdq.openapi``) at build and test time, never by a
function at run time. The JSON request bodies are not here: each is declared once in the code
that checks it (vdq.intake.fields) and written out by vdq.operations.bodies.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from vdq.core import ids, text
from vdq.intake import segments, validation
from vdq.operations import spec
from vdq.results import suppression
from vdq.workflow.lanes import PRIORITIES
from vdq.workflow.table import State
from vdq.workflow.views import HISTORY_KINDS, HISTORY_SOURCES, SIGNALS

EMAIL_FORMAT: dict[str, Any] = {"format": "email"}
_ID_TEXT = "26 characters of Crockford base32 (a ULID)"
Method = Literal["email", "sms"]
HistoryKind = Literal[HISTORY_KINDS]  # type: ignore[valid-type]
HistorySource = Literal[HISTORY_SOURCES]  # type: ignore[valid-type]
Transition = Literal[spec.OPERATOR_TRANSITIONS]  # type: ignore[valid-type]
SmsEncoding = Literal[segments.ENCODINGS]  # type: ignore[valid-type]
SuppressionReason = Literal[suppression.REASON_CODES]  # type: ignore[valid-type]
Priority = Literal[PRIORITIES]  # type: ignore[valid-type]
Signal = Literal[SIGNALS]  # type: ignore[valid-type]
ErrorCode = str  # the generator replaces the schema with the enum of codes (vdq.openapi)


def _id(description: str) -> Any:
    return Field(description=f"{description} ({_ID_TEXT}).", pattern=ids.PATTERN)


# ---- requests --------------------------------------------------------------------------------
# The JSON bodies are declared once (vdq.intake.fields) and written by vdq.operations.bodies;
# Twilio's forms are Twilio's, described here.


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
    cell: str = Field(description="The E.164 number.", pattern=validation.E164)
    name: str | None = Field(None, description="The receiver's name, or null (never on a "
                             "sender).")


class SmsServiceParty(BaseModel):
    """The Twilio Messaging Service an SMS item is sent through (its pool picks the number)."""

    model_config = ConfigDict(extra="forbid")
    messaging_service_sid: str = Field(description="The service's SID.",
                                       pattern=text.MESSAGING_SERVICE_SID)


class OriginOut(BaseModel):
    """What caused the message, as the producer gave it (an id as text)."""

    type: str = Field(description="The kind of record.")
    id: str = Field(description="The record's id.")


class QueueItem(BaseModel):
    """One receiver's message and where it is in the workflow."""

    id: str = _id("The item's id")
    method: Method = Field(description="How it is sent: `email` (SES) or `sms` (Twilio).")
    state: State = Field(description="Where it is in the workflow; cancelled, succeeded and "
                         "unconfirmed are done.")
    sender: EmailParty | SmsParty | SmsServiceParty = Field(
        description="Who it is from (by method; an SMS: a number or a Messaging Service).")
    receiver: EmailParty | SmsParty = Field(description="Who it goes to (by method).")
    result: str | None = Field(description="The provider's last answer or the error, or null.")
    attempt: int = Field(description="The attempt, from 1; a retry, a cancel and an "
                         "automatic delay each raise it (older send messages then drop "
                         "themselves).", ge=1)
    retry_delay: int | None = Field(description="Seconds until an automatic retry of a delayed "
                                    "item, or null.", ge=0)
    queued_at: datetime = Field(description="When the item was queued (UTC).")
    updated_at: datetime = Field(description="When the item last changed (UTC).")
    done_since: datetime = Field(description="When it was queued, as queued_at (kept for "
                                 "clients of earlier versions; done_at says when it entered a "
                                 "done state).")
    done_at: datetime | None = Field(description="When it entered a done state, or null.")
    origin: OriginOut | None = Field(description="What caused the message, or null.")
    provider_id: str | None = Field(description="SES message ID or Twilio SID, once known.")
    resent_from: str | None = Field(description="The item this one is a resend of, or null.",
                                    pattern=ids.PATTERN)
    encoding: SmsEncoding | None = Field(
        description="SMS: how the body is sent, `GSM-7` or `UCS-2` (counted at enqueue); null "
        "for an email and for an MMS of media alone.")
    segments: int | None = Field(description="SMS: the segments the body takes, which Twilio "
                                 "bills for each receiver; 0 for an MMS of media alone (billed "
                                 "as one MMS); null for an email.", ge=0)
    priority: Priority = Field(description="The lane it is sent in: `high`, `normal` or "
                               "`bulk`.")
    send_at: datetime | None = Field(description="Not sent before this time (UTC), as the "
                                     "request's `send_at` asked (a retry before it keeps "
                                     "it); null: sent when queued, or retried after it.")
    excerpt: str | None = Field(description="The start of the subject (email) or the body "
                                "(SMS), for a list: the first 40 characters, on one line; null "
                                "for an MMS of media alone and for an item queued before items "
                                "kept it.")
    signals: list[Signal] = Field(json_schema_extra={"items": {
        "type": "string", "enum": list(SIGNALS), "description": "One signal."}},
                                  description="What a list marks beside the state: `bounce` "
                                  "(a permanent bounce), `complaint` (the receiver reported "
                                  "it as spam), `reject` (the provider refused it), `stop` "
                                  "(the number opted out of SMS), `suppressed` (not sent: the "
                                  "receiver is on the suppression list, or on the SES "
                                  "account's own, which SES reports as a bounce or complaint "
                                  "but counts as neither). From the entries the "
                                  "item keeps with its state (its latest six).")
    held: str | None = Field(None, description="Why the item is parked: its producer is held by "
                             "the reputation guard (since when, and the rates), until an operator "
                             "releases or cancels it; null when it is not.")


class SuppressedReceiver(BaseModel):
    """A receiver of the request that is on the suppression list."""

    receiver: str = Field(description="The receiver, as the list compares it (an address in "
                          "lower case, or an E.164 number).")
    reason: SuppressionReason = Field(description="Why it is suppressed.")
    since: datetime = Field(description="Since when (UTC).")
    list_name: str | None = Field(alias="list", description="The request's list, when the "
                                  "receiver unsubscribed from it (its other mail still goes "
                                  "out); null when it is suppressed for every email or SMS.")


class HoldNotice(BaseModel):
    """The request's producer is held: its items are stored and wait for a release."""

    producer: str = Field(description="The producer (the token's subject).")
    since: datetime = Field(description="When the hold began (UTC).")
    reason: str = Field(description="The rates that passed a hold threshold.")
    text: str = Field(description="What happens to the items.")


class Items(BaseModel):
    """The items a request created, in receiver order."""

    items: list[QueueItem] = Field(description="The new items.")
    suppressed: list[SuppressedReceiver] | None = Field(
        None, description="postEmails, postSms and the resends: the receivers on the "
        "suppression list (for list mail, also those unsubscribed from its list). Their items "
        "are queued all the same and end `cancelled`, unsent, with a result that says why and "
        "since when.")
    held: HoldNotice | None = Field(
        None, description="postEmails: present when the producer is held by the reputation "
        "guard. The items are stored and not sent until an operator releases the hold. Absent "
        "for a `high` email when VDQ_HOLD_EXEMPT_HIGH is set: the hold keeps none of it.")


class ItemPage(BaseModel):
    """One page of a list."""

    items: list[QueueItem] = Field(description="The items of this page, in the list's order.")
    cursor: str | None = Field(description="Pass it as `cursor` to get the next page; null at "
                               "the end.", pattern=spec.cursor.PATTERN)


Tile = Literal["queued", "sent", "delivered", "bounced", "complained", "rejected", "errored",
               "unconfirmed", "cancelled"]


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
    list_unsubscribe: bool | None = Field(None, description="True when the request asked for "
                                          "one-click unsubscribe headers; absent otherwise.")
    list_name: str | None = Field(None, alias="list", description="List mail: the list whose "
                                  "one-click unsubscribe each copy carries (absent: not list "
                                  "mail).")


class SmsContent(BaseModel):
    """What every receiver of an SMS request gets."""

    model_config = ConfigDict(extra="forbid")
    body: str | None = Field(description="The message; null for an MMS of media alone.")
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
    suppressed: SuppressedReceiver | None = Field(
        description="A dry run of `retry`: the receiver's entry on the suppression list, when "
        "it has one: the new attempt would be cancelled by the worker at once, unsent. Null "
        "otherwise.")


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


class Upload(BaseModel):
    """Where to PUT the file, and the reference an email names it by."""

    upload_id: str = Field(description="Name it in an email's attachments as "
                           "`{\"upload_id\": ...}` once the PUT succeeded.",
                           pattern=ids.PATTERN)  # fmt: skip
    url: str = Field(description="The presigned S3 URL to PUT the file's bytes to (no token: "
                     "the URL carries its signature).")  # fmt: skip
    method: str = Field(description="Always `PUT`.", json_schema_extra={"const": "PUT"})
    headers: dict[str, str] = Field(description="Send exactly these headers with the PUT: "
                                    "they are signed, and S3 refuses a PUT whose Content-Type, "
                                    "Content-Length or metadata differ.")  # fmt: skip
    expires_at: str = Field(description="When the URL stops working (VDQ_UPLOAD_URL_SECONDS "
                            "after it was made). An upload no email takes is deleted a day "
                            "after it was made.", json_schema_extra={"format": "date-time"})


class TwilioInbound(BaseModel):
    """Twilio's incoming-message form (any other field Twilio adds is accepted)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={
        "additionalProperties": {"type": "string", "description": "Another field of Twilio's."}})
    From: str = Field(description="The number that sent the message (E.164).")
    Body: str = Field(description="The message text; a keyword is one word, any case.")
    OptOutType: str = Field(None, description="Advanced Opt-Out: STOP, START or HELP.",  # type: ignore[assignment]
                            json_schema_extra=_no_default)


class OneClickUnsubscribe(BaseModel):
    """RFC 8058's one-click body (the List-Unsubscribe-Post header's key/value pair)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={
        "additionalProperties": {"type": "string", "description": "Another field: ignored."}})
    one_click: Literal["One-Click"] = Field(alias="List-Unsubscribe", description="Always "
                                            "`One-Click`: a POST without it changes nothing.")


# Those of this module; vdq.operations.schemas_counts and .schemas_suppressions have theirs.
MODELS: tuple[type[BaseModel], ...] = (
    TwilioStatus, Items, ItemPage, ItemDetail, HistoryPage, TransitionResult, Health,
    OpenApiDocument, Error, PartiallyEnqueued, Upload, TwilioInbound, OneClickUnsubscribe,
)  # fmt: skip
