"""What a repair makes of the schedules' dead letters (Lambda's on-failure records of the stream
mapping) and of what the stream still holds of a batch: offline, over a stream that answers as
DynamoDB Streams does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from vdq.schedules.repair import SkippedBatch, read_batch

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/vdq/stream/2026-12-01T00:00:00.000"


def on_failure(**info: Any) -> str:
    batch = {"shardId": "shardId-1", "startSequenceNumber": "100", "endSequenceNumber": "104",
             "batchSize": 3, "streamArn": STREAM, **info}  # fmt: skip
    return json.dumps({"requestContext": {"functionArn": "arn:aws:lambda:eu-west-1:1:function:f",
                                          "condition": "RetryAttemptsExhausted"},
                       "DDBStreamBatchInfo": {k: v for k, v in batch.items() if v is not None}})


def record(sequence: int, sk: str = "STATE") -> dict[str, Any]:
    return {"eventName": "MODIFY", "dynamodb": {
        "SequenceNumber": str(sequence), "NewImage": {"sk": {"S": sk}, "id": {"S": "x"}}}}


class Shard:
    """A shard's records, read a page of ``page`` records at a time; ``closed`` after them."""

    def __init__(self, records: list[dict[str, Any]], *, page: int = 2,
                 closed: bool = False) -> None:  # fmt: skip
        self.records, self.page, self.closed = records, page, closed

    def get_shard_iterator(self, **kwargs: Any) -> dict[str, Any]:
        assert kwargs["StreamArn"] == STREAM and kwargs["ShardId"] == "shardId-1"
        at = int(kwargs.get("SequenceNumber", 0))
        return {"ShardIterator": str(next((n for n, r in enumerate(self.records)
                                           if int(r["dynamodb"]["SequenceNumber"]) >= at),
                                          len(self.records)))}  # fmt: skip

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
        start = int(ShardIterator)
        got = self.records[start : start + self.page]
        end = start + len(got)
        more = end < len(self.records) or not self.closed
        return {"Records": got, **({"NextShardIterator": str(end)} if more else {})}


def test_an_on_failure_record_names_the_batch_and_its_function():
    batch = SkippedBatch.parse(on_failure(approximateArrivalOfFirstRecord="2026-12-01T10:00:00Z"))
    assert batch is not None
    assert (batch.shard_id, batch.first, batch.last, batch.size) == ("shardId-1", "100", "104", 3)
    assert (batch.region, batch.condition) == ("eu-west-1", "RetryAttemptsExhausted")
    assert batch.function_arn.endswith(":function:f")
    assert batch.first_arrival == "2026-12-01T10:00:00Z"
    assert batch.repair_shard == "repair/shardId-1/100-104"


@pytest.mark.parametrize("body", ['{"task": "sms"}', "{}", "not json", '["DDBStreamBatchInfo"]'])
def test_a_scheduled_runs_input_is_no_batch(body):
    assert SkippedBatch.parse(body) is None


@pytest.mark.parametrize(("info", "field"), [
    ({"shardId": None}, "DDBStreamBatchInfo.shardId is missing"),
    ({"streamArn": ""}, "DDBStreamBatchInfo.streamArn is missing"),
    ({"startSequenceNumber": "1e5"}, "DDBStreamBatchInfo.startSequenceNumber is not a sequence"),
    ({"endSequenceNumber": "99"}, "DDBStreamBatchInfo.startSequenceNumber is after"),
    ({"batchSize": "3"}, "DDBStreamBatchInfo.batchSize is not a count"),
    ({"batchSize": -1}, "DDBStreamBatchInfo.batchSize is not a count"),
])  # fmt: skip
def test_a_broken_on_failure_record_is_refused_naming_its_field(info, field):
    with pytest.raises(ValueError, match=field):
        SkippedBatch.parse(on_failure(**info))


def test_the_batch_is_read_from_its_first_record_past_its_last_through_the_filters():
    shard = Shard([record(99), record(100), record(102, sk="H#1"), record(103), record(104),
                   record(105)])  # fmt: skip
    batch = SkippedBatch.parse(on_failure())
    assert batch is not None
    reading = read_batch(shard, batch)
    assert [r["dynamodb"]["SequenceNumber"] for r in reading.records] == ["100", "103", "104"]
    assert reading.complete and reading.lost(batch) == 0
    assert {r["eventSource"] for r in reading.records} == {"aws:dynamodb"}
    assert {r["eventSourceARN"] for r in reading.records} == {STREAM}


def test_a_closed_shard_that_ends_before_the_last_record_loses_the_rest():
    shard = Shard([record(100), record(101)], closed=True)
    batch = SkippedBatch.parse(on_failure())
    assert batch is not None
    reading = read_batch(shard, batch)
    assert not reading.complete and reading.lost(batch) == 3 - 2


def test_a_shard_or_stream_gone_loses_the_whole_batch():
    class Gone(Shard):
        def get_shard_iterator(self, **kwargs: Any) -> dict[str, Any]:
            raise ClientError({"Error": {"Code": "ResourceNotFoundException",
                                         "Message": "Requested resource not found"}},
                              "GetShardIterator")  # fmt: skip

    batch = SkippedBatch.parse(on_failure())
    assert batch is not None
    reading = read_batch(Gone([]), batch)
    assert (reading.records, reading.gone, reading.lost(batch)) == (
        [], "Requested resource not found", 3)


def test_a_stream_trimmed_while_read_goes_on_from_its_oldest_record():
    class TrimmedOnce(Shard):
        calls = 0

        def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
            self.calls += 1
            if self.calls == 2:  # the first page was read, then the stream dropped it
                del self.records[:2]
                raise ClientError({"Error": {"Code": "TrimmedDataAccessException"}},
                                  "GetRecords")  # fmt: skip
            return super().get_records(ShardIterator, Limit)

        def get_shard_iterator(self, **kwargs: Any) -> dict[str, Any]:
            if kwargs["ShardIteratorType"] == "TRIM_HORIZON":
                return {"ShardIterator": "0"}
            return super().get_shard_iterator(**kwargs)

    shard = TrimmedOnce([record(100), record(101), record(102), record(103), record(104)])
    batch = SkippedBatch.parse(on_failure(batchSize=5))
    assert batch is not None
    reading = read_batch(shard, batch)
    # Each record once, though the first page was read before the trimming.
    assert [r["dynamodb"]["SequenceNumber"] for r in reading.records] == [
        "100", "101", "102", "103", "104"]
    assert reading.trimmed
