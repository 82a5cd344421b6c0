"""SQS and stream pollers that invoke handlers as Lambda's event source mappings do.

Each receives a batch (up to the mapping's batch size), invokes the function with an ``aws:sqs``
event and deletes what succeeded: with ``batchItemFailures`` only the named messages stay; when
the function raises, the whole batch stays. A message that stays becomes visible again after the
queue's visibility timeout, and the queue's RedrivePolicy moves it to the dead-letter queue after
``MAX_RECEIVE_COUNT`` receives, as in AWS.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Self

from vdq.core import resources
from vdq.core.streams import as_lambda_gives, passes
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
    """Reads the table's stream as Lambda's DynamoDB event source mapping of the deployed stack
    does (infra/stack.py, from vdq.core.resources): every shard from its start, in order, only
    the records the mapping's filters let through; batches of up to ``batch_size`` records
    that wait up to ``batching_seconds`` to fill; a tumbling window of ``window_seconds``
    (aligned to the clock, by the records' creation time) whose state the function returns
    and gets back with the next batch of the shard, with the shard's id, and a last invocation
    (``isFinalInvokeForWindow``, no records) once the window has passed. A batch the function
    fails is given again with the state of before it, halved each time (bisect on error); one
    record that fails ``retries`` times is dropped, as the mapping sends it to its dead-letter
    queue. A last invocation that fails is given again until it succeeds: the shard waits."""

    def __init__(self, streams: Any, table_arn_stream: str, function: str,
                 functions: Functions, batch_size: int = resources.STREAM_BATCH_SIZE,
                 window_seconds: float = resources.STREAM_TUMBLING_WINDOW_SECONDS,
                 batching_seconds: float = resources.STREAM_BATCHING_WINDOW_SECONDS,
                 retries: int = resources.STREAM_RETRY_ATTEMPTS,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.streams = streams
        self.stream_arn = table_arn_stream
        self.function = function
        self.functions = functions
        self.batch_size = batch_size
        self.window_seconds = window_seconds
        self.batching_seconds = batching_seconds
        self.retries = retries
        self.clock = clock
        self.invocations = 0
        self.failures = 0
        self.dropped = 0  # records given up on (the mapping's dead-letter queue)
        self.published = 0  # state-change events the function reported publishing
        self.records = 0  # stream records read
        self.delivered = 0  # records that passed the filter and reached the function
        self.windows = 0  # windows closed by a last invocation
        # The last sequence number taken from each shard: every poll asks for a new iterator
        # after it, as a consumer that checkpoints does (an iterator kept across polls went
        # stale once in moto's server and read nothing more while the shard grew).
        self.positions: dict[str, str] = {}
        self.shards: dict[str, _Shard] = {}
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
        """Read what each shard has grown by and hand on what is due; returns the records
        handed to the function."""
        shards = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
            "Shards"]  # fmt: skip
        handed = 0
        for shard in shards:
            shard_id = shard["ShardId"]
            after = self.positions.get(shard_id)
            where = ({"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
                     if after else {"ShardIteratorType": "TRIM_HORIZON"})  # fmt: skip
            iterator = self.streams.get_shard_iterator(StreamArn=self.stream_arn,
                                                       ShardId=shard_id, **where)["ShardIterator"]
            got = self.streams.get_records(ShardIterator=iterator, Limit=1000)
            records = [as_lambda_gives(r, self.stream_arn) for r in got.get("Records", [])]
            self.records += len(records)
            if records:
                self.positions[shard_id] = records[-1]["dynamodb"]["SequenceNumber"]
            state = self.shards.setdefault(shard_id, _Shard(shard_id))
            now = self.clock()
            state.pending.extend((r, now) for r in records if passes(r))
            handed += self._deliver(state, now)
        return handed

    def _deliver(self, shard: _Shard, now: float) -> int:
        handed = 0
        while True:
            if shard.window is None:
                if not shard.pending:
                    return handed
                start = _created(shard.pending[0][0]) // self.window_seconds * self.window_seconds
                shard.window = (start, start + self.window_seconds)
            end = shard.window[1]
            due = [p for p in shard.pending if _created(p[0]) < end]
            if shard.batch is None and due:
                full = len(due) >= self.batch_size
                waited = now - _created(due[0][0]) >= self.batching_seconds
                if not (full or waited or now >= end):
                    return handed
                shard.batch = [r for r, _ in due[: self.batch_size]]
            if shard.batch is not None:
                if not self._invoke(shard, shard.batch, final=False):
                    return handed
                del shard.pending[: len(shard.batch)]
                handed += len(shard.batch)
                shard.batch, shard.tries = None, 0
                continue
            if now < end:
                return handed
            if not self._invoke(shard, [], final=True):
                return handed
            shard.window, shard.state, shard.tries = None, {}, 0
            self.windows += 1

    def _invoke(self, shard: _Shard, records: list[dict[str, Any]], *, final: bool) -> bool:
        """One invocation of the window; True when the function took it. A failed batch is
        halved for its next try (a single record is dropped after ``retries``)."""
        assert shard.window is not None
        start, end = shard.window
        event = {"Records": records, "window": {"start": _iso(start), "end": _iso(end)},
                 "state": dict(shard.state), "shardId": shard.shard_id,
                 "eventSourceARN": self.stream_arn, "isFinalInvokeForWindow": final,
                 "isWindowTerminatedEarly": False}  # fmt: skip
        self.invocations += 1
        try:
            result = self.functions.invoke(self.function, event, lane="stream")
            if not isinstance(result, dict) or not isinstance(result.get("state"), dict):
                raise RuntimeError("a tumbling window's answer must carry its state")
        except Exception:
            log.exception("functions/%s raised on a stream batch of %d; it is given again",
                          self.function, len(records))  # fmt: skip
            self.failures += 1
            shard.tries += 1
            if records and len(records) > 1:
                shard.batch = records[: len(records) // 2]
            elif records and shard.tries > self.retries:
                log.error("stream record %s dropped after %d tries (the mapping's dead-letter "
                          "queue)", records[0]["dynamodb"]["SequenceNumber"], shard.tries)
                self.dropped += 1
                shard.pending.pop(0)
                shard.batch, shard.tries = None, 0
            return False
        shard.state = dict(result["state"])
        self.published += int(result.get("published", 0))
        self.delivered += len(records)
        return True


class _Shard:
    """One shard's place in the mapping: the records read but not handed on, the window open,
    the state it carries, and the batch being tried."""

    def __init__(self, shard_id: str) -> None:
        self.shard_id = shard_id
        self.pending: list[tuple[dict[str, Any], float]] = []  # (record, when read)
        self.window: tuple[float, float] | None = None
        self.state: dict[str, Any] = {}
        self.batch: list[dict[str, Any]] | None = None
        self.tries = 0


def _created(record: dict[str, Any]) -> float:
    created = (record.get("dynamodb") or {}).get("ApproximateCreationDateTime")
    return float(created) if isinstance(created, int | float) else time.time()


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
