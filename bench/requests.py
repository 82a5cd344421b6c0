"""AWS requests per message, counted per service and operation with botocore events.

``Counter.install()`` wraps ``botocore.session.Session.create_client`` so every client made
afterwards (boto3's and PynamoDB's own: PynamoDB builds its client from a botocore session) gets
a ``provide-client-params`` handler (it sees the call's parameters) that counts one request
per API call, and an ``after-call`` handler that prices DynamoDB calls. With ``units=True``
the DynamoDB calls are also priced in write and read units from the item sizes moto holds before
and after each write (1 KB write rounding, 4 KB read rounding, 2 units a transactional item,
index writes for every changed sparse-index key).

Scenarios drive the real handlers; the harness's own SQS receive/delete (what Lambda's event
source mapping does) is not counted here, the cost model adds it.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter as _Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import botocore.session

from bench import env

# ---- DynamoDB item size (the rules DynamoDB bills by) ---------------------------------------


def value_size(value: dict[str, Any]) -> int:
    (kind, v), = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        digits = str(Decimal(v)).lstrip("-").replace(".", "").lstrip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: x}) for x in v)
    if kind == "L":
        return 3 + sum(1 + value_size(x) for x in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(x) for k, x in v.items())
    raise ValueError(f"unknown DynamoDB type {kind}")


def item_size(item: dict[str, dict[str, Any]]) -> int:
    """Bytes of a DynamoDB item in the wire shape: names plus values."""
    return sum(len(k.encode()) + value_size(v) for k, v in item.items())


def stored_item(table: str, key: dict[str, Any]) -> dict[str, Any] | None:
    """The item moto holds (wire shape), read without a request."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    try:
        found = backend.get_item(table, key)
    except Exception:
        return None
    return None if found is None else _wire(found.to_json()["Attributes"])


def _wire(item: dict[str, Any]) -> dict[str, Any]:
    import base64

    out = {}
    for k, v in item.items():
        (kind, x), = v.items()
        out[k] = {"B": base64.b64decode(x)} if kind == "B" and isinstance(x, str) else v
    return out


# ---- the counter -----------------------------------------------------------------------------

INDEX_ENTRY_OVERHEAD = 100  # bytes DynamoDB adds to each index entry


@dataclass
class Tally:
    requests: _Counter = field(default_factory=_Counter)  # (service, operation) -> n
    wru: float = 0.0  # table write units
    gsi_wru: float = 0.0  # index write units
    rru: float = 0.0
    sizes: dict[str, int] = field(default_factory=dict)  # record kind -> largest size
    billed: _Counter = field(default_factory=_Counter)  # service -> billed units (64 KB chunks)
    # Of ``billed``, the requests a send invocation makes once for its whole batch (the check
    # of the emails it sent: vdq.results.checks): a full batch shares them (bench.cost).
    batch_billed: _Counter = field(default_factory=_Counter)
    rows: _Counter = field(default_factory=_Counter)  # "items" / "index" -> DynamoDB rows read
    log_bytes: int = 0  # what the handlers wrote to their log (stdout) at the deployed level
    # Of ``wru``, those of the pace records: a send invocation reserves its whole batch's slots
    # in one request (vdq.dispatch.batchplan), so a full batch shares them (bench.cost).
    pace_wru: float = 0.0
    # Units by partition: "<table or index>|<partition key value>" -> [write units, read units].
    # A partition takes at most 1,000 write and 3,000 read units a second, whatever its table.
    keys: dict[str, list[float]] = field(default_factory=dict)
    # EMF metric name -> values printed (CloudWatch bills each name that gets a value a month).
    metrics: _Counter = field(default_factory=_Counter)

    def on_key(self, space: str, partition: str, wru: float = 0.0, rru: float = 0.0) -> None:
        units = self.keys.setdefault(f"{space}|{partition}", [0.0, 0.0])
        units[0] += wru
        units[1] += rru

    def by_service(self) -> dict[str, int]:
        out: _Counter = _Counter()
        for (service, _), n in self.requests.items():
            out[service] += n
        return dict(out)

    def operations(self) -> dict[str, int]:
        return {f"{s}.{o}": n for (s, o), n in sorted(self.requests.items())}

    def as_json(self) -> dict[str, Any]:
        return {"requests": self.operations(), "by_service": self.by_service(),
                "dynamodb_write_units": self.wru, "dynamodb_index_write_units": self.gsi_wru,
                "dynamodb_read_units": self.rru, "item_sizes": self.sizes,
                "billed": dict(self.billed), "batch_billed": dict(self.batch_billed),
                "log_bytes": self.log_bytes,
                "dynamodb_pace_write_units": self.pace_wru,
                "keys": {k: list(v) for k, v in self.keys.items()},
                "metrics": dict(self.metrics)}  # fmt: skip

    def add(self, other: Tally) -> None:
        self.requests.update(other.requests)
        self.billed.update(other.billed)
        self.batch_billed.update(other.batch_billed)
        self.wru += other.wru
        self.pace_wru += other.pace_wru
        self.gsi_wru += other.gsi_wru
        self.rru += other.rru
        self.log_bytes += other.log_bytes
        for kind, size in other.sizes.items():
            self.sizes[kind] = max(self.sizes.get(kind, 0), size)
        self.metrics.update(other.metrics)
        for key, (wru, rru) in other.keys.items():
            space, partition = key.split("|", 1)
            self.on_key(space, partition, wru, rru)


@contextmanager
def _log_bytes() -> Iterator[Callable[[], str]]:
    """Bytes the handlers log meanwhile, as Lambda would ship them to CloudWatch Logs: the
    Powertools logger at the deployed level (INFO, the default) and the metrics' EMF lines
    (printed), captured instead of shown."""
    import contextlib
    import io

    from vdq.core.observability import logger

    handler = logger.registered_handler
    buffer = io.StringIO()
    level, stream = logger.log_level, handler.stream
    logger.setLevel("INFO")
    handler.setStream(buffer)
    try:
        with contextlib.redirect_stdout(buffer):
            yield buffer.getvalue
    finally:
        handler.setStream(stream)
        logger.setLevel(level)


def emf_metrics(text: str) -> _Counter:
    """Metric name -> values of the EMF lines in ``text`` (a line is one JSON object whose
    ``_aws`` names its metrics: what CloudWatch Logs reads a metric from)."""
    found: _Counter = _Counter()
    for line in text.splitlines():
        if not line.startswith('{"_aws"'):
            continue
        record = json.loads(line)
        for directive in record["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = record[metric["Name"]]
                found[metric["Name"]] += len(value) if isinstance(value, list) else 1
    return found


@contextmanager
def _metrics_printed() -> Iterator[None]:
    """The handlers' EMF metric lines printed meanwhile, as Lambda ships them (a JSON line an
    invocation, to stdout): ``_log_bytes`` counts them. Outside a measurement they are off, and
    what a handler run then added is dropped here, as an invocation starts with none."""
    import os

    from vdq.core.observability import metrics

    metrics.clear_metrics()
    before = os.environ.get("POWERTOOLS_METRICS_DISABLED")
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("POWERTOOLS_METRICS_DISABLED", None)
        else:
            os.environ["POWERTOOLS_METRICS_DISABLED"] = before
        metrics.clear_metrics()


class Counter:
    """Counts every AWS API call made by a client created after ``install()``."""

    def __init__(self) -> None:
        self.tally: Tally | None = None
        self.units = False
        self._pending: dict[int, list[tuple[str, dict, dict | None, int]]] = {}
        self._events: list[tuple[Any, str]] | None = None

    def install(self) -> Counter:
        original = botocore.session.Session.create_client
        if getattr(original, "_bench_counter", None) is self:
            return self
        counter = self

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(session, *args, **kwargs)
            client.meta.events.register("provide-client-params", counter._before_call)
            client.meta.events.register("after-call", counter._after_call)
            return client

        create_client._bench_counter = self  # type: ignore[attr-defined]
        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
        return self

    @contextmanager
    def measure(self, *, units: bool = False) -> Iterator[Tally]:
        tally, outer = Tally(), (self.tally, self.units)
        self.tally, self.units = tally, units
        try:
            with _log_bytes() as written, _metrics_printed():
                yield tally
        finally:
            self.tally, self.units = outer
            text = written()
            tally.log_bytes = len(text.encode())
            tally.metrics.update(emf_metrics(text))

    @contextmanager
    def paused(self) -> Iterator[None]:
        tally, units = self.tally, self.units
        self.tally = None
        try:
            yield
        finally:
            self.tally, self.units = tally, units

    # ---- the send invocation's timeline (bench.cost.replay) ---------------------------------

    @contextmanager
    def timeline(self) -> Iterator[list[tuple[Any, str]]]:
        """The requests made meanwhile, in order, each with the send it belongs to (None: the
        invocation's own thread) and the provider calls; ``("submit", send)`` marks where the
        main thread hands a send to a sending thread (vdq.dispatch.sendbatch)."""
        from vdq.dispatch import sendbatch

        events: list[tuple[Any, str]] = []
        deliver, start = sendbatch.deliver, sendbatch.Batch.start

        def traced_deliver(ready: Any, runtime: Any) -> Any:
            _SEND.key = id(ready)
            try:
                return deliver(ready, runtime)
            finally:
                _SEND.key = None

        def traced_start(batch: Any, record: Any, ready: Any) -> None:
            events.append(("submit", str(id(ready))))
            start(batch, record, ready)

        sendbatch.deliver = traced_deliver  # type: ignore[assignment]
        sendbatch.Batch.start = traced_start  # type: ignore[method-assign]
        self._events = events
        try:
            yield events
        finally:
            self._events = None
            sendbatch.deliver = deliver  # type: ignore[assignment]
            sendbatch.Batch.start = start  # type: ignore[method-assign]

    def note_call(self, service: str) -> None:
        """A provider call made without an AWS request (the bench's Twilio) on the timeline."""
        if self._events is not None:
            self._events.append((getattr(_SEND, "key", None), service))

    # ---- handlers ----------------------------------------------------------------------------

    def _before_call(self, model: Any, params: dict[str, Any], context: Any = None,
                     **_: Any) -> None:  # fmt: skip
        if self.tally is None:
            return
        service = model.service_model.service_name
        self.tally.requests[(service, model.name)] += 1
        units = billed_units(service, model.name, params)
        self.tally.billed[service] += units
        if service == "sqs" and model.name == "SendMessage" and is_check(params["MessageBody"]):
            self.tally.batch_billed[service] += units
        if self._events is not None:
            self._events.append((getattr(_SEND, "key", None), service))
        if context is not None:
            context["bench_params"] = params
        if self.units and service == "dynamodb":
            writes = _writes(model.name, params)
            self._pending[id(params)] = [
                (table, key, stored_item(table, key), factor) for table, key, factor in writes
            ]
            if context is not None:
                context["bench_params_id"] = id(params)

    def _after_call(self, model: Any, parsed: dict[str, Any], context: Any = None,
                    **_: Any) -> None:  # fmt: skip
        tally = self.tally
        if tally is None or model.service_model.service_name != "dynamodb":
            return
        _count_rows(tally, model.name, parsed)
        if not self.units:
            return
        pid = (context or {}).get("bench_params_id")
        for table, key, before, factor in self._pending.pop(pid, []):
            after = stored_item(table, key)
            size = max(item_size(before or {}), item_size(after or {}))
            if before is None and after is None:
                continue
            units = factor * max(1, math.ceil(size / 1024))
            tally.wru += units
            partition = str(key.get("pk", {}).get("S", ""))
            tally.on_key("table", partition, wru=units)
            if partition.startswith(ORIGIN_PREFIX):  # and the one content's share of it
                content = key["sk"]["S"].partition("#")[2]
                tally.on_key(CONTENT_SPACE, f"{partition} {content}", wru=units)
            if partition.startswith(PACE_PREFIX):
                tally.pace_wru += units
            for index, index_partition, moved in _index_moves(before, after):
                tally.gsi_wru += moved
                tally.on_key(index, index_partition, wru=moved)
            _note_size(tally, after or before)
        params = (context or {}).get("bench_params") or {}
        for space, partition, units in _reads(model.name, params, parsed):
            tally.rru += units
            tally.on_key(space, partition, rru=units)


_SEND = threading.local()  # the send (id of its Ready) a sending thread is making

CHUNK = 65_536
PACE_PREFIX = "PACE#"  # vdq.store.pacing.pace_pk
ORIGIN_PREFIX = "CO#"
# An origin's partition holds the contents of many requests: besides the partition's units,
# each content's (its records' sort keys name its ulid), so that one content shared by a bulk
# request's emails shows what it takes while they are sent.
CONTENT_SPACE = "content"


def is_check(body: str) -> bool:
    """A send invocation's check of the emails it sent (vdq.results.checks)."""
    try:
        return json.loads(body).get("kind") == CHECK_KIND
    except (ValueError, AttributeError):
        return False


CHECK_KIND = "vdq.check"


def billed_units(service: str, operation: str, params: dict[str, Any]) -> int:
    """What a request bills as: SQS and SNS per 64 KiB of payload, EventBridge per entry."""
    if service == "sqs" and operation == "SendMessageBatch":
        size = sum(len(e["MessageBody"].encode()) for e in params.get("Entries", []))
        return max(1, math.ceil(size / CHUNK))
    if service == "sqs" and operation == "SendMessage":
        return max(1, math.ceil(len(params["MessageBody"].encode()) / CHUNK))
    if service == "sns" and operation == "Publish":
        return max(1, math.ceil(len(params["Message"].encode()) / CHUNK))
    if service == "events" and operation == "PutEvents":
        return sum(max(1, math.ceil(len(e.get("Detail", "").encode()) / CHUNK))
                   for e in params.get("Entries", []))  # fmt: skip
    return 1


def _count_rows(tally: Tally, operation: str, parsed: dict[str, Any]) -> None:
    if operation == "GetItem" and parsed.get("Item"):
        tally.rows["items"] += 1
    elif operation == "BatchGetItem":
        tally.rows["items"] += sum(len(v) for v in parsed.get("Responses", {}).values())
    elif operation in ("Query", "Scan"):
        # VDQ's queries are of keys-only indexes; a Scan would be of the table.
        tally.rows["index" if operation == "Query" else "items"] += parsed.get("ScannedCount",
                                                                           parsed.get("Count", 0))


def _key_of(item: dict[str, Any]) -> dict[str, Any]:
    return {"pk": item["pk"], "sk": item["sk"]}


def _writes(operation: str, params: dict[str, Any]) -> list[tuple[str, dict, int]]:
    """(table, key, unit factor) of every item a write request touches."""
    if operation == "PutItem":
        return [(params["TableName"], _key_of(params["Item"]), 1)]
    if operation in ("UpdateItem", "DeleteItem"):
        return [(params["TableName"], params["Key"], 1)]
    if operation == "BatchWriteItem":
        out = []
        for table, requests in params["RequestItems"].items():
            for r in requests:
                if "PutRequest" in r:
                    out.append((table, _key_of(r["PutRequest"]["Item"]), 1))
                else:
                    out.append((table, r["DeleteRequest"]["Key"], 1))
        return out
    if operation == "TransactWriteItems":
        out = []
        for entry in params["TransactItems"]:
            (kind, body), = entry.items()
            key = _key_of(body["Item"]) if kind == "Put" else body["Key"]
            out.append((body["TableName"], key, 2))
        return out
    return []


def _index_moves(before: dict | None, after: dict | None) -> list[tuple[str, str, float]]:
    """(index, partition, units) of the index entries a write moved: an entry in or out is a
    unit of the index partition it is in; a changed entry is both."""
    from vdq.core import resources

    moves: list[tuple[str, str, float]] = []
    for index in resources.INDEXES:
        pk, sk = index.partition_key, index.sort_key
        old = (before or {}).get(pk), (before or {}).get(sk)
        new = (after or {}).get(pk), (after or {}).get(sk)
        had, has = None not in old, None not in new
        if had and (not has or old != new):
            moves.append((index.name, str(old[0]["S"]), 1.0))  # the old entry out
        if has and (not had or old != new):
            moves.append((index.name, str(new[0]["S"]), 1.0))  # the new entry in
    return moves


def _read_factor(consistent: Any) -> float:
    """Read units a 4 KB unit of an item costs: 1 strongly consistent, 0.5 eventually."""
    return 1.0 if consistent else 0.5


def _full_size(table: str, item: dict[str, Any]) -> int:
    """A read is billed on the whole item, whatever its projection returned."""
    if "pk" in item and "sk" in item:
        stored = stored_item(table, _key_of(item))
        if stored is not None:
            return item_size(stored)
    return item_size(item)


def _reads(operation: str, params: dict[str, Any],
           parsed: dict[str, Any]) -> list[tuple[str, str, float]]:  # fmt: skip
    """(table or index, partition, read units) of a read. A key that finds no item costs what
    a hit of size 0 would (DynamoDB bills a BatchGetItem as its GetItems): one 4 KB unit, half
    of it when eventually consistent. An index is read eventually consistently."""
    if operation == "GetItem":
        item = parsed.get("Item")
        size = _full_size(params.get("TableName", ""), item) if item else 0
        units = max(1, math.ceil(size / 4096)) * _read_factor(params.get("ConsistentRead"))
        return [("table", _partition(params.get("Key", {})), units)]
    if operation == "BatchGetItem":
        out = []
        for table, request in params.get("RequestItems", {}).items():
            factor = _read_factor(request.get("ConsistentRead"))
            found = {_partition(i) + "|" + str(i.get("sk", {}).get("S", "")): i
                     for i in parsed.get("Responses", {}).get(table, [])}  # fmt: skip
            unprocessed = parsed.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
            for key in request.get("Keys", []):
                if key in unprocessed:
                    continue  # read by a later request, counted there
                item = found.get(_partition(key) + "|" + str(key.get("sk", {}).get("S", "")))
                size = _full_size(table, item) if item else 0
                out.append(("table", _partition(key), max(1, math.ceil(size / 4096)) * factor))
        return out
    if operation == "Query":
        index = params.get("IndexName")
        items = parsed.get("Items", [])
        if index:
            total = sum(item_size(i) + INDEX_ENTRY_OVERHEAD for i in items)
            factor = 0.5
        else:
            total = sum(_full_size(params.get("TableName", ""), i) for i in items)
            factor = _read_factor(params.get("ConsistentRead"))
        units = max(1, math.ceil(total / 4096)) * factor
        return [(index or "table", _query_partition(params), units)]
    return []


def _partition(key: dict[str, Any]) -> str:
    return str(key.get("pk", {}).get("S", ""))


def _query_partition(params: dict[str, Any]) -> str:
    """The partition key value a Query's key condition names."""
    from vdq.core import resources

    names = params.get("ExpressionAttributeNames", {})
    values = params.get("ExpressionAttributeValues", {})
    keys = {resources.TABLE_PARTITION_KEY} | {i.partition_key for i in resources.INDEXES}
    for name, placeholder in re.findall(r"([#\w]+)\s*=\s*(:\w+)",
                                        params.get("KeyConditionExpression", "")):  # fmt: skip
        if names.get(name, name) in keys and placeholder in values:
            (_, value), = values[placeholder].items()
            return str(value)
    return "?"


def _note_size(tally: Tally, item: dict[str, Any]) -> None:
    kind = {"STATE": "state", "CONTENT": "content", "MAP": "provider_map",
            "REFS": "content_refs", "FILE": "attachment"}.get(item["sk"]["S"])  # fmt: skip
    if kind is None and item["sk"]["S"].startswith("H#"):
        kind = "history"
    if kind is None:
        kind = "other"
    tally.sizes[kind] = max(tally.sizes.get(kind, 0), item_size(item))
    if kind == "state":  # the state item also holds the first history entries (``recent``)
        bare = item_size({k: v for k, v in item.items() if k != "recent"})
        tally.sizes["state_without_history"] = max(tally.sizes.get("state_without_history", 0),
                                                   bare)  # fmt: skip


COUNTER = Counter()


# ---- scenarios -------------------------------------------------------------------------------


def email_body(receivers: int = 1, html_bytes: int = 10_000, first: int = 0) -> dict[str, Any]:
    return {
        "sender": {"email": env.SENDER, "name": "Shop"},
        "to": [{"email": f"customer{n}@example.org"} for n in range(first, first + receivers)],
        "subject": "Your order shipped",
        "text": "Your order shipped. Thank you for shopping with us.",
        "html": env.html_body(html_bytes),
        "origin": {"type": "shop.order", "id": "1042"},
    }


def sms_body(receivers: int = 1, first: int = 0) -> dict[str, Any]:
    return {
        "sender": {"cell": "+15005550006"},
        "to": [{"cell": f"+1415555{n:04d}"} for n in range(first, first + receivers)],
        "body": "Your code is 493021",
    }


def post(name: str, body: dict[str, Any], headers: dict[str, str] | None = None,
         expect: int = 201) -> dict:  # fmt: skip
    """POST through the enqueue handler as API Gateway would call it; the response body (an
    error when its status is not ``expect``)."""
    import json

    from functions.enqueue import handler as enqueue_handler
    from tests.support.events import api_event

    event = api_event(name, body=body, groups=["vdq-senders"], headers=headers)
    response = enqueue_handler.handler(event, env.LambdaContext("vdq-enqueue"))
    if response["statusCode"] != expect:
        raise RuntimeError(f"enqueue answered {response['statusCode']}: {response['body']}")
    return json.loads(response["body"])


def run_send(stack: env.Stack, limit: int = 10) -> int:
    """One send-function invocation on what the send queue holds; messages handled."""
    send_handler = env.need("functions.send.handler", "handler")
    from vdq.core import resources

    url = stack.queues[resources.SEND_QUEUE]
    with COUNTER.paused():
        messages = env.receive(stack.sqs, url, limit)
    if messages:
        answer = send_handler(env.sqs_event(messages, env.queue_arn(url)),
                              env.LambdaContext("vdq-send"))  # fmt: skip
        failures = (answer or {}).get("batchItemFailures") or []
        if failures:
            raise RuntimeError(f"send reported failures: {failures}")
    return len(messages)


def state_of(stack: env.Stack, item_id: str) -> Any:
    with COUNTER.paused():
        return stack.runtime.store.get_item(item_id)


def enqueue_many(receivers: int) -> dict[str, Any]:
    """One POST /emails to ``receivers`` receivers: requests per item."""
    with env.stack() as stack, COUNTER.measure(units=True) as tally:
        body = post("apigw_post_emails", email_body(receivers))
        assert len(body["items"]) == receivers
        del stack
    return tally.as_json()


def send_batch(receivers: int = 10) -> dict[str, Any]:
    """One send invocation on a full batch of emails: its requests (the pacer reserves the
    slots of the whole batch in one UpdateItem)."""
    with env.stack() as stack:
        with COUNTER.paused():
            post("apigw_post_emails", email_body(receivers))
        with COUNTER.measure() as tally:
            handled = run_send(stack, limit=receivers)
        assert handled == receivers, handled
    return tally.as_json()


def operator(name: str, *, path: str, path_parameters: dict[str, str] | None = None,
             query: dict[str, str] | None = None, body: Any = None,
             groups: tuple[str, ...] = ("vdq-operators", "vdq-admins"),
             ) -> tuple[int, Any]:  # fmt: skip
    """One operator API request through its handler; (status, parsed body)."""
    import json

    handler = env.need("functions.operator.handler", "handler")
    from tests.support.events import api_event

    event = api_event(name, body=body, groups=list(groups), path=path,
                      pathParameters=path_parameters, queryStringParameters=query)  # fmt: skip
    event["requestContext"]["path"] = f"/prod{path}"
    response = handler(event, env.LambdaContext("vdq-operator"))
    text = response.get("body")
    return response["statusCode"], json.loads(text) if text else None


def _enqueued_email(stack: env.Stack) -> str:
    with COUNTER.paused():
        body = post("apigw_post_emails", email_body(1))
        env.receive(stack.sqs, stack.queues["send"])  # the first publish is not this figure's
    return body["items"][0]["id"]


def _move(stack: env.Stack, item_id: str, *transitions: str) -> None:
    from vdq.workflow.transitions import Step, apply

    with COUNTER.paused():
        for name in transitions:
            apply(item_id, Step(name, actor="bench", result=f"bench {name}", late="record"),
                  stack.runtime)  # fmt: skip


def retry_one() -> dict[str, Any]:
    """An operator's retry of an errored email: the operator request and its publish."""
    with env.stack() as stack:
        item_id = _enqueued_email(stack)
        _move(stack, item_id, "error")
        with COUNTER.measure(units=True) as tally:
            status, body = operator(
                "apigw_operator_transition",
                path=f"/queue-items/{item_id}/transitions/retry",
                path_parameters={"id": item_id, "name": "retry"},
                query={"dry_run": "false"},
            )
        if status != 200:
            raise RuntimeError(f"retry answered {status}: {body}")
    return tally.as_json()


def resend_one() -> dict[str, Any]:
    """An operator's resend of a sent (cancelled) email: the copy and its publish."""
    with env.stack() as stack:
        item_id = _enqueued_email(stack)
        _move(stack, item_id, "error", "cancel")
        with COUNTER.measure(units=True) as tally:
            status, body = operator(
                "apigw_operator_resend",
                path=f"/sent-items/{item_id}/resend",
                path_parameters={"id": item_id},
            )
        if status != 201:
            raise RuntimeError(f"resend answered {status}: {body}")
    return tally.as_json()


def ses_event_record(stack: env.Stack, item_id: str, event_type: str = "Delivery") -> dict:
    """The SQS record an SES event reaches the results queue as (SES -> SNS -> SQS)."""
    import json

    with COUNTER.paused():
        item = stack.runtime.store.get_item(item_id)
    at = "2026-12-02T13:45:11.000Z"
    ses_event = {
        "eventType": event_type,
        "mail": {"timestamp": at, "source": item.sender,
                 "messageId": item.provider_id or accepted_id(stack, item.id),
                 "destination": [item.receiver], "sendingAccountId": "123456789012",
                 "tags": {"vdq_item": [item.id], "vdq_attempt": [str(item.attempt)]}},
        "delivery": {"timestamp": at, "processingTimeMillis": 812,
                     "recipients": [item.receiver], "smtpResponse": "250 2.0.0 OK",
                     "reportingMTA": "a8-1.smtp-out.amazonses.com"},
    }  # fmt: skip
    notification = {"Type": "Notification", "MessageId": "bench-sns-1",
                    "TopicArn": "arn:aws:sns:us-east-1:123456789012:vdq-ses-events",
                    "Message": json.dumps(ses_event), "Timestamp": at}  # fmt: skip
    message = {"MessageId": "bench-sqs-1", "ReceiptHandle": "bench",
               "Body": json.dumps(notification)}  # fmt: skip
    return env.sqs_event([message], env.queue_arn(stack.queues["results"]))


def accepted_id(stack: env.Stack, item_id: str) -> str:
    """The provider ID the send took ``item_id`` as, which the item does not store until its
    first result: the send's check names it (vdq.results.checks), in the results queue."""
    for body in queued_bodies(stack, RESULTS_QUEUE):
        if is_check(body):
            for sent_id, _, provider_id, _ in json.loads(body)["sent"]:
                if sent_id == item_id:
                    return str(provider_id)
    raise RuntimeError(f"no check names {item_id}")


def queued_bodies(stack: env.Stack, name: str) -> list[str]:
    """The bodies moto's queue ``name`` holds (delayed ones included), without a request."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    url = stack.queues[name]
    queue = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].queues[url.rsplit("/", 1)[-1]]
    return [m.body for m in queue._messages]


def run_webhook(event: dict[str, Any]) -> dict[str, Any]:
    handler = env.need("functions.webhook.handler", "handler")
    return handler(event, env.LambdaContext("vdq-webhook"))


def twilio_callback_event(item_id: str, sid: str, status: str,
                          attempt: int = 1) -> dict[str, Any]:  # fmt: skip
    """The status callback Twilio posts to the URL the send gave it (the item's key and
    attempt: vdq.dispatch.outbound), signed with the auth token as Twilio signs it."""
    from urllib.parse import urlencode

    from twilio.request_validator import RequestValidator

    from vdq.dispatch.outbound import status_callback_url

    params = {"MessageSid": sid, "SmsSid": sid, "MessageStatus": status, "SmsStatus": status,
              "AccountSid": env.TWILIO_SID, "From": "+15005550006", "To": "+14155550000",
              "ApiVersion": "2010-04-01"}  # fmt: skip
    url = status_callback_url(env.WEBHOOK_URL, item_id, attempt)
    query = {"queue_item": item_id, "attempt": str(attempt)}
    signature = RequestValidator(env.TWILIO_TOKEN).compute_signature(url, params)
    return {
        "resource": "/twilio/status-callback", "path": "/twilio/status-callback",
        "httpMethod": "POST",
        "headers": {"Content-Type": "application/x-www-form-urlencoded",
                    "X-Twilio-Signature": signature,
                    "Host": "abc123.execute-api.us-east-1.amazonaws.com"},
        "multiValueHeaders": {}, "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()},
        "pathParameters": None,
        "requestContext": {"resourcePath": "/twilio/status-callback", "httpMethod": "POST",
                           "stage": "prod", "path": "/prod/twilio/status-callback"},
        "body": urlencode(params), "isBase64Encoded": False,
    }  # fmt: skip


@dataclass
class Journey:
    """What one message cost, phase by phase (one phase = one Lambda invocation)."""

    phases: list[tuple[str, Tally, str | None, int]] = field(default_factory=list)
    final_state: str | None = None
    messages: int = 1
    # Bytes the message leaves in the table once done and stamped for retention (DynamoDB's
    # storage rules: record_bytes), until the TTL deletes them; of those, the table's own (its
    # records without their index entries: table_record_bytes).
    stored_bytes: int = 0
    table_bytes: int = 0
    # The timeline of a send invocation on a full batch of such messages (send_batch_timeline):
    # what the bill replays on the invocation's threads for the send's duration.
    send_batch: dict[str, Any] | None = None

    def total(self) -> Tally:
        out = Tally()
        for _, tally, _, _ in self.phases:
            out.add(tally)
        return out

    def invocations(self, table: dict[str, Any] | None = None) -> list[Any]:
        from bench import cost

        out = []
        for function, tally, queue, sns in self.phases:
            if queue == STREAM:  # a share of a stream batch: no SQS, no SNS
                out.append(cost.Invocation(function, tally.as_json(), stream_records=sns))
                continue
            if queue == WINDOW:  # a share of a stream window's last call and its writes
                out.append(cost.Invocation(function, tally.as_json(), stream_window=True))
                continue
            if queue == CHECK:  # one a send batch: a full batch's messages share it
                out.append(cost.Invocation(function, tally.as_json(), RESULTS_QUEUE,
                                           per_send_batch=True))  # fmt: skip
                continue
            batch_ms = batch_log_bytes = None
            if function == "send" and self.send_batch is not None:
                batch_ms = send_batch_ms(self.send_batch, table or cost.prices())
                batch_log_bytes = self.send_batch["log_bytes"] / self.send_batch["messages"]
            out.append(cost.Invocation(function, tally.as_json(), queue, sns,
                                       {"twilio": 1} if function == "send" and self.sms else {},
                                       batch_ms=batch_ms,
                                       batch_log_bytes=batch_log_bytes))  # fmt: skip
        return out

    sms: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"final_state": self.final_state, "total": self.total().as_json(),
                "phases": [{"function": f, "queue": q, **t.as_json()}
                           for f, t, q, _ in self.phases]}  # fmt: skip


def send_batch_timeline(sms: bool = False, size: int = 10) -> dict[str, Any]:
    """One send invocation on a full batch of the bench's message (``size`` of them, each its
    own request to a receiver of its own), as a timeline of its requests by thread
    (``Counter.timeline``), with the time its pacer slept for the provider's rate and what it
    printed (its metric line is the batch's). SMS go out
    at ten segments a second (a batch's ten within the rate: several numbers, or a short
    code); a single US long code's one a second would give most of the batch back."""
    from vdq.dispatch.pacing import get_pacer

    changes = {"twilio_sender_rate": 10.0} if sms else {}
    with env.stack(**changes) as stack:
        with COUNTER.paused():
            for n in range(size):
                post("apigw_post_sms" if sms else "apigw_post_emails",
                     sms_body(1, first=n) if sms else email_body(1, first=n))  # fmt: skip
            pacer = get_pacer(stack.runtime)
        stack.runtime.overrides["twilio"].on_send = lambda: COUNTER.note_call("twilio")
        slept = pacer.waited
        with COUNTER.measure() as tally, COUNTER.timeline() as events:
            handled = run_send(stack, limit=size)
        assert handled == size, handled
        return {"events": [list(e) for e in events], "messages": handled,
                "parallelism": stack.runtime.settings.send_parallelism,
                "paced_seconds": round(pacer.waited - slept, 4),
                "requests": tally.operations(), "log_bytes": tally.log_bytes}


def send_batch_ms(batch: dict[str, Any], table: dict[str, Any]) -> float:
    """Milliseconds a message of the batch costs its send invocation (bench.cost.replay), the
    pacer's sleeps left out (``paced_seconds`` says how long they were)."""
    from bench import cost

    wall = cost.replay([tuple(e) for e in batch["events"]], batch["parallelism"],
                       cost.latency_of(table), table["assumptions"]["lambda_base_ms"])  # fmt: skip
    return wall / batch["messages"]


def email_delivered() -> Journey:
    """One email, one receiver, 10 KB HTML, no Idempotency-Key: enqueue, send, Delivery."""
    journey = Journey()
    with env.stack() as stack:
        with COUNTER.measure(units=True) as tally:
            [item] = post("apigw_post_emails", email_body(1))["items"]
        journey.phases.append(("enqueue", tally, None, 0))
        with COUNTER.measure(units=True) as tally:
            assert run_send(stack) == 1
        journey.phases.append(("send", tally, "send", 0))
        # Every event type the configuration set records reaches the webhook; of a delivered
        # email's, that is its Delivery alone.
        for event_type in DELIVERED_EMAIL_EVENTS:
            event = ses_event_record(stack, item["id"], event_type)
            with COUNTER.measure(units=True) as tally:
                answer = run_webhook(event)
            if answer.get("batchItemFailures"):
                raise RuntimeError(f"webhook failed the {event_type} event: {answer}")
            journey.phases.append(("webhook", tally, "results", 1))
        journey.phases.append(check_phase(stack))
        journey.final_state = state_of(stack, item["id"]).state
        journey.phases.extend(stream_phases(stack))
        journey.stored_bytes = stored_bytes(stack)
        journey.table_bytes = stored_bytes(stack, indexes=False)
    return journey


# Records the stream consumer writes once per window of a shard (vdq.store.postings): shared by
# every message of the window, so neither one message's requests nor its stored bytes.
WINDOW_PREFIXES = ("PT#", "DN#", "CNT#", "CK#")  # postings, done postings, counters, checkpoint


CHECK = "check"  # the phase of a send's check (vdq.results.checks), one a send batch
RESULTS_QUEUE = "results"


def check_phase(stack: env.Stack) -> tuple[str, Tally, str | None, int]:
    """The check the send invocation published, delivered to the results function when its
    delay ends (taken from moto's queue: its delay is real time), after the email's events:
    most emails are done by then (a read, no write)."""
    from vdq.core import resources

    url = stack.queues[resources.RESULTS_QUEUE]
    bodies = [body for body in queued_bodies(stack, RESULTS_QUEUE) if is_check(body)]
    if len(bodies) != 1:
        raise RuntimeError(f"the send published {len(bodies)} checks, not one")
    message = {"MessageId": "bench-check-1", "ReceiptHandle": "bench", "Body": bodies[0]}
    with COUNTER.measure(units=True) as tally:
        answer = run_webhook(env.sqs_event([message], env.queue_arn(url)))
    if answer.get("batchItemFailures"):
        raise RuntimeError(f"webhook failed the check: {answer}")
    return "webhook", tally, CHECK, 0


def stored_bytes(stack: env.Stack, *, indexes: bool = True) -> int:
    """What the table (and its indexes) holds after one message's journey (its only message),
    but the stream window's postings, counters and shard checkpoint (about 50 bytes of posting
    entries an email)."""
    weigh = record_bytes if indexes else table_record_bytes
    return sum(weigh(r) for r in table_records(stack.runtime.settings.table_name)
               if not r["pk"]["S"].startswith(WINDOW_PREFIXES))  # fmt: skip


# ---- the table's records and what they store -------------------------------------------------

RECORD_OVERHEAD = 100  # bytes DynamoDB adds to each stored record (and index entry)


def _index_keys() -> list[tuple[str, str]]:
    from vdq.core import resources

    return [(i.partition_key, i.sort_key) for i in resources.INDEXES]


def record_bytes(item: dict[str, Any]) -> int:
    """Storage bytes of one record in wire shape, with its index entries."""
    total = item_size(item) + RECORD_OVERHEAD
    keys = item_size({"pk": item["pk"], "sk": item["sk"]})
    for pk, sk in _index_keys():
        if pk in item and sk in item:
            total += keys + item_size({pk: item[pk], sk: item[sk]}) + RECORD_OVERHEAD
    return total


def table_record_bytes(item: dict[str, Any]) -> int:
    """Storage bytes of one record in the table itself (what point-in-time recovery bills)."""
    return item_size(item) + RECORD_OVERHEAD


def table_records(table: str) -> list[dict[str, Any]]:
    import boto3

    client = boto3.client("dynamodb")
    rows: list[dict[str, Any]] = []
    with COUNTER.paused():
        kwargs: dict[str, Any] = {"TableName": table}
        while True:
            page = client.scan(**kwargs)
            rows.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return rows
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


# The events SES publishes for a delivered email (Send, then Delivery), of those the stack
# subscribes (infra/email_events.py RECORDED_EVENTS: not Send): checked against it by
# tests/infra/test_bench_bill.py.
DELIVERED_EMAIL_EVENTS = ("Delivery",)
STREAM = "stream"  # the phase of the table's stream: the schedule function publishes events
WINDOW = "window"  # the last call of a stream window: its postings and counts, for all its messages


def stream_phases(stack: env.Stack) -> list[tuple[str, Tally, str | None, int]]:
    """The table's stream as the deployed event source mapping hands it on: the records its
    filters let through (new and modified state items), to the schedule function, which stamps
    the done item's records with its expiration, publishes the state events of the default
    mode (none for a delivered message) and folds them into its window's postings and counts;
    then the window's last call writes those. Two phases: the batch (the ``sns`` slot carries
    its records: bench.cost shares it by the mapping's batch size) and the window's last call
    (shared by the messages a shard's window holds: bench.cost). Lambda reads the stream for
    free."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    from vdq.local.pollers import passes

    streams = dynamodbstreams_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    with COUNTER.paused():
        arn = boto3_table_stream(stack)
    records: list[dict[str, Any]] = []
    shard_id = "shardId-bench"
    for shard in streams.describe_stream(arn)["Shards"]:
        shard_id = shard["ShardId"]
        iterator = streams.get_shard_iterator(arn, shard["ShardId"], "TRIM_HORIZON", None)
        got = json.loads(json.dumps(streams.get_records(iterator.arn, 10_000)["Records"],
                                    default=str))  # fmt: skip
        records += [dict(r, eventSourceARN=arn, eventSource="aws:dynamodb") for r in got
                    if passes(r)]  # fmt: skip
    import boto3

    from vdq.schedules.postings import Window
    from vdq.store.postings import Tallies, shard_tag

    handler = env.need("functions.schedule.handler", "handler")
    window = {"window": {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:01:00Z"},
              "shardId": shard_id, "eventSourceARN": arn, "isWindowTerminatedEarly": False}
    # A window's first batch reads its shard's checkpoint, once a window: the window's
    # messages share that read as they share its writes. The batch measured is one after it.
    with COUNTER.measure(units=True) as opening:
        tallies = Tallies(boto3.client("dynamodb"), env.TABLE)
        seen = tallies.shard_checkpoint(shard_tag(shard_id))
    opened = Window(shard=shard_tag(shard_id), seen=max(seen, 0)).state()
    with COUNTER.measure(units=True) as batch:
        answer = handler({"Records": records, "state": opened, "isFinalInvokeForWindow": False,
                          **window}, env.LambdaContext("vdq-schedule"))  # fmt: skip
    if not answer.get("expiring"):  # the done item's records get its expiration
        raise RuntimeError(f"the stream stamped no record: {answer}")
    with COUNTER.measure(units=True) as last:
        handler({"Records": [], "state": answer["state"], "isFinalInvokeForWindow": True,
                 **window}, env.LambdaContext("vdq-schedule"))  # fmt: skip
    last.add(opening)
    return [("schedule", batch, STREAM, len(records)), ("schedule", last, WINDOW, 0)]


def boto3_table_stream(stack: env.Stack) -> str:
    import boto3

    table = stack.runtime.settings.table_name
    return boto3.client("dynamodb").describe_table(TableName=table)["Table"]["LatestStreamArn"]


def sms_delivered() -> Journey:
    """One SMS to one receiver: enqueue, send, Twilio's "sent" and "delivered" callbacks."""
    journey = Journey(sms=True)
    with env.stack() as stack:
        with COUNTER.measure(units=True) as tally:
            [item] = post("apigw_post_sms", sms_body(1))["items"]
        journey.phases.append(("enqueue", tally, None, 0))
        with COUNTER.measure(units=True) as tally:
            assert run_send(stack) == 1
        journey.phases.append(("send", tally, "send", 0))
        sid = state_of(stack, item["id"]).provider_id or accepted_id(stack, item["id"])
        for status in ("sent", "delivered"):
            event = twilio_callback_event(item["id"], sid, status)
            with COUNTER.measure(units=True) as tally:
                answer = run_webhook(event)
            if answer["statusCode"] >= 300:
                raise RuntimeError(f"callback {status} answered {answer}")
            journey.phases.append(("webhook", tally, None, 0))
        journey.phases.append(check_phase(stack))
        journey.final_state = state_of(stack, item["id"]).state
        journey.phases.extend(stream_phases(stack))
        journey.stored_bytes = stored_bytes(stack)
        journey.table_bytes = stored_bytes(stack, indexes=False)
    return journey
