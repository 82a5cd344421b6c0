"""Items accepted for sending now whose first send message may never have gone out.

An item enqueued for now (not scheduled) is written without a publish timer: a timer is an
entry in the timers index when written and another when the claim removes it, two of the ten
or so write units an email costs, and its message is published right after the write anyway.
What is left without one:

- a publish SQS refuses: the enqueue records the error (or, that failing, gives the item its
  publish timer at once: vdq.workflow.unpublished.arm);
- a function that dies between the write and the publish (a timeout, a crash): the schedule
  finds it (``arm_strays``). The active index holds every open item under its enqueue time, so
  a cursor per shard (a place a lane) reads the items enqueued since the last run, up to
  ``VDQ_PUBLISH_GRACE_SECONDS`` ago: by then each has had as long to be claimed as a publish
  timer gives it. An item still queued there with no timer (and not parked by a hold) is given
  the timer it would have had, due at its enqueue time plus the grace; the re-publish sweep,
  which runs next, sends it again. Not while its lane has a backlog (``arm_strays``).

Most items are done within seconds of their send and have left the active index by then: the
read costs nothing for them. An item whose index entry shows up only after the cursor passed
its time (the index lagging more than the grace period) is found by the daily watch of open
items instead (vdq.schedules.sweeps.lost_messages). Items written before this keep the timer
they were written with.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from vdq.core import resources
from vdq.core.clock import iso
from vdq.core.observability import logger
from vdq.workflow.lanes import PRIORITIES, priority_of
from vdq.workflow.unpublished import arm, stray

if TYPE_CHECKING:
    from vdq.runtime import Runtime

CURSOR_PREFIX = "STRAYS#"  # the partition of a shard's places (one a lane): STRAYS#<shard>
PAGE = 100  # index rows a page, the items of one BatchGetItem
PAGES = 200  # pages a shard a run at most: 20,000 open items; the next run goes on from there
# Of the minute sweep's 120 s: a backlog of 1,000 emails a second (60,000 rows a minute over the
# shards, about 1,200 requests) is read within it. The shards take turns at going first.
BUDGET_SECONDS = 30.0


def arm_strays(runtime: Runtime, report: Any, backlog: Callable[[str], int]) -> None:
    """Each shard of the active index, from its cursor to the grace period ago, a page at a
    time: the items still there are read (eventually consistent: a stale one costs at most a
    refused write or a read again next run) and the stray ones armed. The cursor moves past
    each row dealt with; a run that reads ``PAGES`` pages of a shard, or for
    ``BUDGET_SECONDS``, leaves the rest to the next.

    A stray in a lane with a backlog (``backlog``: the lane's waiting sends) is most likely
    still waiting in it: it is not armed (a timer is two index writes, and every item of a
    backlog would get one), and that lane's place in the shard stops before it, so each run
    reads on from there until the item is claimed or the lane drains (then it is armed, and
    the re-publish sweep sends it: a lost publish goes out once its lane drains, as for any
    passed timer). Up to a page of the shard is read again a run meanwhile. The other lanes
    read on from their own place (lanes at the same place share a read): a lost high email is
    not held back by a bulk backlog enqueued before it."""
    s = runtime.settings
    now = runtime.clock.now()
    until = iso(now - timedelta(seconds=s.publish_grace_seconds))
    deadline = time.monotonic() + BUDGET_SECONDS
    first = int(now.timestamp() // 60) % s.index_shards  # a shard a minute goes first
    for k in [*range(first, s.index_shards), *range(first)]:
        if k != first and time.monotonic() > deadline:  # (the first shard reads a page)
            report.add("strays_out_of_time")
            return  # the shards left go first in the next runs
        partition = f"{CURSOR_PREFIX}{k}"
        try:
            # No place yet (the first run after an upgrade): from the shard's oldest open item.
            places = lane_places(runtime.store.schedule_place(partition))
            moved = dict(places)
            for after in dict.fromkeys(places.values()):
                if after is not None and after >= until:
                    continue  # a clock that went back: nothing new in this shard
                lanes = [lane for lane, place in places.items() if place == after]
                moved.update(_shard(k, after, until, lanes, runtime, report, backlog,
                                    deadline))  # fmt: skip
            if moved != places:
                runtime.store.keep_schedule_place(partition, json.dumps(moved, sort_keys=True))
        except Exception:  # the cursor stays: the next run reads the shard again from it
            report.add("failed")
            logger.exception("strays of shard %d not read; the next run goes on", k)


def lane_places(position: str | None) -> dict[str, str | None]:
    """Each lane's place in a shard (the sort key of the last row it dealt with; None: from
    the shard's start), as a shard's cursor stores them."""
    stored = json.loads(position) if position else {}
    return {lane: stored.get(lane) for lane in PRIORITIES}


def passed(item: Any, runtime: Runtime, places: dict[str, dict[str, str | None]]) -> bool:
    """The schedule read past the item (its lane's place in its shard is at or after the
    item's row) without arming it: its index entry came after, and nothing else will.
    ``places``: the shards' places read so far (one read a shard)."""
    if not item.active_pk or not item.active_sk:
        return True  # not in the index: the schedule never reads it
    partition = CURSOR_PREFIX + item.active_pk.split("#", 1)[1]
    if partition not in places:
        places[partition] = lane_places(runtime.store.schedule_place(partition))
    place = places[partition][priority_of(item)]
    return place is not None and item.active_sk <= place


def _shard(k: int, after: str | None, until: str, lanes: list[str], runtime: Runtime,
           report: Any, backlog: Callable[[str], int],
           deadline: float) -> dict[str, str | None]:  # fmt: skip
    """One shard's run for ``lanes`` (all at ``after``): the sort key of the last row each
    dealt with (its next place). An item of another lane is passed."""
    reading = set(lanes)  # the lanes not stopped by a stray in their backlog
    last: dict[str, str | None] = dict.fromkeys(lanes, after)
    start = after
    for _ in range(PAGES):
        # The shard's partition (vdq.workflow.transitions.active_partition).
        rows = runtime.store.query_index(resources.ACTIVE_INDEX, f"A#{k}", start_after=start,
                                         below=until, limit=PAGE)  # fmt: skip
        if not rows:
            return last
        items = runtime.store.get_items([item_id for item_id, _ in rows], consistent=False)
        for item_id, key in rows:
            item = items.get(item_id)
            if item is not None and priority_of(item) in reading and stray(item):
                if backlog(priority_of(item)):
                    report.add("strays_waiting")
                    reading.discard(priority_of(item))  # read again next run
                    if not reading:
                        return last
                    continue
                if arm(item, runtime):
                    report.add("strays_armed")
                    logger.warning("%s was queued at %s with no send message seen since: "
                                   "its publish timer is armed", item.id, item.queued_at)
            last.update(dict.fromkeys(reading, key))
        start = rows[-1][1]
        if len(rows) < PAGE or time.monotonic() > deadline:
            return last
    return last
