"""SQS pollers that invoke handlers as Lambda's event source mapping does.

Each receives a batch (up to the mapping's batch size), invokes the function with an ``aws:sqs``
event and deletes what succeeded: with ``batchItemFailures`` only the named messages stay; when
the function raises, the whole batch stays. A message that stays becomes visible again after the
queue's visibility timeout, and the queue's RedrivePolicy moves it to the dead-letter queue after
``MAX_RECEIVE_COUNT`` receives, as in AWS.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Any, Self

from vdq.local.functions import Functions
from vdq.local.serving import log

REGION = "us-east-1"


def sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {
                    name: {
                        "stringValue": value.get("StringValue"),
                        "binaryValue": value.get("BinaryValue"),
                        "stringListValues": [],
                        "binaryListValues": [],
                        "dataType": value.get("DataType", "String"),
                    }
                    for name, value in (m.get("MessageAttributes") or {}).items()
                },
                "md5OfBody": m.get("MD5OfBody"),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for m in messages
        ]
    }


class _Loop(ABC):
    """A daemon thread that runs ``_run`` until ``stop``."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def halt(self) -> None:
        """Ask the loop to end after what it is doing; ``stop`` waits for it."""
        self._stop.set()

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        self._thread.join(timeout=timeout)

    @abstractmethod
    def _run(self) -> None:
        """Poll until ``self._stop`` is set."""


class Poller(_Loop):
    def __init__(self, sqs: Any, queue_url: str, function: str, functions: Functions,
                 batch_size: int, lane: str = "") -> None:  # fmt: skip
        """``lane`` names the event source: pollers of one function in different lanes (the
        send queue of each priority) invoke it side by side, as separate mappings do."""
        self.sqs = sqs
        self.queue_url = queue_url
        self.function = function
        self.lane = lane
        self.functions = functions
        self.batch_size = batch_size
        self.queue_arn = sqs.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        self.invocations = 0
        self.failures = 0
        self.busy = False
        super().__init__(f"poller-{function}{'-' + lane if lane else ''}")

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.functions.available(self.function):
                self._stop.wait(1.0)  # leave the messages queued until the function lands
                continue
            try:
                self.poll_once(wait_seconds=1)
            except Exception:
                log.exception("poller for %s failed; retrying", self.function)
                self._stop.wait(1.0)

    def poll_once(self, wait_seconds: int = 0) -> int:
        got = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            WaitTimeSeconds=wait_seconds,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = got.get("Messages", [])
        if not messages:
            return 0
        self.busy = True
        try:
            self._invoke(messages)
        finally:
            self.busy = False
        return len(messages)

    def _invoke(self, messages: list[dict[str, Any]]) -> None:
        self.invocations += 1
        try:
            result = self.functions.invoke(self.function, sqs_event(messages, self.queue_arn),
                                           self.lane)  # fmt: skip
        except Exception:
            log.exception("functions/%s raised; the batch of %d stays", self.function,
                          len(messages))  # fmt: skip
            self.failures += len(messages)
            return
        failed = {f.get("itemIdentifier") for f in (result or {}).get("batchItemFailures", [])}
        self.failures += len(failed)
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(done[start : start + 10])
                ],
            )


class StreamPoller(_Loop):
    """Reads the table's stream as Lambda's DynamoDB event source mapping does: every shard
    from its start, batches of records in order, the same batch again until the function
    takes it (at least once), only the records the mapping's filter lets through."""

    def __init__(self, streams: Any, table_arn_stream: str, function: str,
                 functions: Functions, batch_size: int = 100) -> None:  # fmt: skip
        self.streams = streams
        self.stream_arn = table_arn_stream
        self.function = function
        self.functions = functions
        self.batch_size = batch_size
        self.invocations = 0
        self.failures = 0
        self.published = 0  # state-change events the function reported publishing
        self.records = 0  # stream records read
        self.delivered = 0  # records that passed the filter and reached the function
        # The last sequence number taken from each shard: every poll asks for a new iterator
        # after it, as a consumer that checkpoints does (an iterator kept across polls went
        # stale once in moto's server and read nothing more while the shard grew).
        self.positions: dict[str, str] = {}
        super().__init__(f"stream-{function}")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self.poll_once():
                    self._stop.wait(0.2)
            except Exception:
                log.exception("stream poller for %s failed; retrying", self.function)
                self._stop.wait(1.0)

    def poll_once(self) -> int:
        shards = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
            "Shards"]  # fmt: skip
        seen = 0
        for shard in shards:
            shard_id = shard["ShardId"]
            after = self.positions.get(shard_id)
            where = ({"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
                     if after else {"ShardIteratorType": "TRIM_HORIZON"})  # fmt: skip
            iterator = self.streams.get_shard_iterator(StreamArn=self.stream_arn,
                                                       ShardId=shard_id, **where)["ShardIterator"]
            got = self.streams.get_records(ShardIterator=iterator, Limit=self.batch_size)
            records = [dict(r, eventSourceARN=self.stream_arn) for r in got.get("Records", [])]
            wanted = [r for r in records if _passes_filter(r)]
            self.records += len(records)
            if wanted:
                self.invocations += 1
                try:
                    result = self.functions.invoke(self.function, {"Records": wanted},
                                                   lane="stream")  # fmt: skip
                    self.published += int((result or {}).get("published", 0))
                    self.delivered += len(wanted)
                except Exception:
                    log.exception("functions/%s raised on a stream batch; it is delivered again",
                                  self.function)  # fmt: skip
                    self.failures += 1
                    continue  # the position stays: the same records come again
            if records:
                self.positions[shard_id] = records[-1]["dynamodb"]["SequenceNumber"]
            seen += len(records)
        return seen


def _passes_filter(record: dict[str, Any]) -> bool:
    """The deployed mapping's filter (infra/stack.py): modified state items only."""
    image = (record.get("dynamodb") or {}).get("NewImage") or {}
    return record.get("eventName") == "MODIFY" and (image.get("sk") or {}).get("S") == "STATE"
