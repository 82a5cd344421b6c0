"""GET /stats: how many items entered each state, per hour over the last 24 hours or per day
over the last 30, by method; and per producer and per sender identity what a sending
reputation is made of.

Read from the hourly counters the stream consumer writes once per window of a shard
(vdq.schedules.postings): 24 small records for a day, 720 for a month, eventually consistent
(a BatchGetItem per hundred). A count follows what happened by the stream's window: up to
``LAG_SECONDS`` in a deployment (STREAM_TUMBLING_WINDOW_SECONDS plus the batch's wait).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from vdq.core import resources
from vdq.core.clock import iso
from vdq.store.postings import Tallies

if TYPE_CHECKING:
    from vdq.runtime import Runtime

LIST_PERMISSION = "vdq.list_queueitem"
PERIODS = {"hours": 24, "days": 30}
LAG_SECONDS = (resources.STREAM_TUMBLING_WINDOW_SECONDS
               + resources.STREAM_BATCHING_WINDOW_SECONDS)  # fmt: skip
METHODS = ("email", "sms")
# What a dashboard's tiles show, from the names the counters keep.
TILES = {"queued": "queued", "sent": "sent", "delivered": "succeeded", "bounced": "bounce",
         "complained": "complaint", "rejected": "reject", "errored": "errored",
         "unconfirmed": "unconfirmed", "cancelled": "cancelled"}  # fmt: skip
REPUTATION = {"sent": "sent", "delivered": "succeeded", "bounced": "bounce",
              "complained": "complaint", "rejected": "reject"}  # fmt: skip
BREAKDOWNS = ("producer", "identity")


def _tiles(counts: dict[str, int], method: str) -> dict[str, int]:
    return {tile: counts.get(f"{method}.{name}", 0) for tile, name in TILES.items()}


def stats(runtime: Runtime, *, period: str = "hours", method: str | None = None,
          breakdown: str | None = None) -> dict[str, Any]:  # fmt: skip
    """Buckets oldest first, each with its start and the tiles of each method (or of
    ``method``), and their totals; with ``breakdown`` (hours only), the period's reputation
    figures per producer or per sender identity, most sent first."""
    now = runtime.clock.now().replace(minute=0, second=0, microsecond=0)
    methods = (method,) if method else METHODS
    tallies = Tallies(runtime.client("dynamodb"), runtime.settings.table_name)
    if period == "hours":
        hours = [now - timedelta(hours=n) for n in range(PERIODS["hours"] - 1, -1, -1)]
    else:  # whole days, today's so far included
        start = (now - timedelta(days=PERIODS["days"] - 1)).replace(hour=0)
        span = int((now - start).total_seconds() // 3600)
        hours = [start + timedelta(hours=n) for n in range(span + 1)]
    counts = tallies.counters(h.strftime("%Y-%m-%dT%H") for h in hours)
    buckets: dict[str, dict[str, Any]] = {}
    for hour in hours:
        start = hour if period == "hours" else hour.replace(hour=0)
        bucket = buckets.setdefault(iso(start), {m: dict.fromkeys(TILES, 0) for m in methods})
        found = counts.get(hour.strftime("%Y-%m-%dT%H"), {})
        for m in methods:
            for tile, n in _tiles(found, m).items():
                bucket[m][tile] += n
    totals = {m: {tile: sum(b[m][tile] for b in buckets.values()) for tile in TILES}
              for m in methods}  # fmt: skip
    answer: dict[str, Any] = {
        "period": period, "as_of": iso(runtime.clock.now()), "lag_seconds": LAG_SECONDS,
        "buckets": [{"start": start, **tiles} for start, tiles in buckets.items()],
        "totals": totals,
    }  # fmt: skip
    if breakdown is not None:
        answer["breakdown"] = _breakdown(tallies, hours, breakdown)
    return answer


def _breakdown(tallies: Tallies, hours: list[datetime], breakdown: str) -> list[dict[str, Any]]:
    kind = "p" if breakdown == "producer" else "i"
    sums: dict[str, dict[str, int]] = {}
    for hour in hours:
        for (found_kind, name), counts in tallies.reputation(hour.strftime("%Y-%m-%dT%H")).items():
            if found_kind != kind:
                continue
            into = sums.setdefault(name, dict.fromkeys(REPUTATION, 0))
            for label, stored in REPUTATION.items():
                into[label] += counts.get(stored, 0)
    rows = [{"name": name, **figures} for name, figures in sums.items()]
    return sorted(rows, key=lambda r: (-r["sent"], r["name"]))
