"""Producer quotas: how many queue items each producer may enqueue per second, minute and day.

VDQ_PRODUCER_QUOTAS names producers by machine client id (the token's subject) or by group; a
client named there has its own counters, a group's members share the group's, and ``*`` gives
every other producer its own counters with the default limits. A request counts one item per
receiver and is refused whole (429, ``Retry-After``, the limit named) when it would pass any
limit: nothing of it is stored. The caller's quota also counts what else makes VDQ store or
send on its behalf: an upload (POST /attachments/uploads) counts one, an operator's resend one
per copy. Windows are fixed (the current second, minute and UTC day), so a scheduled send
counts on the day it is enqueued. A producer's counters are one record in the table
(vdq.store.counters), or VDQ_QUOTA_SHARDS records each with a share of the limits, charged by
one conditional write a request, expiring two days after the start of the UTC day of its last
charge; a group's record names the clients charged to it in its longest window. A producer past
a limit is refused by each container from the records that refused it for a second
(vdq.store.refusals), and the 429 names the counts they hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from vdq.core.errors import NotFound, PartiallyEnqueued, ValidationError, VdqError
from vdq.core.settings import QuotaLimits
from vdq.store.counters import Counters
from vdq.store.quota_records import Window, window_key
from vdq.store.tx import StoreBusy

if TYPE_CHECKING:
    from vdq.runtime import Runtime

DEFAULT = "*"
GROUP_PREFIX = "group:"
_KINDS = {"per_second": "s", "per_minute": "m", "per_day": "d"}
T = TypeVar("T")
_WORDS = {"per_second": "a second", "per_minute": "a minute", "per_day": "a day (UTC)"}
# Charges refused and then read with room (an earlier charge taken back meanwhile, a window
# turned) before a 503: near a limit under many concurrent requests, about 1 in 400 met two
# such refusals in a row with the counters split over 4 shards, 1 in 3,000 with one record.
CHARGE_TRIES = 4


class QuotaExceeded(VdqError):
    """The request would pass one of its producer's limits: 429 with Retry-After."""

    status = 429
    code = "quota_exceeded"

    def __init__(self, producer: str, window: Window, used: int, requested: int,
                 retry_after: int) -> None:  # fmt: skip
        what = f"{window.limit} queue items {_WORDS[window.name]}"
        message = (f"producer {producer} is over its limit {window.name} of {what}: "
                   f"{used} used, {requested} requested; try again in {retry_after} s")
        super().__init__(message, details={
            "producer": producer, "limit": window.name, "quota": window.limit, "used": used,
            "requested": requested, "retry_after": retry_after})  # fmt: skip
        self.headers = {"Retry-After": str(retry_after)}


class OverQuota(ValidationError):
    """A request that makes more items than one of its producer's limits: no wait makes it
    fit, so a 422 naming the request's field and no Retry-After (a client that honours one
    would wait and send it again for ever)."""

    def __init__(self, field: str, producer: str, window: Window, requested: int) -> None:
        super().__init__(field, f"producer {producer}: this request makes {requested} queue "
                         f"items, more than its limit {window.name} of {window.limit} queue "
                         f"items {_WORDS[window.name]}; split the request")  # fmt: skip
        self.details.update(producer=producer, limit=window.name, quota=window.limit,
                            requested=requested)  # fmt: skip


@dataclass(frozen=True)
class Charge:
    """What a request was charged, to take back when its items could not be stored."""

    producer: str
    windows: tuple[Window, ...]
    count: int

    def part(self, count: int) -> Charge | None:
        """``count`` of the charged items (what to take back of a request partly stored)."""
        return Charge(self.producer, self.windows, min(count, self.count)) if count > 0 else None


def producer_of(subject: str, groups: tuple[str, ...],
                quotas: Any) -> tuple[str, QuotaLimits] | None:  # fmt: skip
    """(the counters' producer name, its limits) for a caller; None when no quota applies."""
    if subject in quotas:
        return subject, quotas[subject]
    for group in groups:
        if group in quotas:
            return GROUP_PREFIX + group, quotas[group]
    if DEFAULT in quotas:
        return subject, quotas[DEFAULT]
    return None


def windows(limits: QuotaLimits, now: datetime) -> tuple[Window, ...]:
    """The current fixed window of each limit that is set."""
    second = math.floor(now.timestamp())
    out = []
    for name, limit in limits._asdict().items():
        if limit is not None:
            key, ends_at = window_key(_KINDS[name], second)
            out.append(Window(name, key, limit, ends_at))
    return tuple(out)


def counters(runtime: Runtime) -> Counters:
    found = runtime.overrides.get("counters")
    if found is None:
        found = Counters(runtime.client("dynamodb"), runtime.settings.table_name,
                         shards=runtime.settings.quota_shards)  # fmt: skip
        runtime.overrides["counters"] = found
    return found


# The request's field that makes its items: a name, or the name for a limit (the list whose
# receivers pass it: vdq.intake.rest).
Field = str | Callable[[int], str]


def charge(subject: str, groups: tuple[str, ...], count: int, runtime: Runtime,
           field: Field = "to") -> Charge | None:  # fmt: skip
    """Count ``count`` items against the caller's quota; QuotaExceeded when any limit would
    be passed (nothing counted then), OverQuota (naming ``field``, what makes the items) when
    one never can be. None when no quota applies."""
    found = producer_of(subject, groups, runtime.settings.producer_quotas)
    if found is None or count <= 0:
        return None
    producer, limits = found
    now = runtime.clock.now()
    current = windows(limits, now)
    for window in current:  # never fits: refused without a request
        if count > window.limit:
            named = field if isinstance(field, str) else field(window.limit)
            raise OverQuota(named, producer, window, count)
    store = counters(runtime)
    member = subject if producer != subject else None  # charged through its group's counters
    for _ in range(CHARGE_TRIES):
        charged = store.charge(producer, current, count, member, now.timestamp())
        if charged is not None:  # the windows it counted in (a newer one another clock turned)
            return Charge(producer, charged, count)
        # (count, end of the window it is counted in), as the refusal read them
        seen = store.read(producer, current, recent=True)
        for window in sorted(current, key=lambda w: -seen[w.name][1]):  # longest wait first
            used, ends_at = seen[window.name]
            if used + count > window.limit:
                wait = max(1, math.ceil(ends_at - now.timestamp()))
                raise QuotaExceeded(producer, window, used, count, wait)
        # Room now that an earlier charge was taken back (or a window turned): try again.
    raise StoreBusy("the producer's quota counters kept changing under the charge; nothing was "
                    "counted, try again")  # fmt: skip


def refund(spent: Charge | None, runtime: Runtime,
           log: Callable[..., None] | None = None) -> None:  # fmt: skip
    """Take back ``spent`` (its items were not stored). The counters' writes are tried again
    while DynamoDB refuses them for a conflict or throttling; one that still fails leaves the
    charge counted, logged with what to take back."""
    if spent is None:
        return
    try:
        counters(runtime).refund(spent.producer, spent.windows, spent.count)
    except Exception as exc:
        if log is not None:
            log("quota refund of %d items of %s failed (%s): they stay counted until the "
                "window ends", spent.count, spent.producer, exc)  # fmt: skip


def charged(subject: str, groups: tuple[str, ...], count: int, runtime: Runtime,
            work: Callable[[], T], log: Callable[..., None] | None = None,
            field: Field = "to") -> T:  # fmt: skip
    """Run ``work`` with ``count`` items charged to the caller's quota first (QuotaExceeded
    or OverQuota before anything runs). When it fails, the charge is taken back, but for the
    items a partial enqueue or resend stored (``PartiallyEnqueued``: they will be sent, and
    stay counted)."""
    spent = charge(subject, groups, count, runtime, field)
    try:
        return work()
    except Exception as exc:
        kept = (len((exc.details or {}).get("accepted") or [])
                if isinstance(exc, PartiallyEnqueued) else 0)  # fmt: skip
        if spent is not None and kept < spent.count:
            refund(spent.part(spent.count - kept), runtime, log)
        raise


def usage(producer: str, runtime: Runtime) -> dict[str, Any]:
    """A producer's limits and what it used in each current window (the operator's view).

    ``producer`` is a client id, or ``group:<name>`` for a group's shared counters. A client
    named in VDQ_PRODUCER_QUOTAS has its own; one charged through a group's quota in the
    current windows is shown with that group's counters (``counters`` names them); any other
    client with the default's."""
    quotas = runtime.settings.producer_quotas
    name = producer.removeprefix(GROUP_PREFIX)
    counted_as = producer
    if producer.startswith(GROUP_PREFIX):
        limits = quotas.get(name)
        if limits is None:
            raise NotFound(f"no quota is set for group {name} (VDQ_PRODUCER_QUOTAS)")
    else:
        limits = quotas.get(producer)
        group = None if limits is not None else _group_of(producer, runtime)
        if group is not None:
            counted_as, limits = GROUP_PREFIX + group, quotas[group]
        elif limits is None:
            limits = quotas.get(DEFAULT)
        if limits is None:
            raise NotFound(f"no quota applies to producer {producer} (VDQ_PRODUCER_QUOTAS "
                           "names neither it nor a default \"*\", and it was charged through "
                           "no group's quota in the current windows)")  # fmt: skip
    now = runtime.clock.now()
    current = windows(limits, now)
    seen = counters(runtime).read(counted_as, current)  # (count, end of its window)
    return {
        "producer": producer,
        "counters": counted_as,
        "at": now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "limits": [
            {"limit": w.name, "quota": w.limit, "used": seen[w.name][0],
             "remaining": max(0, w.limit - seen[w.name][0]),
             "resets_at": (datetime.fromtimestamp(seen[w.name][1], UTC)
                           .isoformat().replace("+00:00", "Z"))}
            for w in current
        ],
    }  # fmt: skip


def _group_of(client: str, runtime: Runtime) -> str | None:
    """The group whose counters ``client`` was charged to in their current windows: a quota
    names groups and clients alike, so each entry but the default is a candidate (one read)."""
    quotas = runtime.settings.producer_quotas
    now = runtime.clock.now()
    candidates = [(GROUP_PREFIX + name, windows(limits, now))
                  for name, limits in quotas.items() if name not in (DEFAULT, client)]  # fmt: skip
    if not candidates:
        return None
    found = counters(runtime).charged_as(client, candidates)
    return found.removeprefix(GROUP_PREFIX) if found is not None else None


__all__ = ["Charge", "QuotaExceeded", "charge", "charged", "refund", "usage", "windows"]
