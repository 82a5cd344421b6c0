"""EventBridge schedules: SMS polling and timeouts, the lease and re-publish sweeps, the purge.

The rule's input names the tasks: ``{"task": "sms" | "sweep" | "purge"}`` or
``{"tasks": [...]}``. A plain scheduled event (no input) runs the every-minute tasks, ``sms``
and ``sweep``; the daily rule sends ``{"task": "purge"}``. A batch of the table's stream
records (``aws:dynamodb``, in a tumbling window) publishes the state-change events they hold
(vdq.workflow.stateevents), after stamping the records of items that entered a done state
(vdq.workflow.retention), and folds them into the window's postings and counts, which the
window's last invocation writes (vdq.schedules.postings): its answer carries the window's state.
vdq.schedules.stream does all of it, as a repair of a batch the mapping skipped does again.
"""

from __future__ import annotations

from typing import Any

import boto3  # noqa: F401  (first, at a shallow depth: see functions/__init__.py)

from vdq.core.observability import logger, metrics, tracer
from vdq.runtime import Runtime
from vdq.schedules import stream
from vdq.schedules import sweeps as schedules


def tasks_of(event: dict[str, Any]) -> tuple[str, ...]:
    detail = event.get("detail")
    for source in (event, detail if isinstance(detail, dict) else {}):
        if isinstance(source.get("tasks"), list):
            return tuple(str(t) for t in source["tasks"])
        if isinstance(source.get("task"), str):
            return (source["task"],)
    return schedules.MINUTE


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if stream.is_stream_event(event):
        # A failure raises: Lambda delivers the batch again (at least once), with the state of
        # before it.
        answer = stream.consume(event, Runtime.default())
        if answer["published"]:  # a zero is no news: CloudWatch bills each metric that gets a value
            metrics.add_metric(name="StateEventsPublished", unit="Count",
                               value=answer["published"])  # fmt: skip
        return answer
    counts = schedules.run(tasks_of(event), Runtime.default())
    for name, n in counts.items():
        if n:  # an alarm on a count treats the missing value as not breaching
            metrics.add_metric(name=f"Schedule_{name}", unit="Count", value=n)
    return counts
