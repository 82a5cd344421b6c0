"""The harness of ``bench/lanespace.py``: a virtual clock that threads take turns on, and an
in-memory DynamoDB table that answers the pace records' requests (vdq.store.pacing).

VirtualClock: every simulated send function is a thread; exactly one runs at a time. A thread
runs until it sleeps (``sleep``: a wake-up at virtual now + d) or waits on a channel
(``wait``: a wake-up at a time, or earlier when ``notify`` names the channel), then hands the
turn to the earliest pending wake-up (ties: in the order they were registered), moving
virtual time to it. So time moves only when every thread is blocked, nothing sleeps in real
time, and a run is the same run every time (given the same seed for ``random``, which
vdq.dispatch.pacing uses for its jitter). A run ends at ``until``: blocked threads then raise
``Stop``, a BaseException so that no ``except Exception`` in the code under test takes it for a
failure.

PaceTable: a boto3 DynamoDB client's ``update_item`` and ``get_item`` on a dict, for the
requests ``PaceRecords`` makes: the update and condition expressions are evaluated (SET of
``#a = :v`` and ``#a = #a + :v``; conditions of comparisons, BETWEEN, attribute_not_exists,
AND, OR), numbers as DynamoDB keeps them (decimal strings, as ``PaceRecords`` formats them),
a failed condition raises ConditionalCheckFailedException with the item as it was (ALL_OLD),
and each request takes the DynamoDB latency of virtual time, applied at its middle. Any other
expression is an error, so a change in the product's requests stops the bench rather than
being simulated wrongly.
"""

from __future__ import annotations

import heapq
import re
import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError


class Stop(BaseException):
    """The run is over: a blocked thread ends."""


class _Waiter:
    __slots__ = ("at", "channel", "event")

    def __init__(self, at: float, channel: str | None) -> None:
        self.event = threading.Event()
        self.at, self.channel = at, channel


class VirtualClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.until = float("inf")
        self.handoffs = 0  # wake-ups served (the run's size)
        self._lock = threading.Lock()
        self._wakes: list[tuple[float, int, _Waiter]] = []
        self._waiting: dict[str, list[_Waiter]] = {}
        self._seq = 0
        self._stopped = False
        self._done = threading.Event()
        self._errors: list[BaseException] = []

    def wall(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self._block(self.now + max(0.0, seconds), None)

    def wait(self, until: float, channel: str) -> None:
        """Block until ``until`` or until ``notify(channel, at)`` brings the wake-up earlier."""
        self._block(max(self.now, until), channel)

    def notify(self, channel: str, at: float) -> None:
        """Threads waiting on ``channel`` wake at ``at`` (not before now) if that is earlier."""
        with self._lock:
            for waiter in self._waiting.get(channel, []):
                if at < waiter.at:
                    waiter.at = max(self.now, at)
                    self._push(waiter)

    def run(self, workers: list[Callable[[], None]], until: float) -> None:
        """Start ``workers`` (each at the current time, in order), run until ``until``."""
        self.until = until
        threads = []
        for work in workers:
            waiter = _Waiter(self.now, None)
            with self._lock:
                self._push(waiter)
            thread = threading.Thread(target=self._body, args=(work, waiter), daemon=True)
            threads.append(thread)
            thread.start()
        with self._lock:
            self._dispatch()
        self._done.wait()
        for thread in threads:
            thread.join()
        if self._errors:
            raise self._errors[0]

    # ---- internals (called with self._lock held where noted) --------------------------------

    def _push(self, waiter: _Waiter) -> None:  # lock held
        self._seq += 1
        heapq.heappush(self._wakes, (waiter.at, self._seq, waiter))

    def _body(self, work: Callable[[], None], waiter: _Waiter) -> None:
        waiter.event.wait()
        try:
            if self._stopped:
                raise Stop
            work()
        except Stop:
            pass
        except BaseException as exc:  # a broken worker stops the run, and run() raises it
            self._errors.append(exc)
            with self._lock:
                self._stop_all()
            return
        with self._lock:
            if not self._stopped:
                self._dispatch()

    def _block(self, at: float, channel: str | None) -> None:
        waiter = _Waiter(at, channel)
        with self._lock:
            if self._stopped:
                raise Stop
            self._push(waiter)
            if channel is not None:
                self._waiting.setdefault(channel, []).append(waiter)
            self._dispatch()
        waiter.event.wait()
        if channel is not None:
            with self._lock:
                self._waiting[channel].remove(waiter)
        if self._stopped:
            raise Stop

    def _dispatch(self) -> None:  # lock held: hand the turn to the earliest wake-up
        while self._wakes:
            at, _, waiter = heapq.heappop(self._wakes)
            if at != waiter.at or waiter.event.is_set():
                continue  # moved earlier by a notify (its newer entry stands), or served
            if at > self.until:
                heapq.heappush(self._wakes, (at, 0, waiter))  # woken by _stop_all
                break
            self.now = max(self.now, at)
            self.handoffs += 1
            waiter.event.set()
            return
        self._stop_all()

    def _stop_all(self) -> None:  # lock held
        self._stopped = True
        for _, _, waiter in self._wakes:
            waiter.event.set()
        self._wakes.clear()
        self._done.set()


# ---- the pace records' table ---------------------------------------------------------------

_TOKEN = re.compile(r"attribute_not_exists\(|attribute_exists\(|BETWEEN|AND|OR|<=|>=|<>|[()<>=]"
                    r"|[#:][A-Za-z_]\w*|\S+")  # fmt: skip


class PaceTable:
    """A boto3 DynamoDB client, for the pace records only (see the module's docstring)."""

    def __init__(self, latency: float = 0.0, sleep: Callable[[float], None] | None = None) -> None:
        self.items: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
        self.requests = 0
        self._latency, self._sleep = latency, sleep
        self.sample: Callable[[], float] | None = None  # a request's latency (default: latency)

    def _latency_of_one(self) -> float:
        return self.sample() if self.sample is not None else self._latency

    def _half(self, latency: float) -> None:
        if self._sleep is not None and latency:
            self._sleep(latency / 2)

    def get_item(self, *, TableName: str, Key: dict[str, Any],
                 ConsistentRead: bool = False) -> dict[str, Any]:  # fmt: skip
        self.requests += 1
        latency = self._latency_of_one()
        self._half(latency)
        item = self.items.get((Key["pk"]["S"], Key["sk"]["S"]))
        self._half(latency)
        return {"Item": {k: dict(v) for k, v in item.items()}} if item is not None else {}

    def update_item(self, *, TableName: str, Key: dict[str, Any], UpdateExpression: str,
                    ConditionExpression: str, ExpressionAttributeNames: dict[str, str],
                    ExpressionAttributeValues: dict[str, Any], ReturnValues: str,
                    ReturnValuesOnConditionCheckFailure: str) -> dict[str, Any]:  # fmt: skip
        self.requests += 1
        latency = self._latency_of_one()
        self._half(latency)
        key = (Key["pk"]["S"], Key["sk"]["S"])
        old = self.items.get(key)
        item = {k: dict(v) for k, v in (old or {}).items()}
        names, values = ExpressionAttributeNames, ExpressionAttributeValues
        if not _Condition(ConditionExpression, item, names, values).holds():
            self._half(latency)
            response: dict[str, Any] = {"Error": {"Code": "ConditionalCheckFailedException",
                                                  "Message": "The conditional request failed"}}
            if old is not None and ReturnValuesOnConditionCheckFailure == "ALL_OLD":
                response["Item"] = item
            raise ClientError(response, "UpdateItem")
        if not old:
            item = {"pk": dict(Key["pk"]), "sk": dict(Key["sk"])}
        _apply(UpdateExpression, item, names, values)
        self.items[key] = item
        self._half(latency)
        assert ReturnValues == "ALL_NEW", ReturnValues
        return {"Attributes": {k: dict(v) for k, v in item.items()}}


def _number(value: dict[str, str]) -> Decimal:
    return Decimal(value["N"])


def _apply(expression: str, item: dict[str, Any], names: dict[str, str],
           values: dict[str, Any]) -> None:  # fmt: skip
    """SET clauses: ``#a = :v``, ``#a = #b + :v``, ``#a = #b - :v``."""
    head, _, clauses = expression.partition(" ")
    if head != "SET":
        raise ValueError(f"PaceTable evaluates SET only: {expression!r}")

    def operand(token: str) -> dict[str, str]:
        if token.startswith(":"):
            return values[token]
        name = names[token]
        if name not in item:
            raise ClientError({"Error": {"Code": "ValidationException", "Message":
                               f"the expression refers to {name}, which the item has not"}},
                              "UpdateItem")  # fmt: skip
        return item[name]

    for clause in clauses.split(","):
        target, _, value = (part.strip() for part in clause.partition("="))
        parts = value.split()
        if len(parts) == 1:
            item[names[target]] = dict(operand(parts[0]))
        elif len(parts) == 3 and parts[1] in "+-":
            a, b = _number(operand(parts[0])), _number(operand(parts[2]))
            item[names[target]] = {"N": str(a + b if parts[1] == "+" else a - b)}
        else:
            raise ValueError(f"PaceTable cannot evaluate {clause!r}")


class _Condition:
    """A condition expression over one item: comparisons of numbers, BETWEEN,
    attribute_(not_)exists, AND, OR and parentheses (a missing attribute compares false)."""

    def __init__(self, expression: str, item: dict[str, Any], names: dict[str, str],
                 values: dict[str, Any]) -> None:  # fmt: skip
        self.tokens = _TOKEN.findall(expression)
        self.item, self.names, self.values = item, names, values
        self.at = 0

    def holds(self) -> bool:
        result = self._or()
        if self.at != len(self.tokens):
            raise ValueError(f"PaceTable cannot evaluate {' '.join(self.tokens)!r}")
        return result

    def _next(self) -> str:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def _peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _or(self) -> bool:
        result = self._and()
        while self._peek() == "OR":
            self._next()
            right = self._and()
            result = result or right
        return result

    def _and(self) -> bool:
        result = self._atom()
        while self._peek() == "AND":
            self._next()
            right = self._atom()
            result = result and right
        return result

    def _value(self, token: str) -> Decimal | None:
        if token.startswith(":"):
            return _number(self.values[token])
        if token.startswith("#"):
            found = self.item.get(self.names[token])
            return _number(found) if found is not None else None
        raise ValueError(f"PaceTable cannot evaluate the operand {token!r}")

    def _atom(self) -> bool:
        token = self._next()
        if token in ("attribute_not_exists(", "attribute_exists("):
            present = self.names[self._next()] in self.item
            if self._next() != ")":
                raise ValueError("PaceTable: a function takes one attribute")
            return present == (token == "attribute_exists(")
        if token == "(":
            result = self._or()
            if self._next() != ")":
                raise ValueError("PaceTable: unbalanced parentheses")
            return result
        left = self._value(token)
        operator = self._next()
        if operator == "BETWEEN":
            low = self._value(self._next())
            if self._next() != "AND":
                raise ValueError("PaceTable: BETWEEN needs AND")
            high = self._value(self._next())
            return None not in (left, low, high) and low <= left <= high  # type: ignore[operator]
        right = self._value(self._next())
        if left is None or right is None:
            return False
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right,
                "=": left == right, "<>": left != right}[operator]  # fmt: skip
