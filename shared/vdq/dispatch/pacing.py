"""Provider rate control: every send function paces its sends to the provider's rate.

One schedule per rate is shared by the whole fleet (vdq.store.pacing): SES's account sending
rate (GetAccount, or VDQ_SES_MAX_SEND_RATE) and each Twilio sender's rate
(VDQ_TWILIO_SENDER_RATE, in segments). A worker plans its SQS batch before claiming
(``vdq.dispatch.batchplan``: each rate's slots reserved in one request, the sends made in slot
order), keeps spare slots for its next sends, and waits for each slot in turn. A slot that ends
(1/rate after its start, for each message or segment) further off than
VDQ_PACING_MAX_WAIT_SECONDS is not waited for: the item goes back to the state its claim took
it from, at the same attempt, and its message is published again with a delay (see
vdq.dispatch.giveback).

Every lane books the same schedule, so together they never exceed the rate, but not equally
far ahead. High and normal sends reserve up to the longest wait ahead. A bulk send first takes
a turn in the bulk lane's own schedule for the rate (``queue_of``: reserved, and given back when
full, exactly as the shared one is), then at that turn reserves its one slot of the shared
schedule, only while the shared schedule is less than the bulk horizon ahead (``HORIZONS``: 1 s,
or one send's slots and ``BULK_LEAD``); further ahead, it waits for it to drain, up to the
longest wait. So a bulk backlog keeps the shared schedule a slot or so ahead, never idle, and a
high send arriving meanwhile finds its slot at most that far off. The bulk queue is what keeps
bulk workers from all asking for the same few shared slots (and shows them one another's
demand, so that a worker gives back what it cannot send soon and takes other work). Why not
shares of the rate: a share kept for high sends is lost whenever none come, so a bulk-only
backlog would send at the bulk share. The price: a bulk send costs about one request for its
shared slot, where a batch reserved its slots in one. Where the batch's slots span a moment
(``BULK_BATCH_SECONDS``: from 100 emails a second, a batch of ten) a bulk send reserves the rest
of its batch's slots with its own, so at 1,000 a second the shared pace record takes a tenth of
the writes it would (bench.lanespace: high items' p99 0.49 s against 0.08 s, within the 1 s
target).

A throttling answer (SES "Maximum sending rate exceeded", Twilio 429 / 20429 or 21611) cuts the
shared rate multiplicatively; it recovers additively with time (AIMD). A throttled item goes back on
the queue the same way: throttling never makes an item ``errored``.
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vdq.core.observability import logger
from vdq.core.settings import index_shards_for
from vdq.providers import LONGEST_CALL_SECONDS
from vdq.store import QueueItemRecord
from vdq.store.pacing import SES_KEY, PaceRecords, PaceState, key_of

if TYPE_CHECKING:
    from vdq.runtime import Runtime

DECREASE = 0.7  # a throttling answer cuts the shared rate to this share of what it was
RECOVERY = 0.02  # share of the limit regained per second after a cut (additive increase)
FLOOR = 0.05  # the rate never falls below this share of the limit
CUT_COOLDOWN = 2.0  # seconds: throttling answers this soon after a cut belong to its burst
SLOT_GRACE = 1.0  # seconds a reserved slot may still be used after its time
BUSY_MEMORY = 2.0  # seconds after the schedule was last seen ahead that it is guessed busy
LIMIT_SECONDS = 300.0  # how long the SES account's rate is kept before it is read again
LIMIT_RETRY_SECONDS = 60.0  # after a failed read: unpaced for this long, then read again
PACED = "paced"  # what ``send.process`` did: the item went back on the queue for its turn
# Seconds ahead of the clock a lane's sends may reserve the schedule to (absent: the longest
# wait): bulk keeps it only this far ahead, so a high send's slot is never further off.
HORIZONS = {"bulk": 1.0}
BULK_LEAD = 0.2  # s: how much earlier than its slot a bulk worker may reserve a long slot
# s: the longest a bulk send's batch may take of the shared schedule at once (at 100 emails a
# second and more, a batch of ten): a high send finds its slot at most that much later.
BULK_BATCH_SECONDS = 0.1
# Seconds of an invocation kept after the last claim or wait for a slot: the longest provider
# call there can be, then its record and giving back the rest of the batch (RECORD_SECONDS).
# A send still in flight at the timeout would leave its item ``sending`` until its lease passed.
RECORD_SECONDS = 5.0
TIMEOUT_MARGIN = LONGEST_CALL_SECONDS + RECORD_SECONDS


def current_rate(limit: float, state: PaceState | None, now: float) -> float:
    """The shared rate at ``now``: the last cut plus the recovery since, at most ``limit``."""
    if state is None or state.rate is None or state.cut_at is None:
        return limit
    return min(limit, state.rate + RECOVERY * limit * max(0.0, now - state.cut_at))


def cut_rate(limit: float, state: PaceState | None, now: float) -> float:
    """The rate a throttling answer at ``now`` cuts to."""
    return max(FLOOR * limit, DECREASE * current_rate(limit, state, now))


class NoSlot(Exception):
    """The item's turn is more than the longest wait away: give it back for ``delay`` s."""

    def __init__(self, delay: int) -> None:
        super().__init__(f"no sending slot within the wait; next in about {delay} s")
        self.delay = delay


@dataclass
class Pacer:
    """One per process: the pace records, the slots it holds, what it last saw of each."""

    records: PaceRecords
    max_wait: float
    wall: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    slots: dict[str, deque[float]] = field(default_factory=dict)
    seen: dict[str, PaceState] = field(default_factory=dict)
    full: set[str] = field(default_factory=set)  # rates the current batch's plan found full
    deferred: dict[str, float] = field(default_factory=dict)  # when the last given back returns
    limits: dict[str, tuple[float | None, float]] = field(default_factory=dict)
    requests: int = 0  # DynamoDB requests made for pacing (the bench divides by sends)
    waited: float = 0.0  # seconds slept for slots
    # No wait for a slot ends after this wall time (``set_deadline``: the invocation's timeout
    # less TIMEOUT_MARGIN); a send whose slot is later goes back. None: no bound.
    deadline: float | None = None
    shards_warned: int = 0  # the shards check_shards last warned were needed

    def turn(self, key: str, limit: float, units: int = 1, upcoming: int = 1,
             lane: str | None = None) -> None:  # fmt: skip
        """Wait for ``units`` slots of ``key``'s schedule; NoSlot when they are too far off.

        ``upcoming``: sends this worker expects to make soon (the rest of its batch), reserved
        together so that a batch costs one request. ``lane``: the send's priority (its horizon,
        ``HORIZONS``); a lane with a horizon waits for the schedule to drain into it, up to the
        longest wait (its turn in the lane's queue included: one send never waits longer than
        one of another lane, and a batch of them ends within the send function's timeout)."""
        until = min(self.wall() + self.max_wait, self.deadline or math.inf)
        if lane in HORIZONS:  # first its turn among its lane's sends
            self._queue(key, limit, units, upcoming, lane)
            # At its turn its slot only; at a rate where the rest of its batch's slots span a
            # moment (BULK_BATCH_SECONDS), theirs too: one request a batch, as other lanes make.
            rate = current_rate(limit, self.seen.get(key), self.wall())
            if upcoming / rate > BULK_BATCH_SECONDS:
                upcoming = units
        now = self.wall()
        held = self._fresh(key, now)
        while len(held) < units:
            room = self._reserve(key, limit, units - len(held), max(units, upcoming) - len(held),
                                 now, lane, until)  # fmt: skip
            if room is None:
                break
            if room > 0:
                self.waited += room
                self.sleep(room)
            now = self.wall()
            held = self._fresh(key, now)
        self._take(held, units, now)

    def _take(self, held: deque[float], units: int, now: float, early: float = 0.0) -> None:
        """Use ``units`` held slots: wait until the last one's time (less ``early``)."""
        for _ in range(units - 1):
            held.popleft()
        at = held.popleft() - early
        if self.deadline is not None and max(at, now) > self.deadline:
            # Past the invocation's time: a timeout would leave the claimed item ``sending``
            # until its lease passed and the lease sweep made it errored.
            raise NoSlot(max(1, math.ceil(at - now)))
        if at > now:
            self.waited += at - now
            self.sleep(at - now)

    def hold(self, key: str, limit: float, units: int, lane: str | None = None,
             first: int = 1) -> list[float]:  # fmt: skip
        """Reserve up to ``units`` slots ahead of the sends that will take them (a batch's
        plan); the times of the slots now held, in order (a lane with a horizon: of its turns in
        its queue, ``_queue``). ``first``: the slots the first of those sends takes, reserved
        together or not at all, as its turn would (an SMS of more segments than the longest
        wait holds waits for an idle schedule: a plan holding only what fits would keep it
        busy, and the send given back, for ever). NoSlot when the schedule is full."""
        if lane in HORIZONS:
            # A new batch: shared slots the last one held for sends that never came to their
            # turn (suppressed, moved before the claim) are past. Sent on now they would go
            # beside the schedule's current slots, over the rate; those still ahead may serve.
            self._fresh(key, self.wall(), grace=0.0)
            return self.hold(queue_of(key, lane), self._lane_rate(key, limit), units, first=first)
        now = self.wall()
        held = self._fresh(key, now)
        if len(held) < units:
            deferred = self.deferred.get(key)
            until = now + self.max_wait
            need = max(1, first - len(held))
            try:
                try:
                    self._reserve(key, limit, need, units - len(held), now, lane, until)
                except NoSlot:
                    # All of them did not fit; as many as fit by what the refusal showed (no
                    # request when not even one does).
                    self._reserve(key, limit, need, units - len(held), now, lane, until)
            except NoSlot:
                if deferred is not None:  # nothing given back yet: only the sends will be
                    self.deferred[key] = deferred
                else:
                    self.deferred.pop(key, None)
                raise
        return list(held)

    def _queue(self, key: str, limit: float, units: int, upcoming: int, lane: str) -> None:
        """Wait for the send's turn in its lane's own schedule (``queue_of``), reserved up to the
        longest wait ahead as the shared one is by the other lanes, then until its slot in the
        shared schedule can be reserved within the lane's horizon. NoSlot when that turn is
        too far off: the lane's workers see one another's demand there, and each holds turns
        of its own, so they do not all ask the shared schedule for the same slots."""
        queue = queue_of(key, lane)
        if key in self.full:
            self.full.add(queue)
        now = self.wall()
        held = self._fresh(queue, now)
        if len(held) < units:
            self._reserve(queue, self._lane_rate(key, limit), units - len(held),
                          max(units, upcoming) - len(held), now)  # fmt: skip
        # At the first of its turns, a moment early: its slots in the shared schedule are
        # reserved while the send before them still runs, and then run along its turns (at
        # the last turn, a send of many segments would wait for them twice over).
        self._take(held, 1, now, early=BULK_LEAD / 2)
        for _ in range(units - 1):
            held.popleft()

    def _lane_rate(self, key: str, limit: float) -> float:
        """A lane's queue runs at the shared schedule's rate as last seen (after a cut too)."""
        return current_rate(limit, self.seen.get(key), self.wall())

    def _fresh(self, key: str, now: float, grace: float = SLOT_GRACE) -> deque[float]:
        """The slots of ``key`` held and still usable at ``now`` (``grace`` after their time)."""
        held = self.slots.setdefault(key, deque())
        while held and held[0] < now - grace:
            held.popleft()
        return held

    def reach(self, rate: float, units: int, lane: str | None) -> float:
        """How far ahead of the clock a send of ``units`` slots in ``lane`` may reserve."""
        horizon = HORIZONS.get(lane or "")
        if horizon is None:
            return self.max_wait
        return min(self.max_wait, max(horizon, units / rate + BULK_LEAD))

    def _reserve(self, key: str, limit: float, need: int, want: int, now: float,
                 lane: str | None = None, until: float | None = None) -> float | None:  # fmt: skip
        """Reserve ``need`` to ``want`` slots within the lane's reach: None when reserved, else
        the seconds until the schedule drains into the lane's reach (a lane with a horizon,
        when its turn is before ``until``). NoSlot when the turn is too far off."""
        state = self.seen.get(key)
        rate = current_rate(limit, state, now)
        reach = self.reach(rate, need, lane)
        ahead = max(0.0, (state.tat or now) - now) if state is not None else 0.0
        # As many as fit within the lane's reach, by what was last seen of the schedule.
        count = max(need, min(want, math.floor(rate * (reach - ahead))))
        length = count / rate
        slack = reach - length
        if slack < 0 and lane not in HORIZONS:
            # Longer than the longest wait (an SMS of many segments, or a cut rate): its first
            # slot may be up to the longest wait off, as any other send's. Only on an idle
            # schedule, it would never go while another lane keeps the schedule busy (a bulk
            # backlog from the same sender keeps it a moment ahead of the clock for ever).
            slack = reach
        latest = now + max(0.0, slack)
        if key in self.full and state is not None and state.tat is not None:
            # The batch's plan found this rate full: the rest of the batch at this rate goes
            # back too, rather than a slot at a time as the schedule drains (a worker sleeping
            # on a rate another worker keeps busy while other senders' sends wait).
            raise NoSlot(self._delay(key, max(state.tat, latest), latest, now, need / rate))
        if state is not None and state.tat is not None and state.tat > latest:
            # The schedule only moves on (it restarts only once it is behind the clock): a
            # schedule seen past the lane's reach is past it still, so no request is needed.
            return self._room(key, state.tat, latest, reach, rate, need, want, now, until)
        # The schedule is likely still busy if it ran ahead of the clock a moment ago (other
        # workers keep it ahead); a wrong guess costs one more request.
        busy = state is not None and state.tat is not None and state.tat >= now - BUSY_MEMORY
        reservation = self.records.reserve(key, length, now, latest, busy=busy)
        self.requests += reservation.requests
        self.seen[key] = reservation.state
        if reservation.start is None:
            tat = reservation.state.tat or now
            return self._room(key, tat, latest, reach, rate, need, want, now, until)
        # A cut this worker had not seen (another's throttling answer): the slots reserved at
        # the rate it saw span ``length``; only as many as the cut rate fits in it are kept.
        cut = current_rate(limit, reservation.state, now)
        if cut < rate:
            count, rate = max(need, math.floor(length * cut + 1e-9)), cut
        self.slots[key].extend(reservation.start + i / rate for i in range(count))
        return None

    def _room(self, key: str, tat: float, latest: float, reach: float, rate: float, need: int,
              want: int, now: float, until: float | None) -> float:  # fmt: skip
        """The schedule runs past ``latest`` until ``tat``: the seconds until it has drained
        enough for the next reservation, when the turn after it is before ``until`` and the
        lane waits (``reach`` shorter than the longest wait); NoSlot otherwise."""
        if until is None or reach >= self.max_wait or tat > until:
            raise NoSlot(self._delay(key, tat, latest, now, need / rate))
        # Ask again once the slot fits; workers waiting together wake apart (a quarter of the
        # time to spare), so that fewer find it taken.
        spare = max(0.0, reach - want / rate)
        # At least a moment: a reservation refused by rounding is not asked again at once.
        return max(0.001, tat - reach + want / rate - now + random.uniform(0, spare / 4))

    def _delay(self, key: str, tat: float, latest: float, now: float, length: float) -> int:
        """Seconds until the schedule has room for a send of ``length`` seconds: the sends
        this worker gives back one after another come back one after another at the rate
        (not all at the moment the schedule frees, when only the first would find room), and
        spread over the schedule already reserved so that other workers' do not collide."""
        start = max(now + tat - latest, self.deferred.get(key, 0.0))
        self.deferred[key] = start + length
        jitter = random.uniform(0, max(self.max_wait, tat - now) / 2)
        return max(1, math.ceil(start - now + jitter))

    def slow_down(self, key: str, limit: float) -> bool:
        """A throttling answer: cut the shared rate (once per burst), drop the held slots."""
        now = self.wall()
        self.slots.pop(key, None)
        rate = cut_rate(limit, self.seen.get(key), now)
        cut, state = self.records.cut(key, rate, now, since=now - CUT_COOLDOWN)
        self.requests += 1
        self.seen[key] = state
        if cut:
            logger.warning("throttled: the pace of %s is cut to %.2f/s", key, rate)
        return cut

    def check_shards(self, rate: float, shards: int) -> None:
        """Warn (once a container for each shortfall) when the sparse indexes' shards are fewer
        than SES's rate needs: their partitions would take more than 30% of their writes."""
        needed = index_shards_for(rate)
        if shards < needed and self.shards_warned != needed:
            self.shards_warned = needed
            logger.warning("VDQ_INDEX_SHARDS is %d: at SES's rate of %.0f emails a second the "
                           "open-items and timer indexes need %d shards; raise it", shards, rate,
                           needed)  # fmt: skip

    def limit(self, name: str, read: Callable[[], float]) -> float | None:
        """A provider limit read by ``read``, cached; None (unpaced) while it cannot be read."""
        now = self.wall()
        value, until = self.limits.get(name, (None, 0.0))
        if now < until:
            return value
        try:
            value, until = read(), now + LIMIT_SECONDS
        except Exception as exc:
            logger.warning("the rate of %s could not be read (%s); sends are not paced for "
                           "%d s", name, exc, LIMIT_RETRY_SECONDS)  # fmt: skip
            value, until = None, now + LIMIT_RETRY_SECONDS
        self.limits[name] = (value, until)
        return value


Member = tuple[int, dict[str, Any] | None]  # a message of a batch: its index, its content


def reserve_batch(groups: Mapping[str | None, Sequence[Member]], lanes: Mapping[str, str],
                  runtime: Runtime, remaining_ms: int | None = None,
                  ) -> tuple[dict[int, float], float | None]:  # fmt: skip
    """A batch's plan (vdq.dispatch.batchplan): the invocation's deadline from its remaining
    time (``set_deadline``), then each rate's slots reserved for its sends (``groups``: the
    batch's messages by rate, as (index, the content it carries); ``lanes``: the lane each
    rate's sends reserve as). Returns {index: when its send may go} and the deadline (the
    wall time past which the invocation claims nothing more; None: no bound). A reservation
    that fails leaves each send to pace itself as it comes."""
    pacer = get_pacer(runtime)
    set_deadline(runtime, remaining_ms)
    pacer.full.clear()
    at: dict[int, float] = {}
    try:
        for key, members in groups.items():
            if key is not None:
                at.update(_slot_times(pacer, key, list(members), lanes.get(key), runtime))
    except Exception:
        logger.exception("the batch's slots could not be reserved; each send paces itself")
        return {}, pacer.deadline
    return at, pacer.deadline


def _slot_times(pacer: Pacer, key: str, members: list[Member], lane: str | None,
                runtime: Runtime) -> dict[int, float]:  # fmt: skip
    """Reserve one rate's slots for its sends; {index: when its send may go}."""
    limit = limit_of(key, runtime)
    if limit is None:
        return {index: -math.inf for index, _ in members}
    method = "email" if key == SES_KEY else "sms"
    units = [units_of(method, content) for _, content in members]
    try:
        held = pacer.hold(key, limit, sum(units), lane, first=units[0])
    except NoSlot:
        pacer.full.add(key)
        return {index: -math.inf for index, _ in members}  # given back first, at no wait
    at: dict[int, float] = {}
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


def past_deadline(runtime: Runtime) -> bool:
    """Whether this invocation is too near its timeout to claim another item."""
    pacer = get_pacer(runtime)
    return pacer.deadline is not None and pacer.wall() > pacer.deadline


def set_deadline(runtime: Runtime, remaining_ms: int | None) -> None:
    """Bound the waits of this invocation's sends by its remaining time (None: unbounded)."""
    pacer = get_pacer(runtime)
    if remaining_ms is None:
        pacer.deadline = None
        return
    pacer.deadline = pacer.wall() + remaining_ms / 1000 - TIMEOUT_MARGIN
    if remaining_ms / 1000 <= TIMEOUT_MARGIN:  # called at the invocation's start: its timeout
        logger.error("the send function's timeout (%.0f s left at the start) is within the "
                     "%g s it keeps for its last send: it claims nothing and publishes every "
                     "message again; raise its timeout", remaining_ms / 1000,
                     TIMEOUT_MARGIN)  # fmt: skip


def queue_of(key: str, lane: str) -> str:
    """The schedule a lane with a horizon takes its turns in before the shared one."""
    return f"{key}#{lane}"


def get_pacer(runtime: Runtime) -> Pacer:
    """The runtime's pacer (``runtime.overrides["pacer"]`` when a test or the bench sets one)."""
    pacer = runtime.overrides.get("pacer")
    if pacer is None:
        records = PaceRecords(runtime.client("dynamodb"), runtime.settings.table_name)
        clock = runtime.clock
        # The runtime's clock: a test's fake clock moves on (advance) where time would pass.
        sleep = getattr(clock, "advance", None) or time.sleep
        pacer = Pacer(records, runtime.settings.pacing_max_wait_seconds,
                      wall=lambda: clock.now().timestamp(), sleep=sleep)  # fmt: skip
        runtime.overrides["pacer"] = pacer
    return pacer


def limit_of(key: str, runtime: Runtime) -> float | None:
    """The limit per second of the rate ``key`` names, or None when unpaced."""
    if key != SES_KEY:
        return runtime.settings.twilio_sender_rate
    pacer, configured = get_pacer(runtime), runtime.settings.ses_max_send_rate
    if configured is not None:
        limit: float | None = configured
    else:
        from vdq.providers.ses import get_ses

        limit = pacer.limit(SES_KEY, lambda: get_ses(runtime).max_send_rate())
    if limit is not None:
        pacer.check_shards(limit, runtime.settings.index_shards)
    return limit


def units_of(method: str, content: dict[str, Any] | None) -> int:
    """Slots one send takes: one per email, one per segment of an SMS (one when unknown)."""
    if method == "email" or content is None:
        return 1
    from vdq.intake import segments

    return segments.count(content.get("body") or "").segments


def rate_of(item: QueueItemRecord, content: dict[str, Any],
            runtime: Runtime) -> tuple[str, float | None, int]:  # fmt: skip
    """(schedule key, its limit per second or None when unpaced, slots this send takes)."""
    key = key_of(item.method, item.sender)
    return key, limit_of(key, runtime), units_of(item.method, content)


def gate(item: QueueItemRecord, content: dict[str, Any], runtime: Runtime,
         upcoming: int = 1) -> float:  # fmt: skip
    """Wait for the item's turn at its provider's rate; NoSlot when it is too far off.
    Returns the seconds waited."""
    key, limit, units = rate_of(item, content, runtime)
    if limit is None:
        return 0.0
    pacer = get_pacer(runtime)
    before = pacer.waited
    try:
        pacer.turn(key, limit, units, upcoming, item.priority or "normal")  # its lane
    except NoSlot:
        raise
    except Exception:
        # The pace record could not be read or written: send unpaced rather than fail the
        # item; a provider that throttles still slows the fleet down.
        logger.exception("pacing of %s failed; %s is sent unpaced", key, item.id)
    return pacer.waited - before
