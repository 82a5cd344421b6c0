"""The reputation guard's arithmetic: bounce and complaint rates over a rolling window, and the
level (ok, warn, hold) they reach against the thresholds. Pure: the counters are read by the
callers (vdq.schedules.guard, vdq.operations.producers).

A rate is SES's: permanent bounces (or complaints) per email sent (a provider took it), over
the same hours. Below ``min_sent`` emails in the window a rate is shown but neither warns nor
holds: three bounces of the first ten emails say little. The thresholds are percentages, below
SES's own (it reviews an account at 5% bounces or 0.1% complaints and may pause it at 10% or
0.5%): a producer is stopped before the account it shares is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vdq.core.setting_values import Thresholds
    from vdq.core.settings import Settings

OK, WARN, HOLD = "ok", "warn", "hold"
LEVELS = (OK, WARN, HOLD)
# The counters' names of an email's reputation (vdq.schedules.postings counts them per producer
# and per sender identity); an SMS's are kept apart (``sms.<name>``) and rate nothing here.
SENT, DELIVERED, BOUNCED, COMPLAINED, REJECTED = "sent", "succeeded", "bounce", "complaint", \
    "reject"  # fmt: skip
HOUR_FORMAT = "%Y-%m-%dT%H"


@dataclass(frozen=True)
class Figures:
    """What a producer's (or an identity's, or the account's) email did in a window."""

    sent: int = 0
    delivered: int = 0
    bounced: int = 0
    complained: int = 0
    rejected: int = 0

    @classmethod
    def of(cls, counts: Mapping[str, int], prefix: str = "") -> Figures:
        """From one counter record's (or a sum of them): names as the counters keep them,
        after ``prefix`` (``email.`` in the records of all items)."""
        def get(name: str) -> int:
            return int(counts.get(prefix + name, 0))

        return cls(get(SENT), get(DELIVERED), get(BOUNCED), get(COMPLAINED), get(REJECTED))

    def __add__(self, other: Figures) -> Figures:
        return Figures(self.sent + other.sent, self.delivered + other.delivered,
                       self.bounced + other.bounced, self.complained + other.complained,
                       self.rejected + other.rejected)  # fmt: skip

    def __sub__(self, other: Figures) -> Figures:
        """What is left of these figures once ``other`` (a baseline) is taken away, never
        below nothing."""
        return Figures(max(0, self.sent - other.sent),
                       max(0, self.delivered - other.delivered),
                       max(0, self.bounced - other.bounced),
                       max(0, self.complained - other.complained),
                       max(0, self.rejected - other.rejected))  # fmt: skip

    def as_counts(self) -> dict[str, int]:
        return {SENT: self.sent, DELIVERED: self.delivered, BOUNCED: self.bounced,
                COMPLAINED: self.complained, REJECTED: self.rejected}  # fmt: skip

    @property
    def bounce_rate(self) -> float | None:
        """Percent of the emails sent that bounced permanently; None before any was sent."""
        return 100.0 * self.bounced / self.sent if self.sent else None

    @property
    def complaint_rate(self) -> float | None:
        return 100.0 * self.complained / self.sent if self.sent else None


@dataclass(frozen=True)
class Limits:
    """The thresholds one producer (or the account) is held to: percentages, and the volume
    below which none of them acts."""

    bounce_warn: float
    bounce_hold: float
    complaint_warn: float
    complaint_hold: float
    min_sent: int

    def as_dict(self) -> dict[str, float | int]:
        return {"bounce_warn": self.bounce_warn, "bounce_hold": self.bounce_hold,
                "complaint_warn": self.complaint_warn, "complaint_hold": self.complaint_hold,
                "min_sent": self.min_sent}  # fmt: skip


def limits_for(settings: Settings, producer: str | None) -> Limits:
    """A producer's thresholds (its entry of VDQ_PRODUCER_THRESHOLDS over the defaults), or the
    account's (``producer`` None: VDQ_ACCOUNT_THRESHOLDS over the defaults)."""
    override: Thresholds | None = (settings.account_thresholds if producer is None
                                   else settings.producer_thresholds.get(producer))  # fmt: skip

    def pick(name: str, default: float) -> float:
        value = getattr(override, name) if override is not None else None
        return float(value) if value is not None else default

    min_sent = override.min_sent if override is not None else None
    return Limits(pick("bounce_warn", settings.bounce_warn_percent),
                  pick("bounce_hold", settings.bounce_hold_percent),
                  pick("complaint_warn", settings.complaint_warn_percent),
                  pick("complaint_hold", settings.complaint_hold_percent),
                  int(min_sent) if min_sent is not None else settings.reputation_min_sent)


@dataclass(frozen=True)
class Verdict:
    """The level the figures reach, and why, in words a producer's owner reads."""

    level: str
    reason: str
    counted: bool  # the window holds ``min_sent`` emails: its rates act
    # May reach a level by what is counted or slides out of the window alone (set by the
    # guard, which judges such a producer again each minute: may_reach_a_level).
    watch: bool = False


def judge(figures: Figures, limits: Limits, *, hold: bool = True) -> Verdict:
    """The level ``figures`` reach against ``limits``. A hold threshold passed reads as a warn
    when ``hold`` is off (the guard only warns in its ``warn`` mode)."""
    if figures.sent < limits.min_sent:
        return Verdict(OK, f"{figures.sent} emails sent in the window, fewer than the "
                           f"{limits.min_sent} a rate needs", False)  # fmt: skip
    bounce, complaint = figures.bounce_rate or 0.0, figures.complaint_rate or 0.0
    for level, b_limit, c_limit in ((HOLD, limits.bounce_hold, limits.complaint_hold),
                                    (WARN, limits.bounce_warn, limits.complaint_warn)):
        over = []
        if bounce >= b_limit:
            over.append(f"bounce rate {bounce:.2f}% (threshold {b_limit:g}%)")
        if complaint >= c_limit:
            over.append(f"complaint rate {complaint:.3f}% (threshold {c_limit:g}%)")
        if over:
            text = (f"{' and '.join(over)} over the last {figures.sent} emails sent in the "
                    "window")  # fmt: skip
            return Verdict(level if hold or level == WARN else WARN, text, True)
    return Verdict(OK, f"bounce rate {bounce:.2f}%, complaint rate {complaint:.3f}%", True)


def may_reach_a_level(hours: Sequence[Figures], limits: Limits) -> bool:
    """Whether these figures (a window's, by hour, oldest first) may come to warn or hold with
    no new bounce or complaint, by what is counted or slides out of the window alone: some
    tail of the hours holds bounces (complaints) that warn or hold (judged as ``judge`` judges,
    with a hold threshold that may be set below the warning) at its emails, or at ``min_sent``
    emails, the fewest a rate acts on, when it has fewer. The emails a rate needs may be counted
    after the bounces (another shard's stream window), and the window's older, clean hours
    slide out before its last; counting or sliding judges no one, so such a producer is watched
    (judged again each minute). One not watched can only reach a level by a new bounce or
    complaint, which judges it anyway."""
    tail = sum(hours, Figures())
    for hour in hours:
        if not (tail.bounced or tail.complained):
            return False  # the later tails have none either
        at = replace(tail, sent=max(tail.sent, limits.min_sent))
        if judge(at, limits).level != OK:
            return True
        tail = tail - hour
    return False


def window_hours(now: datetime, hours: int, since: str | None = None) -> list[str]:
    """The hour buckets of the rolling window that ends with ``now``'s hour, oldest first:
    ``hours`` of them, none before ``since`` (an hour bucket: the window restarts at a
    release)."""
    top = now.replace(minute=0, second=0, microsecond=0)
    out = [(top - timedelta(hours=n)).strftime(HOUR_FORMAT) for n in range(hours - 1, -1, -1)]
    return [h for h in out if since is None or h >= since]


def figures_of(hours: Iterable[Mapping[str, int]], prefix: str = "") -> Figures:
    """The sum of hourly counter sums."""
    total = Figures()
    for counts in hours:
        total = total + Figures.of(counts, prefix)
    return total


def identity_of(sender: str, identities: Iterable[str] = ()) -> str:
    """The SES identity a sender address sends as: the address itself when it is an identity
    of its own (VDQ_SENDER_IDENTITIES lists it), otherwise its domain."""
    address = sender.strip().lower()
    if address in set(identities) or "@" not in address:
        return address
    return address.rsplit("@", 1)[1]
