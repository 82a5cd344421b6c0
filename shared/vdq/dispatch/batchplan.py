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

from vdq.dispatch.pacing import reserve_batch
from vdq.workflow.lanes import PRIORITIES

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


Plan = tuple[list[tuple[int, int]], float | None]  # the order of the batch, its deadline


def plan(bodies: Sequence[Any], runtime: Runtime, remaining_ms: int | None = None) -> Plan:
    """The order a worker sends a batch in, as (index, upcoming): by the time of each send's
    slot; and the wall time past which the invocation claims nothing more (its deadline:
    vdq.dispatch.pacing.reserve_batch, from ``remaining_ms``; None: none).

    The slots of every rate in the batch are reserved first (one request per rate, as the
    first send of each would), then the sends are made in the order of their slots: a worker
    holding slots of two senders uses each one's at its time, never sleeping through one
    sender's slots (which then go unused) while it waits for the other's. Sends whose rate is
    full (given back at once) or unpaced go first; sends that do not name their rate go last
    (each reserves at its turn). When the reservation fails, the batch is taken as
    ``batch_order`` gives it (each send then paces itself as it comes)."""
    order = batch_order(bodies)
    at, deadline = reserve_batch(_groups(bodies), _lanes(bodies), runtime, remaining_ms)
    return sorted(order, key=lambda pair: at.get(pair[0], math.inf)), deadline


def _lanes(bodies: Sequence[Any]) -> dict[str, str]:
    """{rate: the lane its sends reserve as}: the most urgent lane of the batch's sends at that
    rate (a batch is one lane's, but a send published before lanes named theirs is normal)."""
    lanes: dict[str, str] = {}
    for body in bodies:
        try:
            data = json.loads(body) if isinstance(body, str) else None
        except ValueError:
            continue
        pace = data.get("pace") if isinstance(data, dict) else None
        lane = data.get("lane") or "normal" if isinstance(data, dict) else None
        if not isinstance(pace, str) or lane not in PRIORITIES:
            continue
        known = lanes.get(pace)
        if known is None or PRIORITIES.index(lane) < PRIORITIES.index(known):
            lanes[pace] = lane
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
