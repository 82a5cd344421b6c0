"""The sent items (those in a done state), newest first, from the stream's done postings.

The stream consumer posts each item that enters a done state, once, in the window of its
shard, under the day and minute of its done time (vdq.store.postings). A page reads the days
from the cursor's (or today) back, a whole minute at a time (a minute's records come from
several shards and windows), sorts each minute's entries newest first (time, then id: a total
order), and takes those past the cursor's position that pass the filters. Method, state and
lane are in the entries, so only the page's own items are read, in one batch.

A page never skips or repeats an entry: the position moves only past entries examined. The
list follows the table by the stream's window and a batch's wait (vdq.operations.stats'
``LAG_SECONDS``), as the searches by time do; an item's own page and the search by receiver
do not. An item whose retention ran out is left out (its entry outlives it by days).
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from vdq.core.clock import iso
from vdq.core.errors import BadRequest
from vdq.operations import cursor as cursors
from vdq.store.postings import Done, Tallies
from vdq.workflow.lanes import priority_of
from vdq.workflow.table import is_done
from vdq.workflow.views import item_json

if TYPE_CHECKING:
    from vdq.runtime import Runtime

LIST_NAME = "done"  # what a cursor of this list names (the index's name in the active list's)
MAX_BYTES = 4_000_000  # done postings one request reads (over 2 minutes at 1,000 emails a second)
MAX_MONTHS = 24  # months one request walks back (a long-empty history: a cursor goes on)
FIRST_MONTH = "2025-01"  # no release wrote a done posting before: where a walk always ends
CLOCK_SKEW = timedelta(minutes=5)  # a first page starts this far ahead of the clock
_POSITION = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}#[0-9A-Z]{26}")


def list_done(
    runtime: Runtime,
    *,
    limit: int,
    method: str | None = None,
    state: str | None = None,
    priority: str | None = None,
    scheduled: bool | None = None,
    cursor: str | None = None,
) -> dict[str, Any]:
    """``{"items": [...], "cursor": str | None}``: one page of the sent items, newest first.
    ``scheduled``: true asks for items waiting for their send_at, which no done item is."""
    settings = runtime.settings
    filters: tuple[str | None, ...] = (method, state)
    if priority is not None or scheduled is not None:
        filters = (method, state, priority, None if scheduled is None else str(scheduled))
    key = cursors.ListKey(LIST_NAME, filters, 1)
    position = cursors.decode(cursor, key, settings.table_name)[0] if cursor else None
    if position is not None and not _written(position):
        raise BadRequest("the cursor is not valid for this list; start again without it",
                         details={"field": "cursor"})  # fmt: skip
    if scheduled:
        return {"items": [], "cursor": None}

    def wanted(entry: Done) -> bool:
        return ((method is None or entry.method == method)
                and (state is None or entry.state == state)
                and (priority is None or entry.priority == priority))  # fmt: skip

    now = runtime.clock.now()
    newest = iso(now + CLOCK_SKEW)[:23]
    if position is not None and position[:23] <= newest:
        month, through = position[:7], position[8:16]
    else:  # a first page, or a position ahead of any entry: from the newest month
        month, through = newest[:7], None
    floor = FIRST_MONTH if settings.retention_days <= 0 else max(
        FIRST_MONTH, iso(now - timedelta(days=settings.retention_days + 1))[:7])
    tallies = Tallies(runtime.client("dynamodb"), settings.table_name)
    taken: list[Done] = []  # up to limit + 1: the one past the page says a next one exists
    examined: str | None = None  # the last position examined
    seen: set[str] = set()
    read = walked = 0
    stopped = False
    while month >= floor and not stopped:
        if walked == MAX_MONTHS:  # the next request goes on from the end of this month
            examined, stopped = _end_of(month), True
            break
        walked += 1
        for entries, size in tallies.done_minutes(month, through=through):
            read += size
            for entry in sorted(entries, key=lambda e: e.position, reverse=True):
                if (position is not None and entry.position >= position) or \
                        entry.item_id in seen:  # fmt: skip
                    continue
                seen.add(entry.item_id)
                examined = entry.position
                if wanted(entry):
                    taken.append(entry)
            if len(taken) > limit or (read >= MAX_BYTES and examined is not None):
                stopped = True
                break
        month, through = _month_before(month), None

    more = len(taken) > limit or (stopped and examined is not None)
    if len(taken) > limit:
        taken = taken[:limit]
        examined = taken[-1].position
    records = runtime.store.get_items(e.item_id for e in taken)
    page = []
    for entry in taken:
        record = records.get(entry.item_id)
        # Read strongly consistently: the item is as it is now (a record that is not done is
        # not one this release wrote a done entry for).
        if record is not None and is_done(record.state) and \
                (priority is None or priority_of(record) == priority):  # fmt: skip
            page.append(item_json(record))
    next_cursor = cursors.encode([examined], key, settings.table_name) if more else None
    return {"items": page, "cursor": next_cursor}


def _written(position: str) -> bool:
    """A position a page of this list writes: a real time to the millisecond, then an id."""
    if not _POSITION.fullmatch(position):
        return False
    try:
        datetime.strptime(position[:23], "%Y-%m-%dT%H:%M:%S.%f")
    except ValueError:
        return False
    return True


def _month_before(month: str) -> str:
    year, number = int(month[:4]), int(month[5:7])
    return f"{year - 1}-12" if number == 1 else f"{year}-{number - 1:02d}"


def _end_of(month: str) -> str:
    """A position after every entry of ``month``: a walk from it reads the whole month."""
    last = calendar.monthrange(int(month[:4]), int(month[5:7]))[1]
    return f"{month}-{last:02d}T23:59:59.999#{'Z' * 26}"
