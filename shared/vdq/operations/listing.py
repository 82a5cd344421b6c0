"""The active queue and the sent items, page by page.

The active queue is read from a sharded sparse index: each shard from the cursor's position in
it; the rows are merged by sort key (time, then id, so the order is total across shards), and
the items of the page are read in one batch. A page never skips or repeats an item: a shard's
position moves only past rows examined. The method, state, priority and scheduled filters apply
to the items read, in a bounded number of rounds; a page may then hold fewer items than asked,
with a cursor to go on.

The sent items are read from the stream's done postings (vdq.operations.done_list).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vdq.core.clock import iso
from vdq.core.resources import ACTIVE_INDEX, IndexSpec
from vdq.operations import cursor as cursors
from vdq.operations import done_list
from vdq.store import QueueItemRecord
from vdq.workflow.lanes import priority_of
from vdq.workflow.table import State, is_done
from vdq.workflow.views import item_json

if TYPE_CHECKING:
    from vdq.runtime import Runtime

MAX_ROUNDS = 4
LIST_PERMISSION = "vdq.list_queueitem"


@dataclass(frozen=True)
class _List:
    index: IndexSpec | None  # None: the done postings
    prefix: str
    descending: bool
    done: bool  # which side of the done/active split the list shows


ACTIVE = _List(ACTIVE_INDEX, "A", descending=False, done=False)
SENT = _List(None, "S", descending=True, done=True)


def list_items(
    which: _List,
    runtime: Runtime,
    *,
    limit: int,
    method: str | None = None,
    state: str | None = None,
    priority: str | None = None,
    scheduled: bool | None = None,
    cursor: str | None = None,
) -> dict[str, Any]:
    """``{"items": [...], "cursor": str | None}``: one page of the list, in its order.
    ``scheduled``: true for the items waiting for their send_at (queued, send_at ahead),
    false for the others."""
    if which.index is None:
        return done_list.list_done(runtime, limit=limit, method=method, state=state,
                                   priority=priority, scheduled=scheduled, cursor=cursor)
    index = which.index
    settings = runtime.settings
    shards = settings.index_shards
    now = iso(runtime.clock.now())
    filters: tuple[str | None, ...] = (method, state)
    if priority is not None or scheduled is not None:  # older cursors keep their key
        filters = (method, state, priority, None if scheduled is None else str(scheduled))
    key = cursors.ListKey(index.name, filters, shards)
    positions: list[str | None] = (
        cursors.decode(cursor, key, settings.table_name) if cursor else [None] * shards
    )

    def wanted(item: QueueItemRecord) -> bool:
        return (
            is_done(item.state) == which.done
            and (method is None or item.method == method)
            and (state is None or item.state == state)
            and (priority is None or priority_of(item) == priority)
            and (scheduled is None or waiting(item, now) == scheduled)
        )

    page: list[QueueItemRecord] = []
    more = True
    for _ in range(MAX_ROUNDS):
        more = _round(which, index, runtime, positions, limit, page, wanted)
        if len(page) >= limit or not more:
            break
    next_cursor = cursors.encode(positions, key, settings.table_name) if more else None
    return {"items": [item_json(i) for i in page], "cursor": next_cursor}


def waiting(item: QueueItemRecord, now: str) -> bool:
    """The item waits for its send_at: still queued, and the time is ahead."""
    return item.state == State.QUEUED.value and (item.send_at or "") > now


def _round(
    which: _List,
    index: IndexSpec,
    runtime: Runtime,
    positions: list[str | None],
    limit: int,
    page: list[QueueItemRecord],
    wanted: Callable[[QueueItemRecord], bool],
) -> bool:
    """Read up to ``limit`` candidates past the positions, fill ``page``; True if more remain."""
    store = runtime.store
    candidates: list[tuple[str, str, int]] = []  # (sort key, item id, shard)
    full_shards = set()
    for k, position in enumerate(positions):
        rows = store.query_index(index, f"{which.prefix}#{k}", start_after=position,
                                 descending=which.descending, limit=limit)  # fmt: skip
        if len(rows) >= limit:
            full_shards.add(k)
        candidates.extend((sort_key, item_id, k) for item_id, sort_key in rows)
    candidates.sort(reverse=which.descending)
    taken = candidates[:limit]
    records = store.get_items(item_id for _, item_id, _ in taken)
    examined = 0
    for sort_key, item_id, k in taken:
        if len(page) >= limit:
            break
        examined += 1
        positions[k] = sort_key
        record = records.get(item_id)
        # The index is eventually consistent: an item may have crossed the done line since.
        if record is not None and wanted(record):
            page.append(record)
    # A shard that filled its read may hold more rows than were read.
    return examined < len(candidates) or bool(full_shards)
