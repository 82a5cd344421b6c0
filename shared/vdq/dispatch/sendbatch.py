"""A send function's SQS batch: claimed and paced one at a time, sent several at a time.

The main thread takes the batch in the plan's order (vdq.dispatch.batchplan) and, for each message,
does everything before the provider call (``send.prepare``: the suppression check, the claim,
the wait for the item's turn at the provider's rate). At its turn it hands the item to a
sending thread, which calls the provider and records the outcome (``send.deliver``), and goes
on to the next message while the provider answers. At most ``VDQ_SEND_PARALLELISM`` sends are
in flight; the invocation ends when the last has been recorded.

Why: sent one at a time, a send function makes at most 1 / (the time of one send) sends a
second, so a lane's few pollers could not keep up with the provider's rate once a provider
call takes more than a fraction of a slot (at SES 14/s and two bulk pollers: 140 ms). Here the
pollers are bounded by the claim and the pacing requests, not by the provider's latency.

Only the main thread touches the pacer (``vdq.dispatch.pacing.Pacer`` is one per process and not
thread-safe): a throttling answer comes back from the sending thread as ``send.Throttled`` and
is settled here, before the next message is prepared. Everything a sending thread writes is
conditional on the item's claim, exactly as when the same items go to separate invocations,
so the claims' rules (vdq.dispatch.send) hold unchanged: two messages for the same attempt in one
batch still make one send.

A message whose outcome could not be recorded (the store failed) is reported as a batch item
failure, so SQS delivers it again; its delivery then finds the attempt claimed and waits for
the claim's lease (vdq.dispatch.send). A message that is to wait (``send.Wait``) is handed back
the same way, its visibility first set to the wait (ChangeMessageVisibility): SQS delivers it
again then. When every message of the batch failed, the invocation fails instead
(``BatchFailed``), so the function's Errors alarm sees an outage and SQS keeps the whole batch.

Before the invocation returns (and the mapping deletes the batch's messages), the check of the
emails SES accepted is published (vdq.results.checks): a function that dies first leaves their
messages to come again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from functools import partial
from typing import TYPE_CHECKING, Any

from vdq.core.observability import logger, trace_carrier, tracer
from vdq.dispatch import batchplan, send
from vdq.results import checks
from vdq.workflow.sendqueue import SendMessage

if TYPE_CHECKING:
    from vdq.runtime import Runtime


class BatchFailed(Exception):
    """Every record of the batch failed: fail the invocation, SQS delivers the batch again."""


MAX_WAIT_SECONDS = 12 * 3600 - 60  # SQS's visibility reaches at most 12 h past the receive


def queue_url_of(record: dict[str, Any], runtime: Runtime) -> str:
    """The URL of the queue a record came from (its ``eventSourceARN``): the lane's of that
    name (one request to SQS otherwise)."""
    arn = str(record.get("eventSourceARN") or "")
    name = arn.rsplit(":", 1)[-1]
    s = runtime.settings
    for url in (s.send_queue_url, s.high_send_queue_url, s.bulk_send_queue_url):
        if url and url.rstrip("/").rsplit("/", 1)[-1] == name:
            return url
    account = arn.split(":")[4] if arn.count(":") >= 5 else None
    found = runtime.client("sqs").get_queue_url(QueueName=name, **(
        {"QueueOwnerAWSAccountId": account} if account else {}))  # fmt: skip
    return str(found["QueueUrl"])


@tracer.capture_method(capture_response=False)
def prepare(record: dict[str, Any], upcoming: int, runtime: Runtime,
            deadline: float | None = None) -> send.Ready | send.Wait | str:  # fmt: skip
    return send.prepare(SendMessage.parse(record["body"]), runtime, upcoming=upcoming,
                        deadline=deadline)  # fmt: skip


@tracer.capture_method(capture_response=False)
def deliver(ready: send.Ready, runtime: Runtime) -> str | send.Throttled:
    return send.deliver(ready, runtime)


def process(records: Sequence[Any], runtime: Runtime,
            remaining_ms: int | None = None) -> list[dict[str, str]]:  # fmt: skip
    """Send the batch; the batch item failures (``{"itemIdentifier": messageId}``)."""
    if not records:
        raise ValueError("not an SQS event: it has no Records")
    bodies = [r.get("body") if isinstance(r, dict) else None for r in records]
    batch = Batch(runtime)
    # In the order of their slots at the provider's rate (each rate's reserved up front), each
    # told how many more sends of its rate follow; none claimed, nor waits for its slot, past
    # the invocation's timeout (less a margin for the sends: its deadline).
    order, deadline = batchplan.plan(bodies, runtime, remaining_ms)
    with batch:
        for index, upcoming in order:
            record = records[index]
            batch.make_room()  # nothing is claimed that no thread is free to send at its slot
            try:
                ready = prepare(record, upcoming, runtime, deadline)
            except Exception as exc:
                batch.failed(record, exc)
                continue
            if isinstance(ready, send.Ready):
                batch.start(record, ready)
            elif isinstance(ready, send.Wait):
                batch.wait(record, ready)
    batch.check()
    if batch.failures and len(batch.failures) == len(records):
        raise BatchFailed(f"all {len(records)} records of the batch failed") from batch.last
    return batch.failures + batch.waiting


def settle(outcome: str | send.Throttled, runtime: Runtime) -> str:
    """A send's outcome in the pacer's thread: only a throttled one has more to do."""
    return send.settle(outcome, runtime) if isinstance(outcome, send.Throttled) else outcome


class Batch:
    """The sends in flight: up to the runtime's ``send_parallelism`` (1: each made at once in
    the calling thread, as ``send.process`` does)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.parallelism = runtime.settings.send_parallelism
        self.failures: list[dict[str, str]] = []
        self.waiting: list[dict[str, str]] = []  # handed back to SQS to come again later
        self.accepted: list[tuple[dict[str, Any], send.Ready]] = []  # the check names them
        self.last: Exception | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._flying: dict[Future[str | send.Throttled], tuple[dict[str, Any], send.Ready]] = {}

    def __enter__(self) -> Batch:
        if self.parallelism > 1:
            self._pool = ThreadPoolExecutor(self.parallelism, thread_name_prefix="vdq-send")
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if exc_info[0] is None:  # every send recorded before the invocation ends
                self._settle(list(self._flying))
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)  # an error still waits for the sends in flight

    def start(self, record: dict[str, Any], ready: send.Ready) -> None:
        if self._pool is None:
            self._outcome(record, ready, lambda: settle(deliver(ready, self.runtime),
                                                        self.runtime))  # fmt: skip
            return
        carry = trace_carrier()  # (the clients it uses were made by ``send.prepare``)

        def call() -> str | send.Throttled:
            carry()
            return deliver(ready, self.runtime)

        self._flying[self._pool.submit(call)] = (record, ready)

    def wait(self, record: dict[str, Any], wait: send.Wait) -> None:
        """Hand the message back to SQS for ``wait.seconds``: its visibility set to them (a
        refused change leaves it the rest of its own), reported as a batch item failure."""
        message_id = str(record.get("messageId", ""))
        try:
            self.runtime.client("sqs").change_message_visibility(
                QueueUrl=queue_url_of(record, self.runtime), ReceiptHandle=record["receiptHandle"],
                VisibilityTimeout=min(wait.seconds, MAX_WAIT_SECONDS))  # fmt: skip
        except Exception as exc:
            logger.warning("the visibility of send message %s was not changed (%s): it comes "
                           "again when its own runs out", message_id, exc)  # fmt: skip
        self.waiting.append({"itemIdentifier": message_id})

    def check(self) -> None:
        """The check of the emails SES accepted in the batch (vdq.results.checks), published
        before the mapping deletes their messages; when SQS refuses it, its work done now.
        Those neither covered go back to SQS: their deliveries do it."""
        sent = [ready.sent for _, ready in self.accepted if ready.sent is not None]
        if not sent or checks.publish(sent, self.runtime):
            return
        left = {s.item_id for s in checks.look(sent, self.runtime)}
        for record, ready in self.accepted:
            if ready.item.id in left:
                self.failed(record, RuntimeError(f"the check of {ready.item.id} was not made"))

    def make_room(self) -> None:
        """Settle the sends that have finished (a throttled one slows the pace before the
        next message is prepared), first waiting for one while every thread is busy."""
        if self._flying and len(self._flying) >= self.parallelism:
            wait(self._flying, return_when=FIRST_COMPLETED)
        self._settle([f for f in self._flying if f.done()])

    def _settle(self, futures: list[Future[str | send.Throttled]]) -> None:
        wait(futures)
        for future in futures:
            record, ready = self._flying.pop(future)
            self._outcome(record, ready, partial(self._settle_one, future))

    def _settle_one(self, future: Future[str | send.Throttled]) -> str:
        return settle(future.result(), self.runtime)

    def _outcome(self, record: dict[str, Any], ready: send.Ready,
                 outcome: Callable[[], str]) -> None:  # fmt: skip
        try:
            outcome()
        except Exception as exc:
            self.failed(record, exc)
        if ready.sent is not None:  # the provider took it, recorded or not: the check names it
            self.accepted.append((record, ready))

    def failed(self, record: Any, exc: Exception) -> None:
        message_id = str(record.get("messageId", "")) if isinstance(record, dict) else ""
        self.last = exc
        logger.error("send message %s failed; SQS will deliver it again", message_id,
                     exc_info=exc)  # fmt: skip
        self.failures.append({"itemIdentifier": message_id})
