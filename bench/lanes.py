"""Priority lanes and scheduled send: the high lane's latency under a bulk backlog, and the cost
of a long scheduled wait (due-time buckets, measured, against EventBridge Scheduler).

Latency is a discrete-event simulation of the deployed lanes, on simulated time (a real run
would need 100,000 sends through SES). What makes it faithful:

- the lanes are the deployment's own: one queue and one event source mapping per priority with
  the concurrency, batch size and batching window that ``infra`` gives each (imported from
  ``infra.config`` and ``vdq.core.resources``, not copied), and the routing is the code's (every
  publish path goes to the item's lane: tests/integration/test_lanes.py);
- the mapping behaves as Lambda's does: each concurrent poller takes up to a batch of the
  visible messages (oldest first), waiting up to the batching window to fill it, and the send
  function handles the records of a batch one after another (functions/send/handler.py);
- each send takes the time of its real requests: the requests of one send and one enqueue are
  counted on the real handlers (moto) and timed with the per-request latencies the bill uses
  (prices.json ``assumptions``), the provider call starting after the claim; a batch starts
  one ReceiveMessage after its messages are there. Not modelled: cold starts (a lane's first
  invocation after idling adds its init time, about 0.5 s: bench coldstart) and SES's own
  sending-rate throttling (the pacing work).

The same simulation with every message in one queue (the mappings' concurrency summed) shows
what the lanes prevent.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from bench import env
from bench.figures import Row

BULK_BACKLOG = 100_000
HIGH_PER_SECOND = 5.0
NORMAL_PER_SECOND = 20.0
SIMULATED_SECONDS = 600
P99_TARGET = 2.0
SCHEDULED_RECEIVERS = (1, 1000)

FIGURES = [
    ("lanes: high p99 enqueue -> provider call, 100k bulk waiting", f"<= {P99_TARGET:.0f} s"),
    ("lanes: the same with one shared queue", "(reported)"),
    ("scheduled send: buckets, US$ per 1M items (1 receiver/request)", "(reported)"),
    ("scheduled send: buckets, US$ per 1M items (1,000 receivers/request)", "(reported)"),
    ("scheduled send: EventBridge Scheduler, US$ per 1M items (1 receiver/request)",
     "(reported)"),
    ("scheduled send: EventBridge Scheduler, US$ per 1M items (1,000 receivers/request)",
     "(reported)"),
]


# ---- measured inputs -------------------------------------------------------------------------


def _ms(tally: dict[str, Any], prices: dict[str, Any]) -> float:
    latency = prices["assumptions"]["request_latency_ms"]
    return sum(n * latency.get(op.split(".", 1)[0], latency["default"])
               for op, n in tally["requests"].items())  # fmt: skip


def send_timings(prices: dict[str, Any]) -> dict[str, float]:
    """Seconds of one email's enqueue, of its send up to the provider call, and of the whole
    send: the real handlers' requests (moto) at the bill's per-request latencies."""
    from bench import requests as rq

    with env.stack() as stack:
        with rq.COUNTER.measure() as enqueue:
            rq.post("apigw_post_emails", rq.email_body(1))
        with rq.COUNTER.measure() as sending:
            assert rq.run_send(stack) == 1
    latency = prices["assumptions"]["request_latency_ms"]
    base = prices["assumptions"]["lambda_base_ms"]
    send_tally = sending.as_json()
    whole = _ms(send_tally, prices)
    after = sum(n * latency["dynamodb"] for op, n in send_tally["requests"].items()
                if op == "dynamodb.TransactWriteItems")  # fmt: skip
    provider = latency["sesv2"]
    before = whole - after - provider
    return {"enqueue": (base + _ms(enqueue.as_json(), prices)) / 1000,
            "to_provider": before / 1000, "send": whole / 1000, "base": base / 1000,
            "pickup": latency["sqs"] / 1000}  # the mapping's ReceiveMessage


# ---- the simulation --------------------------------------------------------------------------


@dataclass
class Lane:
    name: str
    concurrency: int
    window: float  # seconds a poller waits to fill a batch
    waiting: deque = field(default_factory=deque)  # (visible at, kind, enqueued at)
    idle: int = 0


def lanes_as_deployed() -> dict[str, Lane]:
    from infra.config import DeployConfig

    from vdq.core import resources

    config = DeployConfig()
    return {
        "high": Lane("high", config.high_send_max_concurrency,
                     resources.HIGH_SEND_BATCHING_WINDOW_SECONDS),
        "normal": Lane("normal", config.send_max_concurrency,
                       resources.SEND_BATCHING_WINDOW_SECONDS),
        "bulk": Lane("bulk", config.bulk_send_max_concurrency,
                     resources.SEND_BATCHING_WINDOW_SECONDS),
    }  # fmt: skip


def simulate(timings: dict[str, float], *, shared: bool, seed: int = 7,
             seconds: float = SIMULATED_SECONDS) -> list[float]:  # fmt: skip
    """Seconds from the start of each high item's enqueue to its provider call."""
    from vdq.core import resources

    rng = random.Random(seed)
    lanes = lanes_as_deployed()
    if shared:  # everything in one queue, the same workers in total
        lanes = {"one": Lane("one", sum(lane.concurrency for lane in lanes.values()),
                             resources.SEND_BATCHING_WINDOW_SECONDS)}  # fmt: skip
    lane_of = (lambda kind: "one") if shared else (lambda kind: kind)
    for _ in range(BULK_BACKLOG):
        lanes[lane_of("bulk")].waiting.append((0.0, "bulk", 0.0))
    events: list[tuple[float, int, str, Any]] = []
    seq = 0

    def push(at: float, what: str, data: Any) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (at, seq, what, data))

    highs = 0
    for kind, rate in (("high", HIGH_PER_SECOND), ("normal", NORMAL_PER_SECOND)):
        t = rng.expovariate(rate)
        while t < seconds:
            push(t + timings["enqueue"], "arrive", (kind, t))  # visible once enqueue published
            highs += kind == "high"
            t += rng.expovariate(rate)
    for lane in lanes.values():
        lane.idle = lane.concurrency
        push(0.0, "poll", lane.name)
    latencies: list[float] = []
    while events and len(latencies) < highs:
        now, _, what, data = heapq.heappop(events)
        if what == "arrive":
            kind, enqueued = data
            lane = lanes[lane_of(kind)]
            lane.waiting.append((now, kind, enqueued))
            push(now, "poll", lane.name)
            continue
        if what == "done":
            lanes[data].idle += 1
            push(now, "poll", data)
            continue
        lane = lanes[data]  # a poll: each idle poller takes a batch of what is visible
        while lane.idle and lane.waiting:
            first = lane.waiting[0][0]
            if len(lane.waiting) < resources.SEND_BATCH_SIZE and now < first + lane.window:
                push(first + lane.window, "poll", lane.name)  # fill the batch until the window
                break
            batch = [lane.waiting.popleft()
                     for _ in range(min(resources.SEND_BATCH_SIZE, len(lane.waiting)))]
            lane.idle -= 1
            start = now + timings["pickup"] + timings["base"]
            for n, (_, kind, enqueued) in enumerate(batch):
                if kind == "high":
                    latencies.append(start + n * timings["send"] + timings["to_provider"]
                                     - enqueued)  # fmt: skip
            push(start + len(batch) * timings["send"], "done", lane.name)
    return latencies


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


# ---- scheduled send: measured cost -----------------------------------------------------------


def scheduled_cost(receivers: int, prices: dict[str, Any], requests: int = 50) -> dict[str, Any]:
    """Extra US$ per million items of a long scheduled wait over sending at once, by service:
    ``requests`` real enqueues of ``receivers`` each (scheduled, and not) and the release of
    their buckets by one sweep, counted on moto. The sweep's fixed cost (its reads each
    minute, whatever is due, and the invocation the minute schedule makes anyway) is left out:
    a Query and a cursor read per lane and shard, about 518,000 of each a month, cents."""
    from datetime import timedelta

    from bench import cost
    from bench import requests as rq
    from vdq.core import resources
    from vdq.intake import scheduling
    from vdq.schedules.report import Report

    with env.stack() as stack:
        with rq.COUNTER.measure(units=True) as plain:
            for _ in range(requests):
                rq.post("apigw_post_emails", rq.email_body(receivers))
        # The worker's side differs too: a released message carries no content, so the send
        # reads it from the store (one GetItem) where an immediate one finds it inline.
        with rq.COUNTER.measure(units=True) as plain_send:
            rq.run_send(stack, 1)
        with rq.COUNTER.paused():
            stack.sqs.purge_queue(QueueUrl=stack.queues[resources.SEND_QUEUE])
        with rq.COUNTER.measure(units=True) as scheduled:
            for _ in range(requests):
                body = rq.email_body(receivers)
                body["send_at"] = (stack.clock.now() + timedelta(days=2)).isoformat()
                rq.post("apigw_post_emails", body)
        stack.clock.advance(2 * 86400)
        report = Report()
        with rq.COUNTER.measure(units=True) as release:
            scheduling.release_due(stack.runtime, report)
        assert report.counts == {"scheduled_released": receivers * requests}, report.counts
        with rq.COUNTER.measure(units=True) as released_send:
            rq.run_send(stack, 1)
    items = receivers * requests
    at_once = cost.journey_cost([cost.Invocation("enqueue", plain.as_json())], items, prices)
    waiting = cost.journey_cost([cost.Invocation("enqueue", scheduled.as_json()),
                                 cost.Invocation("schedule", release.as_json())], items,
                                prices)  # fmt: skip
    release_lambda = cost.journey_cost([cost.Invocation("schedule", release.as_json())], items,
                                       prices)["_usage_per_message"]["lambda_requests"]  # fmt: skip
    invocation = release_lambda * prices["lambda"]["per_million_requests"]
    sends = [cost.journey_cost([cost.Invocation("send", t.as_json(), queue="send")], 1, prices)
             for t in (plain_send, released_send)]  # fmt: skip
    by_service = {k: round(waiting[k] - at_once[k] + sends[1][k] - sends[0][k], 4)
                  for k in at_once if not k.startswith("_") and k != "total"}
    by_service = {k: v for k, v in by_service.items() if v}
    by_service["lambda"] = round(by_service.get("lambda", 0) - invocation, 4)
    return {"usd_per_million": round(sum(by_service.values()), 4), "by_service": by_service,
            "release_requests_per_item": {k: round(v / items, 4) for k, v in
                                          release.as_json()["requests"].items()},
            "send_requests": {"sent at once": plain_send.as_json()["requests"],
                              "released": released_send.as_json()["requests"]},
            "write_units_per_item": round((scheduled.wru + scheduled.gsi_wru + release.wru
                                           - plain.wru - plain.gsi_wru) / items, 4)}  # fmt: skip


def scheduler_cost(receivers: int, prices: dict[str, Any]) -> dict[str, Any]:
    """Extra US$ per million items of EventBridge Scheduler one-time schedules over sending at
    once, per item: one CreateSchedule from enqueue (no batch API; its latency billed as
    enqueue's Lambda time), one scheduled invocation, one SQS SendMessage from the schedule
    less the share of the batched publish at enqueue it replaces (ten items a request)."""
    import math

    from infra.config import DEFAULT_MEMORY_MB

    a = prices["assumptions"]
    gbs = DEFAULT_MEMORY_MB["enqueue"] / 1024 * a["request_latency_ms"]["scheduler"] / 1000
    lam = gbs * prices["lambda"][f"per_gb_second_{a['lambda_architecture']}"] * 1e6
    invocation = prices["scheduler"]["per_million_invocations"]
    saved = math.ceil(receivers / 10) / receivers
    sqs = (1 - saved) * prices["sqs"]["per_million_requests"]
    return {"usd_per_million": lam + invocation + sqs,
            "parts": {"lambda (CreateSchedule)": round(lam, 4),
                      "scheduled invocations": invocation,
                      "sqs (one SendMessage each, less the batched publish)": round(sqs, 4)},
            "enqueue_seconds_added_per_1000_receivers": 1000 * a["request_latency_ms"][
                "scheduler"] / 1000}  # fmt: skip


# ---- rows --------------------------------------------------------------------------------------


def measure(quick: bool = False) -> dict[str, Any]:
    from bench import cost

    prices = cost.prices()
    timings = send_timings(prices)
    seconds = 60 if quick else SIMULATED_SECONDS
    lanes = simulate(timings, shared=False, seconds=seconds)
    shared = simulate(timings, shared=True, seconds=seconds)
    buckets = {n: scheduled_cost(n, prices, requests=max(1, 50 // n)) for n in
               SCHEDULED_RECEIVERS}  # fmt: skip
    scheduler = {n: scheduler_cost(n, prices) for n in SCHEDULED_RECEIVERS}
    return {"timings": timings, "lanes": lanes, "shared": shared, "buckets": buckets,
            "scheduler": scheduler}  # fmt: skip


def rows(result: dict[str, Any]) -> list[Row]:
    lanes, shared = result["lanes"], result["shared"]
    p99 = percentile(lanes, 0.99)
    text = (f"p99 {p99:.2f} s, p50 {percentile(lanes, 0.5):.2f} s, max {max(lanes):.2f} s "
            f"({len(lanes)} high items)")
    shared_text = (f"p50 {percentile(shared, 0.5):,.0f} s, p99 {percentile(shared, 0.99):,.0f} s"
                   if shared else "no high item reached the provider in the simulated time")
    b1, b1000 = (result["buckets"][n] for n in SCHEDULED_RECEIVERS)
    e1, e1000 = (result["scheduler"][n] for n in SCHEDULED_RECEIVERS)
    return [
        Row(FIGURES[0][0], FIGURES[0][1], text, p99 <= P99_TARGET, result["timings"]),
        Row(FIGURES[1][0], FIGURES[1][1], shared_text, None),
        Row(FIGURES[2][0], FIGURES[2][1], f"US${b1['usd_per_million']:.2f}", None, b1),
        Row(FIGURES[3][0], FIGURES[3][1], f"US${b1000['usd_per_million']:.2f}", None, b1000),
        Row(FIGURES[4][0], FIGURES[4][1], f"US${e1['usd_per_million']:.2f}", None, e1),
        Row(FIGURES[5][0], FIGURES[5][1], f"US${e1000['usd_per_million']:.2f}", None, e1000),
    ]


if __name__ == "__main__":
    env.prepare_process()
    from bench.requests import COUNTER

    COUNTER.install()
    found = measure()
    for row in rows(found):
        print(f"{row.figure}: {row.measured}")
        if row.detail:
            print(f"    {row.detail}")
