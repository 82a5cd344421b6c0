"""Powertools Logger, Metrics and Tracer, set up once and shared by every function.

The Tracer (X-Ray SDK subsegments of each AWS call) costs about 150 ms of cold start, as much as
boto3 itself, so it is built only with ``VDQ_TRACING=sdk``. Lambda's active tracing still
records every invocation without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics

from vdq.settings import get_settings

SERVICE = "vdq"
NAMESPACE = "VDQ"

logger = Logger(service=SERVICE)
metrics = Metrics(service=SERVICE, namespace=NAMESPACE)


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
    """Use the queue item's id as the correlation id of what is logged next."""
    logger.set_correlation_id(item_id)
