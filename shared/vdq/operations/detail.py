"""One queue item as the single-item views show it: state, content, attachments, history."""

from __future__ import annotations

from typing import Any

from vdq import ids
from vdq.errors import NotFound
from vdq.runtime import Runtime
from vdq.store import AttachmentRecord, QueueItemRecord
from vdq.views import history_json, item_json
from vdq.workflow import is_done

READ_PERMISSION = "vdq.read_queueitem"


def attachment_path(attachment_id: str) -> str:
    return f"/attachments/{attachment_id}"


def attachment_json(record: AttachmentRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "filename": record.filename,
        "content_type": record.content_type,
        "size": int(record.size),
        "inline": bool(record.inline),
        "content_id": record.cid,
        "download_path": attachment_path(record.id),
        "purged": record.purged_at is not None,
    }


def find_item(item_id: str, runtime: Runtime, *, sent_only: bool = False) -> QueueItemRecord:
    """The item, or NotFound; with ``sent_only`` also NotFound for an item not done."""
    item = runtime.store.get_item(item_id) if ids.is_id(item_id) else None
    if item is None:
        raise NotFound(f"queue item {item_id} does not exist", details={"id": item_id})
    if sent_only and not is_done(item.state):
        raise NotFound(
            f"queue item {item_id} is {item.state}, not a sent item; see /queue-items/{item_id}",
            details={"id": item_id, "state": item.state},
        )
    return item


def _queued_entry(item: QueueItemRecord) -> dict[str, Any]:
    """The item's creation, which enqueue does not write as a history record."""
    text = f"resent from {item.resent_from}" if item.resent_from else None
    return {
        "at": item.queued_at,
        "actor": item.created_by or "vdq",
        "source": "operator" if item.resent_from else "server",
        "kind": "transition",
        "name": "queued",
        "from_state": None,
        "to_state": "queued",
        "attempt": 1,
        "text": text,
    }


def item_detail(item_id: str, runtime: Runtime, *, sent_only: bool = False) -> dict[str, Any]:
    store = runtime.store
    item = find_item(item_id, runtime, sent_only=sent_only)
    found = store.get_content(item.content_id)
    if found is None and item.expiration is not None:
        # Its content expired first (another item's shorter expiration): the item is going.
        raise NotFound(f"queue item {item_id} does not exist", details={"id": item_id})
    content = dict(found or {})
    attachment_ids = content.pop("attachments", None) or []
    by_id = {r.id: r for r in store.get_attachments(attachment_ids)}
    attachments = [attachment_json(by_id[a]) for a in attachment_ids if a in by_id]
    history = [_queued_entry(item), *(history_json(h) for h in store.history(item.id))]
    return {**item_json(item), "content": content, "attachments": attachments,
            "history": history}  # fmt: skip
