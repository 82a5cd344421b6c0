"""Producer quotas under contention, through the fault seam (harsh.py): concurrent requests of one
producer charge the same counter records, and DynamoDB cancels all but one of the transactions
with TransactionConflict (moto never does: the seam answers it). A charge or a refund that
conflicts is tried again; one that keeps conflicting is a 503 with nothing stored or charged."""

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
from vdq.store import StoreBusy

CLIENT = "producer-1"
SENDER = Caller(CLIENT, ("vdq-senders",), frozenset({"vdq.add_queueitem"}))
EMAIL = {"sender": {"email": "shop@example.com"},
         "to": [{"email": "ada@example.org"}, {"email": "grace@example.org"}],
         "subject": "Hi", "text": "Text"}  # fmt: skip


@pytest.fixture(scope="module")
def world_once() -> Iterator[World]:
    limits = QuotaLimits(per_minute=100, per_day=1000)
    with harsh_world(producer_quotas={"*": limits}) as created:
        yield created


@pytest.fixture
def world(world_once: World) -> World:
    world_once.fresh(fresh_clock())
    return world_once


def used(world: World) -> dict[str, int]:
    return {w["limit"]: w["used"] for w in quotas.usage(CLIENT, world.rt)["limits"]}


@pytest.mark.parametrize("reason", ["TransactionConflict", "ThrottlingError"])
def test_a_charge_cancelled_for_a_conflict_is_tried_again_and_counted_once(world, reason):
    with world.seam.step(Plan(counter=reason, counter_times=3, counter_on="TransactWriteItems")):
        answer = intake.submit("email", EMAIL, SENDER, world.rt)
    assert len(answer["items"]) == 2 and len(world.items()) == 2
    assert used(world) == {"per_minute": 2, "per_day": 2}


def test_a_charge_that_keeps_conflicting_is_a_503_with_nothing_stored_or_charged(world):
    plan = Plan(counter="TransactionConflict", counter_times=1000, counter_on="TransactWriteItems")
    with world.seam.step(plan), pytest.raises(StoreBusy) as refused:
        intake.submit("email", EMAIL, SENDER, world.rt)
    assert (refused.value.status, refused.value.code) == (503, "contention")
    assert world.items() == {}
    assert used(world) == {"per_minute": 0, "per_day": 0}


def test_a_refund_that_conflicts_is_tried_again_so_nothing_stays_charged(world):
    # The items cannot be stored (every batch write throttled): the request is refused and its
    # charge taken back, while a concurrent charge holds the counters (the refund's UpdateItem
    # answered TransactionConflictException, twice per window).
    plan = Plan(batch="throttle", counter="TransactionConflict", counter_times=4,
                counter_on="UpdateItem")  # fmt: skip
    with world.seam.step(plan), pytest.raises(Exception, match="store refused"):
        intake.submit("email", EMAIL, SENDER, world.rt)
    assert world.items() == {}
    assert used(world) == {"per_minute": 0, "per_day": 0}
