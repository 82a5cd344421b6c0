"""Powertools Logger, Metrics and Tracer, set up once and shared by every function.

The Tracer (X-Ray SDK subsegments of each AWS call) costs about 150 ms of cold start, as much as
boto3 itself, so it is built only with ``VDQ_TRACING=sdk``. Lambda's tracing records the
invocations it samples without it (a deployment's choice, vdq:tracing: by default a function
traces only a request that arrives sampled).

Metrics are printed by ``metrics.log_metrics`` at the end of an invocation, one EMF JSON line
(Lambda's JSON log format passes a JSON line through as it is); an invocation that counted
nothing prints none, and a count of zero is not added (CloudWatch bills each metric that gets
a value, and an alarm on a count treats a missing one as not breaching).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
    AmazonCloudWatchEMFProvider,
)

from vdq.core.settings import get_settings

SERVICE = "vdq"
NAMESPACE = "VDQ"

# Keys the Lambda context adds to every line that are the same on every line of a log group:
# the group already names the function (its ARN, name and memory), and the service is VDQ.
# Dropped, they take about 200 bytes off each line, about 40% of CloudWatch Logs ingestion per
# email (bench.bill). Kept: the request id, the cold start flag, the correlation id (the queue
# item) and, on AWS, the X-Ray trace id.
CONSTANT_KEYS = frozenset({"function_arn", "function_name", "function_memory_size", "service"})


class CompactFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON lines without the keys that never vary within a log group."""

    def serialize(self, log: dict[str, Any]) -> str:  # type: ignore[override]
        for key in CONSTANT_KEYS:
            log.pop(key, None)
        return super().serialize(log)


class ThreadSafeMetrics(Metrics):
    """Powertools' Metrics, whose ``add_metric`` (a read, a change and a write back of the
    metric set) may be called from the send function's sending threads at once."""

    _lock = threading.Lock()

    def __init__(self, service: str, namespace: str) -> None:
        provider = QuietEMFProvider(
            namespace=namespace, service=service, metric_set=Metrics._metrics,
            dimension_set=Metrics._dimensions, metadata_set=Metrics._metadata,
            default_dimensions=Metrics._default_dimensions,
        )  # fmt: skip
        super().__init__(service=service, namespace=namespace, provider=provider)

    def add_metric(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            super().add_metric(*args, **kwargs)


class QuietEMFProvider(AmazonCloudWatchEMFProvider):
    """Powertools' EMF provider, printing nothing for an invocation that counted nothing (most
    do), where Powertools would warn of each on stderr: a log line of its own. An invocation's
    metrics end with it, printed or not (with POWERTOOLS_METRICS_DISABLED, as the bench runs,
    Powertools kept them, and printed them all once a metric had 100 values)."""

    def flush_metrics(self, raise_on_empty_metrics: bool = False) -> None:
        if self.metric_set or raise_on_empty_metrics:
            super().flush_metrics(raise_on_empty_metrics=raise_on_empty_metrics)
        self.clear_metrics()


logger = Logger(service=SERVICE, logger_formatter=CompactFormatter())
metrics = ThreadSafeMetrics(service=SERVICE, namespace=NAMESPACE)


class UntracedHandlers:
    """The Tracer's decorators, passing the function through: no SDK, no subsegments."""

    def capture_lambda_handler(self, func: Callable | None = None, **_: Any) -> Any:
        return func if func is not None else (lambda f: f)

    def capture_method(self, func: Callable | None = None, **_: Any) -> Any:
        return func if func is not None else (lambda f: f)


def _tracer() -> Any:
    if get_settings().tracing == "sdk":
        from aws_lambda_powertools import Tracer

        return Tracer(service=SERVICE)
    return UntracedHandlers()


tracer = _tracer()


def bind_item(item_id: str | None) -> None:
    """Use the queue item's id as the correlation id of what this thread logs next (the send
    function's sending threads each log their own item's)."""
    logger.thread_safe_append_keys(correlation_id=item_id)


def trace_carrier() -> Callable[[], None]:
    """Run in another thread, the returned function makes its AWS calls part of this thread's
    X-Ray trace (with ``VDQ_TRACING=sdk``; otherwise it does nothing)."""
    if isinstance(tracer, UntracedHandlers):
        return lambda: None
    from aws_xray_sdk.core import xray_recorder

    entity = xray_recorder.get_trace_entity()
    return lambda: xray_recorder.set_trace_entity(entity)
