"""The SQS consumer of send messages: each record is one send attempt of one queue item.

A record whose outcome could not be recorded (the store failed) is reported as a batch item
failure, so SQS delivers it again; a redelivered attempt that was claimed drops itself.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from vdq import send
from vdq.observability import logger, metrics, tracer
from vdq.runtime import Runtime

processor = BatchProcessor(event_type=EventType.SQS)


@tracer.capture_method(capture_response=False)
def record_handler(record: SQSRecord) -> str:
    return send.process_body(record.body, Runtime.default())


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
