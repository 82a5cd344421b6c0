"""The SQS consumer of send messages: each record is one send attempt of one queue item.

A record whose outcome could not be recorded (the store failed) is reported as a batch item
failure, so SQS delivers it again; a redelivered attempt that was claimed drops itself. When every
record of a batch failed, the invocation fails instead (as Powertools' BatchProcessor did), so
the function's Errors alarm sees an outage and SQS keeps the whole batch.

The partial-batch loop is written out here: Powertools' batch utility imports every event data
class and asyncio, about a third of this function's cold start, for what is a for loop.
"""

from __future__ import annotations

from typing import Any

import boto3  # noqa: F401  (first, at a shallow depth: see functions/__init__.py)

from vdq import batchplan, pacing, send
from vdq.observability import logger, metrics, tracer
from vdq.runtime import Runtime


class BatchFailed(Exception):
    """Every record of the batch failed: fail the invocation, SQS delivers the batch again."""


@tracer.capture_method(capture_response=False)
def record_handler(record: dict[str, Any], upcoming: int = 1) -> str:
    return send.process_body(record["body"], Runtime.default(), upcoming=upcoming)


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = event.get("Records")
    if not isinstance(records, list) or not records:
        raise ValueError("not an SQS event: it has no Records")
    failures: list[dict[str, str]] = []
    last: Exception | None = None
    # In the order of their slots at the provider's rate (each rate's reserved up front), each
    # told how many more sends of its rate follow.
    bodies = [r.get("body") if isinstance(r, dict) else None for r in records]
    # No send sleeps for its slot past the invocation's timeout (less a margin for the sends).
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    pacing.set_deadline(Runtime.default(), remaining() if callable(remaining) else None)
    for index, upcoming in batchplan.plan(bodies, Runtime.default()):
        record = records[index]
        try:
            record_handler(record, upcoming)
        except Exception as exc:
            last = exc
            logger.exception("send message %s failed; SQS will deliver it again",
                             record.get("messageId"))  # fmt: skip
            failures.append({"itemIdentifier": record["messageId"]})
    if failures and len(failures) == len(records):
        raise BatchFailed(f"all {len(records)} records of the batch failed") from last
    return {"batchItemFailures": failures}
