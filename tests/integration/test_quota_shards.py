"""A producer's quota counters split over shards (VDQ_QUOTA_SHARDS), against moto: a request
writes one shard's record; with N shards a producer is never admitted more than its limit in
any window, and is refused only when the shards together lack room; refunds take back what was
charged, from where it was charged; the day of an upgrade keeps the earlier release's count."""

from __future__ import annotations

import random
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from tests.support.made import Calls, earlier_release_counted
from vdq.core.settings import QuotaLimits
from vdq.intake import quotas
from vdq.intake.quotas import QuotaExceeded, windows
from vdq.store import StoreBusy
from vdq.store.counters import TURNS, Counters
from vdq.store.quota_records import quota_pk, share

T0 = datetime(2026, 12, 3, 12, 0, 10, tzinfo=UTC)


@pytest.fixture
def table(aws):
    return aws["table"]


def shard_record(table: str, producer: str, shard: int) -> dict:
    key = {"pk": {"S": quota_pk(producer, shard)}, "sk": {"S": "Q"}}
    return boto3.client("dynamodb").get_item(TableName=table, Key=key).get("Item") or {}


def counts(table: str, producer: str, shards: int, kind: str) -> list[tuple[str, int]]:
    """(window held, count) of ``kind`` in each shard record."""
    out = []
    for i in range(shards):
        item = shard_record(table, producer, i)
        held = item.get(f"{kind}w", {}).get("S", "")
        out.append((held, int(item.get(f"{kind}n", {}).get("N", "0"))))
    return out


def window_totals(table: str, producer: str, shards: int, kind: str) -> dict[str, int]:
    """What the shards together count in each window of ``kind`` they hold."""
    out: dict[str, int] = {}
    for held, n in counts(table, producer, shards, kind):
        if held:
            out[held] = out.get(held, 0) + n
    return out


def concurrently(request, n: int) -> None:
    """``request(0)`` .. ``request(n - 1)``, each on a thread of its own, all started at once."""
    threads = [threading.Thread(target=request, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def pinned(table: str, shards: int, shard: int, client=None) -> Counters:
    return Counters(client or boto3.client("dynamodb"), table, shards=shards, pick=lambda n: shard)


def fill(
    table: str, producer: str, limits: QuotaLimits, at: datetime, shards: int, shard: int, n: int
) -> None:
    """Charge ``n`` single items into shard ``shard`` (all must land there)."""
    c = pinned(table, shards, shard)
    for _ in range(n):
        got = c.charge(producer, windows(limits, at), 1)
        assert got and all(w.shard == shard for w in got)


def before_op(client, operation: str, run, nth=(1,)) -> list[str]:
    """Run ``run(k)`` before the k-th call (from 1) of ``operation`` whose k is in ``nth``;
    the operations ``client`` made, in order."""
    made: list[str] = []

    def note(model, **_):
        made.append(model.name)
        k = sum(1 for m in made if m == operation)
        if model.name == operation and k in nth:
            run(k)

    client.meta.events.register("before-call.dynamodb.*", note)
    return made


def test_shares_sum_to_the_limit():
    for limit in range(0, 40):
        for shards in range(1, 17):
            parts = [share(limit, i, shards) for i in range(shards)]
            assert sum(parts) == limit and max(parts) - min(parts) <= 1


# Exactness under concurrency: random shards, many threads, several windows.


@pytest.mark.parametrize("shards", [1, 2, 4, 16])
def test_concurrent_charges_never_pass_a_limit_and_fill_it(
    table, atomic_requests, shards
):
    limits = QuotaLimits(per_second=100, per_minute=30)
    counters = Counters(
        boto3.client("dynamodb"), table, shards=shards, pick=random.Random(7).randrange
    )
    admitted, busy = [], []

    def request(n: int) -> None:
        at = T0 + timedelta(seconds=n % 5)
        try:
            if counters.charge("p1", windows(limits, at), 1):
                admitted.append(n)
        except StoreBusy:
            busy.append(n)

    concurrently(request, 60)
    assert not busy, f"{len(busy)} requests answered 503"
    assert len(admitted) == 30  # never more, and refused only when full
    assert counters.used("p1", windows(limits, T0 + timedelta(seconds=4)))["per_minute"] == 30


@pytest.mark.parametrize("shards", [3, 4])
def test_concurrent_charges_of_many_sizes_never_pass_any_limit(table, atomic_requests, shards):
    limits = QuotaLimits(per_second=9, per_minute=30, per_day=40)
    counters = Counters(
        boto3.client("dynamodb"), table, shards=shards, pick=random.Random(11).randrange
    )
    admitted: dict[int, int] = {}
    per_second: dict[str, int] = {}  # by the second each item was counted in
    lock = threading.Lock()

    def request(n: int) -> None:
        at = T0 + timedelta(seconds=n % 5)
        charged = counters.charge("p1", windows(limits, at), 1 + n % 4)
        if charged:
            with lock:
                admitted[n] = 1 + n % 4
                for w in charged:
                    if w.kind == "s":
                        per_second[w.sk] = per_second.get(w.sk, 0) + (w.amount or 1 + n % 4)

    concurrently(request, 80)
    assert max(per_second.values()) <= 9, per_second
    assert sum(admitted.values()) <= 30
    last = counters.used("p1", windows(limits, T0 + timedelta(seconds=4)))
    assert last["per_minute"] == sum(admitted.values()) == last["per_day"]


def test_sequential_charges_fill_the_limit_exactly_whatever_the_shard(table):
    limits = QuotaLimits(per_second=100, per_minute=13, per_day=1000)
    rng = random.Random(3)
    counters = Counters(boto3.client("dynamodb"), table, shards=4, pick=rng.randrange)
    total = 0
    for _ in range(40):
        n = rng.choice([1, 2, 3])
        got = counters.charge("p1", windows(limits, T0), n)
        if got:
            total += n
        else:
            assert counters.used("p1", windows(limits, T0))["per_minute"] + n > 13, (
                "refused while the shards together had room"
            )
    assert total == counters.used("p1", windows(limits, T0))["per_minute"] <= 13


# The spread path under races.


def test_another_charge_filling_a_shard_between_read_and_transaction_is_planned_again(table):
    limits = QuotaLimits(per_minute=8)  # 4 shards: 2 each
    fill(table, "p1", limits, T0, 4, 0, 2)  # shard 0 full
    fill(table, "p1", limits, T0, 4, 1, 1)  # shard 1: 1 of 2
    client = boto3.client("dynamodb")
    # Before the first transaction, another charge takes shard 2's room (planned: 2 there).
    made = before_op(client, "TransactWriteItems", lambda k: fill(table, "p1", limits, T0, 4, 2, 2))
    charged = pinned(table, 4, 0, client).charge("p1", windows(limits, T0), 3)
    assert charged  # 5 counted of 8: room for 3 in shards 1 and 3
    assert made == ["BatchGetItem", "TransactWriteItems", "BatchGetItem", "TransactWriteItems"]
    assert sum(w.amount for w in charged) == 3
    assert [n for _, n in counts(table, "p1", 4, "m")] == [2, 2, 2, 2]
    assert not pinned(table, 4, 3).charge("p1", windows(limits, T0), 1)


def test_a_race_that_leaves_too_little_room_refuses_with_nothing_counted(table):
    limits = QuotaLimits(per_minute=8)
    fill(table, "p1", limits, T0, 4, 0, 2)
    client = boto3.client("dynamodb")
    made = before_op(client, "TransactWriteItems", lambda k: fill(table, "p1", limits, T0, 4, 3, 2))
    assert pinned(table, 4, 0, client).charge("p1", windows(limits, T0), 5) is None
    assert made == ["BatchGetItem", "TransactWriteItems", "BatchGetItem"]
    assert [n for _, n in counts(table, "p1", 4, "m")] == [2, 0, 0, 2]


def test_a_window_turning_between_read_and_transaction_is_planned_again(table):
    limits = QuotaLimits(per_second=8, per_minute=100)  # per_second: 2 a shard
    fill(table, "p1", limits, T0, 4, 0, 2)
    fill(table, "p1", limits, T0, 4, 1, 1)
    client = boto3.client("dynamodb")
    later = T0 + timedelta(seconds=1)
    # A clock ahead turns the second of shards 2 and 3 (planned: 2 each) before the
    # transaction.
    made = before_op(
        client,
        "TransactWriteItems",
        lambda k: [fill(table, "p1", limits, later, 4, shard, 1) for shard in (2, 3)],
    )
    charged = pinned(table, 4, 0, client).charge("p1", windows(limits, T0), 3)
    assert charged is not None
    assert made.count("TransactWriteItems") == 2
    assert all(n <= 2 for _, n in counts(table, "p1", 4, "s"))
    assert all(n <= 8 for n in window_totals(table, "p1", 4, "s").values())
    assert sum(n for _, n in counts(table, "p1", 4, "m")) == 2 + 1 + 2 + 3


@pytest.mark.parametrize("shards", [1, 4])
def test_a_clock_behind_is_not_refused_when_the_newer_window_has_room(table, shards):
    # One record: a caller whose clock is behind counts into the newer second another
    # function started, which has room. Sharded, the shards still holding the caller's
    # second are summed with the newer one's count: refused with room in both seconds.
    limits = QuotaLimits(per_second=4, per_minute=100)  # 4 shards: 1 a second each
    later = T0 + timedelta(seconds=1)
    fill(table, "p1", limits, T0, shards, 0, 1)
    fill(table, "p1", limits, T0, shards, 1 % shards, 1)
    fill(table, "p1", limits, later, shards, 2 % shards, 1)  # a clock ahead: the next second
    # The caller's second counted 2 (of 4); the newer second 1 (of 4).
    charged = pinned(table, shards, 0).charge("p1", windows(limits, T0), 2)
    assert charged is not None, "refused: 2 + 2 <= 4 in its second, 1 + 2 <= 4 in the newer"
    assert all(n <= 4 for n in window_totals(table, "p1", shards, "s").values())


def test_transactions_failing_every_turn_are_a_503_with_nothing_counted(table):
    limits = QuotaLimits(per_second=100, per_minute=8)
    fill(table, "p1", limits, T0, 4, 0, 2)  # shard 0's minute full
    client = boto3.client("dynamodb")

    # Before every transaction a clock ahead turns the second of every shard (the plan counts
    # the second in one of them).
    def turn(k: int) -> None:
        for shard in (0, 1, 2, 3):
            assert pinned(table, 4, shard).charge(
                "p1", windows(QuotaLimits(per_second=100), T0 + timedelta(seconds=k)), 1
            )

    made = before_op(client, "TransactWriteItems", turn, nth=range(1, TURNS + 1))
    with pytest.raises(StoreBusy):
        pinned(table, 4, 0, client).charge("p1", windows(limits, T0), 3)
    assert made.count("TransactWriteItems") == TURNS
    assert [n for _, n in counts(table, "p1", 4, "m")] == [2, 0, 0, 0]
    assert [n for _, n in counts(table, "p1", 4, "s")] == [1, 1, 1, 1]


# A clock behind in the spread path.


def test_a_clock_behind_spread_over_shards_holding_newer_windows_stays_exact(table):
    limits = QuotaLimits(per_second=8, per_minute=1000)  # per_second: 2 a shard
    ahead = T0 + timedelta(seconds=1)
    fill(table, "p1", limits, ahead, 4, 0, 2)  # shard 0: the newer second, full
    fill(table, "p1", limits, ahead, 4, 1, 1)  # shard 1: the newer second, 1 of 2
    c = pinned(table, 4, 0)
    charged = c.charge("p1", windows(limits, T0), 5)  # behind: 3 + 5 = 8 of 8
    assert charged
    assert sum(w.amount for w in charged if w.kind == "s") == 5
    assert all(n <= 8 for n in window_totals(table, "p1", 4, "s").values())
    assert not c.charge("p1", windows(limits, T0), 1)
    # Its refund takes back all five, from where they went.
    c.refund("p1", charged, 5)
    assert [n for _, n in counts(table, "p1", 4, "s")] == [2, 1, 0, 0]
    assert sum(n for _, n in counts(table, "p1", 4, "m")) == 3


# Charges bigger than a share, limits smaller than the shard count.


def test_a_charge_bigger_than_any_share_is_spread_and_refunded_in_part(table):
    limits = QuotaLimits(per_second=20, per_minute=12, per_day=100)  # minute: 3 a shard
    c = pinned(table, 4, 2)
    charged = c.charge("p1", windows(limits, T0), 10)
    assert charged
    assert c.used("p1", windows(limits, T0)) == {"per_second": 10, "per_minute": 10, "per_day": 10}
    for kind in ("s", "m", "d"):
        assert sum(w.amount for w in charged if w.kind == kind) == 10
    c.refund("p1", charged, 4)  # 6 of 10 stored
    assert c.used("p1", windows(limits, T0)) == {"per_second": 6, "per_minute": 6, "per_day": 6}
    assert all(n >= 0 for kind in "smd" for _, n in counts(table, "p1", 4, kind))
    # Refunded again (a retry of the refund): never below what is left of other charges.
    assert c.charge("p1", windows(limits, T0), 1)
    c.refund("p1", charged, 10)
    assert c.used("p1", windows(limits, T0))["per_minute"] >= 1


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
def test_limits_smaller_than_the_shard_count_admit_exactly_the_limit(table, limit):
    limits = QuotaLimits(per_second=100, per_day=limit)
    for shard in range(4):
        c = pinned(table, 4, shard)
        for _ in range(limit + 2):
            c.charge("p1", windows(limits, T0), 1)
    assert (
        Counters(boto3.client("dynamodb"), table, shards=4).used("p1", windows(limits, T0))[
            "per_day"
        ]
        == limit
    )


def test_a_full_shard_spreads_even_for_a_single_item(table):
    limits = QuotaLimits(per_minute=4)
    fill(table, "p1", limits, T0, 4, 0, 1)
    got = [pinned(table, 4, 0).charge("p1", windows(limits, T0), 1) for _ in range(4)]
    assert [bool(g) for g in got] == [True, True, True, False]


# Group members in shards > 0.


def test_a_member_charged_into_a_shard_past_0_is_found(table):
    limits = QuotaLimits(per_minute=100, per_day=1000)
    c = pinned(table, 4, 3)
    assert c.charge("group:bulk", windows(limits, T0), 1, member="client-a")
    assert not shard_record(table, "group:bulk", 0)
    assert c.charged_as("client-a", [("group:bulk", windows(limits, T0))]) == "group:bulk"
    assert c.charged_as("client-z", [("group:bulk", windows(limits, T0))]) is None


def test_a_member_of_a_spread_charge_is_found(table):
    limits = QuotaLimits(per_minute=8, per_day=8)
    c = pinned(table, 4, 1)
    assert c.charge("group:bulk", windows(limits, T0), 6, member="client-b")
    assert (
        c.charged_as("client-b", [("group:bulk", windows(limits, T0 + timedelta(minutes=3)))])
        == "group:bulk"
    )


# The 429 path in quotas.charge.


@pytest.fixture
def sharded_runtime(runtime):
    runtime.settings = replace(
        runtime.settings,
        quota_shards=4,
        producer_quotas={"p1": QuotaLimits(per_second=100, per_minute=8, per_day=1000)},
    )
    return runtime


def test_a_429_names_the_limit_and_the_sum_of_the_shards(sharded_runtime):
    rt = sharded_runtime
    rt.clock._now = T0
    for _ in range(4):
        assert quotas.charge("p1", (), 2, rt) is not None
    with pytest.raises(QuotaExceeded) as refused:
        quotas.charge("p1", (), 1, rt)
    d = refused.value.details
    assert (d["limit"], d["quota"], d["used"]) == ("per_minute", 8, 8), d
    usage = {w["limit"]: w["used"] for w in quotas.usage("p1", rt)["limits"]}
    assert usage == {"per_second": 8, "per_minute": 8, "per_day": 8}


def test_a_429_from_a_clock_behind_with_shards(sharded_runtime):
    rt = sharded_runtime
    minute = datetime(2026, 12, 3, 12, 1, 0, tzinfo=UTC)
    rt.clock._now = minute + timedelta(milliseconds=200)
    for _ in range(8):
        assert quotas.charge("p1", (), 1, rt) is not None
    rt.clock._now = minute - timedelta(milliseconds=200)
    with pytest.raises(QuotaExceeded) as refused:
        quotas.charge("p1", (), 1, rt)
    d = refused.value.details
    assert (d["limit"], d["used"]) == ("per_minute", 8), d


def test_a_failed_request_with_shards_is_refunded_to_zero(sharded_runtime):
    rt = sharded_runtime
    rt.clock._now = T0
    assert quotas.charge("p1", (), 3, rt) is not None

    def fails() -> None:
        raise RuntimeError("nope")

    with pytest.raises(RuntimeError):
        quotas.charged("p1", (), 5, rt, fails)  # 5 > any share of 2: spread
    assert {w["limit"]: w["used"] for w in quotas.usage("p1", rt)["limits"]} == {
        "per_second": 3,
        "per_minute": 3,
        "per_day": 3,
    }


# Records of an earlier release (one a window) with shards: the day of the upgrade keeps the
# day's count (docs/limits.md, "Upgrades and rollbacks").


@pytest.mark.parametrize("first", [0, 1, 2])
def test_the_day_of_an_upgrade_keeps_the_days_count_with_shards(table, first):
    limits = QuotaLimits(per_second=100, per_day=20)
    current = windows(limits, T0)
    earlier_release_counted(table, "p1", current[-1], 18)
    rng = random.Random(first)
    picks = iter([first] + [rng.randrange(4) for _ in range(20)])
    c = Counters(boto3.client("dynamodb"), table, shards=4, pick=lambda n: next(picks))
    admitted = sum(c.charge("p1", current, 1) is not None for _ in range(10))
    assert admitted == 2, f"{18 + admitted} admitted in a day of a limit of 20"


def test_the_upgrade_days_count_survives_a_spread_that_writes_shard_0(table):
    # The legacy day (18 of 20) is more than shard 0's share (5): shard 0's first charge
    # spreads; its plan counts the second in shard 0 and the day in another shard.
    limits = QuotaLimits(per_second=100, per_day=20)
    current = windows(limits, T0)
    earlier_release_counted(table, "p1", current[-1], 18)
    c = pinned(table, 4, 0)
    assert c.charge("p1", current, 1)
    assert c.used("p1", current)["per_day"] == 19, c.used("p1", current)


def test_a_legacy_group_member_stays_found_after_a_spread_writes_shard_0(table):
    limits = QuotaLimits(per_second=100, per_day=20)
    current = windows(limits, T0)
    earlier_release_counted(table, "group:bulk", current[-1], 18, members=("client-b",))
    c = pinned(table, 4, 0)
    assert c.charge("group:bulk", current, 1, member="client-a")
    assert c.charged_as("client-b", [("group:bulk", current)]) == "group:bulk"


# The setting.


def test_one_shard_is_one_record_and_one_update(table):
    client = boto3.client("dynamodb")
    calls = Calls(client)
    c = Counters(client, table, shards=1)
    limits = QuotaLimits(per_second=5, per_minute=8, per_day=20)
    assert c.charge("p1", windows(limits, T0), 2)
    calls.made.clear()
    got = c.charge("p1", windows(limits, T0), 3)
    assert calls.made == ["UpdateItem"] and all(w.shard == 0 and w.amount is None for w in got)
    items = boto3.client("dynamodb").scan(TableName=table)["Items"]
    assert [i["pk"]["S"] for i in items] == ["QUOTA#p1"]


def test_concurrent_charges_and_partial_refunds_keep_exact_counts(table, atomic_requests):
    limits = QuotaLimits(per_minute=40, per_day=60)
    counters = Counters(boto3.client("dynamodb"), table, shards=4, pick=random.Random(5).randrange)
    kept: list[int] = []
    lock = threading.Lock()

    def request(n: int) -> None:
        size = 1 + n % 6  # often more than a share (10 a shard): spread
        charged = counters.charge("p1", windows(limits, T0 + timedelta(seconds=n % 4)), size)
        if not charged:
            return
        back = n % 3  # 0, 1 or 2 of its items not stored
        if back:
            counters.refund("p1", charged, min(back, size))
        with lock:
            kept.append(size - min(back, size))

    concurrently(request, 50)
    used = counters.used("p1", windows(limits, T0 + timedelta(seconds=3)))
    assert used == {"per_minute": sum(kept), "per_day": sum(kept)}
    assert sum(kept) <= 40
    assert all(n >= 0 for kind in "md" for _, n in counts(table, "p1", 4, kind))
    for i in range(4):
        assert counts(table, "p1", 4, "m")[i][1] <= share(40, i, 4)


# One write a request, and a request no share holds in one transaction.

LIMITS = QuotaLimits(per_second=10, per_minute=14, per_day=40)


def test_a_request_writes_one_shard_of_one_write_unit(table):
    client = boto3.client("dynamodb")
    calls = Calls(client)
    store = pinned(table, 4, 2, client)
    assert store.charge("p1", windows(LIMITS, T0), 1)  # a new shard: written by a spread
    calls.made.clear()
    charged = store.charge("p1", windows(LIMITS, T0), 1)
    assert calls.made == ["UpdateItem"]
    assert {w.shard for w in charged} == {2}
    assert [n for _, n in counts(table, "p1", 4, "s")] == [0, 0, 2, 0]


def test_a_request_larger_than_any_share_is_counted_across_shards_in_one_transaction(table):
    client = boto3.client("dynamodb")
    calls = Calls(client)
    charged = pinned(table, 4, 1, client).charge("p1", windows(LIMITS, T0), 9)
    assert charged is not None
    # The shards, then (shard 0 being new) the records of a release before the one record.
    assert calls.made == ["BatchGetItem", "BatchGetItem", "TransactWriteItems"]
    assert sum(n for _, n in counts(table, "p1", 4, "s")) == 9
    for kind in ("s", "m", "d"):
        assert sum(w.amount or 0 for w in charged if w.kind == kind) == 9
    assert pinned(table, 4, 1).charge("p1", windows(LIMITS, T0), 2) is None  # 11 passes 10
    assert pinned(table, 4, 1).charge("p1", windows(LIMITS, T0), 1) is not None


def test_a_new_second_turns_the_shards_it_counts_in_and_keeps_the_longer_windows(table):
    store = pinned(table, 4, 0)
    assert store.charge("p1", windows(LIMITS, T0), 10)  # the second is full
    assert store.charge("p1", windows(LIMITS, T0), 1) is None
    later = windows(LIMITS, T0 + timedelta(seconds=1))
    assert store.charge("p1", later, 4) is not None  # 14 of the minute: full
    assert store.charge("p1", later, 1) is None
    assert store.used("p1", later) == {"per_second": 4, "per_minute": 14, "per_day": 14}


# Mixed windows.


def test_shard_newer_in_second_older_in_minute_stays_exact(table):
    # Shard 1 turned to the next second (a charge with only a per-second limit, clock ahead,
    # across a minute boundary), keeps the old minute.
    limits = QuotaLimits(per_second=8, per_minute=8)
    at = datetime(2026, 12, 3, 12, 0, 59, tzinfo=UTC)
    ahead = at + timedelta(seconds=1)  # next minute
    fill(table, "p1", limits, at, 4, 0, 2)
    fill(table, "p1", limits, at, 4, 1, 2)
    fill(table, "p1", QuotaLimits(per_second=8), ahead, 4, 2, 2)  # s newer, m absent/older
    c = pinned(table, 4, 3)
    got = c.charge("p1", windows(limits, at), 4)
    assert got is not None  # minute: 4 + 4 = 8; second: newer second 2 + 4 = 6
    assert all(n <= 8 for n in window_totals(table, "p1", 4, "s").values())
    assert all(n <= 8 for n in window_totals(table, "p1", 4, "m").values())
    assert c.charge("p1", windows(limits, at), 1) is None
    c.refund("p1", got, 4)
    assert sum(n for h, n in counts(table, "p1", 4, "m")) == 4


def test_clock_ahead_newer_window_plus_own_window_charge_is_exact(table):
    limits = QuotaLimits(per_second=8, per_minute=100)
    ahead = T0 + timedelta(seconds=1)
    fill(table, "p1", limits, T0, 4, 0, 2)
    fill(table, "p1", limits, T0, 4, 1, 2)
    fill(table, "p1", limits, ahead, 4, 2, 2)
    admitted_ahead = 0
    for shard in range(4):
        for _ in range(4):
            if pinned(table, 4, shard).charge("p1", windows(limits, T0), 1):
                admitted_ahead += 1
    t = window_totals(table, "p1", 4, "s")
    assert all(n <= 8 for n in t.values()), t
    # Refused only when the windows are full: the newer second must be full by the end.
    assert t.get(f"s#{int(ahead.timestamp())}", 0) == 8, t


# An earlier release's count belongs to the caller's window, not one a clock ahead turned.


def test_an_upgrade_days_count_is_not_carried_into_the_next_day_a_clock_ahead_turned(table):
    limits = QuotaLimits(per_second=100, per_day=20)
    before = datetime(2026, 12, 3, 23, 59, 59, tzinfo=UTC)
    after = before + timedelta(seconds=1)  # the next UTC day
    earlier_release_counted(table, "p1", windows(limits, before)[-1], 18)  # 18 of 20 today
    # A function whose clock is ahead charges tomorrow into shard 1 (no legacy tomorrow).
    assert pinned(table, 4, 1).charge("p1", windows(limits, after), 1)
    # A caller still in today: the legacy 18 is today's count, not tomorrow's.
    pinned(table, 4, 0).charge("p1", windows(limits, before), 1)
    tomorrow = windows(limits, after)
    used = Counters(boto3.client("dynamodb"), table, shards=4).used("p1", tomorrow)
    more = sum(pinned(table, 4, i % 4).charge("p1", tomorrow, 1) is not None for i in range(20))
    assert used["per_day"] <= 2, (
        f"tomorrow already counts {used['per_day']} of 20; {more} more admitted tomorrow")


def test_an_upgrade_minute_count_is_not_carried_into_a_newer_minute(table):
    limits = QuotaLimits(per_second=100, per_minute=10)
    before = datetime(2026, 12, 3, 12, 0, 59, tzinfo=UTC)
    after = before + timedelta(seconds=1)
    earlier_release_counted(table, "p1", windows(limits, before)[1], 9)
    assert pinned(table, 4, 1).charge("p1", windows(limits, after), 1)
    # One record would count this caller behind in the newer minute (1 of 10): admitted.
    got = pinned(table, 4, 0).charge("p1", windows(limits, before), 1)
    used = Counters(boto3.client("dynamodb"), table, shards=4).used("p1", windows(limits, after))
    assert got is not None, f"refused with {used['per_minute']} of 10 in the newer minute"
    assert used["per_minute"] <= 2, used


# An earlier release's count with concurrent charges.


@pytest.mark.parametrize("seed", range(6))
def test_legacy_carry_over_with_concurrent_charges_is_exact(table, atomic_requests, seed):
    limits = QuotaLimits(per_second=100, per_minute=30, per_day=30)
    current = windows(limits, T0)
    earlier_release_counted(table, "p1", current[1], 7)
    earlier_release_counted(table, "p1", current[2], 12)
    c = Counters(boto3.client("dynamodb"), table, shards=4, pick=random.Random(seed).randrange)
    admitted, busy = [], []
    lock = threading.Lock()

    def request(n: int) -> None:
        size = 1 + n % 5
        try:
            if c.charge("p1", current, size):
                with lock:
                    admitted.append(size)
        except StoreBusy:
            busy.append(n)

    concurrently(request, 30)
    used = c.used("p1", current)
    assert not busy
    assert used["per_day"] == 12 + sum(admitted) <= 30, (used, sum(admitted))
    assert used["per_minute"] == 7 + sum(admitted), (used, sum(admitted))
    assert 30 - used["per_day"] < 5 or not admitted  # refused only when nearly full


def test_legacy_then_new_shard_fast_path_failing_races_shard_0_creation(table):
    limits = QuotaLimits(per_second=100, per_day=20)
    current = windows(limits, T0)
    earlier_release_counted(table, "p1", current[-1], 4)
    client = boto3.client("dynamodb")
    # Shard 2 (new): fast path fails, spreads; before its transaction shard 0 is created by
    # the fast path carrying the legacy 4.
    before_op(client, "TransactWriteItems",
              lambda k: pinned(table, 4, 0).charge("p1", current, 1))  # fmt: skip
    assert pinned(table, 4, 2, client).charge("p1", current, 1)
    c = Counters(boto3.client("dynamodb"), table, shards=4)
    assert c.used("p1", current)["per_day"] == 6
    n = 0
    for shard in range(4):
        while pinned(table, 4, shard).charge("p1", current, 1):
            n += 1
    assert 6 + n == 20


# quotas.charge under concurrency: a 503 only when the counters kept refusing.


class ThreadClock:
    def __init__(self, default: datetime) -> None:
        self.local = threading.local()
        self.default = default

    def now(self) -> datetime:
        return getattr(self.local, "at", self.default)


@pytest.mark.parametrize("shards", [1, 4])
def test_quotas_charge_under_concurrency_has_no_spurious_503(runtime, atomic_requests, shards):
    rt = runtime
    limits = QuotaLimits(per_second=12, per_minute=60, per_day=1000)
    rt.settings = replace(rt.settings, quota_shards=shards, producer_quotas={"p1": limits})
    clock = ThreadClock(T0)
    rt.clock = clock
    results: dict[str, int] = {"ok": 0, "429": 0, "503": 0}
    items = [0]
    lock = threading.Lock()

    def request(n: int) -> None:
        clock.local.at = T0 + timedelta(seconds=n % 6, milliseconds=random.randrange(1000))
        size = 1 + n % 4
        try:
            got = quotas.charge("p1", (), size, rt)
            with lock:
                results["ok"] += 1
                items[0] += size
            if n % 5 == 0 and got is not None:
                quotas.refund(got.part(1), rt)
                with lock:
                    items[0] -= 1
        except QuotaExceeded:
            with lock:
                results["429"] += 1
        except StoreBusy:
            with lock:
                results["503"] += 1

    concurrently(request, 120)
    used = quotas.counters(rt).used("p1", windows(limits, T0 + timedelta(seconds=5)))
    assert used["per_minute"] == items[0] <= 60, (used, items)
    assert results["503"] == 0, results


@pytest.mark.parametrize("shards", [4, 8])
def test_many_concurrent_spreads_far_from_the_limit_are_not_503(table, atomic_requests, shards):
    limits = QuotaLimits(per_minute=400)  # share 100 / 50; nowhere near full
    c = Counters(boto3.client("dynamodb"), table, shards=shards, pick=random.Random(1).randrange)
    busy, ok = [], []

    def request(n: int) -> None:
        try:
            if c.charge("p1", windows(limits, T0), 3 + n % 3 if n % 2 else 60):
                ok.append(n)
        except StoreBusy:
            busy.append(n)

    concurrently(request, 60)
    used = c.used("p1", windows(limits, T0))["per_minute"]
    assert used <= 400
    assert not busy, f"{len(busy)} of 60 were 503 with {used} of 400 used"


# Refunds of parts whose shard turned.


def test_refund_of_a_part_whose_shard_turned_takes_nothing_from_the_new_window(table):
    limits = QuotaLimits(per_second=8, per_minute=100)
    c = pinned(table, 4, 0)
    got = c.charge("p1", windows(limits, T0), 6)  # spread over shards
    assert got and len({w.shard for w in got if w.kind == "s"}) > 1
    later = T0 + timedelta(seconds=1)
    fill(table, "p1", limits, later, 4, 1, 1)  # shard 1 turned
    c.refund("p1", got, 6)
    s = dict(counts(table, "p1", 4, "s"))
    assert s.get(f"s#{int(later.timestamp())}") == 1
    assert all(n >= 0 for _, n in counts(table, "p1", 4, "s"))
    assert sum(n for _, n in counts(table, "p1", 4, "m")) == 1


# read vs admission: a 429's used.


def test_a_429_used_agrees_with_admission_with_a_clock_ahead_shard(runtime):
    rt = runtime
    limits = QuotaLimits(per_second=8, per_minute=100)
    rt.settings = replace(rt.settings, quota_shards=4, producer_quotas={"p1": limits})
    table = rt.settings.table_name
    fill(table, "p1", limits, T0, 4, 0, 2)
    fill(table, "p1", limits, T0, 4, 1, 2)
    fill(table, "p1", limits, T0 + timedelta(seconds=1), 4, 2, 2)
    rt.clock._now = T0
    admitted = 0
    for _ in range(10):
        try:
            quotas.charge("p1", (), 1, rt)
            admitted += 1
        except QuotaExceeded as e:
            d = e.details
            assert d["used"] + 1 > d["quota"], d
            break
    assert admitted == 6  # the newer second: 2 + 6 = 8


@pytest.mark.parametrize("shards", [1, 4])
def test_quotas_charge_flickering_room_rate_of_503(runtime, atomic_requests, shards):
    # Near the minute limit, half the requests fail and are refunded: room flickers. A 503
    # while read() shows room is what the loop answers after CHARGE_TRIES refusals.
    rt = runtime
    limits = QuotaLimits(per_minute=20, per_day=100_000)
    rt.settings = replace(rt.settings, quota_shards=shards, producer_quotas={"p1": limits})
    rt.clock._now = T0
    results: dict[str, int] = {"ok": 0, "429": 0, "503": 0}
    lock = threading.Lock()

    def request(n: int) -> None:
        try:
            got = quotas.charge("p1", (), 1 + n % 3, rt)
            if n % 2:
                quotas.refund(got, rt)
            key = "ok"
        except QuotaExceeded:
            key = "429"
        except StoreBusy:
            key = "503"
        with lock:
            results[key] += 1

    concurrently(request, 200)
    assert results["503"] == 0, results
