"""The quota counters' one record per producer, against moto: a charge is one UpdateItem of one
write unit whatever the producer's limits, windows turn without losing a count, and a record
of an earlier release's layout (a record a window) is carried over."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from vdq.core.settings import QuotaLimits
from vdq.intake.quotas import windows
from vdq.store import StoreBusy
from vdq.store.counters import TURNS, Counters

LIMITS = QuotaLimits(per_second=5, per_minute=8, per_day=20)
T0 = datetime(2026, 12, 3, 12, 0, 10, tzinfo=UTC)


@pytest.fixture
def table(aws):
    return aws["table"]


class Calls:
    """The DynamoDB operations a client made, and a hook run before one of them."""

    def __init__(self, client) -> None:
        self.made: list[str] = []
        self.before: dict[int, object] = {}  # the n-th call (from 1) -> what to run first
        client.meta.events.register("before-call.dynamodb.*", self._note)

    def _note(self, model, **_):
        self.made.append(model.name)
        run = self.before.pop(len(self.made), None)
        if run is not None:
            run()


def record(table: str, producer: str) -> dict:
    key = {"pk": {"S": f"QUOTA#{producer}"}, "sk": {"S": "Q"}}
    return boto3.client("dynamodb").get_item(TableName=table, Key=key).get("Item") or {}


def test_a_charge_is_one_update_of_one_record_whatever_the_limits(table):
    client = boto3.client("dynamodb")
    calls = Calls(client)
    counters = Counters(client, table)
    current = windows(LIMITS, T0)
    assert counters.charge("p1", current, 2)  # the record is new: its first write turns
    calls.made.clear()
    assert counters.charge("p1", current, 3)
    assert calls.made == ["UpdateItem"]
    assert counters.used("p1", current) == {"per_second": 5, "per_minute": 5, "per_day": 5}
    items = boto3.client("dynamodb").scan(TableName=table)["Items"]
    assert [(i["pk"]["S"], i["sk"]["S"]) for i in items] == [("QUOTA#p1", "Q")]
    # Under a kilobyte: one write unit a charge.
    assert sum(len(k) + len(str(v)) for k, v in items[0].items()) < 1024


def test_a_window_that_turns_starts_at_the_request_and_the_others_keep_counting(table):
    counters = Counters(boto3.client("dynamodb"), table)
    assert counters.charge("p1", windows(LIMITS, T0), 5)
    assert not counters.charge("p1", windows(LIMITS, T0), 1)  # the second is full
    later = windows(LIMITS, T0 + timedelta(seconds=1))
    assert counters.charge("p1", later, 3)
    assert counters.used("p1", later) == {"per_second": 3, "per_minute": 8, "per_day": 8}
    assert not counters.charge("p1", windows(LIMITS, T0 + timedelta(seconds=2)), 1)  # minute
    next_minute = windows(LIMITS, T0 + timedelta(seconds=60))
    assert counters.charge("p1", next_minute, 4)
    assert counters.used("p1", next_minute) == {"per_second": 4, "per_minute": 4, "per_day": 12}
    # Nothing counted by a refused charge.
    assert record(table, "p1")["dn"] == {"N": "12"}


def test_two_requests_that_both_see_a_window_turn_count_once_each(table):
    counters = Counters(boto3.client("dynamodb"), table)
    assert counters.charge("p1", windows(LIMITS, T0), 4)
    later = windows(LIMITS, T0 + timedelta(seconds=1))
    client = boto3.client("dynamodb")
    calls = Calls(client)
    # The first write (assuming the new second) fails and answers the old record; before its
    # second write (the turn), another request turns the second first.
    calls.before[2] = lambda: counters.charge("p1", later, 2)
    assert Counters(client, table).charge("p1", later, 1)
    assert calls.made == ["UpdateItem", "UpdateItem", "UpdateItem"]  # the turn failed, again
    assert counters.used("p1", later) == {"per_second": 3, "per_minute": 7, "per_day": 7}


def test_a_charge_from_a_clock_behind_counts_into_the_newer_window(table):
    counters = Counters(boto3.client("dynamodb"), table)
    ahead = windows(LIMITS, T0 + timedelta(seconds=1))
    assert counters.charge("p1", ahead, 4)
    assert counters.charge("p1", windows(LIMITS, T0), 1)  # its second is the record's past
    assert counters.used("p1", ahead) == {"per_second": 5, "per_minute": 5, "per_day": 5}
    assert not counters.charge("p1", windows(LIMITS, T0), 1)  # and that window is full


def test_a_refund_takes_back_from_the_windows_still_held(table):
    counters = Counters(boto3.client("dynamodb"), table)
    assert counters.charge("p1", windows(LIMITS, T0), 3)
    assert counters.charge("p1", windows(LIMITS, T0 + timedelta(seconds=1)), 2)
    counters.refund("p1", windows(LIMITS, T0), 3)  # its second turned: nothing there
    assert counters.used("p1", windows(LIMITS, T0 + timedelta(seconds=1))) == {
        "per_second": 2, "per_minute": 2, "per_day": 2}
    # A refund never takes a window below zero (a charge refunded twice).
    counters.refund("p1", windows(LIMITS, T0 + timedelta(seconds=1)), 2)
    counters.refund("p1", windows(LIMITS, T0 + timedelta(seconds=1)), 2)
    assert counters.used("p1", windows(LIMITS, T0 + timedelta(seconds=1))) == {
        "per_second": 0, "per_minute": 0, "per_day": 0}


def test_a_group_records_its_members_a_window_and_forgets_them_when_it_turns(table):
    counters = Counters(boto3.client("dynamodb"), table)
    current = windows(LIMITS, T0)
    assert counters.charge("group:bulk", current, 1, member="client-a")
    assert counters.charge("group:bulk", current, 1, member="client-b")
    assert counters.charged_as("client-b", [("group:bulk", current)]) == "group:bulk"
    later = windows(QuotaLimits(per_second=5), T0 + timedelta(seconds=1))
    assert counters.charge("group:bulk", later, 1, member="client-c")
    assert counters.charged_as("client-a", [("group:bulk", later)]) is None
    assert counters.charged_as("client-c", [("group:bulk", later)]) == "group:bulk"
    # A charge of a client of its own (no member) leaves no member in a turned window.
    assert counters.charge("group:bulk", windows(QuotaLimits(per_second=5),
                                                 T0 + timedelta(seconds=2)), 1)  # fmt: skip
    assert "sc" not in record(table, "group:bulk")


def test_the_day_of_an_upgrade_keeps_the_days_count(table):
    # A release before the one record kept one record a window (sk: the window's key).
    client = boto3.client("dynamodb")
    current = windows(LIMITS, T0)
    day = current[-1]
    client.put_item(TableName=table, Item={"pk": {"S": "QUOTA#p1"}, "sk": {"S": day.sk},
                                           "used": {"N": "18"}, "expiration": {"N": "9"}})
    counters = Counters(client, table)
    assert counters.used("p1", current) == {"per_second": 0, "per_minute": 0, "per_day": 18}
    assert not counters.charge("p1", current, 3)  # 18 + 3 > 20
    assert counters.charge("p1", current, 2)
    assert counters.used("p1", current) == {"per_second": 2, "per_minute": 2, "per_day": 20}


def test_windows_that_keep_turning_under_the_write_are_a_503_with_nothing_counted(table):
    client = boto3.client("dynamodb")
    calls = Calls(client)
    other = Counters(boto3.client("dynamodb"), table)
    assert other.charge("p1", windows(LIMITS, T0), 1)
    # Before each of this charge's writes, another function whose clock runs ahead turns the
    # second again.
    for n in range(1, TURNS + 1):
        calls.before[n] = (lambda n=n: other.charge(
            "p1", windows(QuotaLimits(per_second=100), T0 + timedelta(seconds=n)), 1))
    with pytest.raises(StoreBusy):
        Counters(client, table).charge("p1", windows(QuotaLimits(per_second=100), T0), 1)
    assert record(table, "p1")["sn"] == {"N": "1"}


def test_concurrent_charges_never_pass_a_limit(table, atomic_requests):
    counters = Counters(boto3.client("dynamodb"), table)
    limits = QuotaLimits(per_minute=30)
    admitted = []

    def request(n: int) -> None:
        at = T0 + timedelta(seconds=n % 3)  # three seconds of one minute
        if counters.charge("p1", windows(limits, at), 1):
            admitted.append(n)

    threads = [threading.Thread(target=request, args=(n,)) for n in range(45)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 30
    assert counters.used("p1", windows(limits, T0)) == {"per_minute": 30}
