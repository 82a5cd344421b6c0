"""The local stack's stream poller reads the table's stream as Lambda's mapping does: each
record once, in order, the same batch again after a failed invocation, only what the filter
lets through; and it never reuses an iterator (each poll asks for one after its position)."""

from __future__ import annotations

import itertools
from typing import Any

from vdq.local.pollers import StreamPoller

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/label"


def record(seq: int, state: str = "succeeded", sk: str = "STATE", event: str = "MODIFY") -> dict:
    return {"eventName": event, "dynamodb": {"SequenceNumber": str(1000 + seq),
            "NewImage": {"sk": {"S": sk}, "state": {"S": state}}}}  # fmt: skip


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


class Functions:
    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.fail_next = False

    def invoke(self, name: str, event: dict, lane: str = "") -> dict:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("the function failed")
        self.batches.append([r["dynamodb"]["SequenceNumber"] for r in event["Records"]])
        return {"published": len(event["Records"])}


def test_each_wanted_record_once_in_order_and_a_failed_batch_again():
    streams, functions = Streams(), Functions()
    poller = StreamPoller(streams, ARN, "schedule", functions, batch_size=2)  # type: ignore[arg-type]
    streams.records += [record(1), record(2, sk="H#x"), record(3, event="INSERT"), record(4)]
    assert poller.poll_once() == 2 and poller.poll_once() == 2 and poller.poll_once() == 0
    assert functions.batches == [["1001"], ["1004"]]
    for _ in range(3):  # idle polls, then the stream grows
        assert poller.poll_once() == 0
    streams.records += [record(5, state="errored"), record(6)]
    functions.fail_next = True
    assert poller.poll_once() == 0  # failed: the position stays
    assert poller.poll_once() == 2
    assert functions.batches[-1] == ["1005", "1006"] and poller.published == 4
    assert poller.failures == 1 and not streams.live  # every iterator was used once
