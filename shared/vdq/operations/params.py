"""Query parameters: an operation's query string read against the operation table
(vdq.operations.spec), with its defaults, bounds and patterns.

The table declares each parameter once and the OpenAPI document is written from it; reading a
request by the same declaration keeps what the document promises and what the server takes
one thing. Apart from the table so that the table stays data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from vdq.core.errors import ValidationError
from vdq.operations.spec import BY_ID, MAX_QUERY_VALUE, Param

_INTEGER = re.compile(r"-?[0-9]{1,18}")


def _value(param: Param, raw: str) -> Any:
    if param.type == "integer":
        # Digits as the contract writes an integer: int() would also read "1_0", " 5", "+5"
        # and non-ASCII digits, and raise on thousands of digits.
        if not _INTEGER.fullmatch(raw):
            raise ValidationError(param.name, "must be a whole number")
        value: Any = int(raw)
        if param.minimum is not None and value < param.minimum:
            raise ValidationError(param.name, f"must be at least {param.minimum}")
        if param.maximum is not None and value > param.maximum:
            raise ValidationError(param.name, f"must be at most {param.maximum}")
        return value
    if param.type == "boolean":
        lowered = raw.strip().lower()
        if lowered not in ("true", "false", "1", "0"):
            raise ValidationError(param.name, "must be true or false")
        return lowered in ("true", "1")
    if param.enum and raw not in param.enum:
        raise ValidationError(param.name, f"must be one of {', '.join(param.enum)}")
    most = param.max_length or MAX_QUERY_VALUE
    if not raw or len(raw) > most:
        raise ValidationError(param.name, f"must be 1 to {most} characters")
    # What the document declares is what the server takes (a cursor that does not even look
    # like one is a 422, also where it would be ignored), but for a loose pattern.
    if param.pattern is not None and not param.loose and not re.fullmatch(param.pattern, raw):
        raise ValidationError(param.name, "is not of the form the document gives it")
    return raw


def query(operation_id: str, raw: Mapping[str, str] | None,
          every: Mapping[str, list[str]] | None = None) -> dict[str, Any]:  # fmt: skip
    """The operation's query parameters, validated, with defaults; unknown ones are refused,
    and so is one given more than once (``every``: each parameter's values, API Gateway's
    ``multiValueQueryStringParameters``; ``raw`` holds only the last of them)."""
    params = [p for p in BY_ID[operation_id].params if p.where == "query"]
    given = dict(raw or {})
    known = {p.name for p in params}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ValidationError(unknown[0], "is not a known query parameter")
    repeated = sorted(name for name, values in (every or {}).items() if len(values or ()) > 1)
    if repeated:
        # Which value the caller meant cannot be known: neither the first nor the last is taken.
        raise ValidationError(repeated[0], "is given more than once; give it once")
    return {
        p.name: _value(p, given[p.name]) if given.get(p.name) is not None else p.default
        for p in params
    }
