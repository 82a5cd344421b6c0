"""Producer quotas under contention, through the fault seam (harsh.py): one producer's requests all
charge its one counters record, and DynamoDB refuses a write beyond what the record's partition
gives (throttling) or one that meets a transaction on it (moto does neither: the seam answers
them). A charge or a refund so refused is tried again; one that keeps being refused is a 503
with nothing stored or charged. With the counters split over shards (VDQ_QUOTA_SHARDS), a
request no one shard has room for is counted across shards in one transaction, which DynamoDB
cancels for the same reasons."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability.harsh import Plan
from tests.reliability.support import fresh_clock
from tests.reliability.world import World, harsh_world
from vdq.api import Caller
from vdq.core.settings import QuotaLimits
from vdq.intake import quotas
from vdq.intake import rest as intake
from vdq.intake.quotas import QuotaExceeded
from vdq.store import StoreBusy

CLIENT = "producer-1"
SENDER = Caller(CLIENT, ("vdq-senders",), frozenset({"vdq.add_queueitem"}))
EMAIL = {"sender": {"email": "shop@example.com"},
         "to": [{"email": "ada@example.org"}, {"email": "grace@example.org"}],
         "subject": "Hi", "text": "Text"}  # fmt: skip


@pytest.fixture(scope="module", params=[1, 4], ids=["one record", "4 shards"])
def world_once(request: pytest.FixtureRequest) -> Iterator[World]:
    # With 4 shards a minute's share is 1 a shard: a request of two receivers always spreads.
    limits = QuotaLimits(per_minute=4, per_day=1000)
    with harsh_world(producer_quotas={"*": limits}, quota_shards=request.param) as created:
        yield created


@pytest.fixture
def world(world_once: World) -> World:
    world_once.fresh(fresh_clock())
    return world_once


def used(world: World) -> dict[str, int]:
    return {w["limit"]: w["used"] for w in quotas.usage(CLIENT, world.rt)["limits"]}


@pytest.mark.parametrize("reason", ["TransactionConflict", "ThrottlingError"])
def test_a_charge_refused_for_throughput_is_tried_again_and_counted_once(world, reason):
    with world.seam.step(Plan(counter=reason, counter_times=3, counter_on="charge")):
        answer = intake.submit("email", EMAIL, SENDER, world.rt)
    assert len(answer["items"]) == 2 and len(world.items()) == 2
    assert used(world) == {"per_minute": 2, "per_day": 2}


def test_a_charge_that_keeps_being_refused_is_a_503_with_nothing_stored_or_charged(world):
    plan = Plan(counter="ThrottlingError", counter_times=1000, counter_on="charge")
    with world.seam.step(plan), pytest.raises(StoreBusy) as refused:
        intake.submit("email", EMAIL, SENDER, world.rt)
    assert (refused.value.status, refused.value.code) == (503, "contention")
    assert world.items() == {}
    assert used(world) == {"per_minute": 0, "per_day": 0}


def test_a_refused_refund_is_tried_again_so_nothing_stays_charged(world):
    # The items cannot be stored (every batch write throttled): the request is refused and its
    # charge taken back, while the producer's other requests take its record's throughput (the
    # refund's UpdateItem throttled, twice per window).
    plan = Plan(batch="throttle", counter="ThrottlingError", counter_times=4,
                counter_on="refund")  # fmt: skip
    with world.seam.step(plan), pytest.raises(Exception, match="store refused"):
        intake.submit("email", EMAIL, SENDER, world.rt)
    assert world.items() == {}
    assert used(world) == {"per_minute": 0, "per_day": 0}


def test_the_counters_admit_the_minutes_limit_and_no_more(world):
    with world.seam.step(Plan()):
        intake.submit("email", EMAIL, SENDER, world.rt)
        intake.submit("email", EMAIL, SENDER, world.rt)
        with pytest.raises(QuotaExceeded) as refused:
            intake.submit("email", EMAIL, SENDER, world.rt)
    assert (refused.value.details["limit"], refused.value.details["used"]) == ("per_minute", 4)
    assert len(world.items()) == 4
