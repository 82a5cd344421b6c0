"""Items whose send message may not have gone out: the publish timer they were written without.

An item enqueued for now is stored without a publish timer (vdq.intake.enqueue): its message
is published right after the write. One left without a message and without a timer (a publish
SQS refused whose error was not recorded either, a function that died between the write and the
publish) is ``stray``; ``arm`` gives it the timer it would have had, and the re-publish sweep
sends it (vdq.schedules.sweeps). The schedule finds them (vdq.schedules.strays).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from vdq.core.clock import iso, parse_iso
from vdq.store import QueueItemRecord
from vdq.workflow.lanes import priority_of
from vdq.workflow.table import State
from vdq.workflow.transitions import TIMER_PUBLISH, timer_partition

if TYPE_CHECKING:
    from vdq.runtime import Runtime


def stray(item: QueueItemRecord) -> bool:
    """Queued or delayed with nothing to move it on: no publish timer, not parked by a hold."""
    waiting = item.state in (State.QUEUED.value, State.DELAYED.value)
    return waiting and not item.timer_pk and not item.held


def arm(item: QueueItemRecord, runtime: Runtime) -> bool:
    """Give a stray item its publish timer, due at its enqueue time plus the grace
    (``VDQ_PUBLISH_GRACE_SECONDS``; passed already for one the schedule found): one UpdateItem,
    conditional on the item as read and on it having no timer. False when it moved on or has
    one."""
    s = runtime.settings
    due = parse_iso(item.queued_at) + timedelta(seconds=s.publish_grace_seconds)
    partition = timer_partition(TIMER_PUBLISH, item.id, s.index_shards, priority_of(item))
    return bool(runtime.store.add_timer(item, partition, f"{iso(due)}#{item.id}"))
