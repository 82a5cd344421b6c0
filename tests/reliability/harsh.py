"""A harsh AWS: faults injected at the one point every AWS request of every client passes under
``mock_aws`` (moto's ``BotocoreStubber.__call__``, which PynamoDB's requests reach too).

Switched per step by a ``Plan``:

- ``stale``: a read that is not strongly consistent (GetItem, BatchGetItem, Query and Scan
  without ``ConsistentRead``, every GSI query) misses the writes younger than ``WINDOW`` seconds
  of the runtime's clock: it sees each such item as it was before them (absent, if they made
  it). The previous images are moto's items copied before each write.
- ``batch``: BatchWriteItem throttled (ProvisionedThroughputExceededException on every SDK
  attempt, nothing applied), or half-applied (every other request item written, the rest
  answered as UnprocessedItems) and then throttled, left unprocessed, or normal.
- ``tx``: the ``tx_nth`` state write of the step (a TransactWriteItems, or an UpdateItem that
  carries history entries on the state item: the writes that replaced transactions) refused
  without applying anything: a transaction cancelled (TransactionConflict or ThrottlingError),
  an UpdateItem answered TransactionConflictException (the item is in another transaction) or
  ProvisionedThroughputExceededException on every SDK attempt.
- ``counter``: the quota counters' writes (a charge's UpdateItem, a refund's; ``counter_on``
  picks one of the two) refused as ``tx`` refuses a state write, the first ``counter_times`` of
  the step (every SDK attempt counts): what DynamoDB answers when one producer's requests take
  more than its record's partition gives (throttling), or meet a transaction on it.
- ``crash_after``: once the step's k-th request returned (its effect applied), the worker dies:
  ``Crash`` (a BaseException) goes up through botocore, PynamoDB and VDQ, so no handler code
  runs after it.
- ``sqs``: a publish fails: SendMessageBatch answers Failed entries (every other one, or all),
  SendMessage an error (its first try, or every one).
- ``interleave``: before the step's k-th request, another handler runs to its end (a concurrent
  Lambda): "read, someone else writes, write" within one step.

Every SQS request is played by the seam itself, on the queues of queues.py (SQS as it behaves:
delays, visibility, receipts, receive counts, dead-letter queues, retention, duplicates); none
reaches moto. ``sqs`` faults make a publish fail; ``sends`` and ``results`` list every body ever
sent to the send queue and to the results queue.
"""

from __future__ import annotations

import copy
import functools
import json
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from moto.core.botocore_stubber import BotocoreStubber, MockRawResponse

from tests.reliability.queues import Queue, SqsError, boto_message, md5
from tests.reliability.support import FIGURES, Crash
from vdq.store.quota_records import QUOTA_KEY

WINDOW = 1.0  # seconds a write stays invisible to an eventually consistent read
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
READS = {"GetItem", "BatchGetItem", "Query", "Scan"}
BATCH_MODES = ("throttle", "half", "half_throttle", "half_unprocessed")
TX_REASONS = ("TransactionConflict", "ThrottlingError")


@dataclass
class Plan:
    """The faults of one step (the defaults: none)."""

    stale: bool = False
    crash_after: int | str | None = None  # see Seam._hits
    batch: str | None = None  # one of BATCH_MODES
    tx: str | None = None  # one of TX_REASONS
    tx_nth: int = 1
    counter: str | None = None  # one of TX_REASONS
    counter_times: int = 1
    counter_on: str | None = None  # "charge" | "refund"; None: both
    sqs: str | None = None  # "half" | "all": Failed entries of SendMessageBatch
    interleave: tuple[int | str, Callable[[], Any]] | None = None  # runs once

    def __post_init__(self) -> None:
        self.interleave_run: Callable[[], Any] = self.interleave[1] if self.interleave else _none

    def describe(self) -> str:
        default = Plan.__dataclass_fields__
        parts = [f"{k}={v!r}" for k, v in vars(self).items()
                 if k in default and v != default[k].default]  # fmt: skip
        return ", ".join(parts) or "none"

    def __repr__(self) -> str:  # what a counterexample shows: the faults, not the defaults
        return f"Plan({self.describe() if self.describe() != 'none' else ''})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis prints with this
        printer.text(repr(self))


@dataclass
class Seam:
    table: str
    send_queue_url: str
    results_queue_url: str
    queues: dict[str, Queue] = field(default_factory=dict)  # URL -> queue (DLQs included)
    clock: Any = None  # the example's fake clock (set per example)
    plan: Plan = field(default_factory=Plan)
    calls: int = 0  # requests of the current step
    ops: list[str] = field(default_factory=list)  # operations of the current step
    nested_errors: list[BaseException] = field(default_factory=list)  # of interleaved handlers
    _young: dict[tuple[str, str], list[tuple[datetime, Any]]] = field(default_factory=dict)
    _tx_seen: int = 0
    _counter_seen: int = 0
    _refused: dict[str, Any] | None = None  # the refused UpdateItem (the SDK retries it)
    _batch_seen: int = 0
    _nested: int = 0
    _sqs_refused: bool = False  # a SendMessage of the step was refused ("half": its first)

    def now(self) -> datetime:
        return self.clock._now  # read without ticking: the seam must not move time

    @property
    def sends(self) -> list[str]:
        """Every body ever published to the send queue, in order."""
        return self.queues[self.send_queue_url].sent

    @property
    def results(self) -> list[str]:
        """Every body ever sent to the results queue, in order."""
        return self.queues[self.results_queue_url].sent

    # ---- steps -------------------------------------------------------------------------------

    def reset(self) -> None:
        """A new example: no queued message, no young write."""
        for queue in self.queues.values():
            queue.reset()
        self._young.clear()
        self.begin(Plan())

    def begin(self, plan: Plan) -> None:
        self.plan, self.calls, self._tx_seen, self._batch_seen = plan, 0, 0, 0
        self._counter_seen = 0
        self.ops, self.nested_errors, self._refused = [], [], None
        self._sqs_refused = False

    @contextmanager
    def step(self, plan: Plan) -> Iterator[Seam]:
        self.begin(plan)
        try:
            yield self
        finally:
            self.begin(Plan())

    def backend(self) -> Any:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends

        return dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[self.table]

    # ---- the dispatch point ------------------------------------------------------------------

    def __call__(self, original: Callable[..., Any], stub: BotocoreStubber, event_name: str,
                 request: AWSPreparedRequest, **kwargs: Any) -> Any:  # fmt: skip
        if not stub.enabled:
            return None
        target = _header(request, "X-Amz-Target")
        op = target.rsplit(".", 1)[-1] if target else ""
        if self._nested:
            return self._dispatch(original, stub, event_name, request, op, Plan(), **kwargs)
        self.calls += 1
        n = self.calls
        self.ops.append(op or request.method)
        plan = self.plan
        if plan.interleave is not None and self._hits(plan.interleave[0], n, op):
            plan.interleave = None
            self._nested += 1
            try:
                FIGURES["interleavings"] += 1
                plan.interleave_run()
            except BaseException as exc:  # the concurrent handler's own failure, not this one's
                self.nested_errors.append(exc)
            finally:
                self._nested -= 1
        answer = self._dispatch(original, stub, event_name, request, op, plan, **kwargs)
        if plan.crash_after is not None and self._hits(plan.crash_after, n, op):
            FIGURES["worker crashes"] += 1
            raise Crash(f"killed after AWS call {n} ({op or request.method})")
        return answer

    def _hits(self, when: int | str, n: int, op: str) -> bool:
        """``when``: the step's n-th request, an operation's name (its first request; with
        ``#k``, its k-th, e.g. "BatchWriteItem#2"), or "write" (the step's first DynamoDB
        write)."""
        if isinstance(when, int):
            return when == n
        name, _, k = when.partition("#")
        if k:
            return op == name and self.ops.count(op) == int(k)
        return op == when or (when == "write" and op in WRITES)

    def _dispatch(self, original: Callable[..., Any], stub: BotocoreStubber, event_name: str,
                  request: AWSPreparedRequest, op: str, plan: Plan,
                  **kwargs: Any) -> Any:  # fmt: skip
        if target_is_sqs(request):
            return self._sqs(request, op, plan)
        if op not in WRITES and op not in READS:
            return original(stub, event_name, request, **kwargs)
        body = json.loads(request.body or b"{}")
        if op in READS:
            if plan.stale and not _consistent(op, body):
                FIGURES["stale reads"] += 1
                with self._stale_view():
                    return original(stub, event_name, request, **kwargs)
            return original(stub, event_name, request, **kwargs)
        if op == "BatchWriteItem" and plan.batch:
            return self._batch(original, stub, event_name, request, body, plan.batch, **kwargs)
        counter = plan.counter and _counter_write(op, body, self.table, plan.counter_on)
        if counter and self._counter_seen < plan.counter_times:
            assert plan.counter is not None
            self._counter_seen += 1
            if op == "TransactWriteItems":
                return self._cancel(body, plan.counter)
            return self._refuse(body, plan.counter)
        if plan.tx and _state_write(op, body):
            if op == "UpdateItem" and body == self._refused:
                return self._refuse(body, plan.tx)  # the SDK's retry of it
            self._tx_seen += 1
            if self._tx_seen == plan.tx_nth:
                if op == "TransactWriteItems":
                    return self._cancel(body, plan.tx)
                self._refused = body
                return self._refuse(body, plan.tx)
        return self._write(original, stub, event_name, request, op, body, **kwargs)

    # ---- writes and the stale view -----------------------------------------------------------

    def _write(self, original: Callable[..., Any], stub: BotocoreStubber, event_name: str,
               request: AWSPreparedRequest, op: str, body: dict[str, Any],
               **kwargs: Any) -> Any:  # fmt: skip
        keys = write_keys(op, body, self.table)
        before = {k: self._image(k) for k in keys}
        answer = original(stub, event_name, request, **kwargs)
        if answer is not None and answer.status_code == 200:
            left = set()
            if op == "BatchWriteItem":
                left = unprocessed_keys(json.loads(answer.content or b"{}"), self.table)
            at = self.now()
            for key, image in before.items():
                if key not in left:
                    self._young.setdefault(key, []).append((at, image))
        return answer

    def _image(self, key: tuple[str, str]) -> Any:
        from moto.dynamodb.models.dynamo_type import DynamoType

        items = self.backend().items
        h = DynamoType({"S": key[0]})
        found = items[h].get(DynamoType({"S": key[1]})) if h in items else None
        return copy.deepcopy(found) if found is not None else None

    @contextmanager
    def _stale_view(self) -> Iterator[None]:
        """Moto's table as an eventually consistent read sees it: every item written within the
        window as it was before its oldest write in the window."""
        from moto.dynamodb.models.dynamo_type import DynamoType

        now = self.now()
        items = self.backend().items
        saved: list[tuple[Any, Any, Any]] = []
        for key, writes in list(self._young.items()):
            recent = [(at, image) for at, image in writes if (now - at).total_seconds() < WINDOW]
            if not recent:
                del self._young[key]
                continue
            self._young[key] = recent
            h, r = DynamoType({"S": key[0]}), DynamoType({"S": key[1]})
            saved.append((h, r, items[h].get(r)))
            old = recent[0][1]
            if old is None:
                items[h].pop(r, None)
            else:
                items[h][r] = old
        try:
            yield
        finally:
            for h, r, current in reversed(saved):
                if current is None:
                    items[h].pop(r, None)
                else:
                    items[h][r] = current

    # ---- faults ------------------------------------------------------------------------------

    def _batch(self, original: Callable[..., Any], stub: BotocoreStubber, event_name: str,
               request: AWSPreparedRequest, body: dict[str, Any], mode: str,
               **kwargs: Any) -> Any:  # fmt: skip
        requests = body["RequestItems"][self.table]
        if mode != "throttle" and not any(_writes_an_item(r) for r in requests):
            # The half modes aim at the batches that store queue items (an enqueue writes its
            # content and files first, in a batch of their own).
            return self._write(original, stub, event_name, request, "BatchWriteItem", body,
                               **kwargs)  # fmt: skip
        self._batch_seen += 1
        first = self._batch_seen == 1
        if mode == "throttle" or (not first and mode == "half_throttle"):
            FIGURES["batch writes throttled"] += 1
            return _error(400, "ProvisionedThroughputExceededException",
                          "The level of configured provisioned throughput for the table was "
                          "exceeded. Consider increasing your provisioning level")  # fmt: skip
        if not first and mode == "half":
            return self._write(original, stub, event_name, request, "BatchWriteItem", body,
                               **kwargs)  # fmt: skip
        applied = requests[::2] if first else []
        rest = requests[1::2] if first else requests
        FIGURES["batch writes half-applied" if applied else "batch writes unprocessed"] += 1
        if applied:
            sub = dict(body, RequestItems={self.table: applied})
            request = _with_body(request, sub)
            self._write(original, stub, event_name, request, "BatchWriteItem", sub, **kwargs)
        return _json(200, {"UnprocessedItems": {self.table: rest} if rest else {}})

    def _cancel(self, body: dict[str, Any], reason: str) -> AWSResponse:
        FIGURES["transactions cancelled"] += 1
        n = len(body.get("TransactItems", []))
        reasons = [{"Code": "None"}] * (n - 1) + [{"Code": reason, "Message": f"injected {reason}"}]
        codes = ", ".join(r["Code"] for r in reasons)
        return _error(400, "TransactionCanceledException",
                      f"Transaction cancelled, please refer cancellation reasons for specific "
                      f"reasons [{codes}]", CancellationReasons=reasons)  # fmt: skip

    def _refuse(self, body: dict[str, Any], reason: str) -> AWSResponse:
        FIGURES["state writes refused"] += 1
        if reason == "TransactionConflict":
            return _error(400, "TransactionConflictException",
                          "Transaction is ongoing for the item")  # fmt: skip
        return _error(400, "ProvisionedThroughputExceededException",
                      "injected: the request rate for the table exceeds its throughput")

    def _sqs(self, request: AWSPreparedRequest, op: str, plan: Plan) -> AWSResponse:
        body = json.loads(request.body or b"{}")
        queue = self.queues.get(body.get("QueueUrl"))
        if queue is None:
            raise AssertionError(f"the harsh world has no queue {body.get('QueueUrl')}")
        now = self.now()
        try:
            return _json(200, self._sqs_op(queue, op, body, plan, now))
        except SqsError as exc:
            FIGURES["sqs requests refused"] += 1
            return _sqs_error(exc.code, exc.message)

    def _sqs_op(self, queue: Queue, op: str, body: dict[str, Any], plan: Plan,
                now: datetime) -> dict[str, Any]:  # fmt: skip
        if op == "SendMessageBatch":
            ok, failed = [], []
            for n, entry in enumerate(body["Entries"]):
                if plan.sqs == "all" or (plan.sqs == "half" and n % 2 == 1):
                    FIGURES["publishes failed"] += 1
                    failed.append({"Id": entry["Id"], "SenderFault": False, "Code": "InternalError",
                                   "Message": "injected failure"})  # fmt: skip
                    continue
                message_id = queue.send(entry["MessageBody"], int(entry.get("DelaySeconds", 0)),
                                        now)  # fmt: skip
                ok.append({"Id": entry["Id"], "MessageId": message_id,
                           "MD5OfMessageBody": md5(entry["MessageBody"])})  # fmt: skip
            return {"Successful": ok, "Failed": failed}
        if op == "SendMessage":
            if plan.sqs == "all" or (plan.sqs == "half" and not self._sqs_refused):
                self._sqs_refused = True
                FIGURES["publishes failed"] += 1
                raise SqsError("KmsThrottled", "injected failure of a publish")
            message_id = queue.send(body["MessageBody"], int(body.get("DelaySeconds", 0)), now)
            return {"MessageId": message_id, "MD5OfMessageBody": md5(body["MessageBody"])}
        if op == "ReceiveMessage":
            taken = queue.receive(int(body.get("MaxNumberOfMessages", 1)), now,
                                  visibility=body.get("VisibilityTimeout"))  # fmt: skip
            return {"Messages": [boto_message(m, r) for m, r in taken]} if taken else {}
        if op == "DeleteMessage":
            queue.delete(body["ReceiptHandle"], now)
            return {}
        if op == "DeleteMessageBatch":
            for entry in body["Entries"]:
                queue.delete(entry["ReceiptHandle"], now)
            return {"Successful": [{"Id": e["Id"]} for e in body["Entries"]], "Failed": []}
        if op == "ChangeMessageVisibility":
            queue.change_visibility(body["ReceiptHandle"], int(body["VisibilityTimeout"]), now)
            return {}
        if op == "ChangeMessageVisibilityBatch":
            done, refused = [], []
            for entry in body["Entries"]:
                try:
                    queue.change_visibility(entry["ReceiptHandle"],
                                            int(entry["VisibilityTimeout"]), now)  # fmt: skip
                    done.append({"Id": entry["Id"]})
                except SqsError as exc:
                    refused.append({"Id": entry["Id"], "SenderFault": True, "Code": exc.code,
                                    "Message": exc.message})  # fmt: skip
            return {"Successful": done, "Failed": refused}
        if op == "GetQueueAttributes":
            counts = queue.counts(now)
            return {"Attributes": {"ApproximateNumberOfMessages": str(counts["visible"]),
                                   "ApproximateNumberOfMessagesNotVisible":
                                       str(counts["in_flight"]),
                                   "ApproximateNumberOfMessagesDelayed": str(counts["delayed"]),
                                   "QueueArn": queue.arn}}  # fmt: skip
        raise AssertionError(f"the harsh world does not play SQS {op} on {queue.url}")


def _none() -> None:
    return None


# ---- request parsing and answers ---------------------------------------------------------------


def _header(request: AWSPreparedRequest, name: str) -> str:
    value = request.headers.get(name)
    return value.decode() if isinstance(value, bytes) else (value or "")


def target_is_sqs(request: AWSPreparedRequest) -> bool:
    return _header(request, "X-Amz-Target").startswith("AmazonSQS.")


def _consistent(op: str, body: dict[str, Any]) -> bool:
    if op == "BatchGetItem":
        return all(r.get("ConsistentRead") for r in body.get("RequestItems", {}).values())
    return bool(body.get("ConsistentRead")) and "IndexName" not in body


def _key(attrs: dict[str, Any]) -> tuple[str, str]:
    return attrs["pk"]["S"], attrs["sk"]["S"]


def write_keys(op: str, body: dict[str, Any], table: str) -> list[tuple[str, str]]:
    if op == "PutItem":
        return [_key(body["Item"])]
    if op in ("UpdateItem", "DeleteItem"):
        return [_key(body["Key"])]
    if op == "BatchWriteItem":
        rows = body["RequestItems"].get(table, [])
        return [_key(r["PutRequest"]["Item"]) if "PutRequest" in r else
                _key(r["DeleteRequest"]["Key"]) for r in rows]  # fmt: skip
    keys = []
    for entry in body.get("TransactItems", []):
        if "Put" in entry:
            keys.append(_key(entry["Put"]["Item"]))
        elif "Update" in entry:
            keys.append(_key(entry["Update"]["Key"]))
        elif "Delete" in entry:
            keys.append(_key(entry["Delete"]["Key"]))
    return keys


def unprocessed_keys(answer: dict[str, Any], table: str) -> set[tuple[str, str]]:
    left = answer.get("UnprocessedItems", {}).get(table, [])
    return set(write_keys("BatchWriteItem", {"RequestItems": {table: left}}, table))


def _with_body(request: AWSPreparedRequest, body: dict[str, Any]) -> AWSPreparedRequest:
    data = json.dumps(body).encode()
    headers = request.headers.copy()
    headers["Content-Length"] = str(len(data))
    return AWSPreparedRequest(method=request.method, url=request.url, headers=headers, body=data,
                              stream_output=False)  # fmt: skip


def _json(status: int, data: dict[str, Any]) -> AWSResponse:
    raw = json.dumps(data).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "harsh",
               "x-amz-crc32": str(zlib.crc32(raw))}  # fmt: skip
    return AWSResponse("https://harsh.invalid", status, headers, MockRawResponse(raw))  # type: ignore[arg-type]


def _state_write(op: str, body: dict[str, Any]) -> bool:
    """A transaction, or an UpdateItem that appends history entries to the state item."""
    if op == "TransactWriteItems":
        return True
    return op == "UpdateItem" and "recent" in (body.get("ExpressionAttributeNames") or {}).values()


def _counter_write(op: str, body: dict[str, Any], table: str, only: str | None) -> bool:
    """A write of the quota counters (vdq.store.counters): a charge (an UpdateItem of one
    record, or a transaction across a producer's shards), or a refund (an ADD of a negative
    count); ``only`` picks one."""
    if op not in ("UpdateItem", "TransactWriteItems") or not any(
            QUOTA_KEY.match(pk) for pk, _ in write_keys(op, body, table)):  # fmt: skip
        return False
    if only is None:
        return True
    refund = int((body.get("ExpressionAttributeValues") or {}).get(":n", {}).get("N", "0")) < 0
    return only == ("refund" if refund else "charge")


def _sqs_error(code: str, message: str) -> AWSResponse:
    """An SQS error answer (the JSON protocol, query-compatible: botocore takes the code from
    the header)."""
    raw = json.dumps({"__type": f"com.amazonaws.sqs#{code}", "message": message}).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "harsh",
               "x-amzn-query-error": f"AWS.SimpleQueueService.{code};Sender"}  # fmt: skip
    return AWSResponse("https://harsh.invalid", 400, headers, MockRawResponse(raw))  # type: ignore[arg-type]


def _error(status: int, code: str, message: str, **extra: Any) -> AWSResponse:
    return _json(status, {"__type": f"com.amazonaws.dynamodb.v20120810#{code}",
                          "message": message, **extra})  # fmt: skip


# ---- installing the seam -----------------------------------------------------------------------


class _NoSleep:
    """``time`` for botocore's retries and the store's back-off: sleeping moves the fake
    clock on, as real time would pass, and costs no real time."""

    def __init__(self, seam: Seam) -> None:
        self.seam = seam

    def sleep(self, seconds: float) -> None:
        if self.seam.clock is not None:
            self.seam.clock.advance(seconds)

    def __getattr__(self, name: str) -> Any:
        import time

        return getattr(time, name)


@contextmanager
def installed(seam: Seam) -> Iterator[Seam]:
    """Route every AWS request through ``seam`` (and make waiting free) while inside."""
    import botocore.endpoint
    import moto.core.responses
    from botocore.retries import quota

    import vdq.store.tx

    original = BotocoreStubber.__call__
    saved = (botocore.endpoint.time, vdq.store.tx.time, quota.RetryQuota.acquire,
             moto.core.responses.method_names_from_class)  # fmt: skip

    def call(stub: BotocoreStubber, event_name: str, request: Any, **kwargs: Any) -> Any:
        return seam(original, stub, event_name, request, **kwargs)

    BotocoreStubber.__call__ = call  # type: ignore[method-assign]
    botocore.endpoint.time = _NoSleep(seam)  # type: ignore[assignment]
    vdq.store.tx.time = _NoSleep(seam)  # type: ignore[assignment]
    # Retries are never rationed: a run's outcome must not depend on the faults of earlier runs.
    quota.RetryQuota.acquire = lambda self, amount: True  # type: ignore[method-assign]
    # moto lists a response class's methods (inspect.getmembers) on every request to find the
    # action's; a class's methods do not change, so each class's list is made once.
    moto.core.responses.method_names_from_class = functools.cache(saved[3])
    try:
        yield seam
    finally:
        BotocoreStubber.__call__ = original  # type: ignore[method-assign]
        botocore.endpoint.time = saved[0]  # type: ignore[assignment]
        vdq.store.tx.time = saved[1]
        quota.RetryQuota.acquire = saved[2]  # type: ignore[method-assign]
        moto.core.responses.method_names_from_class = saved[3]


def _writes_an_item(request: dict[str, Any]) -> bool:
    put = request.get("PutRequest") or {}
    return str(((put.get("Item") or {}).get("pk") or {}).get("S", "")).startswith("QI#")
