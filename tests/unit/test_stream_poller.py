"""The local stack's stream poller hands the table's stream on as the deployed mapping does
(infra/stack.py, from vdq.core.resources): only what its filters let through, each record once
and in order, batches that wait to fill, a tumbling window whose state goes from batch to batch
with the shard's id and ends with a last invocation, a failed batch given again with the state
of before it and halved, a record that keeps failing dropped (the mapping's dead-letter queue),
a failed last invocation given again; and it never reuses an iterator."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from vdq.core import resources
from vdq.local.pollers import StreamPoller, passes

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/label"
START = 1_796_000_040.0  # a window's start (a multiple of 60 s)


def record(seq: int, at: float, state: str = "succeeded", sk: str = "STATE",
           event: str = "MODIFY", **image: Any) -> dict:  # fmt: skip
    new = {"sk": {"S": sk}, "state": {"S": state}, **{k: {"S": v} for k, v in image.items()}}
    return {"eventName": event, "dynamodb": {"SequenceNumber": str(1000 + seq),
            "ApproximateCreationDateTime": at, "NewImage": new}}  # fmt: skip


class Streams:
    """One shard; an iterator serves one GetRecords, as a consumed iterator does."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.live: dict[str, int] = {}  # iterator -> index of its first record
        self._ids = itertools.count()

    def describe_stream(self, StreamArn: str) -> dict:
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-1"}]}}

    def get_shard_iterator(self, StreamArn: str, ShardId: str, ShardIteratorType: str,
                           SequenceNumber: str | None = None) -> dict:  # fmt: skip
        start = 0
        if ShardIteratorType == "AFTER_SEQUENCE_NUMBER":
            start = next(i for i, r in enumerate(self.records)
                         if r["dynamodb"]["SequenceNumber"] == SequenceNumber) + 1  # fmt: skip
        iterator = f"it-{next(self._ids)}"
        self.live[iterator] = start
        return {"ShardIterator": iterator}

    def get_records(self, ShardIterator: str, Limit: int) -> dict:
        start = self.live.pop(ShardIterator)  # KeyError: an iterator used twice
        return {"Records": self.records[start:start + Limit], "NextShardIterator": "unused"}


class Function:
    """Counts the records it folded into its state; fails when told to."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail: list[bool] = []  # the next calls' outcomes (True: raise)

    def invoke(self, name: str, event: dict, lane: str = "") -> dict:
        self.calls.append(event)
        if self.fail and self.fail.pop(0):
            raise RuntimeError("the function failed")
        seen = event["state"].get("seen", "")
        seen += "".join(f"{r['dynamodb']['SequenceNumber']}," for r in event["Records"])
        return {"state": {} if event["isFinalInvokeForWindow"] else {"seen": seen},
                "published": 0, "final_seen": seen if event["isFinalInvokeForWindow"] else None}


@pytest.fixture
def world() -> tuple[Streams, Function, list[float], StreamPoller]:
    streams, function, now = Streams(), Function(), [START]
    poller = StreamPoller(streams, ARN, "schedule", function,  # type: ignore[arg-type]
                          batch_size=2, window_seconds=60, batching_seconds=5, retries=2,
                          clock=lambda: now[0])  # fmt: skip
    return streams, function, now, poller


def sequences(event: dict) -> list[str]:
    return [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]


def test_batches_wait_to_fill_carry_the_windows_state_and_a_last_call_ends_the_window(world):
    streams, function, now, poller = world
    streams.records += [record(1, START + 1), record(2, START + 2, sk="H#x")]
    assert poller.poll_once() == 0  # one wanted record (not the H#) and no second: it waits
    now[0] += 3
    streams.records += [record(3, START + 3, event="INSERT")]
    assert poller.poll_once() == 2  # full: a batch of both, no wait
    assert [sequences(c) for c in function.calls] == [["1001", "1003"]]
    first = function.calls[0]
    assert first["shardId"] == "shard-1" and first["state"] == {}
    assert first["window"] == {"start": "2026-11-30T00:54:00Z", "end": "2026-11-30T00:55:00Z"}
    assert first["isFinalInvokeForWindow"] is False
    streams.records += [record(4, START + 20)]
    now[0] = START + 22
    assert poller.poll_once() == 0
    now[0] = START + 27
    assert poller.poll_once() == 1  # waited its batching window: a batch of one
    streams.records += [record(5, START + 28), record(6, START + 70)]
    now[0] = START + 34
    assert poller.poll_once() == 1
    assert function.calls[-1]["state"] == {"seen": "1001,1003,1004,"}  # from the calls before
    now[0] = START + 61  # past the window's end: the last call, then the next window
    poller.poll_once()
    final = [c for c in function.calls if c["isFinalInvokeForWindow"]]
    assert len(final) == 1 and final[0]["Records"] == []
    assert final[0]["state"] == {"seen": "1001,1003,1004,1005,"}
    assert poller.windows == 1
    now[0] = START + 130
    poller.poll_once()
    last = function.calls[-1]
    assert last["isFinalInvokeForWindow"] and last["state"] == {"seen": "1006,"}
    assert last["window"]["start"] == "2026-11-30T00:55:00Z"
    assert poller.delivered == 5 and poller.windows == 2 and poller.invocations == 6
    assert not streams.live  # every iterator was used once


def test_a_failed_batch_is_given_again_halved_with_the_state_of_before_it(world):
    streams, function, now, poller = world
    poller.batch_size = 4
    streams.records += [record(n, START + n) for n in range(1, 5)]
    function.fail = [True, False, False]
    now[0] = START + 10
    for _ in range(3):  # a failure ends a poll: the next one tries again
        poller.poll_once()
    # The batch of four failed: its first half, then the rest, each with the state of before.
    assert [sequences(c) for c in function.calls] == [["1001", "1002", "1003", "1004"],
                                                      ["1001", "1002"], ["1003", "1004"]]
    assert function.calls[1]["state"] == {} and function.calls[2]["state"] == {
        "seen": "1001,1002,"}
    assert poller.failures == 1 and poller.delivered == 4


def test_a_record_that_keeps_failing_is_dropped_and_the_rest_goes_on(world):
    streams, function, now, poller = world
    streams.records += [record(1, START + 1), record(2, START + 2)]
    function.fail = [True, True, True, True]  # the pair, then record 1 alone three times
    now[0] = START + 10
    for _ in range(6):
        poller.poll_once()
    assert poller.dropped == 1
    assert function.calls[-1]["Records"] and sequences(function.calls[-1]) == ["1002"]
    now[0] = START + 61
    poller.poll_once()
    assert function.calls[-1]["isFinalInvokeForWindow"]
    assert function.calls[-1]["state"] == {"seen": "1002,"}


def test_a_failed_last_call_is_given_again_with_the_same_state(world):
    streams, function, now, poller = world
    streams.records += [record(1, START + 1)]
    now[0] = START + 61
    function.fail = [False, True, False]
    poller.poll_once()  # the batch, then the last call fails
    assert poller.windows == 0
    poller.poll_once()
    finals = [c for c in function.calls if c["isFinalInvokeForWindow"]]
    assert len(finals) == 2 and finals[0]["state"] == finals[1]["state"] == {"seen": "1001,"}
    assert poller.windows == 1


def test_an_answer_without_state_is_a_failure_as_lambda_takes_it(world):
    streams, function, now, poller = world
    streams.records += [record(1, START + 1)]
    function.invoke = lambda name, event, lane="": {"published": 1}  # type: ignore[method-assign]
    now[0] = START + 10
    assert poller.poll_once() == 0 and poller.failures == 1


@pytest.mark.parametrize(("fields", "event", "wanted"), [
    ({"sk": "STATE"}, "INSERT", True),
    ({"sk": "STATE"}, "MODIFY", True),
    ({"sk": "STATE"}, "REMOVE", False),
    ({"sk": "CONTENT"}, "INSERT", False),
    ({"sk": "H#2026#x", "actor": "ses", "name": "Complaint"}, "INSERT", True),
    ({"sk": "H#2026#x", "actor": "ses", "name": "error"}, "INSERT", True),
    ({"sk": "H#2026#x", "actor": "ses", "name": "Open"}, "INSERT", False),
    ({"sk": "H#2026#x", "actor": "worker", "name": "error"}, "INSERT", False),
    ({"sk": "H#2026#x", "actor": "ses", "name": "Complaint"}, "MODIFY", False),
])  # fmt: skip
def test_the_filters_are_the_deployed_mappings(fields, event, wanted):
    image = {k: {"S": v} for k, v in fields.items()}
    assert passes({"eventName": event, "dynamodb": {"NewImage": image}}) is wanted
    assert resources.STREAM_FILTERS  # one definition, read by the CDK app too
