"""GET /producers, the held items, and the release and cancel of a hold: the operator's side of
the reputation guard (its rates: vdq.results.judging; its holds: vdq.results.guard).

The rates are read from the hourly counters (one Query per hour of the window for the names,
one BatchGetItem per producer for its figures): a producer shows here once the stream counted
an email of it. Beside them, SES's own account reputation (CloudWatch ``AWS/SES``
``Reputation.BounceRate`` and ``Reputation.ComplaintRate``), when the function may read it
(``cloudwatch:GetMetricData``) and SES has published it; otherwise ``available`` is false and
says why.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from vdq.core.clock import iso
from vdq.core.errors import ValidationError
from vdq.core.observability import logger
from vdq.operations.spec import PRODUCER_PATTERN
from vdq.results import guard, judging
from vdq.workflow.views import item_json

if TYPE_CHECKING:
    from vdq.runtime import Runtime

LIST_PERMISSION = "vdq.list_queueitem"
RELEASE_PERMISSION = "vdq.release_hold"
CANCEL_PERMISSION = "vdq.can_cancel"
SES_METRICS = {"bounce_rate": "Reputation.BounceRate",
               "complaint_rate": "Reputation.ComplaintRate"}  # fmt: skip
# The API's names of a producer's figures (the stats' breakdown's), from the counters'.
NAMES = {"sent": "sent", "succeeded": "delivered", "bounce": "bounced",
         "complaint": "complained", "reject": "rejected"}  # fmt: skip


def producers(runtime: Runtime) -> dict[str, Any]:
    """Every producer's rates against its thresholds and its level, the account's, and
    SES's own figures."""
    seen = judging.overview(runtime)
    return {"as_of": iso(runtime.clock.now()), "window_hours": seen["window_hours"],
            "guard": seen["guard"], "account": _row(seen["account"]),
            "producers": [_row(r) for r in seen["producers"]],
            "ses": ses_reputation(runtime)}  # fmt: skip


def _row(row: dict[str, Any]) -> dict[str, Any]:
    out = {"producer": row["producer"], **{NAMES[k]: row[k] for k in NAMES}}
    out.update({k: row[k] for k in ("bounce_rate", "complaint_rate", "rates_count", "judged",
                                     "reason", "watched", "thresholds", "level",
                                     "parked")})  # fmt: skip
    return out


def ses_reputation(runtime: Runtime) -> dict[str, Any]:
    """SES's account reputation, as a percentage, the latest point of the last day: SES
    publishes it to CloudWatch (``AWS/SES``) as a fraction, in the region the account sends
    in."""
    now = runtime.clock.now()
    queries = [{"Id": key, "ReturnData": True, "MetricStat": {
        "Metric": {"Namespace": "AWS/SES", "MetricName": name}, "Period": 3600,
        "Stat": "Maximum"}} for key, name in SES_METRICS.items()]  # fmt: skip
    try:
        answer = runtime.client("cloudwatch").get_metric_data(
            MetricDataQueries=queries, StartTime=now - timedelta(days=1), EndTime=now,
            ScanBy="TimestampDescending")  # fmt: skip
    except Exception as exc:
        logger.info("SES's reputation metrics could not be read: %s", exc)
        return {"available": False, "why": f"CloudWatch refused the read: {type(exc).__name__}",
                "bounce_rate": None, "complaint_rate": None}  # fmt: skip
    found: dict[str, float | None] = dict.fromkeys(SES_METRICS)
    for result in answer.get("MetricDataResults", []):
        values = result.get("Values") or []
        if values and result.get("Id") in found:
            found[result["Id"]] = round(100.0 * float(values[0]), 4)
    if all(v is None for v in found.values()):
        return {"available": False, "why": "SES published no reputation figures in the last "
                "day (none until the account sends enough email)", **found}
    return {"available": True, "why": None, **found}


def held_items(runtime: Runtime, producer: str, *, limit: int,
               after: str | None) -> dict[str, Any]:  # fmt: skip
    """A page of the items the producer's hold parked, in enqueue order, as the lists show
    them."""
    _check(producer)
    rows, last = guard.parked_items(runtime, producer, limit=limit, after=after)
    items = [runtime.store.get_item(p.item_id) for p in rows]
    return {"items": [item_json(i) for i in items if i is not None], "after": last}


def release(runtime: Runtime, producer: str, actor: str) -> dict[str, Any]:
    _check(producer)
    return guard.release(runtime, producer, actor)


def cancel(runtime: Runtime, producer: str, actor: str) -> dict[str, Any]:
    _check(producer)
    return guard.cancel(runtime, producer, actor)


def _check(producer: str) -> None:
    """A 422 naming ``producer`` unless it could be one (a client id or a token's subject):
    nothing is looked up for a name no producer can have."""
    if not re.fullmatch(PRODUCER_PATTERN, producer):
        raise ValidationError("producer", "must be a client id or a token's subject (letters, "
                                          "digits and : . _ @ + = -)")  # fmt: skip
