"""The send message is its attempt's lease: every crash point of the send path, through SQS and
Lambda's event source mapping as they behave (queues.py), with what recovers the item and how
long it takes (docs/reliability.md's table). SES is called at most once per attempt in each."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

import vdq
from tests.reliability.harsh import Plan
from tests.reliability.support import Crash, fresh_clock
from tests.reliability.world import World, harsh_world
from tests.support.results import ses_event
from vdq.core import resources
from vdq.results import matching as results
from vdq.schedules import sweeps as schedules

V = resources.visibility_seconds(resources.SEND_FUNCTION_TIMEOUT_SECONDS,
                                 resources.SEND_BATCHING_WINDOW_SECONDS)  # fmt: skip


@pytest.fixture(scope="module")
def world_once() -> Iterator[World]:
    with harsh_world(index_shards=2) as created:
        yield created


@pytest.fixture
def world(world_once: World) -> World:
    world_once.fresh(fresh_clock())
    return world_once


def email(world: World) -> str:
    (item,) = vdq.add_email({"email": "shop@example.com"}, ["ada@example.org"], "Hi", "Text",
                            runtime=world.rt)  # fmt: skip
    return item.id


def deliver(world: World, plan: Plan | None = None, *, late: float = 0.0,
            limit: int = 10) -> Any:  # fmt: skip
    """One round of the send function's mapping (None when the function died)."""
    with world.seam.step(plan or Plan()):
        try:
            return world.deliver_sends(late=late, limit=limit)
        except Crash:
            return None


def until_visible(world: World) -> float:
    """Seconds the clock moves until the send queue's next message is visible again."""
    now = world.rt.clock.now()
    at = world.send_queue.next_visible(now)
    assert at is not None, "no send message left waiting"
    seconds = (at - now).total_seconds() + 0.001
    world.rt.clock.advance(seconds)
    return seconds


def ses_calls(world: World, item_id: str) -> int:
    return sum(n for (i, _), n in world.ses.calls.items() if i == item_id)


def state(world: World, item_id: str) -> Any:
    item = world.item(item_id)
    assert item is not None
    return item


def elapsed(start: datetime, world: World) -> float:
    return (world.rt.clock.now() - start).total_seconds()


def test_a_crash_between_the_claim_and_the_provider_call_errors_it_when_its_message_comes_back(
        world):  # fmt: skip
    """Its message comes back after the queue's visibility (V, longer than the lease): the
    delivery finds the attempt claimed and its lease over, and errors it "outcome unknown"
    (nothing was sent, but nothing says so)."""
    item_id = email(world)
    start = world.rt.clock.now()
    # The send's requests: the suppression read, then the claim (its first UpdateItem).
    assert deliver(world, Plan(crash_after="UpdateItem")) is None
    assert state(world, item_id).state == "sending" and ses_calls(world, item_id) == 0
    assert until_visible(world) == pytest.approx(V, abs=1)
    deliver(world)
    stored = state(world, item_id)
    assert stored.state == "errored" and stored.result.startswith("outcome unknown")
    assert ses_calls(world, item_id) == 0 and not world.pending()
    assert elapsed(start, world) < V + 1  # recovered after V


def test_a_crash_after_ses_took_it_ends_with_its_delivery_or_the_lease(world):
    """SES took it, the worker died before the record: SES's Delivery (usually seconds later)
    finds it by its tags and ends it; without one, the message's return after V errors it."""
    first, second = email(world), email(world)
    world.ses.plan = "crash"
    assert deliver(world) is None
    world.ses.plan = "ok"
    assert [state(world, i).state for i in (first, second)] == ["sending", "queued"]
    # The first's Delivery comes: it ends the item, the message then finds it done.
    message_id = next(m for m, (i, _) in world.ses.accepted.items() if i == first)
    event = ses_event("delivery", message_id=message_id, item_id=first, attempt=1)
    assert results.handle_ses_event(event, world.rt) == "moved"
    assert state(world, first).state == "succeeded"
    until_visible(world)
    deliver(world)
    deliver(world)
    assert state(world, second).state == "awaiting"
    assert ses_calls(world, first) == 1 and ses_calls(world, second) == 1


def test_a_crash_after_ses_took_it_and_no_event_came_is_outcome_unknown_after_v(world):
    item_id = email(world)
    start = world.rt.clock.now()
    world.ses.plan = "crash"
    assert deliver(world) is None
    world.ses.plan = "ok"
    until_visible(world)
    deliver(world)
    stored = state(world, item_id)
    assert stored.state == "errored" and stored.result.startswith("outcome unknown")
    assert ses_calls(world, item_id) == 1
    assert elapsed(start, world) < V + 1


def test_a_crash_between_the_record_and_the_check_gives_it_its_timer_when_it_comes_back(world):
    """SES's acceptance was recorded (awaiting, no timer), then the worker died before the
    batch's check: its message comes back after V and gives the item its timeout's timer."""
    item_id = email(world)
    # The claim, then the record of SES's answer (the harsh world's SES has no rate to pace
    # at: no pace record): UpdateItem number two.
    assert deliver(world, Plan(crash_after="UpdateItem#2")) is None
    stored = state(world, item_id)
    assert stored.state == "awaiting" and stored.timer_pk is None
    assert world.results_queue.messages == []  # no check was published
    assert until_visible(world) == pytest.approx(V, abs=1)
    deliver(world)
    stored = state(world, item_id)
    assert stored.state == "awaiting" and (stored.timer_pk or "").startswith("mailwait#")
    assert ses_calls(world, item_id) == 1 and not world.send_queue.messages


def test_a_crash_after_the_check_leaves_the_check_to_give_it_its_timer(world):
    """The check was published, then the function died before SQS deleted the batch: the check
    (after VDQ_CHECK_SECONDS, within V) gives the item its timer; the message, back after V,
    finds it so and drops itself."""
    item_id = email(world)
    assert deliver(world, Plan(crash_after="SendMessage")) is None
    [check] = world.results_queue.messages
    assert check.delayed_until is not None
    world.rt.clock.advance(world.rt.settings.check_seconds + 0.001)
    world.deliver_results()
    stored = state(world, item_id)
    assert (stored.timer_pk or "").startswith("mailwait#")
    until_visible(world)
    deliver(world)
    assert not world.pending() and ses_calls(world, item_id) == 1


def test_a_copy_delivered_while_its_original_is_in_flight_waits_for_the_lease(world):
    """At-least-once: a copy of the message reaches another send function while the first
    holds the claim. The copy waits (its visibility set to the lease's end), then finds the
    item awaiting and drops itself: one send."""
    item_id = email(world)
    world.send_queue.duplicate(0, world.rt.clock.now())

    def copy_meanwhile() -> None:
        assert world.deliver_sends(limit=1) is not None

    # The copy's delivery runs after the original's claim and SES's answer, before its record.
    deliver(world, Plan(interleave=("UpdateItem#2", copy_meanwhile)), limit=1)
    assert world.seam.nested_errors == []
    assert state(world, item_id).state == "awaiting"
    waiting = world.send_queue.counts(world.rt.clock.now())
    assert waiting["in_flight"] == 1  # the copy, handed back until the lease's end
    seconds = until_visible(world)
    assert seconds <= world.rt.settings.lease_seconds + 1  # (rounded up to a second)
    deliver(world)
    assert ses_calls(world, item_id) == 1 and not world.send_queue.messages


def test_an_invocation_that_starts_late_in_the_visibility_window_sends_once(world):
    """Lambda retried a throttled invocation until late in the batch's visibility: the claim
    counts its lease from itself, and the deletes after it find the visibility gone, so the
    message comes again and drops itself (the item is awaiting)."""
    item_id = email(world)
    deliver(world, late=V - 1)
    assert state(world, item_id).state == "awaiting"
    deliver(world)  # nothing visible yet: the deletes came in time or not
    until = world.send_queue.next_visible(world.rt.clock.now())
    if until is not None:  # the invocation outlived the visibility: the message came back
        until_visible(world)
        deliver(world)
    assert ses_calls(world, item_id) == 1 and not world.send_queue.messages


def test_a_message_dead_lettered_before_its_claim_errors_the_item(world):
    """A send message the function failed on maxReceiveCount times goes to the dead-letter
    queue; the schedule's dead-letter sweep errors its item with why."""
    item_id = email(world)
    for _ in range(resources.MAX_RECEIVE_COUNT):
        # The suppression read fails on every SDK attempt: the record fails, SQS keeps it.
        deliver(world, Plan(crash_after="GetItem"))
        until_visible(world)
    deliver(world)  # the receive past maxReceiveCount moves it
    assert world.send_queue.dead is not None and len(world.send_queue.dead.messages) == 1
    counts = schedules.run(["sweep"], world.rt)
    assert counts.get("dead_moved") == 1
    stored = state(world, item_id)
    assert stored.state == "errored" and "dead-lettered" in stored.result
    assert world.send_queue.dead.messages == [] and ses_calls(world, item_id) == 0
