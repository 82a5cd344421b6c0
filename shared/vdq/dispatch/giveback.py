"""Giving a claimed item back: it waits for its turn at the provider's rate (vdq.dispatch.pacing),
was throttled by the provider, or its receiver was suppressed meanwhile (vdq.results.suppression).
The item returns to the state its claim took it from, at the same attempt, and its message is
published again with a delay: no attempt is spent and nothing is sent. An invocation too near
its timeout publishes the rest of its batch again unclaimed (``unclaimed``).
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from vdq.core import resources
from vdq.core.clock import iso
from vdq.core.observability import logger, metrics
from vdq.dispatch.pacing import PACED, current_rate, get_pacer, rate_of
from vdq.providers import ThrottledProviderError
from vdq.store import Moved, QueueItemRecord, StateWrite
from vdq.workflow.lanes import priority_of
from vdq.workflow.sendqueue import SendMessage
from vdq.workflow.table import GIVE_BACK_ENTRIES, State, claim_source

if TYPE_CHECKING:
    from vdq.runtime import Runtime

# Seconds over which throttled items come back, after their turn at the cut rate: a
# throttling answer comes to many sends at once, and spread they do not all ask for the same
# slots (over the longest wait). A high item's lane holds few, and its wait is the point.
THROTTLED_SPREAD = {"high": 1.0}


def throttled_delay(units: int, rate: float, max_wait: float, lane: str) -> int:
    """Seconds a throttled send of ``units`` slots waits on the queue at the cut ``rate``."""
    spread = THROTTLED_SPREAD.get(lane, max_wait)
    return max(1, math.ceil(units / rate + random.uniform(0, spread)))


def throttled(item: QueueItemRecord, message: SendMessage, content: dict[str, Any],
              exc: ThrottledProviderError, runtime: Runtime) -> str:  # fmt: skip
    """The provider refused the send for its rate: slow the fleet, give the item back."""
    metrics.add_metric(name="SendsThrottled", unit="Count", value=1)
    key, limit, units = rate_of(item, content, runtime)
    if not exc.rate_exceeded:  # a daily quota: no pace helps, try again much later
        delay = runtime.settings.retry_backoff_max_seconds
    else:
        pacer = get_pacer(runtime)
        if limit is not None:
            try:
                pacer.slow_down(key, limit)
            except Exception:
                # The item is given back still: left in ``sending``, its lease would end and
                # make it errored. The next throttling answer cuts the rate.
                logger.exception("the pace of %s could not be cut", key)
        rate = current_rate(limit or 1.0, pacer.seen.get(key), pacer.wall())
        delay = throttled_delay(units, rate, pacer.max_wait, priority_of(item))
    result = f"{exc}; not sent, back on the queue in {delay} s"
    return give_back(item, message, delay, runtime, name="throttled", result=result)


def give_back(
    item: QueueItemRecord,
    message: SendMessage,
    delay: int,
    runtime: Runtime,
    *,
    name: str = "paced",
    result: str | None = None,
    counted: bool = True,
) -> str:
    """Undo the claim: the item returns to the state it was claimed from, at the same attempt,
    and its message (same attempt and lane) is published again ``delay`` seconds later. Not a
    transition of the workflow's table (why: vdq.workflow.table, ``GIVE_BACK``); ``name`` is its
    history entry, one of ``workflow.GIVE_BACK_ENTRIES``.

    The write is conditional on the claim (``sending`` at this attempt), so a status update or
    an operator that moved the item first wins. Then the publish, then (the caller returns)
    SQS deletes the message: a worker that dies between the write and the publish leaves its
    message, whose delivery claims the item again; a publish SQS refuses raises, so that the
    message comes back the same way. A duplicate of the new message fails its claim as any
    duplicate does. ``counted``: a wait for a turn at the rate (SendsPaced)."""
    from vdq.workflow.transitions import (
        TIMER_PUBLISH,
        clip_result,
        history_entry,
        item_now,
        timer_write,
    )

    assert name in GIVE_BACK_ENTRIES
    source = claim_source(item.retries)
    now = item_now(item, runtime)
    write = StateWrite(set={"state": source.value, "updated_at": iso(now), "claimed_at": None})
    if result is not None:
        write.set["result"] = clip_result(result)
    due = now + timedelta(seconds=delay + runtime.settings.publish_grace_seconds)
    timer_write(write, item.id, TIMER_PUBLISH, iso(due), runtime.settings.index_shards,
                priority_of(item))  # the lane's own partition, as its message's queue
    text = result or f"no sending slot within the wait; back on the queue in {delay} s"
    note = history_entry(item.id, now, actor="worker", source="server", kind="event",
                         name=name, from_state=State.SENDING.value, to_state=source.value,
                         attempt=int(item.attempt), text=text)  # fmt: skip
    try:
        runtime.store.commit(item, write, [note])
    except Moved as moved:
        state = moved.current.state if moved.current else "gone"
        logger.info("%s item %s not given back: it is now %s", name, item.id, state)
        return PACED
    if counted:  # waits for its turn at the rate (not: given back for a suppression)
        metrics.add_metric(name=resources.METRIC_SENDS_PACED, unit="Count", value=1)
    # The same message (attempt, content, receiver), in the item's lane.
    again = replace(message, delay_seconds=delay, priority=priority_of(item))
    failed = runtime.send_queue.publish([again])
    if failed:
        raise RuntimeError(f"publish of {item.id} after {name} failed (its message comes "
                           f"again): {failed[item.id]}")  # fmt: skip
    return PACED


def unclaimed(message: SendMessage, runtime: Runtime) -> str:
    """Publish an unclaimed message again as it is (the invocation is too near its timeout to
    send it): the next invocation takes it. Raises when the publish failed, so SQS delivers
    the message again instead."""
    failed = runtime.send_queue.publish([replace(message, delay_seconds=0)])
    if failed:
        raise RuntimeError(f"publish of {message.item_id} failed: {failed[message.item_id]}")
    logger.info("%s not claimed: the invocation is near its timeout; back on the queue",
                message.item_id)  # fmt: skip
    metrics.add_metric(name=resources.METRIC_SENDS_PACED, unit="Count", value=1)
    return PACED
