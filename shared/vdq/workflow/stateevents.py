"""State-change events on EventBridge, so producing services learn outcomes without polling.

Published at least once from the table's stream (NEW_AND_OLD_IMAGES), never by the function
that made the change: a function that dies right after its write cannot lose the event, since
the stream holds every committed change and Lambda retries a failed batch. Each event carries
``event_id`` (item, attempt, change time), the same on every redelivery, for consumers to drop
duplicates by.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from vdq.workflow.lanes import DEFAULT_PRIORITY
from vdq.workflow.table import DONE_STATES, GIVE_BACK, TRANSITIONS, State

SOURCE = "vdq"
DETAIL_TYPE = "Queue Item State Change"
STATE_SK = "STATE"
PUT_EVENTS_BATCH = 10  # PutEvents takes at most 10 entries

# (from, to) -> the transition: each pair names one transition of the workflow.
_TRANSITION_OF = {
    (source.value, t.target.value): name for name, t in TRANSITIONS.items() for source in t.sources
}


def transition_of(before: str, after: str, old: dict[str, Any], new: dict[str, Any]) -> str:
    """The transition a change of state is, or the give-back (vdq.workflow.table.GIVE_BACK): out of
    ``sending`` to where the claim came from at the same attempt (``delay`` starts a new
    one)."""
    same_attempt = (old.get("attempt") or {}).get("N") == (new.get("attempt") or {}).get("N")
    if before == State.SENDING and after in (State.QUEUED, State.DELAYED) and same_attempt:
        return GIVE_BACK
    return _TRANSITION_OF.get((before, after), "unknown")


def wanted(mode: str, target: str) -> bool:
    """``errored`` (the default): transitions into errored, which wait for an operator;
    ``outcomes``: those and into a done state; ``all``; ``none``. One event per delivered
    message is EventBridge's US$1.00 per million, a fifth of the cost target (bench.bill):
    so the outcomes of every message are published only when asked for."""
    if mode == "all":
        return True
    if mode == "none":
        return False
    if mode == "outcomes" and target in DONE_STATES:
        return True
    return target == State.ERRORED


def _plain(image: dict[str, Any]) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeDeserializer

    deserialize = TypeDeserializer().deserialize
    return {k: deserialize(v) for k, v in image.items()}


def detail_of(record: dict[str, Any], mode: str) -> dict[str, Any] | None:
    """The event a stream record announces, or None (not a state change, or not wanted)."""
    if record.get("eventName") != "MODIFY":
        return None
    change = record.get("dynamodb") or {}
    new, old = change.get("NewImage") or {}, change.get("OldImage") or {}
    if (new.get("sk") or {}).get("S") != STATE_SK:
        return None
    before, after = (old.get("state") or {}).get("S"), (new.get("state") or {}).get("S")
    if not before or not after or before == after or not wanted(mode, after):
        return None
    item = _plain(new)
    origin = (
        {"type": item["origin_type"], "id": item.get("origin_id")}
        if item.get("origin_type") is not None else None
    )  # fmt: skip
    attempt = int(item["attempt"])
    return {
        "event_id": f"{item['id']}:{attempt}:{item['updated_at']}",
        "id": item["id"],
        "method": item["method"],
        "priority": item.get("priority") or DEFAULT_PRIORITY,
        "transition": transition_of(before, after, old, new),
        "from": before,
        "to": after,
        "attempt": attempt,
        "origin": origin,
        "result": item.get("result"),
        "provider_id": item.get("provider_id"),
        "at": item["updated_at"],
    }


class StateEvents:
    def __init__(self, events: Any, bus_name: str, mode: str) -> None:
        self._events = events
        self._bus = bus_name
        self._mode = mode

    def publish_changes(self, records: Iterable[dict[str, Any]]) -> int:
        """Publish the events of a batch of stream records; returns how many. Raises when
        EventBridge refuses any, so the batch is delivered again (consumers deduplicate)."""
        if not self._bus:
            return 0
        details = [d for d in (detail_of(r, self._mode) for r in records) if d is not None]
        for start in range(0, len(details), PUT_EVENTS_BATCH):
            self.emit_many(details[start : start + PUT_EVENTS_BATCH])
        return len(details)

    def emit_many(self, details: list[dict[str, Any]]) -> None:
        response = self._events.put_events(
            Entries=[
                {
                    "Source": SOURCE,
                    "DetailType": DETAIL_TYPE,
                    "Detail": json.dumps(d, separators=(",", ":"), default=str),
                    "EventBusName": self._bus,
                    "Resources": [],
                }
                for d in details
            ]
        )
        if response.get("FailedEntryCount"):
            raise RuntimeError(f"EventBridge refused state events: {response['Entries']}")
