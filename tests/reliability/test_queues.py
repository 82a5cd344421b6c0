"""The SQS of the harsh world (queues.py) checked against moto's SQS where moto models the
behaviour (delays, visibility, receive counts, the redrive to a dead-letter queue, deletes,
visibility changes), and against AWS's documentation where moto is more lenient than SQS (a
stale receipt, a visibility change of a message no longer in flight, the 12 hours counted from
the receive): there the model takes SQS's harsher documented answer. Then Lambda's event source
mapping (``deliver``): a function error or crash returns the whole batch after the visibility
timeout, a partial batch response only the listed messages, and an invocation that starts late
in the visibility window deletes nothing whose visibility ran out meanwhile."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.reliability.queues import Queue, SqsError, deliver
from tests.reliability.support import Crash

START = datetime(2030, 1, 1, tzinfo=UTC)
V = 30  # the queues' visibility timeout in these tests


class Clock:
    def __init__(self) -> None:
        self.now = START

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """One clock for the model and for moto's SQS (its times come from moto.core.utils)."""
    import moto.sqs.models as sqs_models

    clock = Clock()

    def unix_time(dt: datetime | None = None) -> float:
        return (dt or clock.now).replace(tzinfo=UTC).timestamp()

    monkeypatch.setattr(sqs_models, "unix_time", unix_time)
    monkeypatch.setattr(sqs_models, "unix_time_millis", lambda dt=None: unix_time(dt) * 1000)
    return clock


class Moto:
    """moto's SQS with a dead-letter queue after ``max_receives``: the same calls as Queue's."""

    def __init__(self, max_receives: int) -> None:
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        dead = self.sqs.create_queue(QueueName="dead")["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])
        self.dead = dead
        redrive = {"deadLetterTargetArn": arn["Attributes"]["QueueArn"],
                   "maxReceiveCount": max_receives}
        self.url = self.sqs.create_queue(QueueName="work", Attributes={
            "VisibilityTimeout": str(V), "RedrivePolicy": json.dumps(redrive)})["QueueUrl"]

    def send(self, body: str, delay: int = 0) -> None:
        self.sqs.send_message(QueueUrl=self.url, MessageBody=body, DelaySeconds=delay)

    def receive(self, url: str | None = None) -> list[tuple[str, str, int]]:
        got = self.sqs.receive_message(QueueUrl=url or self.url, MaxNumberOfMessages=10,
                                       AttributeNames=["All"]).get("Messages", [])  # fmt: skip
        return sorted((m["Body"], m["ReceiptHandle"],
                       int(m["Attributes"]["ApproximateReceiveCount"])) for m in got)

    def delete(self, receipt: str) -> None:
        self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=receipt)

    def change(self, receipt: str, seconds: int) -> None:
        self.sqs.change_message_visibility(QueueUrl=self.url, ReceiptHandle=receipt,
                                           VisibilityTimeout=seconds)  # fmt: skip


class Model:
    def __init__(self, clock: Clock, max_receives: int) -> None:
        self.clock = clock
        self.dead_queue = Queue("dead", "dead", "arn:dead", visibility=V, retention=14 * 86_400)
        self.queue = Queue("work", "work", "arn:work", visibility=V, max_receives=max_receives,
                           dead=self.dead_queue)  # fmt: skip

    def send(self, body: str, delay: int = 0) -> None:
        self.queue.send(body, delay, self.clock.now)

    def receive(self, url: str | None = None) -> list[tuple[str, str, int]]:
        queue = self.dead_queue if url == "dead" else self.queue
        return sorted((m.body, r, m.receives) for m, r in queue.receive(10, self.clock.now))

    def delete(self, receipt: str) -> None:
        self.queue.delete(receipt, self.clock.now)

    def change(self, receipt: str, seconds: int) -> None:
        self.queue.change_visibility(receipt, seconds, self.clock.now)


@pytest.fixture
def both(clock: Clock) -> Iterator[tuple[Moto, Model]]:
    with mock_aws():
        yield Moto(max_receives=3), Model(clock, max_receives=3)


def seen(got: list[tuple[str, str, int]]) -> list[tuple[str, int]]:
    """What two SQS answers must agree on: the bodies and their receive counts."""
    return [(body, count) for body, _, count in got]


def test_a_delayed_message_is_received_only_after_its_delay(both, clock):
    moto, model = both
    for q in both:
        q.send("now")
        q.send("later", delay=V - 10)
    assert seen(moto.receive()) == seen(model.receive()) == [("now", 1)]
    clock.advance(V - 11)
    assert seen(moto.receive()) == seen(model.receive()) == []
    clock.advance(2)
    assert seen(moto.receive()) == seen(model.receive()) == [("later", 1)]


def test_a_received_message_comes_back_after_its_visibility_with_its_receives_counted(both, clock):
    moto, model = both
    for q in both:
        q.send("a")
    assert seen(moto.receive()) == seen(model.receive()) == [("a", 1)]
    clock.advance(V - 1)
    assert seen(moto.receive()) == seen(model.receive()) == []
    clock.advance(2)
    assert seen(moto.receive()) == seen(model.receive()) == [("a", 2)]


def test_a_message_deleted_by_its_latest_receipt_is_gone(both, clock):
    moto, model = both
    for q in both:
        q.send("a")
        [(_, receipt, _)] = q.receive()
        q.delete(receipt)
    clock.advance(V + 1)
    assert seen(moto.receive()) == seen(model.receive()) == []


def test_a_visibility_change_counts_from_the_call(both, clock):
    moto, model = both
    for q in both:
        q.send("a")
    receipts = [q.receive()[0][1] for q in both]
    clock.advance(10)
    for q, receipt in zip(both, receipts, strict=True):
        q.change(receipt, 5)
    clock.advance(4)
    assert seen(moto.receive()) == seen(model.receive()) == []
    clock.advance(2)  # 16 s after the receive, less than V: the change is what counts
    assert seen(moto.receive()) == seen(model.receive()) == [("a", 2)]


def test_a_visibility_of_zero_makes_a_message_visible_at_once(both, clock):
    moto, model = both
    for q in both:
        q.send("a")
        q.change(q.receive()[0][1], 0)
    clock.advance(0.001)  # moto takes a message as visible from the millisecond after
    assert seen(moto.receive()) == seen(model.receive()) == [("a", 2)]


def test_a_message_received_max_receive_count_times_goes_to_the_dead_letter_queue(both, clock):
    moto, model = both
    for q in both:
        q.send("a")
    for n in (1, 2, 3):
        assert seen(moto.receive()) == seen(model.receive()) == [("a", n)]
        clock.advance(V + 1)
    assert seen(moto.receive()) == seen(model.receive()) == []  # moved, not received
    # It keeps its receive count (and its first enqueue time) in the dead-letter queue.
    assert seen(moto.receive(moto.dead)) == seen(model.receive("dead")) == [("a", 4)]


# ---- where SQS is harsher than moto: the model follows AWS's documentation ------------------


def test_a_receipt_that_is_not_the_latest_deletes_nothing(clock):
    model = Model(clock, max_receives=5)
    model.send("a")
    [(_, old, _)] = model.receive()
    clock.advance(V + 1)
    [(_, new, _)] = model.receive()
    model.delete(old)  # "the request succeeds, but the message might not be deleted"
    clock.advance(V + 1)
    assert seen(model.receive()) == [("a", 3)]
    model.delete(model.queue.messages[0].receipt)
    assert model.queue.messages == [] and new != old


def test_a_receipt_whose_visibility_ran_out_neither_deletes_nor_changes(clock):
    model = Model(clock, max_receives=5)
    model.send("a")
    [(_, receipt, _)] = model.receive()
    clock.advance(V + 1)
    with pytest.raises(SqsError) as refused:
        model.change(receipt, 10)
    assert refused.value.code == "MessageNotInflight"
    model.delete(receipt)
    assert seen(model.receive()) == [("a", 2)]


def test_visibility_reaches_at_most_12_hours_after_the_receive_and_a_delay_900_s(clock):
    model = Model(clock, max_receives=5)
    model.send("a")
    [(_, receipt, _)] = model.receive()
    model.change(receipt, 6 * 3600)
    clock.advance(6 * 3600 - 1)
    model.change(receipt, 6 * 3600 + 1)  # exactly 12 hours after the receive: allowed
    with pytest.raises(AssertionError, match="12 hours"):
        model.change(receipt, 6 * 3600 + 2)
    with pytest.raises(AssertionError, match="DelaySeconds 901"):
        model.send("b", delay=901)


def test_a_copy_comes_while_the_original_is_in_flight_and_after_its_delete(clock):
    model = Model(clock, max_receives=5)
    model.send("a")
    [(_, receipt, _)] = model.receive()
    model.queue.duplicate(0, clock.now)
    assert seen(model.receive()) == [("a", 1)]  # the copy, while the original is in flight
    model.delete(receipt)
    model.queue.duplicate(0, clock.now)  # the original was deleted: a copy still comes
    assert [m.body for m in model.queue.visible_messages(clock.now)] == ["a"]


def test_a_message_older_than_the_retention_is_gone_received_or_not(clock):
    model = Model(clock, max_receives=5)
    model.send("a")
    model.receive()
    clock.advance(model.queue.retention)
    assert model.receive() == [] and model.queue.messages == []


# ---- Lambda's event source mapping ---------------------------------------------------------


def _mapping(clock: Clock) -> Queue:
    queue = Queue("work", "work", "arn:work", visibility=V, max_receives=5,
                  dead=Queue("dead", "dead", "arn:dead", visibility=V))  # fmt: skip
    for body in ("a", "b", "c"):
        queue.send(body, 0, clock.now)
    return queue


def _run(queue: Queue, clock: Clock, function: Any, late: float = 0.0) -> Any:
    return deliver(queue, function, lambda: clock.now, limit=10, late=late,
                   advance=clock.advance)  # fmt: skip


def test_a_function_error_returns_the_whole_batch_after_the_visibility(clock):
    queue = _mapping(clock)

    def fails(event: dict[str, Any]) -> Any:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        _run(queue, clock, fails)
    assert queue.visible_messages(clock.now) == []
    clock.advance(V + 1)
    assert sorted(m.body for m in queue.visible_messages(clock.now)) == ["a", "b", "c"]


def test_a_crash_or_a_timeout_deletes_nothing_either(clock):
    queue = _mapping(clock)

    def dies(event: dict[str, Any]) -> Any:
        raise Crash()

    with pytest.raises(Crash):
        _run(queue, clock, dies)
    clock.advance(V + 1)
    assert len(queue.visible_messages(clock.now)) == 3


def test_a_partial_batch_response_returns_only_the_messages_it_lists(clock):
    queue = _mapping(clock)

    def one_fails(event: dict[str, Any]) -> Any:
        failed = [r for r in event["Records"] if r["body"] == "b"]
        assert all(r["attributes"]["ApproximateReceiveCount"] == "1" for r in event["Records"])
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in failed]}

    _run(queue, clock, one_fails)
    clock.advance(V + 1)
    assert [m.body for m in queue.visible_messages(clock.now)] == ["b"]


def test_an_invocation_that_starts_late_deletes_nothing_whose_visibility_ran_out(clock):
    queue = _mapping(clock)
    _run(queue, clock, lambda event: {"batchItemFailures": []}, late=V + 5)
    # The function succeeded, but after the batch's visibility: every message comes again.
    assert len(queue.visible_messages(clock.now)) == 3
