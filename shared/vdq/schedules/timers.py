"""The timers index as the schedule's tasks read it: the timers of a kind that passed, oldest
first across the index's shards, and whether an item read consistently still has one.

The index is sparse, sharded and keys only, and eventually consistent: an entry can be stale,
so a task reads each item strongly consistent and acts only if the item is still as its timer
says."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING

from vdq.core import resources
from vdq.schedules.report import Report, guard
from vdq.store import QueueItemRecord
from vdq.workflow.lanes import priority_of
from vdq.workflow.transitions import shard_timer_partition

if TYPE_CHECKING:
    from vdq.runtime import Runtime

SWEEP_BATCH = 200  # items per timer kind per run


def due(kind: str, before: str, runtime: Runtime, limit: int,
        lane: str | None = None) -> list[str]:  # fmt: skip
    """Ids of items whose ``kind`` timer (in ``lane``: publish timers) is below ``before``,
    oldest first, across shards."""
    return [item_id for item_id, _ in due_rows(kind, before, runtime, limit, lane)]


def due_rows(kind: str, before: str, runtime: Runtime, limit: int, lane: str | None = None,
             after: str | None = None) -> list[tuple[str, str]]:  # fmt: skip
    """(id, timer key) of the ``limit`` oldest ``kind`` timers below ``before`` (and past the
    key ``after``: a cursor), across shards. Every timer of those shards between ``after``
    and the last key returned is among them."""
    store, shards = runtime.store, runtime.settings.index_shards
    rows = []
    for k in range(shards):
        rows.extend(store.query_index(resources.TIMERS_INDEX,
                                      shard_timer_partition(kind, k, lane), below=before,
                                      start_after=after, limit=limit))  # fmt: skip
    return heapq.nsmallest(limit, rows, key=lambda r: r[1])


def timer_due(item: QueueItemRecord, kind: str, before: str, runtime: Runtime) -> bool:
    """The item (read consistently) still has a ``kind`` timer below ``before`` (a publish
    timer in its lane's partition, or the shared one it had before lanes had their own). In
    any of the kind's shards: a timer written before VDQ_INDEX_SHARDS was raised (as
    vdq:peakSendRate raises it) is in its shard of the count then, which ``due_rows`` reads."""
    lanes = {None, priority_of(item)}
    expected = {shard_timer_partition(kind, k, lane)
                for k in range(runtime.settings.index_shards) for lane in lanes}  # fmt: skip
    return item.timer_pk in expected and (item.timer_sk or "") < before


def sweep_pages(kind: str, before: str, pages: int, runtime: Runtime, report: Report,
                act: Callable[[str], None]) -> None:  # fmt: skip
    """``act`` on each item whose ``kind`` timer passed ``before``, oldest first, up to
    ``pages`` pages of SWEEP_BATCH, each page read on from the last key of the one before."""
    seen: set[str] = set()
    after: str | None = None
    for _ in range(pages):
        rows = due_rows(kind, before, runtime, SWEEP_BATCH, after=after)
        if not rows:
            return
        after = rows[-1][1]
        for item_id, _ in rows:
            if item_id not in seen:
                seen.add(item_id)
                guard(report, item_id, lambda i=item_id: act(i))
