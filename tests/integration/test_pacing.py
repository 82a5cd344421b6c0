"""Provider rate control against moto: the shared pace record, and the worker's throttling path.

Two pacers are two send functions: they share the table's pace record and nothing else. Time is
a fake wall clock per worker that sleeping advances; the worker whose clock is earliest acts
next, so the two run as they would side by side.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import boto3
import pytest
from twilio.base.exceptions import TwilioRestException

import vdq
from tests.support.aws import checks, run_checks
from tests.support.events import load_event
from tests.support.lambda_context import LambdaContext
from vdq.dispatch import pacing, send
from vdq.dispatch.pacing import NoSlot, Pacer
from vdq.providers import ThrottledProviderError
from vdq.providers.twilio import classify as twilio_classify
from vdq.store.pacing import PaceRecords
from vdq.workflow.sendqueue import SendMessage

SENDER = "shop@example.com"
CELL = "+15005550006"


class Wall:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def wall():
    return Wall()


def worker(runtime, wall, max_wait=5.0) -> Pacer:
    records = PaceRecords(boto3.client("dynamodb"), runtime.settings.table_name)
    return Pacer(records, max_wait, wall=wall, sleep=wall.sleep)


def test_two_workers_share_one_schedule_and_together_keep_to_the_rate(aws, runtime):
    walls = [Wall(), Wall()]
    workers = [worker(runtime, w) for w in walls]
    batches = [[10, 9, 8, 7, 6, 5, 4, 3, 2, 1] * 3 for _ in workers]  # three batches each
    sent = []
    while any(batches):
        i = min((i for i in range(2) if batches[i]), key=lambda i: walls[i].now)
        workers[i].turn("ses", 10.0, upcoming=batches[i].pop(0))
        sent.append(walls[i].now)
        walls[i].now += 0.004  # the SES call
    times = sorted(sent)
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps) >= 0.1 - 1e-6  # never two sends closer than 1/rate, across both workers
    assert times[-1] - times[0] == pytest.approx(5.9, abs=0.05)  # and no slot left idle
    requests = sum(w.requests for w in workers)
    assert requests / 60 <= 0.2  # batches of slots: about one request per ten sends


def test_a_cut_by_one_worker_slows_the_other(aws, runtime, wall):
    a, b = worker(runtime, wall), worker(runtime, wall)
    b.turn("ses", 10.0)
    assert a.slow_down("ses", 10.0) is True
    assert b.slow_down("ses", 10.0) is False  # the same burst: one cut for the fleet
    b.slots.clear()
    b.turn("ses", 10.0)  # learns the cut from the record it writes
    assert b.seen["ses"].rate == pytest.approx(7.0)
    before = wall.now
    b.turn("ses", 10.0, upcoming=3)
    b.turn("ses", 10.0)
    assert wall.now - before >= 1 / 7.0 - 1e-6


def test_a_full_schedule_refuses_in_one_request_with_the_time_it_frees(aws, runtime, wall):
    a, b = worker(runtime, wall, max_wait=1.0), worker(runtime, wall, max_wait=1.0)
    a.turn("twilio#+15550001", 1.0)  # reserves [now, now+1)
    a.records.reserve("twilio#+15550001", 20.0, wall.now, wall.now + 1, busy=True)  # +20 s
    with pytest.raises(NoSlot) as no_slot:
        b.turn("twilio#+15550001", 1.0)
    assert b.requests == 1  # the refusal carried the record: no read after it
    assert 20 <= no_slot.value.delay <= 21 + 21 / 2 + 1


# ---- the worker -------------------------------------------------------------------------------


class ThrottlingSes:
    """Refuses ``times`` sends as SES does over the account's rate, then accepts."""

    def __init__(self, times: int) -> None:
        self.times, self.calls = times, 0

    def send_raw(self, **_):
        self.calls += 1
        if self.calls <= self.times:
            raise ThrottledProviderError("SES", "Maximum sending rate exceeded.",
                                         code="TooManyRequestsException")  # fmt: skip
        return f"0100-{self.calls:04d}"


class RecordingQueue:
    def __init__(self):
        self.messages = []

    def publish(self, messages):
        self.messages.extend(messages)
        return {}


@pytest.fixture
def rt(aws, runtime, wall):
    boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
    runtime.settings = replace(runtime.settings, ses_max_send_rate=10.0)
    runtime.overrides["pacer"] = worker(runtime, wall)
    queue = RecordingQueue()
    runtime.overrides["send_queue"] = queue
    runtime.__dict__.pop("send_queue", None)
    return runtime


def states(rt, item_id):
    return [(h.name, h.from_state, h.to_state) for h in rt.store.history(item_id)]


def test_a_throttled_email_goes_back_on_the_queue_and_never_ends_errored(aws, rt, clock):
    [item] = vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", runtime=rt)
    body = rt.overrides["send_queue"].messages[0].body()
    ses = ThrottlingSes(times=20)  # more throttling answers than VDQ_MAX_RETRIES allows retries
    rt.overrides["ses_provider"] = ses
    queue = rt.overrides["send_queue"]
    outcomes = []
    while True:
        outcome = send.process_body(body, rt)
        outcomes.append(outcome)
        stored = rt.store.get_item(item.id)
        if outcome != send.PACED:
            break
        # Back where the claim took it from, at the same attempt, its retries untouched.
        assert stored.state == "queued" and stored.attempt == item.attempt
        assert stored.retries in (0, None) and "Maximum sending rate" in stored.result
        message = queue.messages[-1]
        assert message.attempt == item.attempt and message.delay_seconds >= 1
        clock.advance(message.delay_seconds)
        body = message.body()
    assert outcomes == [send.PACED] * 20 + [send.ACCEPTED]
    # Sent: sending until its first event or its check, which records it awaiting.
    assert stored.state == "sending" and ses.calls == 21
    assert [(i, a) for i, a, _, _ in checks(aws)] == [(item.id, item.attempt)]
    run_checks(aws, rt)
    stored = rt.store.get_item(item.id)
    assert stored.state == "awaiting" and stored.result is None
    steps = states(rt, item.id)
    assert ("throttled", "sending", "queued") in steps
    assert all(to != "errored" for _, _, to in steps)
    record = rt.overrides["pacer"].records.read(pacing.SES_KEY)
    assert record.rate is not None and record.rate < 10.0  # the fleet's pace was cut


@pytest.mark.parametrize(("priority", "longest"), [("high", 2), ("normal", 6), ("bulk", 6)])
def test_a_throttled_high_email_comes_back_within_a_second_of_its_turn_others_spread_wider(
        aws, rt, monkeypatch, priority, longest):  # fmt: skip
    # Spread at its widest: 1 s for a high item (giveback.THROTTLED_SPREAD), the longest wait
    # (5 s) for the others, after its turn at the cut rate (7/s: 0.14 s).
    monkeypatch.setattr("vdq.dispatch.giveback.random.uniform", lambda low, high: high)
    [_item] = vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", priority=priority,
                            runtime=rt)  # fmt: skip
    body = rt.overrides["send_queue"].messages[0].body()
    rt.overrides["ses_provider"] = ThrottlingSes(times=1)
    assert send.process_body(body, rt) == send.PACED
    again = rt.overrides["send_queue"].messages[-1]
    assert again.priority == priority and again.delay_seconds == longest


def test_a_duplicate_of_a_given_back_message_sends_once(aws, rt):
    [_item] = vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", runtime=rt)
    body = rt.overrides["send_queue"].messages[0].body()
    rt.overrides["ses_provider"] = ThrottlingSes(times=1)
    assert send.process_body(body, rt) == send.PACED
    again = rt.overrides["send_queue"].messages[-1].body()
    assert send.process_body(again, rt) == send.ACCEPTED
    # The duplicate fails its claim: the attempt is sending (until its first event or check),
    # so it waits for the claim's lease; once the check recorded it, it is dropped.
    assert send.process_body(again, rt) == send.WAITING
    run_checks(aws, rt)
    assert send.process_body(again, rt) == send.DROPPED
    assert rt.overrides["ses_provider"].calls == 2


def test_an_item_whose_turn_is_far_off_is_given_back_unsent(aws, rt, wall):
    [item] = vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", runtime=rt)
    body = rt.overrides["send_queue"].messages[0].body()
    records = rt.overrides["pacer"].records
    records.reserve(pacing.SES_KEY, 60.0, wall.now, wall.now, busy=False)  # a minute booked
    calls = ThrottlingSes(times=0)
    rt.overrides["ses_provider"] = calls
    assert send.process_body(body, rt) == send.PACED
    stored = rt.store.get_item(item.id)
    assert stored.state == "queued" and stored.attempt == item.attempt and calls.calls == 0
    message = rt.overrides["send_queue"].messages[-1]
    assert 55 <= message.delay_seconds <= 60 + 60 / 2 + 1
    assert states(rt, item.id)[-1] == ("paced", "sending", "queued")
    wall.now += message.delay_seconds
    assert send.process_body(message.body(), rt) == send.ACCEPTED


@pytest.mark.parametrize(("priority", "most", "least"), [("bulk", 1.0, 0.1), ("high", 1.5, 1.5)])
def test_a_bulk_send_books_the_schedule_only_a_horizon_ahead_a_high_one_the_longest_wait(
        aws, rt, wall, priority, most, least):  # fmt: skip
    # Others hold the next 3 s at 10/s. A send told that 15 of its batch come: the high one
    # reserves all 15 at once (1.5 s past its slot, within the longest wait); the bulk one
    # waits until the schedule is within its 1 s horizon and reserves no further than that.
    records = rt.overrides["pacer"].records
    records.reserve(pacing.SES_KEY, 3.0, wall.now, wall.now, busy=False)
    start = wall.now
    vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", priority=priority, runtime=rt)
    message = rt.overrides["send_queue"].messages[-1]
    assert message.priority == priority
    rt.overrides["ses_provider"] = ThrottlingSes(times=0)
    assert send.process(message, rt, upcoming=15) == send.ACCEPTED
    assert wall.now == pytest.approx(start + 3.0)  # at its slot, right after the others'
    ahead = records.read(pacing.SES_KEY).tat - wall.now
    assert least - 1e-3 <= ahead <= most + 1e-3


# 429 / 20429: Twilio's rate limit; 400 / 21611: the sender's queue holds ten hours of messages
# at its rate, and Twilio's remedy is to send more slowly.
@pytest.mark.parametrize("status,code", [(429, 20429), (400, 21611)])
def test_twilio_429_puts_an_sms_back_on_the_queue_instead_of_erroring_it(aws, rt, status, code):
    class Throttled429:
        calls = 0

        def send(self, *args, **kwargs):
            self.calls += 1
            if self.calls == 1:
                raise twilio_classify(TwilioRestException(status, "/Messages.json",
                                                          "Too Many Requests", code))
            return "SM" + "2" * 32

    rt.overrides["twilio"] = Throttled429()
    [item] = vdq.add_sms(CELL, [CELL], "Your code is 1234", runtime=rt)
    body = rt.overrides["send_queue"].messages[0].body()
    assert send.process_body(body, rt) == send.PACED
    assert rt.store.get_item(item.id).state == "queued"
    again = rt.overrides["send_queue"].messages[-1].body()
    assert send.process_body(again, rt) == send.ACCEPTED
    record = rt.overrides["pacer"].records.read(f"twilio#{CELL}")
    assert record.rate == pytest.approx(0.7)  # VDQ_TWILIO_SENDER_RATE 1/s, cut by 0.7


def test_a_pace_record_that_cannot_be_written_sends_unpaced_instead_of_failing(aws, rt):
    class Broken:
        def reserve(self, *args, **kwargs):
            raise RuntimeError("ProvisionedThroughputExceededException")

    rt.overrides["pacer"].records = Broken()
    vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", runtime=rt)
    rt.overrides["ses_provider"] = ThrottlingSes(times=0)
    body = rt.overrides["send_queue"].messages[0].body()
    assert send.process_body(body, rt) == send.ACCEPTED


@pytest.mark.parametrize("priority", ["high", "bulk"])
def test_a_given_back_message_stays_in_its_items_lane(aws, rt, priority):
    # The worker parses a message without its lane (the body does not carry it): the give-back
    # must take the lane from the item, or a high item would wait behind the normal backlog.
    [_item] = vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", priority=priority,
                            runtime=rt)  # fmt: skip
    first = rt.overrides["send_queue"].messages[0]
    assert first.priority == priority
    rt.overrides["ses_provider"] = ThrottlingSes(times=1)
    assert send.process_body(first.body(), rt) == send.PACED
    assert rt.overrides["send_queue"].messages[-1].priority == priority


@pytest.mark.parametrize("priority", ["high", "bulk"])
def test_a_given_back_item_keeps_its_publish_timer_in_its_lanes_partition(aws, rt, priority):
    # Should the publish of the give-back be lost, the re-publish sweep reads each lane's own
    # timers: a high item's timer in the normal lane's partition would wait for its backlog.
    from vdq.schedules import timers
    from vdq.workflow.transitions import TIMER_PUBLISH, timer_partition

    [item] = vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", priority=priority,
                           runtime=rt)  # fmt: skip
    rt.overrides["ses_provider"] = ThrottlingSes(times=1)
    assert send.process_body(rt.overrides["send_queue"].messages[0].body(), rt) == send.PACED
    stored = rt.store.get_item(item.id)
    shards = rt.settings.index_shards
    assert stored.state == "queued"
    assert stored.timer_pk == timer_partition(TIMER_PUBLISH, item.id, shards, priority)
    far = "9999-01-01T00:00:00.000000Z"
    assert timers.due(TIMER_PUBLISH, far, rt, 10, priority) == [item.id]
    assert timers.due(TIMER_PUBLISH, far, rt, 10, "normal") == []


def test_a_send_message_names_the_rate_it_is_paced_at_and_a_give_back_keeps_it(aws, rt):
    # The handler orders a batch by this key before any claim (vdq.dispatch.batchplan.batch_order).
    vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", runtime=rt)
    vdq.add_sms(CELL, ["+14155550100"], "Your code is 1234", runtime=rt)
    email, sms = rt.overrides["send_queue"].messages
    assert (email.pace, sms.pace) == ("ses", f"twilio#{CELL}")
    assert SendMessage.parse(sms.body()).pace == f"twilio#{CELL}"
    rt.overrides["ses_provider"] = ThrottlingSes(times=1)
    assert send.process_body(email.body(), rt) == send.PACED
    assert SendMessage.parse(rt.overrides["send_queue"].messages[-1].body()).pace == "ses"


def test_the_send_handler_takes_each_senders_messages_in_turn(aws, rt, monkeypatch):
    from functions.send import handler as send_handler

    from vdq.dispatch import sendbatch

    other = "+15005550007"
    vdq.add_sms(CELL, ["+14155550100", "+14155550101", "+14155550102"], "Hi", runtime=rt)
    vdq.add_sms(other, ["+14155550103"], "Hi", runtime=rt)
    messages = rt.overrides["send_queue"].messages
    event = load_event("sqs_send_message")
    event["Records"] = [{**event["Records"][0], "messageId": f"m{i}", "body": m.body()}
                        for i, m in enumerate(messages)]  # fmt: skip
    seen = []
    monkeypatch.setattr(sendbatch, "prepare",
                        lambda record, upcoming, *_: seen.append((record["messageId"], upcoming)))
    assert send_handler.handler(event, LambdaContext()) == {"batchItemFailures": []}
    # The lone message of the second sender goes second, not after the first sender's three;
    # each is told how many sends of its own sender follow (slots are reserved for those only).
    assert seen == [("m0", 3), ("m3", 1), ("m1", 2), ("m2", 1)]


def test_a_retry_given_back_returns_to_delayed_at_its_attempt_with_its_retries(aws, rt, wall):
    from vdq.providers import TransientProviderError

    class DownOnce:
        calls = 0

        def send_raw(self, **_):
            self.calls += 1
            if self.calls == 1:
                raise TransientProviderError("SES", "Service unavailable", code="503")
            return "0100-0001"

    rt.overrides["ses_provider"] = DownOnce()
    [item] = vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", runtime=rt)
    queue = rt.overrides["send_queue"]
    assert send.process_body(queue.messages[0].body(), rt) == send.DELAYED
    retry = queue.messages[-1]
    # The retry comes after its delay: history is ordered by time, and two entries of one
    # instant would come in either order.
    rt.clock.advance(max(1, retry.delay_seconds or 0))
    booked = rt.overrides["pacer"].records.reserve(pacing.SES_KEY, 60.0, wall.now, wall.now + 1,
                                                   busy=True)  # a minute booked by others
    assert booked.start is not None
    assert send.process_body(retry.body(), rt) == send.PACED
    stored = rt.store.get_item(item.id)
    assert (stored.state, stored.attempt, stored.retries) == ("delayed", retry.attempt, 1)
    assert states(rt, item.id)[-1] == ("paced", "sending", "delayed")


def test_a_throttled_send_whose_rate_cut_fails_still_goes_back_on_the_queue(aws, rt, monkeypatch):
    """The pace record's write failing (DynamoDB throttling the one hot item) must not leave
    the claimed item in ``sending``: its lease would pass and the sweep make it errored."""
    from botocore.exceptions import ClientError

    [item] = vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", runtime=rt)
    body = rt.overrides["send_queue"].messages[0].body()
    rt.overrides["ses_provider"] = ThrottlingSes(times=1)

    def unavailable(*_args, **_kwargs):
        error = {"Code": "ProvisionedThroughputExceededException", "Message": "Rate exceeded"}
        raise ClientError({"Error": error}, "UpdateItem")

    monkeypatch.setattr(rt.overrides["pacer"].records, "cut", unavailable)
    assert send.process_body(body, rt) == send.PACED
    stored = rt.store.get_item(item.id)
    assert stored.state == "queued" and stored.attempt == item.attempt
    again = rt.overrides["send_queue"].messages[-1]
    assert again.item_id == item.id and again.delay_seconds >= 1
    assert rt.overrides["ses_provider"].calls == 1
