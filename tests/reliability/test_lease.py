"""The send message is its attempt's lease: every crash point of the send path, through SQS and
Lambda's event source mapping as they behave (queues.py), with what recovers the item and how
long it takes (docs/reliability.md's table). SES is called at most once per attempt in each."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

import vdq
from tests.reliability.harsh import Plan
from tests.reliability.support import Crash, fresh_clock
from tests.reliability.world import World, harsh_world
from tests.support.results import ses_event
from vdq.core import resources
from vdq.core.clock import parse_iso
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


def run_checks_when_due(world: World) -> None:
    """The results function's mapping, once the checks' delay has passed (VDQ_CHECK_SECONDS,
    shorter than the lease): it handles every check then visible."""
    world.rt.clock.advance(world.rt.settings.check_seconds + 0.001)
    world.deliver_results()


def lease_of(world: World) -> float:
    return float(world.rt.settings.lease_seconds)


def test_a_crash_between_the_claim_and_the_provider_call_errors_it_when_its_lease_ends(
        world):  # fmt: skip
    """Its message comes back after the queue's visibility (V): the delivery finds the attempt
    claimed within its lease (the function's timeout, the check's delay and a minute: longer
    than V) and waits; back at the lease's end, it errors it "outcome unknown" (nothing was
    sent, but nothing says so)."""
    item_id = email(world)
    start = world.rt.clock.now()
    # The send's requests: the suppression read, then the claim (its first UpdateItem).
    assert deliver(world, Plan(crash_after="UpdateItem")) is None
    assert state(world, item_id).state == "sending" and ses_calls(world, item_id) == 0
    assert until_visible(world) == pytest.approx(V, abs=1)
    deliver(world)
    assert state(world, item_id).state == "sending"  # waiting for the lease's end
    until_visible(world)
    deliver(world)
    stored = state(world, item_id)
    assert stored.state == "errored" and stored.result.startswith("outcome unknown")
    assert ses_calls(world, item_id) == 0 and not world.pending()
    assert lease_of(world) <= elapsed(start, world) < lease_of(world) + 2  # recovered at LEASE


def test_a_crash_after_ses_took_it_ends_with_its_delivery_before_the_lease(world):
    """SES took it, the worker died before the batch's check: SES's Delivery (usually seconds
    later) finds it sending by its tags, stores the ID and the acceptance and ends it; the
    message then finds it done. The second email of the batch is sent when the batch comes
    back, and its check records it."""
    first, second = email(world), email(world)
    world.ses.plan = "crash"
    assert deliver(world) is None
    world.ses.plan = "ok"
    assert [state(world, i).state for i in (first, second)] == ["sending", "queued"]
    assert world.results_queue.messages == []  # no check was published
    message_id = next(m for m, (i, _) in world.ses.accepted.items() if i == first)
    event = ses_event("delivery", message_id=message_id, item_id=first, attempt=1)
    assert results.handle_ses_event(event, world.rt) == "moved"
    stored = state(world, first)
    assert (stored.state, stored.provider_id) == ("succeeded", message_id)
    assert [h.name for h in world.history(first)] == ["send", "await", "succeed"]
    until_visible(world)
    deliver(world)
    deliver(world)
    assert state(world, second).state == "sending"
    run_checks_when_due(world)
    assert state(world, second).state == "awaiting"
    assert ses_calls(world, first) == 1 and ses_calls(world, second) == 1


def test_a_crash_after_ses_took_it_and_no_event_came_is_outcome_unknown_at_the_lease(world):
    """No check was published and no event came by the lease: its message errors it "outcome
    unknown"; the Delivery that comes later is recorded in its history (late), not lost."""
    item_id = email(world)
    start = world.rt.clock.now()
    world.ses.plan = "crash"
    assert deliver(world) is None
    world.ses.plan = "ok"
    until_visible(world)
    deliver(world)  # back after V: within the lease, it waits
    assert state(world, item_id).state == "sending"
    until_visible(world)
    deliver(world)
    stored = state(world, item_id)
    assert stored.state == "errored" and stored.result.startswith("outcome unknown")
    assert ses_calls(world, item_id) == 1
    assert elapsed(start, world) < lease_of(world) + 2
    (message_id,) = world.ses.accepted
    event = ses_event("delivery", message_id=message_id, item_id=item_id, attempt=1)
    assert results.handle_ses_event(event, world.rt) == "late"
    stored = state(world, item_id)
    assert stored.state == "errored" and stored.result.startswith("outcome unknown")
    late = world.history(item_id)[-1]
    assert (late.kind, late.name) == ("late", "succeed") and "250 2.0.0 OK" in late.text


def test_a_crash_before_the_check_then_a_delivery_delay_gets_its_timer_from_its_message(world):
    """SES took it, the worker died before the batch's check, then a DeliveryDelay moved it to
    awaiting (its ID and acceptance stored, no timer: no check will come): its message, back
    after V, gives it its timeout's timer."""
    item_id = email(world)
    world.ses.plan = "crash"
    assert deliver(world) is None
    world.ses.plan = "ok"
    (message_id,) = world.ses.accepted
    event = ses_event("delivery_delay", message_id=message_id, item_id=item_id, attempt=1)
    assert results.handle_ses_event(event, world.rt) == "moved"
    stored = state(world, item_id)
    assert (stored.state, stored.provider_id, stored.timer_pk) == ("awaiting", message_id, None)
    assert world.results_queue.messages == []  # no check was published
    assert until_visible(world) == pytest.approx(V, abs=1)
    deliver(world)
    stored = state(world, item_id)
    assert stored.state == "awaiting" and (stored.timer_pk or "").startswith("mailwait#")
    assert ses_calls(world, item_id) == 1 and not world.send_queue.messages


def test_a_crash_after_the_check_leaves_the_check_to_record_it(world):
    """The check was published, then the function died before SQS deleted the batch: the check
    (after VDQ_CHECK_SECONDS, within V) records the acceptance (awaiting, the ID, its entry at
    SES's answer, the timeout's timer); the message, back after V, finds it so and drops
    itself."""
    item_id = email(world)
    assert deliver(world, Plan(crash_after="SendMessage")) is None
    [check] = world.results_queue.messages
    assert check.delayed_until is not None
    assert state(world, item_id).state == "sending"
    run_checks_when_due(world)
    stored = state(world, item_id)
    (message_id,) = world.ses.accepted
    assert (stored.state, stored.provider_id) == ("awaiting", message_id)
    assert (stored.timer_pk or "").startswith("mailwait#")
    assert world.history(item_id)[-1].text == f"accepted by SES as {message_id}"
    until_visible(world)
    deliver(world)
    assert not world.pending() and ses_calls(world, item_id) == 1


def test_a_copy_delivered_while_its_original_is_in_flight_waits_for_the_lease(world):
    """At-least-once: a copy of the message reaches another send function while the first
    holds the claim. The copy waits (its visibility set to the lease's end); the check, due
    before it, records the item awaiting, and the copy then drops itself: one send."""
    item_id = email(world)
    world.send_queue.duplicate(0, world.rt.clock.now())

    def copy_meanwhile() -> None:
        assert world.deliver_sends(limit=1) is not None

    # The copy's delivery runs after the original's claim and SES's answer, before its check.
    deliver(world, Plan(interleave=("SendMessage", copy_meanwhile)), limit=1)
    assert world.seam.nested_errors == []
    assert state(world, item_id).state == "sending"
    waiting = world.send_queue.counts(world.rt.clock.now())
    assert waiting["in_flight"] == 1  # the copy, handed back until the lease's end
    assert world.send_queue.next_visible(world.rt.clock.now()) is not None
    run_checks_when_due(world)
    assert state(world, item_id).state == "awaiting"
    seconds = until_visible(world)
    assert seconds <= world.rt.settings.lease_seconds + 1  # (rounded up to a second)
    deliver(world)
    assert ses_calls(world, item_id) == 1 and not world.send_queue.messages
    assert state(world, item_id).state == "awaiting"


def test_an_invocation_that_starts_late_in_the_visibility_window_sends_once(world):
    """Lambda retried a throttled invocation until late in the batch's visibility: the claim
    counts its lease from itself, and the deletes after it find the visibility gone, so the
    message comes again: it waits for the lease, by which the check recorded the item, and
    drops itself."""
    item_id = email(world)
    deliver(world, late=V - 1)
    assert state(world, item_id).state == "sending"
    deliver(world)  # nothing visible yet: the deletes came in time or not
    run_checks_when_due(world)
    assert state(world, item_id).state == "awaiting"
    while world.send_queue.next_visible(world.rt.clock.now()) is not None:
        until_visible(world)  # the invocation outlived the visibility: the message came back
        deliver(world)
    assert ses_calls(world, item_id) == 1 and not world.send_queue.messages


def test_a_dead_message_of_an_accepted_sending_attempt_waits_for_the_lease(world):
    """A send message dead-lettered while its attempt is sending within the claim's lease (the
    provider took it, its check is due): the dead-letter sweep leaves it for a run past the
    lease, by which the check has recorded the acceptance; that run changes nothing."""
    item_id = email(world)
    assert deliver(world, Plan(crash_after="SendMessage")) is None  # the check is published
    assert world.send_queue.dead is not None
    [body] = [m.body for m in world.send_queue.messages]
    world.send_queue.dead.send(body, 0, world.rt.clock.now())
    world.send_queue.consume(body)
    counts = schedules.run(["sweep"], world.rt)
    assert counts.get("dead_waits") == 1 and state(world, item_id).state == "sending"
    run_checks_when_due(world)
    recorded = state(world, item_id)
    assert recorded.state == "awaiting" and (recorded.timer_pk or "").startswith("mailwait#")
    world.rt.clock.advance(lease_of(world))
    schedules.run(["sweep"], world.rt)
    assert state(world, item_id).updated_at == recorded.updated_at
    assert world.send_queue.dead.messages == [] and ses_calls(world, item_id) == 1


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


def test_a_check_that_failed_once_still_records_an_accepted_email_its_message_waited_for(
        world):  # fmt: skip
    """The check was published, the function died before SQS deleted the batch, and the check's
    first delivery failed (the results function died: a throttled read, a timeout). The
    results queue gives it again after its visibility (190 s), by which the claim is past
    VDQ_CHECK_SECONDS + 190 s, later than a lease of timeout + check delay + 60 s: the send
    message, waiting for the lease, must not take the attempt for lost while a check that
    names SES's answer is still due. SES took the email once and said so: it ends awaiting
    (or delivered), never "outcome unknown"."""
    item_id = email(world)
    assert deliver(world, Plan(crash_after="SendMessage")) is None  # the check is published
    world.rt.clock.advance(world.rt.settings.check_seconds + 0.001)
    with world.seam.step(Plan(crash_after="BatchGetItem")), contextlib.suppress(Crash):
        world.deliver_results()  # the check's first delivery: the function dies
    assert state(world, item_id).state == "sending"
    for _ in range(10):  # both queues' mappings, in the order their messages come back
        now = world.rt.clock.now()
        due = [t for t in (world.send_queue.next_visible(now),
                           world.results_queue.next_visible(now)) if t is not None]  # fmt: skip
        if not due:
            break
        world.rt.clock.advance(max(0.0, (min(due) - now).total_seconds()) + 0.001)
        deliver(world)
        world.deliver_results()
    stored = state(world, item_id)
    (message_id,) = world.ses.accepted
    assert not (stored.result or "").startswith("outcome unknown"), stored.result
    assert (stored.state, stored.provider_id) == ("awaiting", message_id)
    assert ses_calls(world, item_id) == 1


def test_a_late_invocation_s_message_waits_for_a_check_the_results_backlog_holds(world):
    """No crash: Lambda started the send invocation late in its batch's visibility (it retried
    a throttled invocation), and the batch outlived it: the deletes after it find the
    visibility gone, and the message comes back; it waits for the claim's lease. The check
    was published on time, but the results function is behind (a backlog of SES events: the
    same load that throttled the send function) and reaches it about two and a half minutes
    after it was due, past the lease's one minute of margin. SES took the email and the check
    says so: the item must not end "outcome unknown" (a retry of it would send it twice)."""
    item_id = email(world)
    # It starts a moment before the visibility ends; the batch's work takes longer.
    deliver(world, Plan(interleave=("SendMessage", lambda: world.rt.clock.advance(2))),
            late=V - 1)  # fmt: skip
    assert state(world, item_id).state == "sending"
    assert world.send_queue.messages, "the message came back"
    claimed = parse_iso(state(world, item_id).claimed_at)
    due = claimed + timedelta(seconds=world.rt.settings.check_seconds + 150)
    for _ in range(5):  # the send mapping, until the results function reaches the check
        deliver(world)
        at = world.send_queue.next_visible(world.rt.clock.now())
        if at is None or at >= due:
            break
        world.rt.clock.advance((at - world.rt.clock.now()).total_seconds() + 0.001)
    world.rt.clock.advance(max(0.0, (due - world.rt.clock.now()).total_seconds()))
    world.deliver_results()
    while world.send_queue.next_visible(world.rt.clock.now()) is not None:
        until_visible(world)
        deliver(world)
    stored = state(world, item_id)
    (message_id,) = world.ses.accepted
    assert not (stored.result or "").startswith("outcome unknown"), stored.result
    assert (stored.state, stored.provider_id) == ("awaiting", message_id)
    assert ses_calls(world, item_id) == 1


def test_the_daily_watch_leaves_an_accepted_email_whose_check_a_results_backlog_holds(world):
    """No crash: the send function sent the email, published its check and deleted its
    message. The results function is behind (a burst of SES events, a throttled function:
    twenty minutes of backlog, far within the four days the results queue keeps a message)
    when the daily watch runs. The check is not lost, only late: the watch must not take the
    attempt for lost because its lease passed (the lease bounds a holder, not the results
    queue). SES took the email: "outcome unknown" would invite a retry that sends it twice,
    and the Delivery that follows could only be a late event of an errored item."""
    item_id = email(world)
    deliver(world)
    assert not world.send_queue.messages  # its message deleted: only its check is left
    assert len(world.results_queue.messages) == 1  # its check, delayed
    assert state(world, item_id).state == "sending"
    world.rt.clock.advance(20 * 60)  # the results function has not reached the check yet
    schedules.run(["purge"], world.rt)
    world.deliver_results()
    stored = state(world, item_id)
    (message_id,) = world.ses.accepted
    assert not (stored.result or "").startswith("outcome unknown"), stored.result
    assert (stored.state, stored.provider_id) == ("awaiting", message_id)
    event = ses_event("delivery", message_id=message_id, item_id=item_id, attempt=1)
    results.handle_ses_event(event, world.rt)
    assert state(world, item_id).state == "succeeded"
    assert ses_calls(world, item_id) == 1
