"""Items for now are written without a publish timer (vdq.schedules.strays): the ones whose
send message never went out are still found, given their timer and sent again."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.support.aws import drain
from tests.support.operator import dynamodb_requests, move
from tests.support.results import new_email, to_awaiting, to_sending
from vdq.schedules import strays
from vdq.schedules import sweeps as schedules
from vdq.schedules.report import Report
from vdq.workflow import unpublished

DAY = 86_400


class Crash(Exception):
    """The enqueue function dies between its write and its publish."""


def crashing_publish(runtime, monkeypatch):
    def publish(messages):
        raise Crash("the function timed out")

    monkeypatch.setattr(runtime.send_queue, "publish", publish)


def stored_items(aws, runtime):
    import boto3

    rows = boto3.client("dynamodb").scan(TableName=aws["table"])["Items"]
    ids = [r["id"]["S"] for r in rows if r["sk"]["S"] == "STATE"]
    return [runtime.store.get_item(i) for i in ids]


def crashed_item(aws, runtime, monkeypatch, receiver="ada@example.org"):
    before = {i.id for i in stored_items(aws, runtime)}
    with monkeypatch.context() as patch:
        crashing_publish(runtime, patch)
        with pytest.raises(Crash):
            new_email(runtime, receiver)
    [item] = [i for i in stored_items(aws, runtime) if i.id not in before]
    return item


def test_an_item_for_now_has_no_publish_timer_and_a_scheduled_one_has(aws, runtime, clock):
    import vdq

    now = new_email(runtime)
    assert now.timer_pk is None and now.state == "queued"
    [later] = vdq.add_email({"email": "shop@example.com"}, ["bob@example.org"], "Hi", "Text",
                            send_at=clock.now() + timedelta(hours=2), runtime=runtime)  # fmt: skip
    assert runtime.store.get_item(later.id).timer_pk.startswith("publish#")


def test_an_item_whose_publish_died_is_sent_a_grace_period_later_once(aws, runtime, clock,
                                                                     monkeypatch):  # fmt: skip
    item = crashed_item(aws, runtime, monkeypatch)
    assert item.state == "queued" and item.timer_pk is None, "accepted, with nothing to send it"
    assert drain(aws) == []
    grace = runtime.settings.publish_grace_seconds
    clock.advance(grace - 1)
    assert schedules.run(["sweep"], runtime) == {}  # it may still be on its way
    clock.advance(2)
    assert schedules.run(["sweep"], runtime) == {"strays_armed": 1, "republished": 1}
    assert [m["id"] for m in drain(aws)] == [item.id]
    assert schedules.run(["sweep"], runtime) == {}  # armed once, sent once
    assert drain(aws) == []


def test_a_refused_publish_whose_error_was_not_written_gets_its_timer_at_once(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    from vdq.intake import enqueue

    def refused(messages):
        return {m.item_id: "SQS refused it" for m in messages}

    def no_store(*args, **kwargs):
        raise RuntimeError("DynamoDB refused the write")

    with monkeypatch.context() as patch:
        patch.setattr(runtime.send_queue, "publish", refused)
        patch.setattr(enqueue, "apply", no_store)
        item = new_email(runtime)
    assert item.state == "queued" and item.timer_pk.startswith("publish#")
    due = item.timer_sk.split("#")[0]
    assert due == unpublished.iso(unpublished.parse_iso(item.queued_at)
                                  + timedelta(seconds=runtime.settings.publish_grace_seconds))


def test_items_sent_or_done_within_the_grace_are_read_at_most_once_and_never_written(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    done, awaiting, sending = (new_email(runtime, f"{n}@example.org") for n in "abc")
    to_awaiting(done, runtime, "0100-a")
    move(runtime, done.id, "succeed")
    to_awaiting(awaiting, runtime, "0100-b")
    to_sending(sending, runtime)
    drain(aws)
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    with monkeypatch.context() as patch, dynamodb_requests(patch) as counts:
        strays.arm_strays(runtime, Report(), lambda lane: 0)
    # The open ones are read (one BatchGetItem for the shard that holds them), none written;
    # the done one left the index. Each shard's cursor is read, and moved where rows were.
    shards = runtime.settings.index_shards
    assert counts["Query"] == shards and counts["GetItem"] == shards
    assert counts["BatchGetItem"] <= 2 and "UpdateItem" not in counts
    with monkeypatch.context() as patch, dynamodb_requests(patch) as counts:
        strays.arm_strays(runtime, Report(), lambda lane: 0)
    assert "BatchGetItem" not in counts, "a row is read again"


def test_a_run_reads_its_pages_and_the_next_goes_on_from_its_cursor(aws, runtime, clock,
                                                                    monkeypatch):  # fmt: skip
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, index_shards=1)
    items = [crashed_item(aws, runtime, monkeypatch, f"r{n}@example.org") for n in range(5)]
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    monkeypatch.setattr(strays, "PAGE", 2)
    monkeypatch.setattr(strays, "PAGES", 1)
    armed = []
    for _ in range(3):
        report = Report()
        strays.arm_strays(runtime, report, lambda lane: 0)
        armed.append(report.counts.get("strays_armed", 0))
    assert armed == [2, 2, 1]
    assert all(runtime.store.get_item(i.id).timer_pk for i in items)


def test_a_parked_item_is_not_armed(aws, runtime, clock):
    item = new_email(runtime)
    item.held = "held since h1: bounces"
    assert not unpublished.stray(item)
    item.held = None
    assert unpublished.stray(item)
    item.timer_pk = "publish#0"
    assert not unpublished.stray(item)


def test_the_daily_watch_arms_a_stray_the_cursor_passed_before_the_index_showed_it(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    item = crashed_item(aws, runtime, monkeypatch)
    # The index lagged: the cursor passed the item's time before its entry was there.
    later = unpublished.iso(clock.now() + timedelta(seconds=1))
    for k in range(runtime.settings.index_shards):
        runtime.store.keep_schedule_place(f"{strays.CURSOR_PREFIX}{k}", json.dumps(
            dict.fromkeys(("high", "normal", "bulk"), later)))  # fmt: skip
    clock.advance(runtime.settings.publish_grace_seconds + 2)
    assert "strays_armed" not in schedules.run(["sweep"], runtime)
    assert runtime.store.get_item(item.id).timer_pk is None
    clock.advance(DAY)
    assert schedules.run(["purge"], runtime).get("watch_strays_armed") == 1
    assert schedules.run(["sweep"], runtime) == {"republished": 1}
    assert [m["id"] for m in drain(aws)] == [item.id]


def test_a_stray_in_a_lane_with_a_backlog_waits_and_holds_the_cursor(aws, runtime, clock,
                                                                     monkeypatch):  # fmt: skip
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, index_shards=1)
    lost = crashed_item(aws, runtime, monkeypatch, "lost@example.org")
    clock.advance(1)
    queued = new_email(runtime, "queued@example.org")  # waits in the queue behind a backlog
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    waits = {"normal": 5}
    for _ in range(2):
        report = Report()
        strays.arm_strays(runtime, report, lambda lane: waits.get(lane, 0))
        assert report.counts == {"strays_waiting": 1}  # the first stray stops the shard
    assert runtime.store.get_item(lost.id).timer_pk is None
    waits.clear()  # drained
    report = Report()
    strays.arm_strays(runtime, report, lambda lane: 0)
    assert report.counts == {"strays_armed": 2}
    assert runtime.store.get_item(queued.id).timer_pk and runtime.store.get_item(lost.id).timer_pk


def test_a_shard_that_fails_keeps_its_cursor_and_is_read_again_next_run(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, index_shards=1)
    item = crashed_item(aws, runtime, monkeypatch)
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    with monkeypatch.context() as patch:
        def throttled(*args, **kwargs):
            raise RuntimeError("ProvisionedThroughputExceededException")

        patch.setattr(runtime.store, "get_items", throttled)
        counts = schedules.run(["sweep"], runtime)
    assert counts.get("failed") == 1 and "strays_armed" not in counts
    assert runtime.store.schedule_place(f"{strays.CURSOR_PREFIX}0") is None
    assert schedules.run(["sweep"], runtime) == {"strays_armed": 1, "republished": 1}
    assert [m["id"] for m in drain(aws)] == [item.id]


def crashed_in(aws, runtime, monkeypatch, receiver, priority):
    import vdq

    before = {i.id for i in stored_items(aws, runtime)}
    with monkeypatch.context() as patch:
        crashing_publish(runtime, patch)
        with pytest.raises(Crash):
            vdq.add_email({"email": "shop@example.com"}, [receiver], "Hi", "Text",
                          priority=priority, runtime=runtime)  # fmt: skip
    [item] = [i for i in stored_items(aws, runtime) if i.id not in before]
    return item


def test_a_backlog_in_one_lane_does_not_hold_back_a_lost_send_of_another(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    # A bulk send waits behind its lane's backlog; a high email enqueued after it lost its
    # publish. The high lane has no backlog: its lost send is armed and sent, as its passed
    # publish timer was before, not left until the bulk lane drains or the daily watch.
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, index_shards=1)
    import vdq

    vdq.add_email({"email": "shop@example.com"}, ["bulk@example.org"], "Hi", "Text",
                  priority="bulk", runtime=runtime)  # fmt: skip
    clock.advance(1)
    lost = crashed_in(aws, runtime, monkeypatch, "urgent@example.org", "high")
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    waits = {"bulk": 50_000}
    report = Report()
    strays.arm_strays(runtime, report, lambda lane: waits.get(lane, 0))
    assert runtime.store.get_item(lost.id).timer_pk, report.counts


def test_the_daily_watch_leaves_the_items_of_a_backlog_to_the_strays_schedule(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    # A bulk send waits in its lane's backlog for longer than the grace: each of its items is
    # queued with no timer, its message on the queue. The strays schedule leaves them be (a
    # timer each would be written, then removed by the claim); the daily watch must too.
    waiting = [new_email(runtime, f"r{n}@example.org") for n in range(3)]
    monkeypatch.setattr(runtime.send_queue, "backlog", lambda priority="normal": 40_000)
    clock.advance(runtime.settings.publish_grace_seconds + 60)
    assert schedules.run(["sweep"], runtime).get("strays_waiting")
    counts = schedules.run(["purge"], runtime)
    assert "watch_strays_armed" not in counts, counts
    assert all(runtime.store.get_item(i.id).timer_pk is None for i in waiting)


def test_the_daily_watch_still_arms_a_stray_the_schedule_has_not_reached_without_a_backlog(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    # The strays schedule's read of the shard fails run after run (its cursor never moves):
    # the daily watch stays the backstop for a lost send in a lane without a backlog.
    item = crashed_item(aws, runtime, monkeypatch)
    clock.advance(runtime.settings.publish_grace_seconds + 60)
    assert all(runtime.store.schedule_place(f"{strays.CURSOR_PREFIX}{k}") is None
               for k in range(runtime.settings.index_shards))  # fmt: skip
    assert schedules.run(["purge"], runtime).get("watch_strays_armed") == 1
    assert runtime.store.get_item(item.id).timer_pk


def test_a_stale_read_never_arms_an_item_parked_since(aws, runtime, clock, monkeypatch):
    # The schedule reads items eventually consistent: one read queued with no timer may have
    # been claimed and parked by its producer's hold since (same state and attempt, ``held``
    # set). Armed, the re-publish sweep would publish it again while it is parked.
    from vdq.store import QueueItemRecord
    from vdq.store.models import STATE_SK, item_pk

    stale = crashed_item(aws, runtime, monkeypatch)
    QueueItemRecord(item_pk(stale.id), STATE_SK).update(
        actions=[QueueItemRecord.held.set("held since h1: bounces")])  # the park's write
    assert unpublished.stray(stale) and not unpublished.arm(stale, runtime)
    assert runtime.store.get_item(stale.id).timer_pk is None


def test_a_run_out_of_time_leaves_the_shards_left_to_go_first_next(aws, runtime, clock,
                                                                   monkeypatch):  # fmt: skip
    """A run reads for a time budget, not at most 2,000 rows a shard (behind a bulk backlog of
    1,000 emails a second the other lanes' places fell further behind each run, found in
    review); the shards take turns at going first, so one out of time leaves none unread."""
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, index_shards=4)
    lost = [crashed_item(aws, runtime, monkeypatch, f"r{n}@example.org") for n in range(12)]
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    monkeypatch.setattr(strays, "BUDGET_SECONDS", 0.0)  # a page, then out of time
    firsts, armed = [], 0
    for _ in range(8):
        report = Report()
        firsts.append(int(clock.now().timestamp() // 60) % 4)
        strays.arm_strays(runtime, report, lambda lane: 0)
        armed += report.counts.get("strays_armed", 0)
        clock.advance(60)
    assert sorted(set(firsts)) == [0, 1, 2, 3]
    assert armed == 12 and all(runtime.store.get_item(i.id).timer_pk for i in lost)
