"""Priority lanes: which send queue carries an item's send messages.

Each priority has its own SQS queue, dead-letter queue and consumer with its own concurrency,
so a backlog in one lane never delays another: a ``high`` item waits only behind high items.
Every publish of a send takes the lane from the item (``message_for``), and the send queue
routes each message to its lane's URL.
"""

from __future__ import annotations

from typing import Any

from vdq.core.errors import BadValue

PRIORITIES = ("high", "normal", "bulk")
DEFAULT_PRIORITY = "normal"


def parse_priority(value: Any, path: str = "priority") -> str:
    """The priority a request names (absent or null: normal); a 400 naming the field else."""
    if value is None:
        return DEFAULT_PRIORITY
    if not isinstance(value, str) or value not in PRIORITIES:
        raise BadValue(path, f"must be one of {', '.join(PRIORITIES)}")
    return value


def priority_of(item: Any) -> str:
    """An item's lane; items stored before lanes existed are normal."""
    return getattr(item, "priority", None) or DEFAULT_PRIORITY


def lane_urls(settings: Any) -> dict[str, str]:
    """Queue URL per priority; an unset lane URL shares the normal lane's queue."""
    normal = settings.send_queue_url
    return {
        "high": settings.high_send_queue_url or normal,
        "normal": normal,
        "bulk": settings.bulk_send_queue_url or normal,
    }


def message_for(item: Any, *, delay_seconds: int = 0,
                content: dict[str, Any] | None = None) -> Any:  # fmt: skip
    """The send message of the item's current attempt, in the item's lane."""
    from vdq.store.pacing import key_of
    from vdq.workflow.sendqueue import SendMessage

    return SendMessage(item.id, int(item.attempt), delay_seconds, content,
                       receiver=item.receiver, priority=priority_of(item),
                       pace=key_of(item.method, item.sender),
                       list_name=getattr(item, "list_name", None),
                       delayed=getattr(item, "state", None) == "delayed",
                       queued_at=getattr(item, "queued_at", None))  # fmt: skip
