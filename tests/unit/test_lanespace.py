"""The lanes-at-the-rate simulation's harness (bench.virtual) and the simulation (bench.lanesim):
the virtual clock moves only when every worker is blocked, the in-memory pace table keeps the
pace records' conditions, workers with the real Pacer on it keep to the rate together, and a
run is the same run for the same seed. Nothing here waits in real time for the clock.
"""

from __future__ import annotations

import itertools
import time

import pytest
from bench.lanesim import Queue, Scenario, Timings, arrivals_of, ideal, simulate
from bench.virtual import PaceTable, VirtualClock
from botocore.exceptions import ClientError

from vdq.dispatch.pacing import NoSlot, Pacer
from vdq.store.pacing import PaceRecords, pace_pk

RATE = 10.0
TIMINGS = Timings(pickup=0.012, base=0.005, enqueue=0.035, before=0.012, ddb=0.006,
                  provider=0.06, after=0.006, give_back=0.018)  # fmt: skip


# ---- the virtual clock -------------------------------------------------------------------------


def test_time_stands_still_while_a_worker_runs_even_for_real_time():
    clock = VirtualClock()
    seen: list[tuple[str, float]] = []

    def busy() -> None:
        clock.sleep(1.0)
        before = clock.now
        time.sleep(0.05)  # real work, no virtual sleep: the other worker must not run
        seen.append(("busy", before))
        seen.append(("busy", clock.now))

    def ticking() -> None:
        while True:
            clock.sleep(0.25)
            seen.append(("tick", clock.now))

    clock.run([busy, ticking], until=2.0)
    at = seen.index(("busy", 1.0))
    assert seen[at + 1] == ("busy", 1.0)  # nothing ran, no time passed, between the two
    assert [t for who, t in seen if who == "tick"] == [0.25 * n for n in range(1, 9)]


def test_wake_ups_come_in_time_order_and_ties_in_the_order_they_were_asked():
    clock = VirtualClock()
    order: list[tuple[str, float]] = []

    def worker(name: str, pauses: list[float]) -> object:
        def work() -> None:
            for pause in pauses:
                clock.sleep(pause)
                order.append((name, clock.now))

        return work

    clock.run([worker("a", [1.0, 1.0]), worker("b", [2.0]), worker("c", [0.5])], until=10.0)
    # b asked for 2.0 (at 0) before a did (at 1.0)
    assert order == [("c", 0.5), ("a", 1.0), ("b", 2.0), ("a", 2.0)]


def test_a_notify_wakes_a_waiting_worker_earlier_and_never_in_the_past():
    clock = VirtualClock()
    woke: list[float] = []

    def waiter() -> None:
        clock.wait(100.0, "lane")
        woke.append(clock.now)

    def producer() -> None:
        clock.sleep(3.0)
        clock.notify("lane", 1.0)  # earlier than now: wakes now

    clock.run([waiter, producer], until=200.0)
    assert woke == [3.0]


def test_a_run_ends_at_its_time_and_a_worker_error_is_raised():
    clock = VirtualClock()
    clock.run([lambda: clock.sleep(50.0)], until=10.0)
    assert clock.now == 0.0  # the wake-up after ``until`` never came

    other = VirtualClock()

    def broken() -> None:
        other.sleep(1.0)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        other.run([broken, lambda: other.sleep(100.0)], until=5.0)


# ---- the pace table --------------------------------------------------------------------------


def test_the_pace_table_keeps_the_reservation_conditions():
    records = PaceRecords(PaceTable(), "t")
    first = records.reserve("ses", 0.5, 100.0, 101.0, busy=True)  # a wrong guess: no record
    assert (first.start, first.state.tat, first.requests) == (100.0, 100.5, 2)
    second = records.reserve("ses", 0.5, 100.1, 101.0, busy=True)  # busy: after the last
    assert (second.start, second.state.tat, second.requests) == (100.5, 101.0, 1)
    full = records.reserve("ses", 0.5, 100.2, 100.9, busy=True)  # past ``latest``: refused
    assert (full.start, full.state.tat, full.requests) == (None, 101.0, 1)
    idle = records.reserve("ses", 0.5, 105.0, 106.0, busy=True)  # behind the clock: restarts
    assert (idle.start, idle.state.tat, idle.requests) == (105.0, 105.5, 2)
    assert records.read("ses").tat == 105.5


def test_the_pace_table_cuts_once_per_burst():
    records = PaceRecords(PaceTable(), "t")
    assert records.cut("ses", 7.0, 100.0, since=98.0)[0]
    cut, state = records.cut("ses", 4.9, 101.0, since=99.0)  # the same burst: refused
    assert not cut and (state.rate, state.cut_at) == (7.0, 100.0)
    assert records.cut("ses", 4.9, 103.0, since=101.0)[0]


def test_the_pace_table_refuses_expressions_it_does_not_evaluate():
    table = PaceTable()
    key = {"pk": {"S": pace_pk("ses")}, "sk": {"S": "PACE"}}
    with pytest.raises(ValueError, match="cannot evaluate"):
        table.update_item(TableName="t", Key=key, UpdateExpression="SET #tat = :a",
                          ConditionExpression="begins_with(#tat, :a)",
                          ExpressionAttributeNames={"#tat": "tat"},
                          ExpressionAttributeValues={":a": {"N": "1"}}, ReturnValues="ALL_NEW",
                          ReturnValuesOnConditionCheckFailure="ALL_OLD")  # fmt: skip
    with pytest.raises(ClientError, match="ConditionalCheckFailed"):
        table.update_item(TableName="t", Key=key, UpdateExpression="SET #tat = :a",
                          ConditionExpression="#tat < :a", ExpressionAttributeNames={"#tat": "tat"},
                          ExpressionAttributeValues={":a": {"N": "1"}}, ReturnValues="ALL_NEW",
                          ReturnValuesOnConditionCheckFailure="ALL_OLD")  # fmt: skip


# ---- the real Pacer on them ------------------------------------------------------------------


def within_the_rate(times: list[float], rate: float, late: float = 0.02) -> bool:
    """Any ``rate`` + 1 sends in a row span at least a second, less ``late``: a send goes
    when the pacing requests it waited on answer, a few ms after its slot began (two at 6 ms);
    workers sharing slots would send ms apart, a tenth of a second early."""
    times = sorted(times)
    span = int(rate)
    return all(times[i + span] - times[i] >= 1.0 - late for i in range(len(times) - span))


@pytest.mark.parametrize("lanes", [("high", "high"), ("normal", "bulk", "bulk")])
def test_workers_with_their_own_pacers_keep_to_the_rate_together(lanes):
    clock = VirtualClock(1_000.0)
    records = PaceRecords(PaceTable(0.006, clock.sleep), "t")
    sent: list[float] = []

    def worker(lane: str) -> object:
        pacer = Pacer(records, 5.0, wall=clock.wall, sleep=clock.sleep)

        def work() -> None:
            while True:
                for left in range(10, 0, -1):
                    try:
                        pacer.turn("ses", RATE, upcoming=left, lane=lane)
                        sent.append(clock.now)
                        clock.sleep(0.066)
                    except NoSlot:
                        clock.sleep(0.03)

        return work

    clock.run([worker(lane) for lane in lanes], until=1_030.0)
    assert len(sent) >= 0.9 * RATE * 30  # they use the rate...
    assert within_the_rate(sent, RATE)  # ...and never more


# ---- the simulation --------------------------------------------------------------------------


def tiny(seed: int) -> dict:
    result = simulate(Scenario(2.0, bulk=40, high=6, interval=1.5, seconds=10.0, seed=seed,
                               drain=15.0), TIMINGS)  # fmt: skip
    result.pop("real_seconds")
    return result


def test_a_run_with_a_tiny_backlog_is_the_same_run_for_the_same_seed():
    first, again, other = tiny(3), tiny(3), tiny(4)
    assert first == again
    assert first["latencies"] != other["latencies"]  # the seed sets the arrivals
    assert first["high_sent"] == first["high"] == 6
    assert first["sent"]["bulk"] > 0 and first["pacing_requests"]["bulk"] > 0


def test_a_poller_waits_up_to_the_window_to_fill_its_batch_and_takes_a_full_one_at_once():
    clock = VirtualClock()
    queue = Queue("bulk", window=1.0)
    for n in range(3):
        queue.put(clock, n, 0.0, 0.0)
    taken: list[tuple[float, list[int]]] = []

    def poller() -> None:
        while True:
            batch = queue.take(clock, 10)
            taken.append((clock.now, [n for n, _, _ in batch]))

    def producer() -> None:
        clock.sleep(0.5)
        queue.put(clock, 3, 0.5, 0.5)  # within the window: joins the batch
        clock.sleep(1.0)
        for n in range(4, 14):
            queue.put(clock, n, 1.5, 1.5)  # a full batch: taken at once

    clock.run([poller, producer], until=5.0)
    assert taken == [(1.0, [0, 1, 2, 3]), (1.5, list(range(4, 14)))]


# ---- the sensitivity knobs (bench.lanesens) ----------------------------------------------------


def test_a_sampled_request_latency_spans_both_halves_of_its_own_request():
    # Two workers' requests overlap; each must take its own sampled latency, start to answer.
    clock = VirtualClock()
    table = PaceTable(0.006, clock.sleep)
    draws = iter([0.010, 0.100])
    table.sample = lambda: next(draws)
    records = PaceRecords(table, "t")
    took: dict[str, float] = {}

    def worker(name: str) -> object:
        def work() -> None:
            start = clock.now
            records.read(name)
            took[name] = clock.now - start

        return work

    clock.run([worker("a"), worker("b")], until=1.0)
    assert took == pytest.approx({"a": 0.010, "b": 0.100})


def test_a_run_at_real_epoch_seconds_is_the_run_at_zero():
    # Pace records hold epoch seconds at six decimals; the simulation's clock starts at 0.
    def run(epoch: float) -> dict:
        return simulate(Scenario(2.0, bulk=40, high=6, interval=1.5, seconds=10.0, seed=3,
                                 drain=15.0, epoch=epoch), TIMINGS)  # fmt: skip

    zero, real = run(0.0), run(1.764e9)
    assert real["latencies"] == pytest.approx(zero["latencies"], abs=0.002)
    assert real["sent"] == zero["sent"]


def test_tails_and_the_functions_own_time_slow_the_two_bulk_pollers_below_the_rate():
    # At 8/s with a 250 ms provider call, two serial bulk pollers are the bottleneck: a
    # latency's mean over its median (the tail) and time outside requests cost sends.
    slow = Timings(**{**TIMINGS.__dict__, "provider": 0.25})

    def run(**knobs: float) -> dict:
        return simulate(Scenario(8.0, bulk=400, high=4, interval=2.0, seconds=8.0, seed=1,
                                 drain=20.0, parallelism=1, **knobs), slow)  # fmt: skip

    steady = run()["sent"]["bulk"]
    assert run(tail=6.0)["sent"]["bulk"] < 0.9 * steady
    assert run(cpu=0.2)["sent"]["bulk"] < 0.9 * steady


def test_sending_threads_keep_two_bulk_pollers_at_the_rate_of_a_slow_provider():
    # The same 250 ms provider call: one send at a time, the two bulk pollers use about 82% of
    # 8/s; with sending threads (vdq.dispatch.sendbatch) the provider's latency overlaps the next
    # claims.
    slow = Timings(**{**TIMINGS.__dict__, "provider": 0.25})

    def run(parallelism: int) -> dict:
        return simulate(Scenario(8.0, bulk=400, high=4, interval=2.0, seconds=8.0, seed=1,
                                 drain=20.0, parallelism=parallelism), slow)  # fmt: skip

    serial, threads = run(1), run(4)
    assert serial["use"] < 0.9 <= threads["use"]
    assert threads["sent"]["bulk"] > 1.2 * serial["sent"]["bulk"]
    assert threads["high_sent"] == threads["high"] == 4


def test_a_burst_of_high_items_waits_its_turns_at_the_rate():
    burst = simulate(Scenario(4.0, bulk=200, high=4, interval=2.0, seconds=8.0, seed=1,
                              drain=20.0, burst=8), TIMINGS)  # fmt: skip
    assert burst["high"] == 12 and burst["high_sent"] == 12
    assert burst["max"] >= 8 / 4.0  # eight at once at 4/s: the last waits two seconds of slots


def test_lanes_sharing_the_functions_environments_count_each_lanes_requests():
    def run(environments: bool) -> dict:
        return simulate(Scenario(4.0, bulk=200, high=6, interval=1.0, seconds=8.0, seed=2,
                                 drain=20.0, environments=environments), TIMINGS)  # fmt: skip

    own, shared = run(False), run(True)
    assert shared["high_sent"] == shared["high"] == 6
    def lanes(run: dict) -> set[str]:
        return {lane for lane, n in run["pacing_requests"].items() if n}

    assert lanes(shared) == lanes(own) == {"high", "bulk"}
    assert sum(shared["pacing_requests"].values()) <= shared["pacing_table_requests"]


def test_an_ses_that_refuses_calls_over_its_rate_slows_the_pace_and_loses_nothing():
    # SES takes at most rate + ses_burst calls in any second: with no burst at all, calls that
    # land a few ms early are refused; each refusal cuts the shared pace (Pacer.slow_down) and
    # gives the item back, as vdq.dispatch.giveback.throttled does, and it is sent later.
    def run(ses_burst: int | None) -> dict:
        return simulate(Scenario(4.0, bulk=200, high=8, interval=1.0, seconds=10.0, seed=5,
                                 drain=30.0, tail=3.0, ses_burst=ses_burst), TIMINGS)  # fmt: skip

    lenient, strict = run(None), run(0)
    assert lenient["throttled"] == {} and lenient["most_landed_in_1s"] > 4
    assert strict["throttled"]["high"] >= 1 and strict["throttled"]["bulk"] >= 1
    assert strict["most_landed_in_1s"] <= 4  # SES's limit holds for every call it took
    assert strict["high_sent"] == strict["high"] == 8  # a refused high email is sent later
    assert strict["use"] < lenient["use"]  # the cut pace


PATH = TIMINGS.enqueue + TIMINGS.pickup + TIMINGS.base + TIMINGS.before


def test_the_bound_sends_a_lone_high_item_at_the_first_slot_after_its_shortest_path():
    lone = ideal(Scenario(1.0, high=1, seed=3), TIMINGS, phases=10)
    assert len(lone) == 10  # one latency per phase of the full rate's sends
    assert all(PATH - 1e-9 <= x <= PATH + 1.0 for x in lone)
    assert min(lone) < PATH + 0.1 and max(lone) > PATH + 0.8  # the phases span the slot


def test_the_bound_gives_each_slot_to_one_high_item_at_most_in_arrival_order():
    scenario = Scenario(2.0, high=6, seed=4, burst=5)  # six arrive together, then the others
    arrived = arrivals_of(scenario)
    for phase in range(4):
        sent = [at + x for at, x in zip(arrived, ideal(scenario, TIMINGS, phases=4)[
            phase * len(arrived):(phase + 1) * len(arrived)], strict=True)]  # fmt: skip
        assert sent == sorted(sent)
        assert all(b - a >= 0.5 - 1e-9 for a, b in itertools.pairwise(sent))  # 1/rate apart


def test_at_one_email_a_second_no_schedule_filling_the_rate_meets_two_seconds_for_high():
    # bench.lanespace's 1/s run: a high item every 5 s at random, for 10 minutes, 5 seeds. A
    # high item that comes while another waits waits a slot more, so the p99 is past 2 s for
    # any pacer at full use on these arrivals (2.10 s; over seeds 1-40 it is 2.00 s: at the
    # line, not past it); at 14/s a slot is 71 ms and it is far under.
    def p99(rate: float, interval: float) -> float:
        from bench.lanesim import ideal_percentile

        return ideal_percentile([Scenario(rate, interval=interval, seconds=600.0, seed=seed)
                                 for seed in range(1, 6)], TIMINGS, 0.99)  # fmt: skip

    assert p99(1.0, 5.0) > 2.0
    assert p99(14.0, 1.0) < 0.25


def on_time_first(arrivals: list[float], rate: float, phase: float, limit: float) -> list[float]:
    """A schedule on the full rate's slots (a send every 1/rate s from ``phase``, one high
    item each at most, none before the item is ready after PATH): each slot to the oldest
    waiting item that can still be sent within ``limit`` of its enqueue, else to the oldest
    that cannot (else to bulk). Every item is sent; their latencies in arrival order."""
    import math

    gap, out, waiting, late = 1.0 / rate, {}, [], []
    pending = list(enumerate(arrivals))
    slot = -math.inf
    while pending or waiting or late:
        if not waiting and not late:  # the next ready item's first slot (bulk meanwhile)
            ready = pending[0][1] + PATH
            slot = max(slot, phase + math.ceil((ready - phase) / gap - 1e-9) * gap)
        while pending and pending[0][1] + PATH <= slot + 1e-9:
            waiting.append(pending.pop(0))
        while waiting and waiting[0][1] + limit < slot - 1e-9:
            late.append(waiting.pop(0))
        index, arrived = (waiting or late).pop(0)
        assert slot >= arrived + PATH - 1e-9  # sent once ready, at a slot of its own
        out[index] = slot - arrived
        slot += gap
    return [out[i] for i in range(len(arrivals))]


def test_no_schedule_on_the_full_rates_slots_has_a_lower_p99_than_the_bound():
    # The bound bench.lanespace prints for its 1/s run (5 seeds, 10 phases each) is the p99
    # of giving each slot to the oldest ready high item. A schedule on the same slots that
    # gives a slot to an item that can still make it, before one that is late anyway, has
    # the same sends and fewer items past any latency: its p99 is lower.
    from bench.lanesim import percentile
    from bench.lanespace import bound

    scenarios = [Scenario(1.0, interval=5.0, seconds=600.0, seed=seed) for seed in range(1, 6)]
    other = [x for s in scenarios for k in range(10)
             for x in on_time_first(arrivals_of(s), s.rate, k / 10 / s.rate, 2.1)]  # fmt: skip
    assert len(other) == sum(len(arrivals_of(s)) for s in scenarios) * 10  # every item sent
    assert bound(scenarios, TIMINGS)["p99"] <= percentile(other, 0.99) + 1e-9
