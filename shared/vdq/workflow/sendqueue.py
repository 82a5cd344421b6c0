"""The send queues: one SQS message per send attempt of a queue item, in the item's lane.

A message carries the item id and the attempt it was published for; the worker drops a message
whose attempt is no longer the item's ("revoke"). It names the receiver too (and the list of
list mail, ``list``), so the worker can check the suppression list before it claims the item
(vdq.results.suppression.refuse), and the provider rate it is paced at (``pace``) and, outside
the normal lane, its lane (``lane``), so the worker can plan a batch before claiming
(vdq.dispatch.batchplan: bulk books the rate's schedule less far ahead). Small content rides
along so the worker needs no content read; larger content is read from the store. Each priority
has its own queue (vdq.workflow.lanes); a message goes to the queue of its
``priority``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vdq.core.clock import parse_iso

MAX_INLINE_CONTENT = 48_000  # bytes of JSON; SQS bills each 64 KiB of a message as a request
MAX_DELAY_SECONDS = 900  # SQS's limit
MAX_BATCH_BYTES = 262_144  # SQS's limit on a SendMessageBatch's bodies together (256 KiB)


def wait_seconds(send_at: str | None, now: datetime) -> float:
    """Seconds until ``send_at``; 0 when there is none or it passed."""
    if send_at is None:
        return 0.0
    return max(0.0, (parse_iso(send_at) - now).total_seconds())


def delay_for(send_at: str | None, now: datetime) -> int:
    """The DelaySeconds that holds a message until ``send_at`` (never early)."""
    return min(MAX_DELAY_SECONDS, math.ceil(wait_seconds(send_at, now)))


def is_long(send_at: str | None, now: datetime) -> bool:
    """Longer than SQS can delay a message: the item waits in a due-time bucket
    (vdq.intake.scheduling)."""
    return wait_seconds(send_at, now) > MAX_DELAY_SECONDS


@dataclass(frozen=True)
class SendMessage:
    item_id: str
    attempt: int
    delay_seconds: int = 0
    content: dict[str, Any] | None = None
    receiver: str | None = None
    priority: str = "normal"  # the lane (vdq.workflow.lanes); in the body only when not normal
    pace: str | None = None  # the provider rate's key (vdq.dispatch.pacing.key_of); None: not known
    list_name: str | None = None  # list mail: the list an unsubscribe of it leaves
    # Where its attempt waits: ``delayed`` after an automatic retry, else queued (the claim's
    # condition and history entry say the state it takes the item from, without a read).
    delayed: bool = False
    queued_at: str | None = None  # the item's (its history entries' times count from it)

    def body(self) -> str:
        data: dict[str, Any] = {"id": self.item_id, "attempt": self.attempt}
        if self.delayed:
            data["delayed"] = True
        if self.queued_at is not None:
            data["queued"] = self.queued_at
        if self.receiver is not None:
            data["to"] = self.receiver
        if self.pace is not None:
            data["pace"] = self.pace
        if self.priority != "normal":
            data["lane"] = self.priority
        if self.list_name is not None:
            data["list"] = self.list_name
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
        receiver, pace, lane = data.get("to"), data.get("pace"), data.get("lane")
        list_name, queued_at = data.get("list"), data.get("queued")
        return cls(item_id, attempt, 0, content if isinstance(content, dict) else None,
                   receiver if isinstance(receiver, str) else None,
                   priority=lane if isinstance(lane, str) else "normal",
                   pace=pace if isinstance(pace, str) else None,
                   list_name=list_name if isinstance(list_name, str) else None,
                   delayed=data.get("delayed") is True,
                   queued_at=queued_at if isinstance(queued_at, str) else None)  # fmt: skip


def _batches(messages: Sequence[SendMessage]) -> list[list[SendMessage]]:
    """Ten messages to a request, fewer when their bodies would pass MAX_BATCH_BYTES together
    (ten carrying content near MAX_INLINE_CONTENT are 480 KB)."""
    out: list[list[SendMessage]] = []
    size = 0
    for m in messages:
        length = len(m.body().encode())
        if not out or len(out[-1]) == 10 or size + length > MAX_BATCH_BYTES:
            out.append([])
            size = 0
        out[-1].append(m)
        size += length
    return out


class SendQueue:
    """Publishes send messages to their lanes' queues, ten to a request."""

    def __init__(self, sqs: Any, queue_url: str,
                 lanes: Mapping[str, str] | None = None) -> None:  # fmt: skip
        """``queue_url`` takes every message whose lane ``lanes`` does not name."""
        self._sqs = sqs
        self._url = queue_url
        self._lanes = dict(lanes or {})

    def url_of(self, priority: str) -> str:
        return self._lanes.get(priority) or self._url

    def publish(self, messages: Sequence[SendMessage]) -> dict[str, str]:
        """Publish; returns {item id: error text} for the messages SQS did not take."""
        by_url: dict[str, list[SendMessage]] = {}
        for m in messages:
            by_url.setdefault(self.url_of(m.priority), []).append(m)
        failed: dict[str, str] = {}
        for url, lane in by_url.items():
            for chunk in _batches(lane):
                failed.update(self._publish_batch(url, chunk))
        return failed

    def _publish_batch(self, url: str, chunk: Sequence[SendMessage]) -> dict[str, str]:
        entries = [
            {
                "Id": str(i),
                "MessageBody": m.body(),
                "DelaySeconds": max(0, min(m.delay_seconds, MAX_DELAY_SECONDS)),
            }
            for i, m in enumerate(chunk)
        ]
        try:
            response = self._sqs.send_message_batch(QueueUrl=url, Entries=entries)
        except Exception as exc:  # the whole request failed: every message in it did
            return {m.item_id: f"publishing the send failed: {exc}" for m in chunk}
        failed: dict[str, str] = {}
        for failure in response.get("Failed", []):
            message = chunk[int(failure["Id"])]
            failed[message.item_id] = (
                f"publishing the send failed: {failure.get('Code')}: {failure.get('Message')}"
            )
        return failed

    def backlog(self, priority: str = "normal") -> int:
        """Messages waiting for a consumer in a lane: SQS's approximate count of visible
        messages."""
        answer = self._sqs.get_queue_attributes(
            QueueUrl=self.url_of(priority), AttributeNames=["ApproximateNumberOfMessages"]
        )
        return int(answer["Attributes"]["ApproximateNumberOfMessages"])
