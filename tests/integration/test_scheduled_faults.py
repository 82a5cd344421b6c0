"""Scheduled send when things break (moto, fake clock): a sweep killed between its publish and
its cursor, a batch SQS took in part, an enqueue killed after its items, a bucket gone before
its time, an operator's cancel and retry, a hostile repeat. Each item is sent once, in its
lane, and never before its send_at."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from functions.enqueue import handler as enqueue_handler

import vdq
from tests.integration.test_scheduled_send import (
    HOUR,
    LEAD_SECONDS,
    CountingSes,
    Spy,
    at,
    buckets,
    crowd,
)
from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from tests.support.operator import call
from vdq.core import resources
from vdq.dispatch import send
from vdq.schedules import sweeps as schedules
from vdq.store.models import scheduled_partition
from vdq.store.scheduled import Scheduled

LANES = resources.SEND_QUEUES


@pytest.fixture
def spy(aws, runtime):
    spy = Spy(runtime.send_queue)
    runtime.overrides["send_queue"] = spy
    runtime.__dict__.pop("send_queue", None)
    return spy


def deliver(runtime, sent):
    """Hand every published message to the worker, as SQS would (in any order, each once);
    returns the provider's calls per item."""
    runtime.overrides["ses_provider"] = ses = CountingSes()
    calls: dict[str, int] = {}
    for item_id, attempt, _, _ in sent:
        before = ses.calls
        send.process_body(json.dumps({"id": item_id, "attempt": attempt}), runtime)
        calls[item_id] = calls.get(item_id, 0) + ses.calls - before
    return calls


def schedule_two(runtime, clock, wait, priority=None):
    return [i.id for i in vdq.add_email("shop@example.com", ["a@example.org", "b@example.org"],
                                        "Hi", "Later", send_at=clock.now() + timedelta(
                                            seconds=wait), priority=priority,
                                        runtime=runtime)]  # fmt: skip


def mailing(runtime, receivers, send_at):
    return [i.id for i in vdq.add_email("shop@example.com",
                                        [f"r{k}@example.org" for k in range(receivers)],
                                        "Sale", "Today", send_at=send_at, runtime=runtime)]


def test_a_sweep_killed_before_moving_its_cursor_publishes_again_and_each_item_is_sent_once(
        aws, runtime, clock, spy, monkeypatch):  # fmt: skip
    ids = schedule_two(runtime, clock, 2 * HOUR)
    clock.advance(2 * HOUR)

    def killed(self, partition, position):
        raise RuntimeError("Task timed out")

    with monkeypatch.context() as patch:
        patch.setattr(Scheduled, "move_bucket_cursor", killed)
        assert schedules.run(["sweep"], runtime) == {"scheduled_released": 2, "failed": 1}
    clock.advance(60)
    assert schedules.run(["sweep"], runtime) == {"scheduled_released": 2}
    assert sorted(s[0] for s in spy.sent) == sorted(ids * 2)
    assert deliver(runtime, spy.sent) == {i: 1 for i in ids}
    assert schedules.run(["sweep"], runtime) == {}


def test_a_cursor_write_that_fails_publishes_again_only_its_shards_buckets(
        aws, runtime, clock, spy, monkeypatch):  # fmt: skip
    """The shards of a lane share a run: the other shard's cursor still moves."""
    crowd(runtime, monkeypatch, 0, 2)
    nine = clock.now() + timedelta(hours=2)
    sale, reminder = mailing(runtime, 10, nine), mailing(runtime, 1, nine)
    clock.advance(2 * HOUR - LEAD_SECONDS + 1)
    real = Scheduled.move_bucket_cursor

    def refused(self, partition, position):
        if partition == scheduled_partition("normal", 0):
            raise RuntimeError("ProvisionedThroughputExceededException")
        real(self, partition, position)

    with monkeypatch.context() as patch:
        patch.setattr(Scheduled, "move_bucket_cursor", refused)
        assert schedules.run(["sweep"], runtime) == {"scheduled_released": 11, "failed": 1}
    clock.advance(60)
    assert schedules.run(["sweep"], runtime) == {"scheduled_released": 10}
    assert sorted(s[0] for s in spy.sent) == sorted(reminder + sale * 2)
    assert deliver(runtime, spy.sent) == {i: 1 for i in sale + reminder}
    assert schedules.run(["sweep"], runtime) == {}


def test_a_sweep_killed_amid_a_lanes_shards_publishes_them_again_each_item_sent_once(
        aws, runtime, clock, spy, monkeypatch):  # fmt: skip
    crowd(runtime, monkeypatch, 0, 2)
    nine = clock.now() + timedelta(hours=2)
    sale, reminder = mailing(runtime, 10, nine), mailing(runtime, 1, nine)
    clock.advance(2 * HOUR - LEAD_SECONDS + 1)

    class KilledAfterOne:
        def __init__(self):
            self.calls = 0

        def publish(self, messages):
            self.calls += 1
            if self.calls > 1:
                raise RuntimeError("Task timed out")
            return spy.publish(messages)

    runtime.overrides["send_queue"] = KilledAfterOne()
    runtime.__dict__.pop("send_queue", None)
    assert schedules.run(["sweep"], runtime) == {"scheduled_released": 1, "failed": 1}
    runtime.overrides["send_queue"] = spy
    runtime.__dict__.pop("send_queue", None)
    clock.advance(60)
    assert schedules.run(["sweep"], runtime) == {"scheduled_released": 11}
    assert sorted(s[0] for s in spy.sent) == sorted(reminder * 2 + sale)
    assert deliver(runtime, spy.sent) == {i: 1 for i in sale + reminder}
    assert schedules.run(["sweep"], runtime) == {}


def test_a_batch_sqs_took_in_part_is_published_again_and_each_item_is_sent_once(
        aws, runtime, clock, spy):  # fmt: skip
    ids = schedule_two(runtime, clock, 2 * HOUR, priority="bulk")

    class PartOnce:
        """SendMessageBatch answers one entry Failed (InternalError), once."""

        def __init__(self):
            self.failed = False

        def publish(self, messages):
            if self.failed:
                return spy.publish(messages)
            self.failed = True
            spy.publish(messages[:-1])
            return {messages[-1].item_id: "publishing the send failed: InternalError"}

    runtime.overrides["send_queue"] = PartOnce()
    runtime.__dict__.pop("send_queue", None)
    clock.advance(2 * HOUR)
    assert schedules.run(["sweep"], runtime) == {"scheduled_publish_failed": 1}
    assert buckets(runtime) != []  # the cursor stays before it
    clock.advance(60)
    assert schedules.run(["sweep"], runtime) == {"scheduled_released": 2}
    assert buckets(runtime) == []
    assert {s[2] for s in spy.sent} == {aws["queues"][LANES["bulk"]]}
    assert deliver(runtime, spy.sent) == {i: 1 for i in ids}


def test_an_enqueue_killed_after_its_items_sends_them_after_send_at_never_before(
        aws, runtime, clock, spy):  # fmt: skip
    class Killed:
        def publish(self, messages):
            raise RuntimeError("Task timed out")

    runtime.overrides["send_queue"] = Killed()
    runtime.__dict__.pop("send_queue", None)
    with pytest.raises(RuntimeError):
        schedule_two(runtime, clock, 600, priority="high")
    runtime.overrides["send_queue"] = spy
    runtime.__dict__.pop("send_queue", None)
    grace = runtime.settings.publish_grace_seconds
    clock.advance(600 + grace - 1)
    assert "republished" not in schedules.run(["sweep"], runtime) and spy.sent == []
    clock.advance(2)
    assert schedules.run(["sweep"], runtime) == {"republished": 2}
    assert {(s[1], s[2], s[3]) for s in spy.sent} == {(1, aws["queues"][LANES["high"]], 0)}
    assert set(deliver(runtime, spy.sent).values()) == {1}


def test_a_bucket_gone_before_its_time_still_sends_its_items_after_send_at(aws, runtime, clock,
                                                                           spy):  # fmt: skip
    """TTL removed it (the sweep was down for over a week), or it was written behind the
    cursor: the items' publish timers, counting from send_at, send them."""
    ids = schedule_two(runtime, clock, 2 * 24 * HOUR, priority="high")
    for bucket in buckets(runtime):
        bucket.delete()
    grace = runtime.settings.publish_grace_seconds
    clock.advance(2 * 24 * HOUR + grace - 1)
    assert schedules.run(["sweep"], runtime) == {} and spy.sent == []
    clock.advance(2)
    assert schedules.run(["sweep"], runtime) == {"republished": 2}
    assert sorted(s[0] for s in spy.sent) == sorted(ids)
    assert {s[2] for s in spy.sent} == {aws["queues"][LANES["high"]]}


def test_a_cancelled_long_wait_resent_is_sent_at_once_and_the_buckets_message_dropped(
        aws, runtime, clock, spy):  # fmt: skip
    """Cancel, then resend (retry is not offered from cancelled): the copy goes at once in the
    original's lane, without its send_at; the original's bucket message, when it comes, is
    dropped (cancel raised its attempt)."""
    [item_id, _] = schedule_two(runtime, clock, 3 * 24 * HOUR, priority="bulk")
    assert call("transition", params={"id": item_id, "name": "cancel"}, query={}).status == 200
    answer = call("resend", params={"id": item_id})
    assert answer.status == 201, answer.body
    [copy] = answer.body["items"]
    assert (copy["priority"], copy["send_at"]) == ("bulk", None)
    assert spy.sent == [(copy["id"], 1, aws["queues"][LANES["bulk"]], 0)]
    clock.advance(3 * 24 * HOUR)
    assert schedules.run(["sweep"], runtime)["scheduled_released"] == 2
    assert (item_id, 1) in [(s[0], s[1]) for s in spy.sent]
    calls = deliver(runtime, spy.sent)
    assert (calls[item_id], calls[copy["id"]]) == (0, 1)
    assert runtime.store.get_item(item_id).state == "cancelled"


def test_the_same_idempotency_key_with_another_send_at_is_a_422(aws, runtime, clock):
    answers = []
    for wait in (5 * HOUR, 6 * HOUR):
        body = {"sender": {"email": "shop@example.com"}, "to": [{"email": "ada@example.org"}],
                "subject": "Reminder", "text": "x", "send_at": at(clock, wait)}  # fmt: skip
        event = api_event("apigw_post_emails", body=body, groups=["vdq-senders"],
                          headers={"Idempotency-Key": "reminder-43"})
        answers.append(enqueue_handler.handler(event, LambdaContext())["statusCode"])
    assert answers == [201, 422]
    assert len(buckets(runtime)) == 1


@pytest.mark.parametrize("query,field", [
    ({"priority": "URGENT"}, "priority"),
    ({"priority": ""}, "priority"),
    ({"scheduled": "soon"}, "scheduled"),
])  # fmt: skip
def test_a_bad_list_filter_is_a_422_naming_it(aws, runtime, query, field):
    """As every bad query value of the operator API (422, the field named)."""
    answer = call("list_queue_items", query=query)
    assert answer.status == 422, answer.body
    assert answer.body["error"]["details"]["field"] == field
