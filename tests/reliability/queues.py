"""SQS as it behaves, for the harsh world (harsh.py routes every SQS request here), and Lambda's
SQS event source mapping as it behaves (``Mapping``).

A standard queue holds each message in one of three states: delayed (``DelaySeconds``, at most
900 s), visible, or in flight (received, not deleted, until its visibility timeout runs out).
What SQS does, and so what this model does:

- ``ReceiveMessage`` takes visible messages, in no promised order, makes each in flight for the
  queue's visibility timeout (or the request's), counts a receive and hands out a new receipt
  handle; a message received ``maxReceiveCount`` times goes to the dead-letter queue at its
  next receive instead (keeping its first enqueue time and its receive count).
- ``DeleteMessage`` deletes with the latest receipt while the message is in flight. A receipt
  that is not the latest, or whose visibility ran out, may delete nothing (AWS: "the request
  succeeds, but the message might not be deleted"): this model deletes nothing.
- ``ChangeMessageVisibility`` counts the new timeout from the call; it needs the latest receipt
  of a message still in flight (else an error) and never reaches past 12 hours after the receive.
- Retention: a message is gone once it is older than the queue's retention, received or not.
- At-least-once delivery (``duplicate``): a copy of a message may be delivered while the
  original is in flight, or after it was deleted.

Requests no product code may make (a delay over 900 s, a visibility past 12 hours, an operation
the product does not use) fail the test: they are defects, not faults of SQS.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

MAX_DELAY_SECONDS = 900
MAX_VISIBILITY_SECONDS = 12 * 3600
DAY = 86_400

_receipts: Iterator[int] = itertools.count(1)
_ids: Iterator[int] = itertools.count(1)


class SqsError(Exception):
    """An error answer of SQS the product must handle (the request was well formed)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class Message:
    message_id: str
    body: str
    sent_at: datetime  # the first enqueue (a dead-lettered message keeps it)
    visible_at: datetime  # delayed until / in flight until
    delayed_until: datetime | None = None  # its DelaySeconds' end (a copy waits for it too)
    receives: int = 0
    receipt: str | None = None  # the latest receive's handle
    received_at: datetime | None = None  # the latest receive
    first_received_at: datetime | None = None

    def in_flight(self, now: datetime) -> bool:
        return self.receipt is not None and self.visible_at > now

    def visible(self, now: datetime) -> bool:
        return self.visible_at <= now


@dataclass
class Queue:
    name: str
    url: str
    arn: str
    visibility: int  # seconds: the queue's default visibility timeout
    max_receives: int | None = None  # the redrive policy's maxReceiveCount
    dead: Queue | None = None  # its dead-letter queue
    retention: int = 4 * DAY
    messages: list[Message] = field(default_factory=list)
    gone: list[Message] = field(default_factory=list)  # deleted or expired
    sent: list[str] = field(default_factory=list)  # every body ever sent, in order

    # ---- the operations ----------------------------------------------------------------------

    def send(self, body: str, delay: int, now: datetime) -> str:
        if not 0 <= delay <= MAX_DELAY_SECONDS:
            raise AssertionError(f"DelaySeconds {delay} sent to {self.name}: SQS refuses it")
        until = now + timedelta(seconds=delay)
        message = Message(f"m-{next(_ids)}", body, now, until, delayed_until=until)
        self.messages.append(message)
        self.sent.append(body)
        return message.message_id

    def receive(self, limit: int, now: datetime, *, start: int = 0, visibility: int | None = None,
                first: Message | None = None) -> list[tuple[Message, str]]:  # fmt: skip
        """Up to ``limit`` visible messages, from the ``start``-th on (SQS promises no order;
        ``first``, when visible, before every other), each now in flight with a new receipt."""
        self.expire(now)
        ready = self.visible_messages(now)
        if ready:
            k = start % len(ready)
            ready = ready[k:] + ready[:k]
        if first is not None and first in ready:
            ready = [first, *(m for m in ready if m is not first)]
        taken: list[tuple[Message, str]] = []
        for message in ready:
            if len(taken) >= limit:
                break
            if self.max_receives is not None and message.receives >= self.max_receives:
                self._dead_letter(message, now)
                continue
            message.receives += 1
            message.receipt = f"rh-{next(_receipts)}"
            message.received_at = now
            message.first_received_at = message.first_received_at or now
            seconds = self.visibility if visibility is None else visibility
            message.visible_at = now + timedelta(seconds=seconds)
            taken.append((message, message.receipt))
        return taken

    def delete(self, receipt: str, now: datetime) -> bool:
        """True when the message went; a stale receipt deletes nothing (no error)."""
        for message in self.messages:
            if message.receipt == receipt and message.in_flight(now):
                self.messages.remove(message)
                self.gone.append(message)
                return True
        return False

    def change_visibility(self, receipt: str, seconds: int, now: datetime) -> None:
        if not 0 <= seconds <= MAX_VISIBILITY_SECONDS:
            raise AssertionError(f"VisibilityTimeout {seconds} asked of {self.name}")
        for message in self.messages:
            if message.receipt == receipt:
                if not message.in_flight(now):
                    raise SqsError("MessageNotInflight", "the message's visibility timeout "
                                   "ran out; it is visible again")  # fmt: skip
                assert message.received_at is not None
                end = now + timedelta(seconds=seconds)
                if end - message.received_at > timedelta(seconds=MAX_VISIBILITY_SECONDS):
                    raise AssertionError(f"visibility of {message.message_id} asked to reach "
                                         "past 12 hours after its receive: SQS refuses it")
                message.visible_at = end
                return
        raise SqsError("ReceiptHandleIsInvalid", f"the receipt handle {receipt} is not the "
                       "latest of a message in the queue")  # fmt: skip

    # ---- what SQS does on its own ------------------------------------------------------------

    def duplicate(self, n: int, now: datetime) -> Message | None:
        """At-least-once: a copy of the ``n``-th message ever sent (in flight, waiting, or
        deleted), visible now (once its delay ended), as another SQS server would hand it."""
        known = [*self.messages, *self.gone]
        if not known:
            return None
        original = sorted(known, key=lambda m: (m.sent_at, m.message_id))[n % len(known)]
        until = original.delayed_until or now
        copy = Message(original.message_id, original.body, original.sent_at, max(now, until),
                       delayed_until=original.delayed_until)  # fmt: skip
        self.messages.append(copy)
        return copy

    def consume(self, body: str) -> None:
        """Every copy of ``body`` received and deleted, as a consumer that handled it would:
        for tests that hand a body to the function themselves."""
        for message in [m for m in self.messages if m.body == body]:
            self.messages.remove(message)
            self.gone.append(message)

    def expire(self, now: datetime) -> None:
        """Messages past the retention are gone, received or not."""
        for message in list(self.messages):
            if message.sent_at + timedelta(seconds=self.retention) <= now:
                self.messages.remove(message)
                self.gone.append(message)

    def _dead_letter(self, message: Message, now: datetime) -> None:
        self.messages.remove(message)
        assert self.dead is not None
        # As SQS moves it: its first enqueue time and its receive count kept.
        self.dead.messages.append(Message(message.message_id, message.body, message.sent_at, now,
                                          receives=message.receives))  # fmt: skip
        self.dead.sent.append(message.body)

    # ---- what a test reads -------------------------------------------------------------------

    def visible_messages(self, now: datetime) -> list[Message]:
        return [m for m in self.messages if m.visible(now)]

    def next_visible(self, now: datetime) -> datetime | None:
        """When the next message waiting (delayed or in flight) becomes visible."""
        waiting = [m.visible_at for m in self.messages if not m.visible(now)]
        return min(waiting, default=None)

    def counts(self, now: datetime) -> dict[str, int]:
        visible = sum(1 for m in self.messages if m.visible(now))
        flying = sum(1 for m in self.messages if m.in_flight(now))
        return {"visible": visible, "in_flight": flying,
                "delayed": len(self.messages) - visible - flying}  # fmt: skip

    def reset(self) -> None:
        self.messages.clear()
        self.gone.clear()
        self.sent.clear()


def millis(moment: datetime | None) -> str:
    return str(int(moment.timestamp() * 1000)) if moment is not None else ""


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def boto_message(message: Message, receipt: str) -> dict[str, Any]:
    """A received message as ReceiveMessage answers it (AttributeNames=All)."""
    return {"MessageId": message.message_id, "ReceiptHandle": receipt, "Body": message.body,
            "MD5OfBody": md5(message.body),
            "Attributes": {"ApproximateReceiveCount": str(message.receives),
                           "SentTimestamp": millis(message.sent_at),
                           "ApproximateFirstReceiveTimestamp": millis(message.first_received_at),
                           "SenderId": "AROAEXAMPLE:vdq"}}  # fmt: skip


# ---- Lambda's event source mapping -------------------------------------------------------------


@dataclass
class Delivery:
    """One invocation of a function by its SQS event source mapping: the batch it received."""

    queue: Queue
    taken: list[tuple[Message, str]]

    def event(self) -> dict[str, Any]:
        from vdq.local.pollers import sqs_event

        return sqs_event([boto_message(m, r) for m, r in self.taken], self.queue.arn)

    def settle(self, answer: Any, now: datetime) -> int:
        """What the mapping does after the function: on a return, delete every message but the
        ``batchItemFailures`` (with the receipts it received them by); on an error or a
        timeout (``answer`` None), delete nothing: the whole batch comes back when its
        visibility runs out. Returns how many it deleted."""
        if answer is None:
            return 0
        failed = {f.get("itemIdentifier") for f in (answer or {}).get("batchItemFailures") or []}
        return sum(1 for m, r in self.taken
                   if m.message_id not in failed and self.queue.delete(r, now))  # fmt: skip


def deliver(queue: Queue, function: Callable[[dict[str, Any]], Any], now: Callable[[], datetime],
            *, limit: int = 10, start: int = 0, late: float = 0.0, first: Message | None = None,
            advance: Callable[[float], None] | None = None) -> tuple[Delivery, Any]:  # fmt: skip
    """The mapping's one round: receive a batch, invoke ``function`` with it (``late`` seconds
    after the receive: Lambda retries a throttled invocation until the messages' visibility
    runs out, so an invocation can start late in it), then settle. Returns the delivery and
    the function's answer; an exception (and a crash) goes up after nothing was deleted."""
    delivery = Delivery(queue, queue.receive(limit, now(), start=start, first=first))
    if not delivery.taken:
        return delivery, None
    if late and advance is not None:
        advance(late)
    answer = function(delivery.event())
    delivery.settle(answer, now())
    return delivery, answer
