"""The suppression list's bodies as pydantic models, for the OpenAPI document only (as
vdq.operations.schemas)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from vdq.operations import spec
from vdq.operations.schemas import Method, SuppressionReason


class Suppression(BaseModel):
    """A receiver VDQ does not send to."""

    receiver: str = Field(description=spec.RECEIVER_TEXT)
    channel: Method = Field(description="`email` for an address, `sms` for a number.")
    list_name: str | None = Field(alias="list", description="The list the address unsubscribed "
                                  "from: only that list's mail is stopped. Null: every email "
                                  "or SMS is.")
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
    list_name: str | None = Field(alias="list", description="The list of the entry it added or "
                                  "removed; null: the entry for every email or SMS.")
    reason: SuppressionReason | None = Field(description="Why, for an addition.")
    text: str | None = Field(description="What the feed or the operator said.")


class SuppressionHistory(BaseModel):
    """A receiver's suppression and its history."""

    receiver: str = Field(description=spec.RECEIVER_TEXT)
    suppression: Suppression | None = Field(description="The suppression for every email or "
                                            "SMS now, or null.")
    lists: list[Suppression] = Field(description="The lists the address is unsubscribed from "
                                     "now.")
    history: list[SuppressionEvent] = Field(description="Oldest first.")


MODELS: tuple[type[BaseModel], ...] = (
    SuppressionPage, SuppressionChange, SuppressionRemoved, SuppressionHistory,
)  # fmt: skip
