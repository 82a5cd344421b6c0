"""Priority lanes against moto: every path that publishes a send puts it in the item's lane."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from functions.enqueue import handler as enqueue_handler

import vdq
from tests.support.aws import drain
from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from tests.support.operator import call, move, succeed
from tests.support.stream import posted
from vdq.core import resources
from vdq.core.clock import iso, parse_iso
from vdq.dispatch import send
from vdq.providers import TransientProviderError
from vdq.schedules import sweeps as schedules
from vdq.schedules import timers
from vdq.workflow.lanes import priority_of

LANES = resources.SEND_QUEUES


def post(name, body):
    event = api_event(name, body=body, groups=["vdq-senders"])
    response = enqueue_handler.handler(event, LambdaContext())
    return response["statusCode"], json.loads(response["body"]) if response["body"] else None


def email_request(**changes):
    body = {"sender": {"email": "shop@example.com"}, "to": [{"email": "ada@example.org"}],
            "subject": "Your code", "text": "123456"}  # fmt: skip
    body.update(changes)
    return body


def in_lanes(aws):
    """{priority: [item ids]} of the messages waiting in each lane's queue (drained)."""
    return {p: [m["id"] for m in drain(aws, queue)] for p, queue in LANES.items()}


def add(runtime, priority, *receivers):
    return vdq.add_email("shop@example.com", list(receivers or ["ada@example.org"]), "Hi",
                         "Text", priority=priority, runtime=runtime)  # fmt: skip


@pytest.mark.parametrize("priority", ["high", "normal", "bulk"])
def test_post_emails_stores_the_priority_and_publishes_in_its_lane_only(aws, runtime, priority):
    status, body = post("apigw_post_emails", email_request(priority=priority))
    assert status == 201, body
    [item] = body["items"]
    assert item["priority"] == priority and item["send_at"] is None
    assert priority_of(runtime.store.get_item(item["id"])) == priority  # normal: not stored
    expected = {p: [] for p in LANES}
    expected[priority] = [item["id"]]
    assert in_lanes(aws) == expected


def test_without_a_priority_an_sms_is_normal(aws, runtime):
    status, body = post("apigw_post_sms", {"sender": {"cell": "+15005550006"},
                                           "to": [{"cell": "+14155550100"}], "body": "hi"})
    assert status == 201, body
    assert body["items"][0]["priority"] == "normal"
    assert in_lanes(aws) == {"high": [], "normal": [body["items"][0]["id"]], "bulk": []}


def test_a_bad_priority_is_a_400_naming_it_and_stores_nothing(aws, runtime):
    status, body = post("apigw_post_emails", email_request(priority="urgent"))
    assert status == 400 and body["error"]["details"]["field"] == "priority", body
    assert in_lanes(aws) == {p: [] for p in LANES}
    assert call("list_queue_items", query={}).body["items"] == []


class Spy:
    """The real send queue, recording which queue URL each message went to."""

    def __init__(self, queue):
        self.queue, self.sent = queue, []

    def publish(self, messages):
        self.sent += [(m.item_id, self.queue.url_of(m.priority), m.delay_seconds)
                      for m in messages]  # fmt: skip
        return self.queue.publish(messages)

    def backlog(self, priority="normal"):
        return self.queue.backlog(priority)


@pytest.fixture
def spy(aws, runtime):
    spy = Spy(runtime.send_queue)
    runtime.overrides["send_queue"] = spy
    runtime.__dict__.pop("send_queue", None)
    return spy


def test_an_operator_retry_publishes_in_the_items_lane(aws, runtime):
    [item] = add(runtime, "bulk")
    drain(aws, LANES["bulk"])
    move(runtime, item.id, "send", "error")
    answer = call("transition", params={"id": item.id, "name": "retry"}, query={})
    assert answer.status == 200, answer.body
    assert in_lanes(aws) == {"high": [], "normal": [], "bulk": [item.id]}


def test_the_workers_retry_later_publishes_in_the_items_lane(aws, runtime, spy):
    [item] = add(runtime, "high")
    [body] = [json.dumps(m) for m in drain(aws, LANES["high"])]

    class Throttled:
        def send_raw(self, **_):
            raise TransientProviderError("SES", "Maximum sending rate exceeded.")

    runtime.overrides["ses_provider"] = Throttled()
    assert send.process_body(body, runtime) == send.DELAYED
    assert spy.sent[-1] == (item.id, aws["queues"][LANES["high"]], 16)


def test_the_republish_sweep_publishes_in_the_items_lane(aws, runtime, clock):
    [high] = add(runtime, "high")
    [bulk] = add(runtime, "bulk", "bob@example.org")
    in_lanes(aws)  # both publishes were lost
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    # Written without publish timers: the strays schedule arms them, then they go out again.
    assert schedules.run(["sweep"], runtime) == {"strays_armed": 2, "republished": 2}
    assert in_lanes(aws) == {"high": [high.id], "normal": [], "bulk": [bulk.id]}


def test_a_bulk_backlog_holds_back_no_re_publish_of_a_high_item(aws, runtime, clock):
    [high] = add(runtime, "high")
    drain(aws, LANES["high"])  # its publish was lost
    bulk = add(runtime, "bulk", "a@example.org", "b@example.org")  # waiting in the bulk lane
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    counts = schedules.run(["sweep"], runtime)
    # The bulk items wait in their lane's backlog (not armed: a shard's bulk place stops at
    # its first); the high one, lost, is armed and published again.
    assert counts.pop("strays_waiting") in (1, 2)
    assert counts == {"strays_armed": 1, "republished": 1}
    assert [m["id"] for m in drain(aws, LANES["high"])] == [high.id]
    assert sorted(m["id"] for m in drain(aws, LANES["bulk"])) == sorted(i.id for i in bulk)


def test_a_bulk_backlog_older_than_a_sweeps_batch_holds_back_no_re_publish_of_a_high_item(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    """Every bulk item waiting longer than the grace period has a passed publish timer, older
    than the high item's: they must not fill the sweep's batch run after run while the high
    item's lost publish waits behind them (100,000 bulk items: hours)."""
    monkeypatch.setattr(timers, "SWEEP_BATCH", 3)
    add(runtime, "bulk", *[f"r{n}@example.org" for n in range(5)])  # waiting in the bulk lane
    clock.advance(60)
    [high] = add(runtime, "high")
    drain(aws, LANES["high"])  # its publish was lost
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    counts = schedules.run(["sweep"], runtime)
    assert counts.get("republished") == 1, counts
    assert [m["id"] for m in drain(aws, LANES["high"])] == [high.id]


def test_a_high_timer_in_the_normal_partition_moves_to_its_lane_when_re_published(
        aws, runtime, clock):  # fmt: skip
    """The release before wrote a given-back item's publish timer without its lane: the sweep
    of the normal lane still finds it, publishes it in its own lane and moves the timer there."""
    from vdq.store import QueueItemRecord
    from vdq.workflow.transitions import TIMER_PUBLISH, timer_partition

    [high] = add(runtime, "high")
    drain(aws, LANES["high"])  # its publish was lost
    shards = runtime.settings.index_shards
    stored = runtime.store.get_item(high.id)
    grace = timedelta(seconds=runtime.settings.publish_grace_seconds)
    due = iso(parse_iso(stored.queued_at) + grace)
    stored.update(actions=[QueueItemRecord.timer_pk.set(
        timer_partition(TIMER_PUBLISH, high.id, shards)),
        QueueItemRecord.timer_sk.set(f"{due}#{high.id}")])  # fmt: skip
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    assert schedules.run(["sweep"], runtime) == {"republished": 1}
    assert in_lanes(aws) == {"high": [high.id], "normal": [], "bulk": []}
    stored = runtime.store.get_item(high.id)
    assert stored.timer_pk == timer_partition(TIMER_PUBLISH, high.id, shards, "high")


def test_a_resent_item_goes_in_its_originals_lane(aws, runtime):
    [item] = add(runtime, "bulk")
    succeed(runtime, item.id)
    in_lanes(aws)
    answer = call("resend", params={"id": item.id})
    assert answer.status == 201, answer.body
    [copy] = answer.body["items"]
    assert copy["priority"] == "bulk"
    assert in_lanes(aws) == {"high": [], "normal": [], "bulk": [copy["id"]]}


def test_lists_filter_by_priority(aws, runtime):
    [high] = add(runtime, "high")
    add(runtime, "bulk", "b@example.org")
    answer = call("list_queue_items", query={"priority": "high"})
    assert [i["id"] for i in answer.body["items"]] == [high.id]
    assert all(i["priority"] == "high" for i in answer.body["items"])
    succeed(runtime, high.id)
    posted(aws["table"])
    sent = call("list_sent_items", query={"priority": "high"}).body["items"]
    assert [i["id"] for i in sent] == [high.id]
    assert call("list_sent_items", query={"priority": "bulk"}).body["items"] == []
    bad = call("list_queue_items", query={"priority": "urgent"})
    assert bad.status == 422 and bad.body["error"]["details"]["field"] == "priority"


def test_items_stored_before_the_index_shards_were_raised_are_still_re_published(
        aws, runtime, clock):  # fmt: skip
    # vdq:peakSendRate raises VDQ_INDEX_SHARDS with the rate (4 to 8 at 1,000 a second), and
    # the settings page says to raise it so: the timers written before stay in the partitions
    # of the old count, which the sweep reads (every shard up to the new count) and must act
    # on, or their items wait for ever.
    from dataclasses import replace

    from vdq.store.models import shard

    items = add(runtime, "normal", *[f"r{k}@example.org" for k in range(12)])
    in_lanes(aws)  # every publish was lost
    # Written, as items for now were before they went without one, with their publish timer
    # in the partitions of 4 shards.
    from vdq.workflow.transitions import TIMER_PUBLISH, timer_partition

    for item in items:
        due = iso(parse_iso(item.queued_at)
                  + timedelta(seconds=runtime.settings.publish_grace_seconds))  # fmt: skip
        assert runtime.store.add_timer(runtime.store.get_item(item.id),
                                       timer_partition(TIMER_PUBLISH, item.id, 4, "normal"),
                                       f"{due}#{item.id}")  # fmt: skip
    moved = [i.id for i in items if shard(i.id, 8) != shard(i.id, 4)]
    assert moved  # about half of them
    runtime.settings = replace(runtime.settings, index_shards=8)
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    assert schedules.run(["sweep"], runtime) == {"republished": len(items)}
    assert sorted(in_lanes(aws)["normal"]) == sorted(i.id for i in items)
