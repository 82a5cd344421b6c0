"""SQS pollers that invoke handlers as Lambda's event source mapping does.

Each receives a batch (up to the mapping's batch size), invokes the function with an ``aws:sqs``
event and deletes what succeeded: with ``batchItemFailures`` only the named messages stay; when
the function raises, the whole batch stays. A message that stays becomes visible again after the
queue's visibility timeout, and the queue's RedrivePolicy moves it to the dead-letter queue after
``MAX_RECEIVE_COUNT`` receives, as in AWS.
"""

from __future__ import annotations

import threading
from typing import Any

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


class Poller:
    def __init__(self, sqs: Any, queue_url: str, function: str, functions: Functions,
                 batch_size: int) -> None:  # fmt: skip
        self.sqs = sqs
        self.queue_url = queue_url
        self.function = function
        self.functions = functions
        self.batch_size = batch_size
        self.queue_arn = sqs.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        self.invocations = 0
        self.failures = 0
        self.busy = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"poller-{function}", daemon=True)

    def start(self) -> Poller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

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
            result = self.functions.invoke(self.function, sqs_event(messages, self.queue_arn))
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
