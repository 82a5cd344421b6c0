"""State-change events on EventBridge, so producing services learn outcomes without polling."""

from __future__ import annotations

import json
from typing import Any

from vdq.workflow import DONE_STATES, State

SOURCE = "vdq"
DETAIL_TYPE = "Queue Item State Change"


def wanted(mode: str, target: str) -> bool:
    """``default``: transitions into errored or a done state; ``all``; ``none``."""
    if mode == "all":
        return True
    if mode == "none":
        return False
    return target == State.ERRORED or target in DONE_STATES


class StateEvents:
    def __init__(self, events: Any, bus_name: str, mode: str) -> None:
        self._events = events
        self._bus = bus_name
        self._mode = mode

    def enabled_for(self, target: str) -> bool:
        return bool(self._bus) and wanted(self._mode, target)

    def emit(self, detail: dict[str, Any]) -> None:
        response = self._events.put_events(
            Entries=[
                {
                    "Source": SOURCE,
                    "DetailType": DETAIL_TYPE,
                    "Detail": json.dumps(detail, separators=(",", ":")),
                    "EventBusName": self._bus,
                    "Resources": [],
                }
            ]
        )
        if response.get("FailedEntryCount"):
            raise RuntimeError(f"EventBridge refused the state event: {response['Entries']}")
