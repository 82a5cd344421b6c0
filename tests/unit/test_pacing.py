"""Provider rate control, offline: the AIMD maths and the pacer's use of its schedule.

The schedule here is an in-memory stand-in with the pace record's contract (vdq.store.pacing:
reserve after the last reserved slot, or now when idle; refuse past ``latest``); the record
itself is tested against moto in tests/integration/test_pacing.py. Time is a fake wall clock
that sleeping advances.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from vdq.dispatch.batchplan import batch_order, plan
from vdq.dispatch.pacing import (
    FLOOR,
    RECOVERY,
    NoSlot,
    Pacer,
    current_rate,
    cut_rate,
)
from vdq.store.pacing import PaceState, Reservation


class Wall:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Schedule:
    """One pace record in memory."""

    def __init__(self, tat: float | None = None) -> None:
        self.state = PaceState(tat=tat)
        self.reservations = 0

    def reserve(self, key, seconds, now, latest, *, busy):
        self.reservations += 1
        start = max(self.state.tat or now, now)
        if start > latest:
            return Reservation(None, self.state, 1)
        self.state = PaceState(start + seconds, self.state.rate, self.state.cut_at)
        return Reservation(start, self.state, 1)

    def cut(self, key, rate, now, since):
        if self.state.cut_at is not None and self.state.cut_at >= since:
            return False, self.state
        self.state = PaceState(self.state.tat, rate, now)
        return True, self.state


def pacer(schedule: Schedule, wall: Wall, max_wait: float = 5.0) -> Pacer:
    return Pacer(schedule, max_wait, wall=wall, sleep=wall.sleep)  # type: ignore[arg-type]


# ---- AIMD -------------------------------------------------------------------------------------


def test_without_a_cut_the_rate_is_the_limit():
    assert current_rate(14.0, None, 5.0) == 14.0
    assert current_rate(14.0, PaceState(tat=3.0), 5.0) == 14.0


def test_a_cut_multiplies_the_rate_and_time_brings_it_back_additively():
    cut = cut_rate(10.0, None, 100.0)
    assert cut == pytest.approx(7.0)
    state = PaceState(rate=cut, cut_at=100.0)
    assert current_rate(10.0, state, 100.0) == pytest.approx(7.0)
    # RECOVERY of the limit per second: +0.2/s here, linear, never past the limit.
    assert current_rate(10.0, state, 105.0) == pytest.approx(7.0 + 5 * RECOVERY * 10.0)
    assert current_rate(10.0, state, 110.0) == pytest.approx(7.0 + 10 * RECOVERY * 10.0)
    assert current_rate(10.0, state, 1_000.0) == 10.0
    # A second cut applies to the recovered rate, not to the one before.
    assert cut_rate(10.0, state, 105.0) == pytest.approx(0.7 * 8.0)


def test_cuts_never_take_the_rate_below_its_floor():
    state = None
    for second in range(50):
        state = PaceState(rate=cut_rate(10.0, state, float(second)), cut_at=float(second))
    assert state.rate == pytest.approx(FLOOR * 10.0)


# ---- the pacer --------------------------------------------------------------------------------


def test_a_batch_reserves_its_slots_in_one_request_and_waits_for_each():
    wall, schedule = Wall(), Schedule()
    p = pacer(schedule, wall)
    start = wall.now
    for left in range(10, 0, -1):
        p.turn("ses", 10.0, upcoming=left)
    assert schedule.reservations == 1 and p.requests == 1
    # Ten sends at 10/s: the first at once, then one every 0.1 s.
    assert wall.now - start == pytest.approx(0.9)
    assert schedule.state.tat == pytest.approx(start + 1.0)


def test_a_reservation_is_capped_at_what_the_rate_fills_in_the_longest_wait():
    wall, schedule = Wall(), Schedule()
    p = pacer(schedule, wall, max_wait=2.0)
    p.turn("twilio#+15550001", 1.0, upcoming=10)
    assert schedule.state.tat == pytest.approx(wall.now + 2.0 - 0.0)  # 2 slots, 1 used
    assert len(p.slots["twilio#+15550001"]) == 1


def test_a_turn_further_off_than_the_longest_wait_is_given_back_with_its_delay():
    wall = Wall()
    schedule = Schedule(tat=wall.now + 30.0)  # others reserved the next 30 s
    p = pacer(schedule, wall)
    with pytest.raises(NoSlot) as no_slot:
        p.turn("ses", 10.0)
    # Free for a one-slot reservation once the schedule is within the longest wait of now,
    # spread over up to half the reserved schedule so that given-back items come back apart.
    assert 25 <= no_slot.value.delay <= 25 + 30 / 2 + 1
    assert wall.slept == []  # nothing waited for
    # Seen full: the next one is refused without asking the schedule again.
    with pytest.raises(NoSlot):
        p.turn("ses", 10.0)
    assert schedule.reservations == 1 and p.requests == 1


def test_slots_left_from_a_batch_serve_the_next_sends_while_fresh():
    wall, schedule = Wall(), Schedule()
    p = pacer(schedule, wall)
    p.turn("ses", 10.0, upcoming=4)  # 4 reserved, 1 used
    p.turn("ses", 10.0)
    assert schedule.reservations == 1
    wall.now += 10  # the 2 left are stale now
    p.turn("ses", 10.0)
    assert schedule.reservations == 2


def test_an_sms_of_three_segments_takes_three_slots_of_its_sender():
    wall, schedule = Wall(), Schedule()
    p = pacer(schedule, wall)
    start = wall.now
    p.turn("twilio#+15550001", 1.0, units=3)
    assert wall.now - start == pytest.approx(2.0)  # slots at +0, +1, +2: it goes with the last
    assert schedule.state.tat == pytest.approx(start + 3.0)


def test_a_throttling_answer_cuts_once_per_burst_and_drops_the_held_slots():
    wall, schedule = Wall(), Schedule()
    p = pacer(schedule, wall)
    p.turn("ses", 10.0, upcoming=5)
    assert p.slow_down("ses", 10.0) is True
    assert "ses" not in p.slots
    assert schedule.state.rate == pytest.approx(7.0)
    wall.now += 0.5
    assert p.slow_down("ses", 10.0) is False  # the same burst
    assert schedule.state.rate == pytest.approx(7.0)
    wall.now += 5
    assert p.slow_down("ses", 10.0) is True
    assert schedule.state.rate == pytest.approx(0.7 * (7.0 + 5.5 * RECOVERY * 10.0))


def test_after_a_cut_the_slots_are_spaced_at_the_cut_rate():
    wall, schedule = Wall(), Schedule()
    p = pacer(schedule, wall)
    p.slow_down("ses", 10.0)  # 7/s
    start = wall.now
    p.turn("ses", 10.0, upcoming=8)
    p.turn("ses", 10.0)
    assert wall.now - start == pytest.approx(1 / 7.0)


def test_a_provider_rate_that_cannot_be_read_leaves_sends_unpaced_for_a_while():
    wall = Wall()
    p = pacer(Schedule(), wall)
    calls = []

    def failing() -> float:
        calls.append(wall.now)
        raise RuntimeError("AccessDenied")

    assert p.limit("ses", failing) is None
    assert p.limit("ses", failing) is None
    assert len(calls) == 1  # not read again at once
    wall.now += 61
    assert p.limit("ses", lambda: 14.0) == 14.0
    assert p.limit("ses", failing) == 14.0  # cached


# ---- a batch's order ---------------------------------------------------------------------------


def body(pace: str | None) -> str:
    return json.dumps({"id": "I", "attempt": 1, **({"pace": pace} if pace else {})})


def test_a_batch_takes_its_rates_in_turn_and_counts_upcoming_sends_per_rate():
    bodies = [body("twilio#+1"), body("twilio#+1"), body("twilio#+1"), body("twilio#+2"),
              body(None), "not json", body("twilio#+2")]  # fmt: skip
    assert batch_order(bodies) == [
        (0, 3), (3, 2), (4, 2),  # +1, +2, and the messages without a rate, each in turn
        (1, 2), (6, 1), (5, 1),
        (2, 1),
    ]


def test_one_rate_keeps_the_batch_order_and_reserves_for_the_whole_batch():
    assert batch_order([body("ses")] * 4) == [(0, 4), (1, 3), (2, 2), (3, 1)]


def test_a_worker_with_two_senders_in_a_batch_sends_both_at_their_rate_and_wastes_no_slot():
    # Five SMS of each of two senders at 1/s: both senders' slots are used at their time, so
    # the batch takes 4 s (not 9), and each sender's schedule holds exactly its five slots.
    wall = Wall()
    schedules = {"twilio#+1": Schedule(), "twilio#+2": Schedule()}

    class Records:
        def reserve(self, key, *args, **kwargs):
            return schedules[key].reserve(key, *args, **kwargs)

    p = Pacer(Records(), 5.0, wall=wall, sleep=wall.sleep)  # type: ignore[arg-type]
    start = wall.now
    bodies = [body("twilio#+1")] * 5 + [body("twilio#+2")] * 5
    for index, upcoming in batch_order(bodies):
        p.turn(json.loads(bodies[index])["pace"], 1.0, upcoming=upcoming)
    assert wall.now - start == pytest.approx(4.0)
    for schedule in schedules.values():
        assert schedule.reservations == 1
        assert schedule.state.tat == pytest.approx(start + 5.0)


class Records:
    """One in-memory schedule per rate."""

    def __init__(self, **tats: float) -> None:
        self.schedules: dict[str, Schedule] = {}
        self.tats = tats

    def reserve(self, key, *args, **kwargs):
        schedule = self.schedules.setdefault(key, Schedule(self.tats.get(key)))
        return schedule.reserve(key, *args, **kwargs)


def batch_runtime(p: Pacer, twilio_rate: float = 1.0) -> SimpleNamespace:
    settings = SimpleNamespace(twilio_sender_rate=twilio_rate, ses_max_send_rate=10.0,
                               index_shards=4)  # fmt: skip
    return SimpleNamespace(overrides={"pacer": p}, settings=settings)


def run_batch(p: Pacer, bodies: list[str], wall: Wall,
              give_back_seconds: float = 0.0) -> list[tuple[int, object]]:  # fmt: skip
    """Each send of the batch in the plan's order: (index, when it went, or NoSlot)."""
    done: list[tuple[int, object]] = []
    for index, upcoming in plan(bodies, batch_runtime(p))[0]:
        try:
            p.turn(json.loads(bodies[index])["pace"], 1.0, upcoming=upcoming)
            done.append((index, wall.now))
        except NoSlot as no_slot:
            done.append((index, no_slot))
            wall.now += give_back_seconds  # the give-back's writes
    return done


def test_a_plan_sends_in_the_order_of_the_slots_so_none_goes_unused():
    # Sender +1's next 3 s are reserved by another worker, +2 is idle: +2's sends go at once
    # and +1's after, each at its slot, instead of +2's slots passing while +1's are waited for.
    wall = Wall()
    records = Records(**{"twilio#+1": wall.now + 3.0})
    p = Pacer(records, 5.0, wall=wall, sleep=wall.sleep)  # type: ignore[arg-type]
    bodies = [body("twilio#+1")] * 2 + [body("twilio#+2")] * 2
    done = run_batch(p, bodies, wall)
    start = 1_000.0
    assert done == [(2, start), (3, start + 1), (0, start + 3), (1, start + 4)]
    assert all(s.reservations == 1 for s in records.schedules.values())  # one request a rate


def test_a_rate_the_plan_found_full_gives_back_the_whole_batch_at_that_rate():
    # Full for the next 5 s: every send at that rate goes back, even when the schedule has
    # room for one more by the time the later ones come up (the worker would otherwise sleep
    # on a rate another worker keeps busy); the other rate's sends go meanwhile.
    wall = Wall()
    records = Records(**{"twilio#+1": wall.now + 5.0})
    p = Pacer(records, 5.0, wall=wall, sleep=wall.sleep)  # type: ignore[arg-type]
    bodies = [body("twilio#+1")] * 3 + [body("twilio#+2")] * 3
    done = run_batch(p, bodies, wall, give_back_seconds=1.5)  # room for one after the first
    assert [i for i, outcome in done if isinstance(outcome, NoSlot)] == [0, 1, 2]
    assert [i for i, outcome in done if not isinstance(outcome, NoSlot)] == [3, 4, 5]
    assert records.schedules["twilio#+1"].reservations == 1


def test_sends_given_back_together_come_back_one_after_another_at_the_rate(monkeypatch):
    monkeypatch.setattr("vdq.dispatch.pacing.random.uniform", lambda low, high: low)  # no jitter
    wall = Wall()
    records = Records(**{"twilio#+1": wall.now + 5.0})
    p = Pacer(records, 5.0, wall=wall, sleep=wall.sleep)  # type: ignore[arg-type]
    done = run_batch(p, [body("twilio#+1")] * 3, wall)
    # A one-slot reservation fits 1 s from now (4 s ahead); then one a second, at 1/s, not
    # all three at the moment the schedule frees (where only the first would find room).
    assert [outcome.delay for _, outcome in done] == [1, 2, 3]  # type: ignore[attr-defined]


@pytest.mark.parametrize("ahead,waits", [(3.0, True), (3.5, False)])
def test_the_longest_wait_runs_to_the_end_of_the_slot(ahead, waits):
    """At 0.5/s a slot lasts 2 s: within the longest wait (5 s), a slot may begin at most 3 s
    away; one beginning 3.5 s away would end past it, and the item goes back instead."""
    wall = Wall()
    schedule = Schedule(tat=wall.now + ahead)
    p = pacer(schedule, wall)
    start = wall.now
    if waits:
        p.turn("twilio#+15550001", 0.5)
        assert wall.now - start == pytest.approx(ahead)
    else:
        with pytest.raises(NoSlot):
            p.turn("twilio#+15550001", 0.5)
        assert wall.slept == []


# ---- the sparse indexes' shards follow the rate ------------------------------------------------


def test_the_index_shards_a_rate_needs_double_from_the_default_as_the_rate_grows():
    from vdq.core.settings import INDEX_SHARD_RATE, Settings, index_shards_for

    assert Settings().index_shards == index_shards_for(14) == index_shards_for(600) == 4
    assert index_shards_for(601) == index_shards_for(1_000) == index_shards_for(1_200) == 8
    assert index_shards_for(1_201) == 16 and index_shards_for(5_000) == 64
    for rate in (1, 14, 599, 1_000, 2_500, 9_999):  # each shard within its share of the writes
        shards = index_shards_for(rate)
        assert rate / shards <= INDEX_SHARD_RATE and shards & (shards - 1) == 0


def test_too_few_index_shards_for_the_rate_are_warned_once_a_container(monkeypatch):
    from vdq.dispatch import pacing

    warned = []
    monkeypatch.setattr(pacing, "logger", SimpleNamespace(
        warning=lambda message, *args: warned.append(message % args)))  # fmt: skip
    p = pacer(Schedule(), Wall())

    def runtime(rate: float, shards: int) -> SimpleNamespace:
        return SimpleNamespace(overrides={"pacer": p}, settings=SimpleNamespace(
            ses_max_send_rate=rate, index_shards=shards))  # fmt: skip

    assert pacing.limit_of("ses", runtime(500.0, 4)) == 500.0 and warned == []
    assert pacing.limit_of("ses", runtime(1_000.0, 4)) == 1_000.0
    assert pacing.limit_of("ses", runtime(1_000.0, 4)) == 1_000.0
    assert warned == ["VDQ_INDEX_SHARDS is 4: at SES's rate of 1000 emails a second the "
                      "open-items and timer indexes need 8 shards; raise it"]
    pacing.limit_of("ses", runtime(1_000.0, 8))
    pacing.limit_of("ses", runtime(2_000.0, 8))  # a higher rate read later: warned again
    assert len(warned) == 2 and "need 16 shards" in warned[1]
