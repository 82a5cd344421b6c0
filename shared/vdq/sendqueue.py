"""The send queue: one SQS message per send attempt of a queue item.

A message carries the item id and the attempt it was published for; the worker drops a message
whose attempt is no longer the item's ("revoke"). It names the receiver too, so the worker can
check the suppression list before it claims the item (vdq.suppression.refuse). Small content
rides along so the worker needs no content read; larger content is read from the store.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_INLINE_CONTENT = 48_000  # bytes of JSON; SQS bills each 64 KiB of a message as a request
MAX_DELAY_SECONDS = 900  # SQS's limit


@dataclass(frozen=True)
class SendMessage:
    item_id: str
    attempt: int
    delay_seconds: int = 0
    content: dict[str, Any] | None = None
    receiver: str | None = None

    def body(self) -> str:
        data: dict[str, Any] = {"id": self.item_id, "attempt": self.attempt}
        if self.receiver is not None:
            data["to"] = self.receiver
        if self.content is not None:
            encoded = json.dumps(self.content, separators=(",", ":"))
            if len(encoded) <= MAX_INLINE_CONTENT:
                data["content"] = self.content
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def parse(cls, body: str) -> SendMessage:
        data = json.loads(body)
        item_id, attempt = data["id"], data["attempt"]
        if not isinstance(item_id, str) or not isinstance(attempt, int):
            raise ValueError("send message needs a string id and an integer attempt")
        content = data.get("content")
        receiver = data.get("to")
        return cls(item_id, attempt, 0, content if isinstance(content, dict) else None,
                   receiver if isinstance(receiver, str) else None)


class SendQueue:
    """Publishes send messages, ten to a request."""

    def __init__(self, sqs: Any, queue_url: str) -> None:
        self._sqs = sqs
        self._url = queue_url

    def publish(self, messages: Sequence[SendMessage]) -> dict[str, str]:
        """Publish; returns {item id: error text} for the messages SQS did not take."""
        failed: dict[str, str] = {}
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            entries = [
                {
                    "Id": str(i),
                    "MessageBody": m.body(),
                    "DelaySeconds": max(0, min(m.delay_seconds, MAX_DELAY_SECONDS)),
                }
                for i, m in enumerate(chunk)
            ]
            try:
                response = self._sqs.send_message_batch(QueueUrl=self._url, Entries=entries)
            except Exception as exc:  # the whole request failed: every message in it did
                failed.update({m.item_id: f"publishing the send failed: {exc}" for m in chunk})
                continue
            for failure in response.get("Failed", []):
                message = chunk[int(failure["Id"])]
                failed[message.item_id] = (
                    f"publishing the send failed: {failure.get('Code')}: {failure.get('Message')}"
                )
        return failed

    def backlog(self) -> int:
        """Messages waiting for a consumer: SQS's approximate count of visible messages."""
        answer = self._sqs.get_queue_attributes(
            QueueUrl=self._url, AttributeNames=["ApproximateNumberOfMessages"]
        )
        return int(answer["Attributes"]["ApproximateNumberOfMessages"])
