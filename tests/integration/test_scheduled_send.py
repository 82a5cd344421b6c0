"""Scheduled send against moto with a fake clock: short waits as SQS delays, long waits in
due-time buckets the minute sweep releases, the publish timer, cancel, and the list filter."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from functions.enqueue import handler as enqueue_handler

import vdq
from tests.support.aws import drain
from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from tests.support.operator import call
from vdq.core import resources
from vdq.core.clock import iso
from vdq.dispatch import send
from vdq.intake.scheduling import LEAD_SECONDS
from vdq.schedules import sweeps as schedules
from vdq.store import ScheduledRecord
from vdq.store.models import scheduled_partition

LANES = resources.SEND_QUEUES
HOUR = 3600


class Spy:
    """The real send queue, recording each message's queue URL, attempt and delay."""

    def __init__(self, queue):
        self.queue, self.sent = queue, []

    def publish(self, messages):
        self.sent += [(m.item_id, m.attempt, self.queue.url_of(m.priority), m.delay_seconds)
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


class CountingSes:
    def __init__(self):
        self.calls = 0

    def send_raw(self, **_):
        self.calls += 1
        return f"ses-{self.calls}"


def post_email(send_at, priority=None):
    body = {"sender": {"email": "shop@example.com"}, "to": [{"email": "ada@example.org"}],
            "subject": "Reminder", "text": "Tomorrow at 9", "send_at": send_at}  # fmt: skip
    if priority:
        body["priority"] = priority
    event = api_event("apigw_post_emails", body=body, groups=["vdq-senders"])
    response = enqueue_handler.handler(event, LambdaContext())
    return response["statusCode"], json.loads(response["body"])


def at(clock, seconds):
    return (clock.now() + timedelta(seconds=seconds)).isoformat()


def buckets(runtime):
    """The buckets not yet published: past each lane's and shard's cursor."""
    store = runtime.store
    partitions = [scheduled_partition(p, k) for p in LANES
                  for k in range(runtime.settings.index_shards)]  # fmt: skip
    return [b for p in partitions
            for b in store.due_buckets(p, "~", 100, after=store.bucket_cursor(p))]  # fmt: skip


def test_a_short_wait_is_the_first_publishs_sqs_delay(aws, runtime, clock, spy):
    status, body = post_email(at(clock, 300.4), priority="high")
    assert status == 201, body
    [item] = body["items"]
    assert item["state"] == "queued" and item["send_at"] == iso(
        clock.now() + timedelta(seconds=300.4))
    assert spy.sent == [(item["id"], 1, aws["queues"][LANES["high"]], 301)]  # never early
    assert buckets(runtime) == []
    # Its publish timer counts from send_at: the re-publish sweep leaves it until then.
    stored = runtime.store.get_item(item["id"])
    grace = runtime.settings.publish_grace_seconds
    assert stored.timer_sk.startswith(iso(clock.now() + timedelta(seconds=300.4 + grace)))


def test_a_long_wait_publishes_nothing_until_the_sweep_releases_its_bucket(aws, runtime, clock,
                                                                           spy):  # fmt: skip
    status, body = post_email(at(clock, 2 * 24 * HOUR), priority="bulk")
    assert status == 201, body
    item_id = body["items"][0]["id"]
    send_at = clock.now() + timedelta(days=2)
    assert spy.sent == [] and len(buckets(runtime)) == 1
    # A day of minute sweeps: nothing due, nothing published, the item untouched (no publish
    # timer fires while it waits: it counts from send_at).
    for _ in range(24):
        clock.advance(HOUR)
        assert schedules.run(["sweep"], runtime) == {}
    clock.advance(24 * HOUR - LEAD_SECONDS - 30)  # 30 s before the bucket is due
    assert schedules.run(["sweep"], runtime) == {}
    clock.advance(45)  # the first sweep after it fell due
    assert schedules.run(["sweep"], runtime) == {"scheduled_released": 1}
    wait = (send_at - clock.now()).total_seconds()
    assert spy.sent == [(item_id, 1, aws["queues"][LANES["bulk"]], round(wait))]
    assert 0 < wait <= LEAD_SECONDS
    assert buckets(runtime) == []
    assert schedules.run(["sweep"], runtime) == {}  # released once
    stored = runtime.store.get_item(item_id)
    assert (stored.state, stored.attempt) == ("queued", 1)
    # The message the bucket published is the item's: the worker sends it.
    runtime.overrides["ses_provider"] = ses = CountingSes()
    message = {"id": item_id, "attempt": 1}  # as published (moto holds it for real seconds)
    assert send.process_body(json.dumps(message), runtime) == send.ACCEPTED and ses.calls == 1


def test_a_sweep_that_runs_late_publishes_at_once(aws, runtime, clock, spy):
    post_email(at(clock, 3 * HOUR))
    clock.advance(3 * HOUR + 120)  # the sweeps stopped for a while
    assert schedules.run(["sweep"], runtime) == {"scheduled_released": 1}
    assert spy.sent[-1][3] == 0


def test_a_request_with_many_receivers_shares_one_bucket(aws, runtime, clock, spy):
    items = vdq.add_sms("+15005550006", [f"+1415555{n:04d}" for n in range(30)], "Sale",
                        send_at=clock.now() + timedelta(hours=5), runtime=runtime)
    [bucket] = buckets(runtime)
    assert bucket.item_ids.split() == [i.id for i in items]
    clock.advance(5 * HOUR)
    assert schedules.run(["sweep"], runtime) == {"scheduled_released": 30}
    assert [s[0] for s in spy.sent] == [i.id for i in items]


@pytest.mark.parametrize("wait", [600, 3 * 24 * HOUR], ids=["short", "long"])
def test_a_cancelled_scheduled_item_is_never_sent(aws, runtime, clock, spy, wait):
    _, body = post_email(at(clock, wait))
    item_id = body["items"][0]["id"]
    answer = call("transition", params={"id": item_id, "name": "cancel"}, query={})
    assert answer.status == 200 and answer.body["item"]["state"] == "cancelled", answer.body
    clock.advance(wait)
    schedules.run(["sweep"], runtime)
    runtime.overrides["ses_provider"] = ses = CountingSes()
    # Whatever reaches the worker when the time comes (the delayed message, or the bucket's)
    # carries attempt 1; cancel moved the item to attempt 2.
    assert [(s[0], s[1]) for s in spy.sent] == [(item_id, 1)]
    assert send.process_body(json.dumps({"id": item_id, "attempt": 1}), runtime) == send.DROPPED
    assert ses.calls == 0
    assert runtime.store.get_item(item_id).state == "cancelled"


def test_a_failed_release_keeps_the_bucket_for_the_next_sweep(aws, runtime, clock, spy):
    post_email(at(clock, 2 * HOUR))
    clock.advance(2 * HOUR)

    class Refusing:
        def publish(self, messages):
            return {m.item_id: "publishing the send failed: throttled" for m in messages}

    runtime.overrides["send_queue"] = Refusing()
    runtime.__dict__.pop("send_queue", None)
    assert schedules.run(["sweep"], runtime) == {"scheduled_publish_failed": 1}
    assert len(buckets(runtime)) == 1
    runtime.overrides["send_queue"] = spy
    runtime.__dict__.pop("send_queue", None)
    assert schedules.run(["sweep"], runtime) == {"scheduled_released": 1}
    assert buckets(runtime) == []


def test_the_active_list_filters_by_scheduled(aws, runtime, clock):
    send_at = clock.now() + timedelta(days=1)
    [waiting] = vdq.add_email("shop@example.com", ["a@example.org"], "Hi", "Later",
                              send_at=send_at, runtime=runtime)
    [now] = vdq.add_email("shop@example.com", ["b@example.org"], "Hi", "Now", runtime=runtime)
    ids = lambda q: [i["id"] for i in call("list_queue_items", query=q).body["items"]]  # noqa: E731
    assert ids({"scheduled": "true"}) == [waiting.id]
    assert ids({"scheduled": "false"}) == [now.id]
    assert sorted(ids({})) == sorted([waiting.id, now.id])
    clock.advance(24 * HOUR + 1)  # its time came: no longer waiting
    assert ids({"scheduled": "true"}) == []
    detail = call("get_queue_item", params={"id": waiting.id}).body
    assert detail["send_at"] == iso(send_at) and detail["state"] == "queued"


@pytest.mark.parametrize("send_at,why,expected", [
    ("2026-01-02T09:00:00", "needs a UTC offset", 400),
    # The document's schema takes any date-time and says the limit in words: a time past it is
    # invalid input (422, as the document declares), not a malformed request.
    ("2026-03-01T09:00:00Z", "days ahead", 422),
])  # fmt: skip
def test_a_bad_send_at_is_refused_naming_it_and_stores_nothing(aws, runtime, send_at, why,
                                                               expected):  # fmt: skip
    status, body = post_email(send_at)
    assert status == expected and body["error"]["details"]["field"] == "send_at", body
    assert why in body["error"]["message"]
    assert buckets(runtime) == [] and drain(aws) == []
    assert call("list_queue_items", query={}).body["items"] == []


@pytest.mark.parametrize("path", ["apigw_post_emails", "apigw_post_sms",
                                  "apigw_post_attachment_upload"])
def test_a_send_at_in_the_query_string_is_refused_not_sent_now(aws, runtime, clock, path):
    # The body's send_at is the only one: the query's, ignored, would have sent the items now.
    event = api_event(path, groups=["vdq-senders"])
    event["queryStringParameters"] = {"send_at": at(clock, 5 * HOUR)}
    event["multiValueQueryStringParameters"] = {"send_at": [at(clock, 5 * HOUR)]}
    response = enqueue_handler.handler(event, LambdaContext())
    body = json.loads(response["body"])
    assert response["statusCode"] == 422 and body["error"]["details"]["field"] == "send_at"
    assert "not a known query parameter" in body["error"]["message"]
    assert drain(aws) == [] and call("list_queue_items", query={}).body["items"] == []


def test_the_schedule_days_setting_bounds_send_at(aws, runtime, clock):
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, max_schedule_days=1)
    status, body = post_email(at(clock, 2 * 24 * HOUR))
    assert status == 422 and "1 days ahead" in body["error"]["message"]


def test_an_idempotent_repeat_of_a_scheduled_request_schedules_nothing_again(aws, runtime,
                                                                              clock):  # fmt: skip
    body = {"sender": {"email": "shop@example.com"}, "to": [{"email": "ada@example.org"}],
            "subject": "Reminder", "text": "x", "send_at": at(clock, 5 * HOUR)}  # fmt: skip
    answers = []
    for _ in range(2):
        event = api_event("apigw_post_emails", body=body, groups=["vdq-senders"],
                          headers={"Idempotency-Key": "reminder-42"})
        answers.append(json.loads(enqueue_handler.handler(event, LambdaContext())["body"]))
    assert answers[0] == answers[1]
    assert len(buckets(runtime)) == 1


def test_a_bucket_record_expires_a_week_after_its_time(aws, runtime, clock):
    post_email(at(clock, 2 * HOUR))
    [bucket] = buckets(runtime)
    assert isinstance(bucket, ScheduledRecord)
    assert bucket.expiration == int((clock.now() + timedelta(hours=2, days=7)).timestamp())


def test_the_sweep_reads_past_its_cursor_only(aws, runtime, clock, spy):
    first = post_email(at(clock, 2 * HOUR))[1]["items"][0]["id"]
    second = post_email(at(clock, 5 * HOUR))[1]["items"][0]["id"]
    clock.advance(2 * HOUR)
    assert schedules.run(["sweep"], runtime) == {"scheduled_released": 1}
    clock.advance(2 * HOUR)
    # The first is behind the cursor. (Its publish timer passed too, but its message waits in
    # its lane: the re-publish sweep leaves it.)
    assert "scheduled_released" not in schedules.run(["sweep"], runtime)
    third = post_email(at(clock, 20 * 60))[1]["items"][0]["id"]  # due before the second
    clock.advance(HOUR)
    assert schedules.run(["sweep"], runtime)["scheduled_released"] == 2
    sent = [s[0] for s in spy.sent]
    assert sent[0] == first and sorted(sent[1:]) == sorted([third, second])  # shards: any order


class Refusing:
    def publish(self, messages):
        return {m.item_id: "publishing the send failed: throttled" for m in messages}


def errored_at_enqueue(runtime, clock, spy, wait):
    """A scheduled item whose first publish SQS refused: errored before its time."""
    runtime.overrides["send_queue"] = Refusing()
    runtime.__dict__.pop("send_queue", None)
    item_id = post_email(at(clock, wait))[1]["items"][0]["id"]
    assert runtime.store.get_item(item_id).state == "errored"
    runtime.overrides["send_queue"] = spy
    runtime.__dict__.pop("send_queue", None)
    return item_id


def test_an_operator_retry_before_its_time_keeps_the_item_waiting_for_it(aws, runtime, clock,
                                                                          spy):  # fmt: skip
    item_id = errored_at_enqueue(runtime, clock, spy, 600)
    send_at = runtime.store.get_item(item_id).send_at
    clock.advance(100)
    answer = call("transition", params={"id": item_id, "name": "retry"}, query={})
    assert answer.status == 200, answer.body
    item = answer.body["item"]
    assert (item["state"], item["attempt"], item["send_at"]) == ("queued", 2, send_at)
    # Published for the rest of its wait, never early.
    assert spy.sent == [(item_id, 2, aws["queues"][LANES["normal"]], 500)]
    assert [i["id"] for i in call("list_queue_items",
                                  query={"scheduled": "true"}).body["items"]] == [item_id]
    # Its publish timer counts from send_at: the re-publish sweep leaves it until then.
    grace = runtime.settings.publish_grace_seconds
    assert runtime.store.get_item(item_id).timer_sk.startswith(
        iso(clock.now() + timedelta(seconds=500 + grace)))
    clock.advance(grace)
    assert "republished" not in schedules.run(["sweep"], runtime)
    history = call("get_queue_item", params={"id": item_id}).body["history"]
    [retry] = [h for h in history if h["name"] == "retry"]
    assert send_at in retry["text"] and "waits" in retry["text"], retry


def test_an_operator_retry_before_a_long_wait_is_released_then_with_its_attempt(
        aws, runtime, clock, spy):  # fmt: skip
    """An item errored while it waits longer than SQS can delay (the store's error, whatever
    caused it): the retry publishes nothing now; the sweep releases it near its time at the
    new attempt, and the first bucket's message (attempt 1) is dropped."""
    from vdq.workflow.transitions import Step, apply

    item_id = post_email(at(clock, 2 * 24 * HOUR))[1]["items"][0]["id"]
    apply(item_id, Step("error", actor="vdq", result="publishing the send failed"), runtime)
    answer = call("transition", params={"id": item_id, "name": "retry"}, query={})
    assert answer.status == 200, answer.body
    assert answer.body["item"]["send_at"] is not None and spy.sent == []
    clock.advance(2 * 24 * HOUR - LEAD_SECONDS + 30)
    assert schedules.run(["sweep"], runtime) == {"scheduled_released": 2}
    assert sorted((s[0], s[1]) for s in spy.sent) == [(item_id, 1), (item_id, 2)]
    assert all(0 < s[3] <= LEAD_SECONDS for s in spy.sent)
    runtime.overrides["ses_provider"] = ses = CountingSes()
    outcomes = [send.process_body(json.dumps({"id": s[0], "attempt": s[1]}), runtime)
                for s in sorted(spy.sent, key=lambda s: s[1])]  # fmt: skip
    assert outcomes == [send.DROPPED, send.ACCEPTED] and ses.calls == 1


def test_an_operator_retry_after_its_time_sends_it_at_once(aws, runtime, clock, spy):
    item_id = errored_at_enqueue(runtime, clock, spy, 600)
    send_at = runtime.store.get_item(item_id).send_at
    clock.advance(700)
    answer = call("transition", params={"id": item_id, "name": "retry"}, query={})
    assert answer.status == 200, answer.body
    assert answer.body["item"]["send_at"] is None and answer.body["item"]["attempt"] == 2
    assert spy.sent == [(item_id, 2, aws["queues"][LANES["normal"]], 0)]
    assert call("list_queue_items", query={"scheduled": "true"}).body["items"] == []
    history = call("get_queue_item", params={"id": item_id}).body["history"]
    [retry] = [h for h in history if h["name"] == "retry"]
    assert send_at in retry["text"] and "now" in retry["text"], retry


def test_a_retry_of_an_item_waiting_for_its_send_at_is_a_409_that_says_so(aws, runtime, clock,
                                                                          spy):  # fmt: skip
    """An operator who finds a queued item and presses retry is told why nothing is stuck,
    and how to send it sooner."""
    item_id = post_email(at(clock, 3 * HOUR))[1]["items"][0]["id"]
    send_at = runtime.store.get_item(item_id).send_at
    answer = call("transition", params={"id": item_id, "name": "retry"}, query={})
    assert answer.status == 409 and answer.body["error"]["details"]["state"] == "queued"
    message = answer.body["error"]["message"]
    assert f"waits for its send_at {send_at}" in message and "cancel it" in message, message
    assert runtime.store.get_item(item_id).attempt == 1
    clock.advance(3 * HOUR + 1)  # due: its send is in its lane, no longer waiting
    answer = call("transition", params={"id": item_id, "name": "retry"}, query={})
    assert answer.status == 409 and "send_at" not in answer.body["error"]["message"]


def test_due_bulk_buckets_never_hold_back_a_high_one(aws, runtime, clock, spy):
    """A newsletter scheduled for 9:00 fills more than a run's batch; a high item due then (a
    second later, so its bucket sorts behind theirs in time) is released in the first run."""
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, schedule_batch=5, index_shards=1)
    nine = clock.now() + timedelta(hours=2)
    for n in range(3):
        vdq.add_sms("+15005550006", [f"+1415555{n}{k:03d}" for k in range(10)], "Sale",
                    priority="bulk", send_at=nine, runtime=runtime)  # fmt: skip
    [high] = vdq.add_sms("+15005550006", ["+14155550199"], "Your code is 123456",
                         priority="high", send_at=nine + timedelta(seconds=1), runtime=runtime)
    clock.advance(2 * HOUR - LEAD_SECONDS + 2)  # all due
    schedules.run(["sweep"], runtime)
    assert (high.id, 1, aws["queues"][LANES["high"]], LEAD_SECONDS - 1) in spy.sent
    # The bulk buckets go on at the batch's pace, each once.
    for _ in range(3):
        clock.advance(60)
        schedules.run(["sweep"], runtime)
    assert len(spy.sent) == len({s[0] for s in spy.sent}) == 31


def test_a_run_behind_its_cursor_reads_nothing_and_fails_nothing(aws, runtime, clock, spy,
                                                                  monkeypatch):  # fmt: skip
    """Two runs overlap (EventBridge delivers at least once; a long run meets the next minute's):
    the later one moves a cursor past the earlier one's window. DynamoDB refuses a Query whose
    ExclusiveStartKey lies outside its key condition (moto does not: the store says so here),
    which would fail the earlier run's whole release."""
    from vdq.store.scheduled import Scheduled

    real = Scheduled.due_buckets

    def as_dynamodb(self, partition, before, limit, after=None):
        if after is not None and after >= before:
            raise RuntimeError("ValidationException: The provided starting key is outside "
                               "query boundaries based on provided condition")  # fmt: skip
        return real(self, partition, before, limit, after)

    monkeypatch.setattr(Scheduled, "due_buckets", as_dynamodb)
    post_email(at(clock, 2 * HOUR))
    clock.advance(2 * HOUR - LEAD_SECONDS + 30)  # due 30 s ago for this run
    assert schedules.run(["sweep"], runtime) == {"scheduled_released": 1}
    clock.advance(-40)  # the overlapping run started 40 s earlier: the bucket is not in its window
    assert schedules.run(["sweep"], runtime) == {}
    assert len(spy.sent) == 1


def crowd(runtime, monkeypatch, *shards):
    """A run's batch of 5 and buckets of 10 ids (a bucket fills a run); the next requests'
    buckets go to ``shards`` in turn (a request's shard is a hash of its random content id)."""
    from dataclasses import replace

    from vdq.intake import scheduling

    runtime.settings = replace(runtime.settings, schedule_batch=5, index_shards=4)
    monkeypatch.setattr(scheduling, "BUCKET_IDS", 10)
    order = iter(shards)
    monkeypatch.setattr(scheduling, "shard", lambda key, count: next(order))


def newsletter(runtime, n, receivers, send_at, priority=None):
    return vdq.add_sms("+15005550006", [f"+1415{n}5{k:05d}" for k in range(receivers)], "Sale",
                       priority=priority, send_at=send_at, runtime=runtime)  # fmt: skip


def test_a_one_off_item_due_with_a_newsletter_in_another_shard_goes_in_the_first_run(
        aws, runtime, clock, spy, monkeypatch):  # fmt: skip
    """A newsletter of ten runs' batches in shard 0 does not hold back a reminder due in the
    same minute in shard 2: a run's batch is shared between the shards."""
    crowd(runtime, monkeypatch, 0, 2)
    nine = clock.now() + timedelta(hours=2)
    sale = newsletter(runtime, 2, 100, nine)
    [reminder] = newsletter(runtime, 3, 1, nine + timedelta(seconds=30))
    clock.advance(2 * HOUR - LEAD_SECONDS + 31)  # all due
    schedules.run(["sweep"], runtime)
    assert reminder.id in [s[0] for s in spy.sent]
    for _ in range(10):
        clock.advance(60)
        schedules.run(["sweep"], runtime)
    assert sorted(s[0] for s in spy.sent) == sorted(i.id for i in [*sale, reminder])
    assert buckets(runtime) == []


def test_newsletters_due_together_in_two_shards_take_turns(aws, runtime, clock, spy,
                                                            monkeypatch):  # fmt: skip
    """Each fills many runs' batches: neither waits for the other to drain."""
    crowd(runtime, monkeypatch, 0, 2)
    nine = clock.now() + timedelta(hours=2)
    sales = [{i.id for i in newsletter(runtime, n, 50, nine)} for n in (2, 3)]
    clock.advance(2 * HOUR - LEAD_SECONDS + 1)
    for _ in range(2):
        schedules.run(["sweep"], runtime)
        clock.advance(60)
    sent = {s[0] for s in spy.sent}
    assert [len(sent & sale) for sale in sales] == [10, 10]


def test_the_earliest_due_goes_first_across_shards(aws, runtime, clock, spy, monkeypatch):
    crowd(runtime, monkeypatch, 0, 2)
    nine = clock.now() + timedelta(hours=2)
    later = newsletter(runtime, 2, 10, nine + timedelta(minutes=5))
    first = newsletter(runtime, 3, 10, nine)
    clock.advance(2 * HOUR - LEAD_SECONDS + 5 * 60 + 1)  # both due, one bucket a run
    schedules.run(["sweep"], runtime)
    assert {s[0] for s in spy.sent} == {i.id for i in first}
    clock.advance(60)
    schedules.run(["sweep"], runtime)
    assert {s[0] for s in spy.sent} == {i.id for i in first + later}


def test_an_item_due_behind_a_late_newsletter_in_another_shard_still_goes_before_its_time(
        aws, runtime, clock, spy, monkeypatch):  # fmt: skip
    """The newsletter due at 9:00 needs 20 runs: from 8:46 it goes first (it is due first),
    but once its items are late, a reminder due at 9:02:30 shares the batch with them and
    enters SQS before its time, not after the newsletter drains."""
    crowd(runtime, monkeypatch, 0, 2)
    nine = clock.now() + timedelta(hours=2)
    newsletter(runtime, 2, 200, nine)
    [reminder] = newsletter(runtime, 3, 1, nine + timedelta(seconds=150))
    clock.advance(2 * HOUR - LEAD_SECONDS + 2)
    while reminder.id not in [s[0] for s in spy.sent]:
        assert clock.now() < nine + timedelta(minutes=10)
        schedules.run(["sweep"], runtime)
        clock.advance(60)
    [delay] = [s[3] for s in spy.sent if s[0] == reminder.id]
    assert delay > 0  # it entered SQS before its send_at


def test_a_sweep_with_nothing_due_reads_a_cursor_and_a_query_per_lane_and_shard(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    from tests.support.operator import dynamodb_requests
    from vdq.intake.scheduling import release_due
    from vdq.schedules.report import Report

    post_email(at(clock, 2 * HOUR))  # not yet due
    partitions = len(LANES) * runtime.settings.index_shards
    with dynamodb_requests(monkeypatch) as counts:
        release_due(runtime, Report())
    assert counts == {"GetItem": partitions, "Query": partitions}


def test_a_one_off_item_due_with_a_newsletter_in_its_own_shard_goes_in_the_first_run(
        aws, runtime, clock, spy, monkeypatch):  # fmt: skip
    """A newsletter sent as requests of up to VDQ_MAX_RECEIVERS, accepted first, spreads over
    the shards: the reminder due at the same time shares a shard with some of them and does
    not wait for those to go."""
    crowd(runtime, monkeypatch, 0, 0, 0, 0)
    nine = clock.now() + timedelta(hours=2)
    sale = []
    for n in (2, 3, 4):
        sale += [i.id for i in newsletter(runtime, n, 10, nine)]
        clock.advance(1)  # request ids follow the time they were accepted
    [reminder] = newsletter(runtime, 5, 1, nine)
    clock.advance(2 * HOUR - LEAD_SECONDS - 2)
    schedules.run(["sweep"], runtime)
    assert reminder.id in [s[0] for s in spy.sent]
    for _ in range(3):
        clock.advance(60)
        schedules.run(["sweep"], runtime)
    assert sorted(s[0] for s in spy.sent) == sorted([*sale, reminder.id])
