"""The bodies of the counts (``/stats``), producer quotas and the reputation guard's
operations, as pydantic models, for the OpenAPI document only (as vdq.operations.schemas)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vdq.core import ids
from vdq.operations.schemas import QueueItem


class Tiles(BaseModel):
    """How many items entered each state (or met each event) in a bucket, for one method."""

    model_config = ConfigDict(extra="forbid")
    queued: int = Field(description="Items queued (new items; resends included).", ge=0)
    sent: int = Field(description="Items a provider took (their provider ID was stored).",
                      ge=0)
    delivered: int = Field(description="Items that succeeded.", ge=0)
    bounced: int = Field(description="Permanent bounces (SES).", ge=0)
    complained: int = Field(description="Complaints (SES feedback; not-spam left out).", ge=0)
    rejected: int = Field(description="Messages the provider rejected (SES Reject).", ge=0)
    errored: int = Field(description="Items that entered errored.", ge=0)
    unconfirmed: int = Field(description="Items that got no final outcome in time.", ge=0)
    cancelled: int = Field(description="Items cancelled (by operators, or not sent to a "
                           "suppressed receiver).", ge=0)


class StatsBucket(BaseModel):
    """One hour or one day."""

    model_config = ConfigDict(extra="forbid")
    start: datetime = Field(description="When the bucket starts (UTC).")
    email: Tiles | None = Field(None, description="The email counts (unless `method=sms`).")
    sms: Tiles | None = Field(None, description="The SMS counts (unless `method=email`).")


class StatsTotals(BaseModel):
    """The sums over the buckets."""

    model_config = ConfigDict(extra="forbid")
    email: Tiles | None = Field(None, description="The email totals (unless `method=sms`).")
    sms: Tiles | None = Field(None, description="The SMS totals (unless `method=email`).")


class Reputation(BaseModel):
    """One producer's or sender identity's figures over the last 24 hours."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="The producer (a client id, a user's subject, or `-` for "
                      "none) or the sender identity (an address in lower case, or a number).")
    sent: int = Field(description="Items a provider took.", ge=0)
    delivered: int = Field(description="Items that succeeded.", ge=0)
    bounced: int = Field(description="Permanent bounces.", ge=0)
    complained: int = Field(description="Complaints.", ge=0)
    rejected: int = Field(description="Rejections by the provider.", ge=0)


class Stats(BaseModel):
    """Counts per hour or per day, from the table's stream."""

    model_config = ConfigDict(extra="forbid")
    period: Literal["hours", "days"] = Field(description="Hourly or daily buckets.")
    as_of: datetime = Field(description="When this was read (UTC).")
    lag_seconds: int = Field(description="How far behind what happened a count may be: the "
                             "stream's window and a batch's wait.", ge=0)
    buckets: list[StatsBucket] = Field(description="Oldest first: 24 hours or 30 days, the "
                                       "current one so far included.")
    totals: StatsTotals = Field(description="The buckets' sums.")
    breakdown: list[Reputation] | None = Field(None, description="With `breakdown`: each "
                                               "producer or sender identity, most sent first.")


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

    producer: str = Field(description="The client id, or `group:<name>`, as asked.")
    counters: str = Field(description="Whose counters these are: the producer's own, or "
                          "`group:<name>` for a client charged through its group's quota.")
    at: datetime = Field(description="When this was read (UTC).")
    limits: list[WindowUsage] = Field(description="One entry per limit set for the producer.")


class ReputationThresholds(BaseModel):
    """The thresholds a producer (or the account) is held to, in percent of emails sent."""

    model_config = ConfigDict(extra="forbid")
    bounce_warn: float = Field(description="Bounce rate that warns.", gt=0, le=100)
    bounce_hold: float = Field(description="Bounce rate that holds (the account: alarms).",
                               gt=0, le=100)
    complaint_warn: float = Field(description="Complaint rate that warns.", gt=0, le=100)
    complaint_hold: float = Field(description="Complaint rate that holds (the account: "
                                  "alarms).", gt=0, le=100)
    min_sent: int = Field(description="Emails sent in the window before a rate acts.", ge=1)


class GuardLevel(BaseModel):
    """What the guard recorded for a producer (or the account) last."""

    model_config = ConfigDict(extra="forbid")
    level: Literal["ok", "warn", "hold", "released"] = Field(description="`hold`: its email "
                                                             "is parked until a release.")
    reason: str | None = Field(description="The rates that reached the level, or who "
                               "released it.")
    hold_id: datetime | None = Field(description="When its (last) hold began (UTC).")
    updated_at: datetime | None = Field(description="When the level was recorded (UTC).")
    released_by: str | None = Field(description="Who released the last hold.")
    released_at: datetime | None = Field(description="When (UTC).")
    since: str | None = Field(description="After a release: the hour (UTC, `YYYY-MM-DDTHH`) "
                              "its rates count from.")


class ProducerRates(BaseModel):
    """One producer's (or the account's) email over the window, and its level."""

    model_config = ConfigDict(extra="forbid")
    producer: str = Field(description="The producer (`account` for the whole account).")
    sent: int = Field(description="Emails a provider took.", ge=0)
    delivered: int = Field(description="Emails delivered.", ge=0)
    bounced: int = Field(description="Permanent bounces.", ge=0)
    complained: int = Field(description="Complaints.", ge=0)
    rejected: int = Field(description="Rejections by SES.", ge=0)
    bounce_rate: float | None = Field(description="Percent of the emails sent that bounced "
                                      "permanently; null before any was sent.", ge=0)
    complaint_rate: float | None = Field(description="Percent complained about.", ge=0)
    rates_count: bool = Field(description="False below the minimum volume: the rates are "
                              "shown and act on nothing.")
    judged: Literal["ok", "warn", "hold"] = Field(description="The level the rates reach now.")
    reason: str = Field(description="Why, in words.")
    watched: bool = Field(description="At ok, but its bounces or complaints would warn or "
                          "hold once the emails a rate needs are counted or the window's older "
                          "hours leave it: judged again each minute.")
    thresholds: ReputationThresholds = Field(description="The thresholds it is held to.")
    level: GuardLevel | None = Field(description="What the guard recorded last (null: "
                                     "nothing yet).")
    parked: bool | None = Field(description="Items a hold parked are waiting, whatever the "
                                "level (a release cut short leaves some behind a later "
                                "warning or ok): releaseHold sends them, cancelHeldItems "
                                "cancels them, listHeldItems lists them. A flag, not a count "
                                "(counting would read every entry at each read); true also "
                                "for an entry whose item moved on meanwhile, until a release "
                                "or a cancel drops it. Null when it could not be read (the "
                                "other figures stand); always false for the account.")


class SesReputation(BaseModel):
    """SES's own account reputation (CloudWatch `AWS/SES`), beside VDQ's figures."""

    model_config = ConfigDict(extra="forbid")
    available: bool = Field(description="False when it could not be read or SES published "
                            "none.")
    why: str | None = Field(description="Why it is not available.")
    bounce_rate: float | None = Field(description="`Reputation.BounceRate`, in percent.")
    complaint_rate: float | None = Field(description="`Reputation.ComplaintRate`, in percent.")


class Producers(BaseModel):
    """The reputation guard's view of every producer."""

    model_config = ConfigDict(extra="forbid")
    as_of: datetime = Field(description="When this was read (UTC).")
    window_hours: int = Field(description="The rolling window, in hours.", ge=1)
    guard: Literal["hold", "warn", "off"] = Field(description="VDQ_REPUTATION_GUARD.")
    account: ProducerRates = Field(description="The whole account's figures.")
    producers: list[ProducerRates] = Field(description="Each producer, by name.")
    ses: SesReputation = Field(description="SES's own figures.")


class HeldPage(BaseModel):
    """A page of a producer's parked items."""

    model_config = ConfigDict(extra="forbid")
    items: list[QueueItem] = Field(description="The items, in enqueue order.")
    after: str | None = Field(description="Pass it as `after` for the next page; null at the "
                              "end.", pattern=ids.PATTERN)


class HoldWork(BaseModel):
    """What a release or a cancel did."""

    model_config = ConfigDict(extra="forbid")
    producer: str = Field(description="The producer.")
    done: int = Field(description="Parked items sent again (a release) or cancelled.", ge=0)
    skipped: int = Field(description="Parked items that had moved on meanwhile (cancelled, "
                         "retried): nothing to do.", ge=0)
    more: bool = Field(description="Items are still parked: call again.")
    level: GuardLevel | None = Field(description="The producer's level now.")


MODELS: tuple[type[BaseModel], ...] = (ProducerUsage, Stats, Producers, HeldPage, HoldWork)
