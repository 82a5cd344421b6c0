"""One queue item as the single-item views show it: state, content, attachments, history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vdq.core import ids
from vdq.core.errors import NotFound
from vdq.operations import cursor as cursors
from vdq.store import AttachmentRecord, HistoryRecord, QueueItemRecord
from vdq.workflow.table import State, is_done
from vdq.workflow.views import history_json, item_json

if TYPE_CHECKING:
    from vdq.runtime import Runtime

READ_PERMISSION = "vdq.read_queueitem"
HISTORY_PAGE = 100  # entries an item's view holds; the rest is paged (getItemHistory)
MAX_HISTORY_PAGE = 500
_BEFORE_ALL = "H#"  # below every history key: the position after the synthetic queued entry
# Reads of an item's history and state a view makes, at most, for a history that ends in the
# item's state (a change committed between the two reads is read again).
HISTORY_READS = 3


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
    item_id = ids.typed(item_id)
    item = runtime.store.get_item(item_id) if ids.is_id(item_id) else None
    return _found(item_id, item, sent_only=sent_only)


def _found(item_id: str, item: QueueItemRecord | None, *, sent_only: bool) -> QueueItemRecord:
    if item is None:
        raise NotFound(f"queue item {item_id} does not exist", details={"id": item_id})
    if sent_only and not is_done(item.state):
        raise NotFound(
            f"queue item {item_id} is {item.state}, not a sent item; see /queue-items/{item_id}",
            details={"id": item_id, "state": item.state},
        )
    return item


Entries = dict[str, HistoryRecord]  # an item's history entries by key


def read_item(item_id: str, runtime: Runtime, *,
              sent_only: bool = False) -> tuple[QueueItemRecord, Entries]:  # fmt: skip
    """The item and its history entries, as of one moment: the history is read first, then
    the item (``Store.item_and_history``), so the item is never older than its history. When
    the history ends in another state than the item's (a change committed between the two
    reads), both are read again, at most ``HISTORY_READS`` times in all; then the last read is
    answered (its item newer than its history, never older). NotFound as ``find_item``."""
    item_id = ids.typed(item_id)
    item: QueueItemRecord | None = None
    stored: Entries = {}
    for _ in range(HISTORY_READS if ids.is_id(item_id) else 0):
        item, entries = runtime.store.item_and_history(item_id)
        if item is None:
            break
        stored = _with_claim(item, {h.sk: h for h in entries})
        if _last_state(stored) in (None, item.state):
            break
    return _found(item_id, item, sent_only=sent_only), stored


def _last_state(stored: Entries) -> str | None:
    """The state the item's history ends in (its last entry that names one)."""
    for sk in sorted(stored, reverse=True):
        if stored[sk].to_state is not None:
            return stored[sk].to_state
    return None


def _with_claim(item: QueueItemRecord, stored: Entries) -> Entries:
    """``stored`` with the claim's ``send`` entry of a sending item claimed by a release whose
    claim left the entry to the outcome's write (a claim now writes it itself). Such an entry
    is written into the past (dated at the claim, written with the outcome, after any event
    recorded while the item was sending): shown from the claim on, so no reader's cursor
    passes its place before it is there."""
    if (item.state == State.SENDING.value and item.claimed_at
            and not any(h.name == "send" and h.at == item.claimed_at for h in stored.values())):
        from vdq.workflow.transitions import send_entry  # only here: a read's cold start skips it

        claim = send_entry(item)
        stored[claim.sk] = claim
    return stored


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
    item, stored = read_item(item_id, runtime, sent_only=sent_only)
    found = store.get_content(item.content_id)
    if found is None and item.expiration is not None:
        # Its content expired first (another item's shorter expiration): the item is going.
        raise NotFound(f"queue item {item_id} does not exist", details={"id": item_id})
    content = dict(found or {})
    attachment_ids = content.pop("attachments", None) or []
    by_id = {r.id: r for r in store.get_attachments(attachment_ids)}
    attachments = [attachment_json(by_id[a]) for a in attachment_ids if a in by_id]
    history, history_cursor = history_page(item, stored, runtime)
    return {**item_json(item), "content": content, "attachments": attachments,
            "history": history, "history_cursor": history_cursor}  # fmt: skip


def item_history(item_id: str, runtime: Runtime, *, limit: int = HISTORY_PAGE,
                 cursor: str | None = None) -> dict[str, Any]:  # fmt: skip
    """``{"entries": [...], "cursor": str | None}``: one page of the item's history."""
    item, stored = read_item(item_id, runtime)
    entries, next_cursor = history_page(item, stored, runtime, limit=limit, cursor=cursor)
    return {"entries": entries, "cursor": next_cursor}


def history_page(item: QueueItemRecord, stored: Entries, runtime: Runtime, *,
                 limit: int = HISTORY_PAGE,
                 cursor: str | None = None) -> tuple[list[dict[str, Any]], str | None]:  # fmt: skip
    """Up to ``limit`` of the entries ``read_item`` read, oldest first, after the position
    ``cursor`` names, and the cursor of the next page (None at the end).

    The cursor holds the key of the last entry shown, signed for this item, so a page goes on
    from where the last one ended even as new entries arrive. Every entry is read for each page
    (one strongly consistent Query of the item's history), and the answer, not the read, is
    bounded."""
    key = cursors.ListKey("history", (item.id,), 1)
    table = runtime.settings.table_name
    after = cursors.decode(cursor, key, table)[0] if cursor else None
    rows: list[tuple[str, dict[str, Any]]] = [] if after else [(_BEFORE_ALL, _queued_entry(item))]
    rows += [(sk, history_json(stored[sk])) for sk in sorted(stored)
             if after is None or sk > after]  # fmt: skip
    page = rows[:limit]
    more = len(rows) > limit
    return [entry for _, entry in page], (
        cursors.encode([page[-1][0]], key, table) if more else None)
