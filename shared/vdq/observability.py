"""Powertools Logger, Metrics and Tracer, set up once and shared by every function."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "vdq"
NAMESPACE = "VDQ"

logger = Logger(service=SERVICE)
metrics = Metrics(service=SERVICE, namespace=NAMESPACE)
tracer = Tracer(service=SERVICE)


def bind_item(item_id: str | None) -> None:
    """Use the queue item's id as the correlation id of what is logged next."""
    logger.set_correlation_id(item_id)
