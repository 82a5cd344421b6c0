"""The one loader of the sample payloads in events/ (real-shaped events of every source)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

EVENTS = Path(__file__).resolve().parents[2] / "events"


def load_event(name: str, **changes: Any) -> dict[str, Any]:
    """The sample event ``events/<name>.json``, with top-level keys replaced by ``changes``."""
    data = json.loads((EVENTS / f"{name}.json").read_text())
    data = copy.deepcopy(data)
    data.update(changes)
    return data


def api_event(name: str, *, body: Any = None, groups: list[str] | None = None,
              headers: dict[str, str] | None = None, **changes: Any) -> dict[str, Any]:  # fmt: skip
    """An API Gateway REST proxy event from a sample, with body, caller groups and headers."""
    event = load_event(name, **changes)
    if body is not None:
        event["body"] = body if isinstance(body, str) else json.dumps(body)
    if groups is not None:
        claims = event["requestContext"]["authorizer"]["claims"]
        claims["cognito:groups"] = ",".join(groups)
    if headers:
        event["headers"] = {**(event.get("headers") or {}), **headers}
    return event
