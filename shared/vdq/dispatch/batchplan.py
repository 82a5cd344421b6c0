"""Batch plans: the order a send function takes its SQS batch in, by provider rate.

Each rate's slots are reserved before any claim (vdq.dispatch.pacing holds the schedules); the sends
go in the order of their slots, the rates taking turns. A batch comes from one lane's queue; its
messages name their lane (``lane``, absent for normal). A bulk batch reserves its turns in the
bulk lane's own schedule for each rate, and each send its shared slot at its turn
(vdq.dispatch.pacing, ``HORIZONS``): the plan orders a bulk batch by those turns.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from vdq.core.observability import logger
from vdq.dispatch.pacing import NoSlot, current_rate, get_pacer, limit_of, units_of
from vdq.store.pacing import SES_KEY
from vdq.workflow.lanes import PRIORITIES
from vdq.workflow.sendqueue import SendMessage

if TYPE_CHECKING:
    from vdq.runtime import Runtime


def batch_order(bodies: Sequence[Any]) -> list[tuple[int, int]]:
    """The batch's messages grouped by provider rate (their ``pace``), as (index, upcoming).

    ``upcoming`` counts the sends left in the batch at the same rate, this one included: a
    worker reserves slots only for sends it will make, never for another sender's. The rates
    take turns (round robin). Messages without ``pace`` (published before it existed, or by a
    scheduled release) count as one rate of their own."""
    groups = _groups(bodies)
    order: list[tuple[int, int]] = []
    while groups:
        for key in list(groups):
            waiting = groups[key]
            order.append((waiting.popleft()[0], len(waiting) + 1))
            if not waiting:
                del groups[key]
    return order


def plan(bodies: Sequence[Any], runtime: Runtime) -> list[tuple[int, int]]:
    """The order a worker sends a batch in, as (index, upcoming): by the time of each send's
    slot.

    The slots of every rate in the batch are reserved first (one request per rate, as the
    first send of each would), then the sends are made in the order of their slots: a worker
    holding slots of two senders uses each one's at its time, never sleeping through one
    sender's slots (which then go unused) while it waits for the other's. Sends whose rate is
    full (given back at once) or unpaced go first; sends that do not name their rate go last
    (each reserves at its turn). When the reservation fails, the batch is taken as
    ``batch_order`` gives it (each send then paces itself as it comes)."""
    order = batch_order(bodies)
    try:
        at = _slot_times(_groups(bodies), _lanes(bodies), runtime)
    except Exception:
        logger.exception("the batch's slots could not be reserved; each send paces itself")
        return order
    return sorted(order, key=lambda pair: at.get(pair[0], math.inf))


def _slot_times(groups: dict[str | None, deque[tuple[int, dict[str, Any] | None]]],
                lanes: dict[str, str], runtime: Runtime) -> dict[int, float]:  # fmt: skip
    """Reserve each rate's slots for its sends; {index: when its send may go}."""
    pacer = get_pacer(runtime)
    pacer.full.clear()
    at: dict[int, float] = {}
    for key, members in groups.items():
        if key is None:
            continue
        limit = limit_of(key, runtime)
        if limit is None:
            at.update((index, -math.inf) for index, _ in members)
            continue
        method = "email" if key == SES_KEY else "sms"
        units = [units_of(method, content) for _, content in members]
        try:
            held = pacer.hold(key, limit, sum(units), lanes.get(key), first=units[0])
        except NoSlot:
            pacer.full.add(key)
            for index, _ in members:
                at[index] = -math.inf  # given back first, at no wait
            continue
        seen = pacer.seen.get(key)
        # No slot held (none reserved, or all already used): after what the schedule holds.
        last = held[-1] if held else max(pacer.wall(), (seen.tat or 0.0) if seen else 0.0)
        rate = current_rate(limit, seen, pacer.wall())
        for (index, _), n in zip(members, units, strict=True):
            if len(held) >= n:
                at[index], held = held[n - 1], held[n:]
            else:  # past what one reservation holds: after it, at the rate
                last += n / rate
                at[index], held = last, []
    return at


def _lanes(bodies: Sequence[Any]) -> dict[str, str]:
    """{rate: the lane its sends reserve as}: the most urgent lane of the batch's sends at that
    rate (a batch is one lane's, but a send published before lanes named theirs is normal)."""
    lanes: dict[str, str] = {}
    for body in bodies:
        try:
            message = SendMessage.parse(body) if isinstance(body, str) else None
        except (ValueError, KeyError, TypeError):
            continue
        if message is None or message.pace is None or message.priority not in PRIORITIES:
            continue
        known = lanes.get(message.pace)
        if known is None or PRIORITIES.index(message.priority) < PRIORITIES.index(known):
            lanes[message.pace] = message.priority
    return lanes


def _groups(bodies: Sequence[Any]) -> dict[str | None, deque[tuple[int, dict[str, Any] | None]]]:
    """The batch's messages by rate, in batch order: (index, the content it carries)."""
    groups: dict[str | None, deque[tuple[int, dict[str, Any] | None]]] = {}
    for index, body in enumerate(bodies):
        pace, content = None, None
        try:
            data = json.loads(body) if isinstance(body, str) else None
        except ValueError:
            data = None
        if isinstance(data, dict):
            pace = data.get("pace") if isinstance(data.get("pace"), str) else None
            content = data.get("content") if isinstance(data.get("content"), dict) else None
        groups.setdefault(pace, deque()).append((index, content))
    return groups
