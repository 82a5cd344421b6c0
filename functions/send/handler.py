"""The SQS consumer of send messages: each record is one send attempt of one queue item.

The batch is claimed and paced one message at a time and sent up to ``VDQ_SEND_PARALLELISM``
at a time (vdq.dispatch.sendbatch). A record whose outcome could not be recorded (the store failed)
is reported as a batch item failure, so SQS delivers it again; a redelivered attempt that was
claimed drops itself. When every record of a batch failed, the invocation fails instead (as
Powertools' BatchProcessor did), so the function's Errors alarm sees an outage and SQS keeps the
whole batch.

The partial-batch loop is written out (vdq.dispatch.sendbatch): Powertools' batch utility imports
every event data class and asyncio, about a third of this function's cold start, for what is a loop.
"""

from __future__ import annotations

from typing import Any

import boto3  # noqa: F401  (first, at a shallow depth: see functions/__init__.py)

from vdq.core.observability import logger, metrics, tracer
from vdq.dispatch import sendbatch
from vdq.runtime import Runtime

BatchFailed = sendbatch.BatchFailed


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = event.get("Records")
    if not isinstance(records, list) or not records:
        raise ValueError("not an SQS event: it has no Records")
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    failures = sendbatch.process(records, Runtime.default(),
                                 remaining() if callable(remaining) else None)  # fmt: skip
    return {"batchItemFailures": failures}
