"""The deployed priority lanes at the provider's rate, simulated on virtual time (bench.virtual),
with the pacing decisions made by the product's code (``bench/lanespace.py`` prints its
figures; ``bench/lanes.py`` simulates the lanes without the rate):

- each simulated send function instance (a poller of a lane's event source mapping, as many as
  ``infra.config.DeployConfig`` gives each lane) is a thread with its own real
  ``vdq.dispatch.pacing.Pacer`` (its held slots, what it last saw), whose ``wall`` and ``sleep`` are
  the virtual clock's;
- the pace records are the real ``vdq.store.pacing.PaceRecords`` over ``PaceTable``, an
  in-memory table that evaluates the update and condition expressions ``PaceRecords`` sends;
- each invocation runs the send handler's pacing path: ``pacing.set_deadline`` from the send
  function's timeout, ``vdq.dispatch.batchplan.plan`` over the batch's real message bodies
  (``SendMessage.body``), then for each record in the plan's order ``pacing.gate`` (what
  ``vdq.dispatch.send.process`` calls), the provider call after it (and after a second suppression
  read when it waited long: ``suppression.check_again``), or on ``NoSlot`` the give-back: the
  message is published again with its delay (vdq.dispatch.giveback).

Modelled as ``bench/lanes.py`` does: each lane's queue (its messages visible oldest first, a
poller takes up to a batch, waiting up to the lane's batching window from the first visible
one to fill it; a message given back is visible again after its delay, behind those waiting),
a batch's start one ReceiveMessage and the Lambda base time after it is taken, and the time of
each request at the bill's latencies (prices.json ``assumptions``): before the pacing, the
send's suppression read and claim (two DynamoDB requests, counted on moto: a send makes a
GetItem and two UpdateItems, one of them pacing's, and its record's TransactWriteItems); the
pacing requests themselves (one DynamoDB latency each, in PaceTable); the provider call; the
record after it; a give-back's write and publish. The provider takes every send (its own
throttling is not modelled: the figures report the most sends in any 10 s, and the closest two
sends, against the rate).
Not modelled: cold starts, the high lane's mapping scaling (its pollers are all there from the
start), DynamoDB or SQS errors.

Only the part of the backlog that can be sent in the simulated time is ever received, but the
bulk queue holds every message (100,000 visible at the start), so its pollers always find full
batches, as they would. With ``shared_pacer`` every lane's poller uses one Pacer, as the local
stack's (one process) do: how ``bench/lanespace.py`` compares with ``bench/stacklanes.py``.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from bench.virtual import PaceTable, VirtualClock

BULK = 100_000
SECONDS = 600.0  # of high arrivals
HIGH_START = 5.0  # s: the first high item, once the bulk lane is sending
SEED = 7
SENDER = "shop@example.com"


@dataclass(frozen=True)
class Timings:
    """Seconds of each step (prices.json's per-request latencies)."""

    pickup: float  # the mapping's ReceiveMessage
    base: float  # Lambda's own time per invocation
    enqueue: float  # POST /emails until its message is visible
    before: float  # a send's requests before its pacing: suppression read, claim
    ddb: float  # one pacing request
    provider: float  # the provider call
    after: float  # the send's record
    give_back: float  # a give-back's write and publish

    @classmethod
    def of(cls, prices: dict[str, Any], enqueue: float | None = None) -> Timings:
        latency = {k: v / 1000 for k, v in prices["assumptions"]["request_latency_ms"].items()}
        base = prices["assumptions"]["lambda_base_ms"] / 1000
        return cls(pickup=latency["sqs"], base=base,
                   enqueue=enqueue if enqueue is not None else base + 3 * latency["dynamodb"]
                   + latency["sqs"],
                   before=2 * latency["dynamodb"], ddb=latency["dynamodb"],
                   provider=latency["sesv2"], after=latency["dynamodb"],
                   give_back=latency["dynamodb"] + latency["sqs"])  # fmt: skip


@dataclass
class Scenario:
    rate: float  # SES's sending rate, emails per second
    bulk: int = BULK
    high: int | None = None  # high items (None: as many as fit in ``seconds``)
    interval: float = 1.0  # seconds between high items (on average, when ``poisson``)
    poisson: bool = True  # high items at random (Poisson) times; False: every ``interval``
    seconds: float = SECONDS
    concurrency: dict[str, int] | None = None  # pollers per lane (None: as deployed)
    windows: dict[str, float] | None = None  # batching window per lane (None: as deployed)
    shared_pacer: bool = False  # one Pacer for every poller (the local stack)
    max_wait: float = 5.0  # VDQ_PACING_MAX_WAIT_SECONDS' default
    seed: int = SEED
    drain: float = 60.0  # s after the last high item the run may go on to send it
    # Sensitivity (bench/lanespace.py's figures keep the defaults): every request's latency
    # drawn from a lognormal whose median is prices.json's and whose p99 is ``tail`` times it
    # (1: constant); ``cpu`` s of the function's own time per send (MIME, signing, logging),
    # which the Timings leave out; ``burst`` high items arriving together at the first
    # arrival, on top of the others.
    tail: float = 1.0
    cpu: float = 0.0
    burst: int = 0
    # One send function serves every lane's mapping: an invocation runs in any idle warm
    # environment, whose Pacer (its held slots, what it saw, ``deferred``) another lane's
    # batches used before. True: each batch takes the longest idle environment of one
    # pool (a new one when none is idle); False: each poller keeps its own, as deployed per lane.
    environments: bool = False
    # As deployed, VDQ_SES_MAX_SEND_RATE is unset: each Pacer reads the rate with SES's
    # GetAccount (one provider latency) when it first paces and every LIMIT_SECONDS after.
    read_limit: bool = False
    epoch: float = 0.0  # the virtual clock's start (real pace records hold epoch seconds)
    # Sending threads per send function (vdq.dispatch.sendbatch; None: VDQ_SEND_PARALLELISM's
    # default): the main thread waits for a free one before it claims the next message, hands each
    # send over at its slot and goes on; the invocation ends when the last send is recorded.
    parallelism: int | None = None
    # SES's enforcement of its rate: it refuses a call when ``rate + ses_burst`` calls reached
    # it in the trailing second (SES documents short bursts over the rate, not their size;
    # 0: none at all). The refusal is settled as vdq.dispatch.giveback.throttled does: the main
    # thread cuts the shared pace (Pacer.slow_down) and gives the item back. None: SES accepts all.
    ses_burst: int | None = None
    # The deploy's vdq:peakSendRate (None: unset), which sizes the lanes' concurrency and the
    # index shards (infra.config) as a deploy for that rate gets them.
    peak: float | None = None


class _Context:
    """A CDK node's context as infra.config reads it."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def try_get_context(self, key: str) -> Any:
        return self.values.get(key)


def deployed(peak: float | None = None) -> tuple[dict[str, int], dict[str, float]]:
    from infra.config import DeployConfig

    from vdq.core import resources

    context = {} if peak is None else {"vdq:peakSendRate": peak}
    config = DeployConfig.from_context(_Context(context))  # type: ignore[arg-type]
    return ({"high": config.high_send_max_concurrency, "normal": config.send_max_concurrency,
             "bulk": config.bulk_send_max_concurrency},
            {"high": resources.HIGH_SEND_BATCHING_WINDOW_SECONDS,
             "normal": resources.SEND_BATCHING_WINDOW_SECONDS,
             "bulk": resources.SEND_BATCHING_WINDOW_SECONDS})  # fmt: skip


@dataclass
class Queue:
    """One lane's SQS queue: messages (item number, enqueued at, visible at) visible oldest
    first; those not yet visible in order of their time."""

    name: str
    window: float
    visible: deque[tuple[int, float, float]] = field(default_factory=deque)
    later: deque[tuple[int, float, float]] = field(default_factory=deque)  # sorted by visible at

    def put(self, clock: VirtualClock, number: int, enqueued: float, at: float) -> None:
        entry = (number, enqueued, at)
        if at <= clock.now:
            self.visible.append(entry)
        else:  # give-backs come in roughly in order: insert from the back
            index = len(self.later)
            while index and self.later[index - 1][2] > at:
                index -= 1
            self.later.insert(index, entry)
        clock.notify(self.name, at)

    def take(self, clock: VirtualClock, size: int) -> list[tuple[int, float, float]]:
        """A poller's batch: blocks (virtual time) until one is there, by the window."""
        while True:
            while self.later and self.later[0][2] <= clock.now:
                self.visible.append(self.later.popleft())
            if self.visible:
                full_at = clock.now if len(self.visible) >= size else (
                    self.later[size - len(self.visible) - 1][2]
                    if len(self.later) >= size - len(self.visible) else float("inf"))
                until = min(full_at, self.visible[0][2] + self.window)
                if until <= clock.now:
                    return [self.visible.popleft() for _ in range(min(size, len(self.visible)))]
                clock.wait(until, self.name)
            else:
                clock.wait(self.later[0][2] if self.later else float("inf"), self.name)


@dataclass
class Outcome:
    high: list[float] = field(default_factory=list)  # seconds, enqueue -> provider call
    sends: list[tuple[float, str]] = field(default_factory=list)  # (provider call at, lane)
    landed: list[float] = field(default_factory=list)  # when each call reaches the provider
    given_back: dict[str, int] = field(default_factory=dict)
    delays: dict[str, list[int]] = field(default_factory=dict)  # give-backs' delays by lane
    throttled: dict[str, int] = field(default_factory=dict)  # calls SES refused, by lane
    pacing_requests: dict[str, int] = field(default_factory=dict)


def arrivals_of(scenario: Scenario) -> list[float]:
    """When the high items are enqueued: after HIGH_START, at random times (Poisson,
    ``interval`` apart on average) or every ``interval`` from a random phase: the seed's, so
    that high items do not all arrive at the same point of the rate's slots."""
    high = scenario.high
    if high is None:
        high = int(scenario.seconds // scenario.interval)
    rng = random.Random(scenario.seed)
    at, arrivals = scenario.epoch + HIGH_START + rng.uniform(0, scenario.interval), []
    for _ in range(high):
        arrivals.append(at)
        at += rng.expovariate(1 / scenario.interval) if scenario.poisson else scenario.interval
    return sorted(arrivals[:1] * scenario.burst + arrivals)


def ideal(scenario: Scenario, timings: Timings, phases: int = 10) -> list[float]:
    """The high items' latencies (enqueue to provider call) under the oldest-first schedule that
    keeps to the rate and fills it: a send every 1/rate s, each given to the oldest high item ready
    for it, else to bulk; for each of ``phases`` phases of those sends (the same arrivals). A
    high item is ready after the shortest path there is: its enqueue, one ReceiveMessage, the
    Lambda base time and the send's requests before the call (no pacing request, no batching
    window, no other item's claim first). A pacer that fills the rate with sends 1/rate apart
    gives high items no earlier slots than these (each goes to a waiting high item first, in
    arrival order); to do better it must leave slots empty (use under 100%) or send two within
    1/rate (over the rate). Its longest wait is the least there is; its percentiles are not
    (``ideal_percentile`` is the bound for those)."""
    path = timings.enqueue + timings.pickup + timings.base + timings.before
    gap, arrivals, out = 1.0 / scenario.rate, arrivals_of(scenario), []
    for phase in (gap * k / phases for k in range(phases)):
        free = -math.inf
        for arrived in arrivals:
            slot = phase + math.ceil((arrived + path - phase) / gap - 1e-9) * gap  # the first
            at = max(slot, free)  # a slot no earlier high item took
            free = at + gap
            out.append(at - arrived)
    return out


def _on_time(arrivals: list[float], gap: float, phase: float, path: float,
             limit: float) -> int:  # fmt: skip
    """How many of the high items the full rate's slots (every ``gap`` s from ``phase``) can
    send within ``limit`` of their enqueue: each slot to the oldest ready item that can still
    make it (an item past it is sent after all, in a slot no such item wants: not counted)."""
    met, i, waiting, slot = 0, 0, deque[float](), -math.inf
    while i < len(arrivals) or waiting:
        if not waiting:
            slot = max(slot, phase + math.ceil((arrivals[i] + path - phase) / gap - 1e-9) * gap)
        while i < len(arrivals) and arrivals[i] + path <= slot + 1e-9:
            waiting.append(arrivals[i])
            i += 1
        while waiting and waiting[0] + limit < slot - 1e-9:
            waiting.popleft()
        if waiting:
            waiting.popleft()
            met += 1
        slot += gap
    return met


def ideal_percentile(scenarios: list[Scenario], timings: Timings, share: float,
                     phases: int = 10) -> float:  # fmt: skip
    """The lowest ``share`` percentile (nearest rank, as ``percentile``) of the high items'
    latencies that any schedule on the full rate's slots reaches, pooled as ``ideal``'s over
    the scenarios and phases. Not ``ideal``'s own: giving every slot to the oldest ready item
    minimizes the longest wait, not a percentile; a schedule that lets an item already late
    wait for one that can still make it has fewer past any latency (at 1/s with a high item
    every 5 s: p99 2.10 s where ``ideal`` has 2.22 s, seeds 1-5)."""
    path = timings.enqueue + timings.pickup + timings.base + timings.before
    runs = [(arrivals_of(s), 1.0 / s.rate, k / phases / s.rate)
            for s in scenarios for k in range(phases)]  # fmt: skip
    total = sum(len(arrivals) for arrivals, _, _ in runs)
    rank = max(1, min(total, round(share * total + 0.5)))
    low = path - 1e-9
    high = percentile([x for s in scenarios for x in ideal(s, timings, phases)], share)
    for _ in range(40):  # the ``rank``-th shortest latency is at most ``high``
        middle = (low + high) / 2
        if sum(_on_time(a, gap, phase, path, middle) for a, gap, phase in runs) >= rank:
            high = middle
        else:
            low = middle
    return high


def simulate(scenario: Scenario, timings: Timings) -> dict[str, Any]:
    """One run: the figures of ``scenario`` (see ``summary``)."""
    from vdq.core import resources
    from vdq.core.settings import index_shards_for
    from vdq.dispatch import batchplan, giveback, pacing
    from vdq.dispatch.pacing import NoSlot, Pacer
    from vdq.results import suppression
    from vdq.store.pacing import SES_KEY, PaceRecords
    from vdq.workflow.sendqueue import SendMessage

    random.seed(scenario.seed)  # vdq.dispatch.pacing's jitter
    parallelism = scenario.parallelism or default_parallelism()
    concurrency, windows = deployed(scenario.peak)
    concurrency = scenario.concurrency or concurrency
    windows = scenario.windows or windows
    clock = VirtualClock(scenario.epoch)
    table = PaceTable(timings.ddb, clock.sleep)
    table.sample = lambda: lat(timings.ddb)
    records = PaceRecords(table, "vdq")
    settings = SimpleNamespace(ses_max_send_rate=None if scenario.read_limit else scenario.rate,
                               twilio_sender_rate=1.0,
                               pacing_max_wait_seconds=scenario.max_wait,
                               index_shards=index_shards_for(scenario.rate))  # fmt: skip
    queues = {lane: Queue(lane, windows[lane]) for lane in concurrency}
    for number in range(scenario.bulk):
        queues["bulk"].visible.append((number, scenario.epoch, scenario.epoch))
    first = scenario.bulk
    arrivals = arrivals_of(scenario)
    spread = random.Random(scenario.seed + 1)
    sigma = math.log(scenario.tail) / 2.326  # z of the 99th percentile

    def lat(median: float) -> float:
        return median * math.exp(spread.gauss(0.0, sigma)) if sigma else median

    for n, at in enumerate(arrivals):
        queues["high"].later.append((first + n, at, at + lat(timings.enqueue)))
    queues["high"].later = deque(sorted(queues["high"].later, key=lambda e: e[2]))
    out = Outcome()
    accepted: list[float] = []  # when each call SES took reached it, in order

    def ses_takes(at: float) -> bool:
        if scenario.ses_burst is None:
            return True
        recent = bisect.bisect_right(accepted, at) - bisect.bisect_right(accepted, at - 1.0)
        if recent >= scenario.rate + scenario.ses_burst:
            return False
        bisect.insort(accepted, at)
        return True
    shared = Pacer(records, scenario.max_wait, wall=clock.wall, sleep=clock.sleep)
    pacers: list[tuple[str, Pacer]] = []
    idle: list[Pacer] = []  # warm environments' pacers (``environments``)
    made: list[Pacer] = []

    def worker(lane: str) -> Any:
        pacer = shared if scenario.shared_pacer else Pacer(
            records, scenario.max_wait, wall=clock.wall, sleep=clock.sleep)  # fmt: skip
        if not scenario.environments:
            pacers.append((lane, pacer))
        # What the pacing path reads of a Runtime: its settings and the pacer it holds.
        runtime: Any = SimpleNamespace(overrides={"pacer": pacer}, settings=settings)

        def get_account() -> float:
            clock.sleep(lat(timings.provider))
            return scenario.rate

        runtime.overrides["ses_provider"] = SimpleNamespace(max_send_rate=get_account)
        queue = queues[lane]
        refused: list[tuple[float, int, float]] = []  # (answered at, number, enqueued)

        def settle(until: float) -> None:
            """The refusals answered by ``until``, as vdq.dispatch.giveback.throttled."""
            for entry in [r for r in refused if r[0] <= until]:
                refused.remove(entry)
                _, number, enqueued = entry
                pacer = runtime.overrides["pacer"]
                pacer.slow_down(SES_KEY, scenario.rate)
                rate = pacing.current_rate(scenario.rate, pacer.seen.get(SES_KEY),
                                           clock.wall())  # fmt: skip
                delay = giveback.throttled_delay(1, rate, scenario.max_wait, lane)
                clock.sleep(lat(timings.give_back))
                out.throttled[lane] = out.throttled.get(lane, 0) + 1
                queue.put(clock, number, enqueued, clock.now + delay)

        def work() -> None:
            while True:
                batch = queue.take(clock, resources.SEND_BATCH_SIZE)
                if scenario.environments:
                    if not idle:
                        made.append(Pacer(records, scenario.max_wait, wall=clock.wall,
                                          sleep=clock.sleep))  # fmt: skip
                        idle.append(made[-1])
                    runtime.overrides["pacer"] = env = idle.pop(0)
                    before = env.requests
                clock.sleep(lat(timings.pickup) + lat(timings.base))
                bodies = [SendMessage(f"I{n}", 1, content={"subject": lane}, receiver=f"r{n}",
                                      priority=lane, pace="ses").body() for n, _, _ in batch]
                busy: list[float] = []  # when each sending thread's send is recorded
                timeout_ms = resources.SEND_FUNCTION_TIMEOUT_SECONDS * 1000
                for index, upcoming in batchplan.plan(bodies, runtime, timeout_ms)[0]:
                    number, enqueued, _ = batch[index]
                    busy = [t for t in busy if t > clock.now]
                    if len(busy) >= parallelism:  # Batch.make_room: a free thread first
                        clock.sleep(min(busy) - clock.now)
                        busy = [t for t in busy if t > clock.now]
                    settle(clock.now)
                    if pacing.past_deadline(runtime):  # published again, unclaimed
                        queue.put(clock, number, enqueued, clock.now)
                        continue
                    clock.sleep(lat(timings.before / 2) + lat(timings.before / 2) + scenario.cpu)
                    item: Any = SimpleNamespace(id=f"I{number}", method="email", sender=SENDER,
                                           priority=lane)  # fmt: skip
                    try:
                        waited = pacing.gate(item, {"subject": lane}, runtime, upcoming)
                    except NoSlot as no_slot:
                        clock.sleep(lat(timings.give_back))
                        out.given_back[lane] = out.given_back.get(lane, 0) + 1
                        out.delays.setdefault(lane, []).append(no_slot.delay)
                        queue.put(clock, number, enqueued, clock.now + no_slot.delay)
                        continue
                    if waited > suppression.RECHECK_AFTER_WAIT_SECONDS:
                        clock.sleep(lat(timings.ddb))  # the receiver's suppression read again
                    provider = lat(timings.provider)
                    if ses_takes(clock.now + provider / 2):
                        out.sends.append((clock.now, lane))
                        if lane == "high":
                            out.high.append(clock.now - enqueued)
                        out.landed.append(clock.now + provider / 2)
                        recorded = provider + lat(timings.after)
                    else:  # the throttling answer, settled by the main thread
                        recorded = provider
                        refused.append((clock.now + provider, number, enqueued))
                    if parallelism == 1:  # in the main thread
                        clock.sleep(recorded)
                        settle(clock.now)
                    else:
                        busy.append(clock.now + recorded)
                if busy:  # the invocation ends when its last send is recorded
                    clock.sleep(max(busy) - clock.now)
                settle(clock.now)
                if scenario.environments:
                    out.pacing_requests[lane] = (out.pacing_requests.get(lane, 0)
                                                 + env.requests - before)  # fmt: skip
                    idle.append(env)

        return work

    workers = [worker(lane) for lane, n in concurrency.items() for _ in range(n)]
    started = time.perf_counter()
    until = (arrivals[-1] if arrivals else 0.0) + scenario.drain
    clock.run(workers, until)
    if scenario.shared_pacer:  # one pacer: its requests are every lane's
        out.pacing_requests["all"] = shared.requests
    for lane, pacer in pacers if not scenario.shared_pacer else []:
        out.pacing_requests[lane] = out.pacing_requests.get(lane, 0) + pacer.requests
    return summary(scenario, out, arrivals, time.perf_counter() - started, clock.handoffs,
                   table.requests)


def default_parallelism() -> int:
    """VDQ_SEND_PARALLELISM's default (the deployed value)."""
    from vdq.core.settings import Settings

    return int(Settings.__dataclass_fields__["send_parallelism"].default)


def percentile(values: list[float], share: float) -> float:
    """Nearest rank (as bench.stacklanes)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(share * len(ordered) + 0.5) - 1))]


def summary(scenario: Scenario, out: Outcome, arrivals: list[float], real: float,
            handoffs: int, table_requests: int) -> dict[str, Any]:  # fmt: skip
    """High latency (p50, p99, max, sent of), the share of the rate used while high items came
    (from the first one's enqueue to the last one's provider call, as bench.stacklanes takes
    it), the most sends in any 10 s, pacing requests per send by lane, give-backs."""
    start = arrivals[0] if arrivals else 0.0
    end = max((t for t, lane in out.sends if lane == "high"), default=start)
    inside = [(t, lane) for t, lane in out.sends if start <= t < end]  # n sends span n - 1 slots
    window = end - start
    times = sorted(t for t, _ in out.sends)
    peak, j = 0, 0
    for i, t in enumerate(times):  # sends in [t, t + 10)
        while j < len(times) and times[j] < t + 10.0:
            j += 1
        peak = max(peak, j - i)
    gap = min((b - a for a, b in itertools.pairwise(times)), default=None)
    landed, most_1s, j = sorted(out.landed), 0, 0
    for i, t in enumerate(landed):  # calls reaching the provider in [t, t + 1)
        while j < len(landed) and landed[j] < t + 1.0:
            j += 1
        most_1s = max(most_1s, j - i)
    sent = {lane: sum(1 for _, x in out.sends if x == lane) for lane in ("high", "normal", "bulk")}
    sent["all"] = len(out.sends)
    return {
        "rate": scenario.rate, "bulk": scenario.bulk, "interval": scenario.interval,
        "seed": scenario.seed, "shared_pacer": scenario.shared_pacer,
        "high": len(arrivals), "high_sent": len(out.high),
        "latencies": [round(x, 3) for x in out.high],
        "p50": statistics.median(out.high) if out.high else None,
        "p99": percentile(out.high, 0.99) if out.high else None,
        "max": max(out.high) if out.high else None,
        "window_seconds": round(window, 2),
        "use": len(inside) / (scenario.rate * window) if window > 0 else None,
        "bulk_in_window": sum(1 for _, lane in inside if lane == "bulk"),
        "most_in_10s": peak, "closest_sends": gap, "rate_in_10s": scenario.rate * 10,
        "most_landed_in_1s": most_1s,
        "sent": sent, "given_back": out.given_back, "throttled": out.throttled,
        "longest_give_back": {lane: max(d) for lane, d in out.delays.items()},
        "pacing_requests": dict(out.pacing_requests),
        "pacing_requests_per_send": {lane: round(n / sent[lane], 3)
                                     for lane, n in out.pacing_requests.items() if sent[lane]},
        "bulk_waiting_at_end": scenario.bulk - sent["bulk"],
        "pacing_table_requests": table_requests,
        "real_seconds": round(real, 1), "handoffs": handoffs,
    }  # fmt: skip


