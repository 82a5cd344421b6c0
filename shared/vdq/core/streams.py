"""The table's stream records as the deployed mapping hands them to the schedule function: the
records its filters let through (``passes``), shaped as Lambda gives them (``as_lambda_gives``).
The local stack's poller and the repair of skipped batches (vdq.schedules.repair) read the
stream themselves and hand on what the mapping would."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from vdq.core import resources


def as_lambda_gives(record: dict[str, Any], arn: str) -> dict[str, Any]:
    """A record of GetRecords as the mapping hands it on: its source named, its creation
    time in epoch seconds."""
    data = dict(record.get("dynamodb") or {})
    created = data.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        data["ApproximateCreationDateTime"] = created.timestamp()
    return dict(record, dynamodb=data, eventSourceARN=arn, eventSource="aws:dynamodb")


def passes(record: dict[str, Any], patterns: tuple[dict, ...] = resources.STREAM_FILTERS) -> bool:
    """The deployed mapping's filters (vdq.core.resources.STREAM_FILTERS): a record passes when
    any pattern matches it (Lambda's syntax, as far as the patterns use it: lists of values,
    and ``{"prefix": ...}``)."""
    return any(_matches(record, pattern) for pattern in patterns)


def _matches(value: Any, pattern: Any) -> bool:
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            _matches(value.get(key), sub) for key, sub in pattern.items())
    if isinstance(pattern, list):
        for option in pattern:
            if isinstance(option, dict) and "prefix" in option:
                if isinstance(value, str) and value.startswith(option["prefix"]):
                    return True
            elif value == option:
                return True
        return False
    return bool(value == pattern)
