"""Request and response bodies as pydantic models, for the OpenAPI document only.

Imported by the generator (``python -m vdq.openapi``) at build and test time, never by a
function at run time: the handlers validate input with vdq.messages and vdq.operations.spec.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from vdq.workflow import State


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Address(_Strict):
    email: str = Field(description="email address", examples=["ada@example.org"])
    name: str | None = None


class Origin(_Strict):
    type: str = Field(max_length=256, description="kind of the record that caused the message")
    id: str = Field(max_length=256)


class AttachmentIn(_Strict):
    filename: str = Field(max_length=255)
    content_type: str = Field(examples=["application/pdf"])
    content_base64: str
    inline: bool = False
    content_id: str | None = Field(None, description="Content-ID of an inline attachment")


class EmailRequest(_Strict):
    sender: Address
    to: list[Address] = Field(min_length=1)
    cc: list[Address] = []
    bcc: list[Address] = []
    reply_to: list[Address] = []
    subject: str = Field(max_length=998)
    text: str
    html: str | None = None
    attachments: list[AttachmentIn] = []
    origin: Origin | None = None


class SmsSender(_Strict):
    cell: str = Field(pattern=r"^\+[1-9][0-9]{1,14}$")


class SmsReceiver(_Strict):
    cell: str = Field(pattern=r"^\+[1-9][0-9]{1,14}$")
    name: str | None = None


class SmsRequest(_Strict):
    sender: SmsSender
    to: list[SmsReceiver] = Field(min_length=1)
    body: str = Field(max_length=1600)
    media_urls: list[str] = Field([], max_length=10)
    origin: Origin | None = None


class Party(BaseModel):
    email: str | None = None
    cell: str | None = None
    name: str | None = None


class QueueItem(BaseModel):
    id: str
    method: Literal["email", "sms"]
    state: State
    sender: Party
    receiver: Party
    result: str | None
    attempt: int
    retry_delay: int | None
    queued_at: str
    updated_at: str
    done_since: str
    done_at: str | None
    origin: Origin | None
    provider_id: str | None = Field(description="SES message ID or Twilio SID, once known")
    resent_from: str | None


class Items(BaseModel):
    items: list[QueueItem]


class ItemPage(BaseModel):
    items: list[QueueItem]
    cursor: str | None = Field(description="pass it to get the next page; null at the end")


class AttachmentOut(BaseModel):
    id: str
    filename: str
    content_type: str
    size: int
    inline: bool
    content_id: str | None
    download_path: str = Field(examples=["/attachments/01JD0000000000000000000000"])
    purged: bool = Field(description="the file was deleted by cleanup")


class HistoryEntry(BaseModel):
    at: str
    actor: str
    source: str
    kind: str
    name: str
    from_state: str | None
    to_state: str | None
    attempt: int | None
    text: str | None


class ItemDetail(QueueItem):
    content: dict[str, Any] = Field(
        description="email: subject, text, html, to, cc, reply_to; sms: body, media_urls"
    )
    attachments: list[AttachmentOut]
    history: list[HistoryEntry]


class TransitionResult(BaseModel):
    transition: str
    dry_run: bool
    from_state: State
    to_state: State
    item: QueueItem


class ResendRequest(_Strict):
    ids: list[str] = Field(min_length=1, max_length=100)


class TwilioStatus(BaseModel):
    model_config = ConfigDict(extra="allow")
    MessageSid: str
    MessageStatus: str
    ErrorCode: str | None = None


class Health(BaseModel):
    status: Literal["ok"]


class OpenApiDocument(BaseModel):
    model_config = ConfigDict(extra="allow")
    openapi: str


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: dict[str, Any] | None = None


class Error(BaseModel):
    error: ErrorDetail


MODELS: tuple[type[BaseModel], ...] = (
    EmailRequest, SmsRequest, ResendRequest, TwilioStatus, Items, ItemPage, ItemDetail,
    TransitionResult, Health, OpenApiDocument, Error,
)  # fmt: skip
