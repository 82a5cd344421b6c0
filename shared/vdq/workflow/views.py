"""JSON shapes of queue items and their history, as the REST API returns them."""

from __future__ import annotations

from typing import Any

from vdq.store import HistoryRecord, QueueItemRecord
from vdq.workflow.lanes import priority_of

# What a history entry's ``source`` and ``kind`` may be (the OpenAPI document's enums; a test
# checks every writer of history uses only these).
HISTORY_SOURCES = ("server", "provider", "operator", "schedule")
HISTORY_KINDS = ("transition", "ignored", "late", "event", "action")


def item_json(item: QueueItemRecord) -> dict[str, Any]:
    origin = (
        {"type": item.origin_type, "id": item.origin_id} if item.origin_type is not None else None
    )
    sender: dict[str, Any]
    receiver: dict[str, Any]
    if item.method == "email":
        sender = {"email": item.sender, "name": item.sender_name}
        receiver = {"email": item.receiver, "name": item.receiver_name}
    else:
        sender = {"cell": item.sender}
        receiver = {"cell": item.receiver, "name": item.receiver_name}
    return {
        "id": item.id,
        "method": item.method,
        "state": item.state,
        "sender": sender,
        "receiver": receiver,
        "result": item.result,
        "attempt": int(item.attempt),
        "retry_delay": int(item.retry_delay) if item.retry_delay is not None else None,
        "queued_at": item.queued_at,
        "updated_at": item.updated_at,
        "done_since": item.done_since,
        "done_at": item.done_at,
        "origin": origin,
        "provider_id": item.provider_id,
        "resent_from": item.resent_from,
        "encoding": item.encoding,
        "segments": int(item.segments) if item.segments is not None else None,
        "priority": priority_of(item),
        "send_at": item.send_at,
    }


def history_json(entry: HistoryRecord) -> dict[str, Any]:
    return {
        "at": entry.at,
        "actor": entry.actor,
        "source": entry.source,
        "kind": entry.kind,
        "name": entry.name,
        "from_state": entry.from_state,
        "to_state": entry.to_state,
        "attempt": int(entry.attempt) if entry.attempt is not None else None,
        "text": entry.text,
    }
