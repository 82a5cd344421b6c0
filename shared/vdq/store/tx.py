"""Requests DynamoDB may refuse: transactions and conditional updates, tried again on
contention or throttling, batches of new records, and batch reads it leaves part unread.

``StoreBusy``: a write DynamoDB kept refusing (nothing written); ``WriteFailed``: a
batch not wholly stored (it names the records that were).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError
from pynamodb.exceptions import TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from vdq.core.errors import VdqError
from vdq.store.models import QueueItemRecord, _Table


class StoreBusy(VdqError):
    """A write DynamoDB kept refusing for conflicts or throttling: nothing written."""

    status = 503
    code = "contention"


class WriteFailed(VdqError):
    """A batch of new records was not (wholly) stored. ``written`` holds exactly the records
    that were; nothing else was."""

    status = 503
    code = "store_unavailable"

    def __init__(self, written: Sequence[_Table], why: str) -> None:
        super().__init__(f"the store refused the write: {why}")
        self.written = list(written)


def _key_of(raw: dict[str, Any]) -> tuple[str, str]:
    """(pk, sk) of a record as BatchWriteItem takes it (PynamoDB's serialized form)."""
    return (raw["pk"]["S"], raw["sk"]["S"])


_RETRYABLE = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})


# DynamoDB's limit on the actions of one TransactWriteItems.
TRANSACT_MAX_ACTIONS = 100


def retried(write: Callable[[], None], refused: Callable[[Exception], str | None],
            tries: int) -> None:
    """Run ``write`` again while ``refused`` names why DynamoDB did not apply it (a reason
    worth another try; None: raise as is), with full jitter, at most about 5 s in all;
    ``StoreBusy`` when it kept refusing."""
    delay = 0.02
    for attempt in range(tries):
        try:
            write()
            return
        except Exception as exc:
            why = refused(exc)
            if why is None:
                raise
            if attempt + 1 < tries:
                time.sleep(random.uniform(0, delay))
                delay = min(delay * 2, 1.0)
                continue
            raise StoreBusy(f"DynamoDB kept refusing the write ({why}); nothing was written, "
                            "try again") from exc  # fmt: skip


def transact(fill: Callable[[TransactWrite], None], tries: int = 10) -> None:
    """Run one TransactWriteItems, built by ``fill``, again when DynamoDB cancelled it only
    for a conflict with another transaction on one of its items or for throttling (neither
    is retried by botocore; every receiver of one email releases the same content record)."""

    def write() -> None:
        with TransactWrite(connection=QueueItemRecord._get_connection().connection) as tx:
            fill(tx)

    def refused(exc: Exception) -> str | None:
        if not isinstance(exc, TransactWriteError):
            return None
        codes = {r.code for r in exc.cancellation_reasons or [] if r is not None}
        codes.discard("None")
        return ", ".join(sorted(codes)) if codes and codes <= _RETRYABLE else None

    retried(write, refused, tries)


# What DynamoDB answers a single-item write that it did not apply and that is worth trying
# again: the item is in another transaction's write (not retried by botocore), or throttling
# that outlasted botocore's own retries.
_UPDATE_RETRYABLE = frozenset({"TransactionConflictException",
                               "ProvisionedThroughputExceededException", "ThrottlingException"})
UPDATE_TRIES = 10


def conditional_update(record: _Table, actions: list[Any], condition: Any,
                       tries: int = UPDATE_TRIES) -> None:
    """One conditional UpdateItem of ``record``, tried again as ``transact`` does when
    DynamoDB did not apply it for a conflict with a transaction on the item or throttling;
    ``StoreBusy`` when it kept refusing. A failed condition raises ``UpdateError`` as is."""

    def refused(exc: Exception) -> str | None:
        code = getattr(exc, "cause_response_code", None)
        return code if isinstance(exc, UpdateError) and code in _UPDATE_RETRYABLE else None

    retried(lambda: record.update(actions=actions, condition=condition), refused, tries)


def client_code(exc: Exception) -> str:
    """The error code of a boto3 client's failed call ("" for anything else)."""
    if not isinstance(exc, ClientError):
        return ""
    return str(exc.response.get("Error", {}).get("Code") or "")


def cancellation_codes(exc: Exception) -> list[str]:
    """The code of each request of a transaction a boto3 client's call saw cancelled ("None"
    for those that were fine); empty for any other error."""
    if client_code(exc) != "TransactionCanceledException":
        return []
    assert isinstance(exc, ClientError)
    return [str(r.get("Code")) for r in exc.response.get("CancellationReasons") or []]


def client_refused(exc: Exception) -> str | None:
    """Why DynamoDB did not apply a boto3 client's write and another try may: a transaction
    cancelled only for a conflict with another transaction or throttling, or a single-item
    write refused for the same (botocore retries neither); None for anything else. For
    ``retried``."""
    codes = set(cancellation_codes(exc)) - {"None"}
    if codes:
        return ", ".join(sorted(codes)) if codes <= _RETRYABLE else None
    code = client_code(exc)
    return code if code in _UPDATE_RETRYABLE else None


def batch_get(client: Any, table: str, request: dict[str, Any],
              tries: int = UPDATE_TRIES) -> list[dict[str, Any]]:  # fmt: skip
    """Every row of one BatchGetItem request of a boto3 client (at most 100 keys), asking
    again, with jittered back-off, for the keys DynamoDB left unprocessed (it does under
    throttling, and botocore does not ask again): a key missing from the answer would read as
    a count of 0. ``StoreBusy`` when keys are still left after the tries."""
    rows: list[dict[str, Any]] = []
    delay = 0.02
    for _ in range(tries):
        answer = client.batch_get_item(RequestItems={table: request})
        rows.extend(answer.get("Responses", {}).get(table, []))
        left = (answer.get("UnprocessedKeys") or {}).get(table)
        if not left or not left.get("Keys"):
            return rows
        request = left
        time.sleep(random.uniform(0, delay))
        delay = min(delay * 2, 1.0)
    raise StoreBusy("DynamoDB kept leaving keys unread (UnprocessedKeys); try again")


class ConditionFailed(Exception):
    """A conditional UpdateItem's condition failed; ``old`` is the item as it was (DynamoDB
    returns it with the failure: ReturnValuesOnConditionCheckFailure), None when there was
    none."""

    def __init__(self, old: dict[str, Any] | None) -> None:
        super().__init__("the condition failed")
        self.old = old


def update_returning(model: type[_Table], pk: str, sk: str, actions: list[Any], condition: Any,
                     tries: int = UPDATE_TRIES) -> dict[str, Any]:  # fmt: skip
    """One conditional UpdateItem that reads nothing first: the item as written (ALL_NEW), or
    ``ConditionFailed`` with the item as it was (ALL_OLD, in the same answer), so the caller
    decides what to do without a read. Tried again as ``conditional_update`` is."""
    table = model._get_connection()
    connection = table.connection
    kwargs = connection.get_operation_kwargs(
        table.table_name, pk, sk, actions=actions, condition=condition, return_values="ALL_NEW",
        return_values_on_condition_failure="ALL_OLD")  # fmt: skip
    written: dict[str, Any] = {}

    def write() -> None:
        try:
            written.update(connection.client.update_item(**kwargs).get("Attributes") or {})
        except ClientError as exc:
            if client_code(exc) == "ConditionalCheckFailedException":
                raise ConditionFailed(exc.response.get("Item")) from None
            raise

    retried(write, client_refused, tries)
    return written


def condition_failed(reason: Any) -> bool:
    """A transaction's cancellation reason says its condition failed."""
    return reason is not None and reason.code == "ConditionalCheckFailed"


def condition_failed_at(exc: UpdateError | TransactWriteError, at: int = 0) -> bool:
    """The write's condition failed; in a transaction, that of its ``at``-th request (PynamoDB
    sends a transaction's condition checks, then its deletes, puts and updates, in that order,
    whatever order they were added in)."""
    if isinstance(exc, TransactWriteError):
        reasons = exc.cancellation_reasons or []
        return len(reasons) > at and condition_failed(reasons[at])
    return exc.cause_response_code == "ConditionalCheckFailedException"


class BatchWrites:
    """New records written, and taken back, in batches."""

    def put_new(self, records: Sequence[_Table]) -> list[_Table]:
        """Write new records with BatchWriteItem (25 a request), retrying unprocessed ones.

        Returns the records written. On any failure (a throttled request, items still
        unprocessed after the retries, an error answer) raises ``WriteFailed`` naming exactly
        the records that were written before it: a half-applied batch leaves some records of
        a request stored and others not, and the caller must say which.
        """
        written: list[_Table] = []
        connection = QueueItemRecord._get_connection()
        for start in range(0, len(records), 25):
            chunk = {_key_of(r.serialize()): r for r in records[start : start + 25]}
            pending = [r.serialize() for r in chunk.values()]
            delay = 0.05
            for _ in range(8):
                try:
                    response = connection.batch_write_item(put_items=pending)
                except Exception as exc:
                    # An error answer does not say the request was not applied (its answer may
                    # have been lost): read back which of its records exist.
                    written.extend(self._read_back(chunk))
                    raise WriteFailed(written, str(exc)) from exc
                unprocessed = [u["PutRequest"]["Item"] for u in response.get(
                    "UnprocessedItems", {}).get(QueueItemRecord.Meta.table_name, [])]
                left = {_key_of(u) for u in unprocessed}
                written.extend(r for k, r in chunk.items() if k not in left)
                chunk = {k: r for k, r in chunk.items() if k in left}
                if not unprocessed:
                    break
                pending = unprocessed
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            else:
                raise WriteFailed(written, "DynamoDB left items unprocessed after 8 tries")
        return written

    def _read_back(self, chunk: dict[tuple[str, str], _Table]) -> list[_Table]:
        """The records of ``chunk`` that exist (strongly consistent). When even that read
        fails, they are deleted so that none counts as stored unknowingly; a record neither
        read nor deleted is reported as written (the caller then keeps, never loses, it)."""
        by_model: dict[type[_Table], list[tuple[str, str]]] = {}
        for key, record in chunk.items():
            by_model.setdefault(type(record), []).append(key)
        try:
            found: set[tuple[str, str]] = set()
            for model, keys in by_model.items():  # each model reads through its own connection
                for start in range(0, len(keys), 100):
                    for row in model.batch_get(keys[start : start + 100], consistent_read=True):
                        found.add((row.pk, row.sk))
            return [r for k, r in chunk.items() if k in found]
        except Exception:
            try:
                self.delete_new(list(chunk.values()))
                return []
            except Exception:
                return list(chunk.values())

    def delete_new(self, records: Sequence[_Table]) -> None:
        """Delete records that ``put_new`` wrote for a request that was then refused."""
        connection = QueueItemRecord._get_connection()
        for start in range(0, len(records), 25):
            keys = [{"pk": {"S": r.pk}, "sk": {"S": r.sk}} for r in records[start : start + 25]]
            for _ in range(8):
                response = connection.batch_write_item(delete_items=keys)
                keys = [u["DeleteRequest"]["Key"] for u in response.get(
                    "UnprocessedItems", {}).get(QueueItemRecord.Meta.table_name, [])]
                if not keys:
                    break
                time.sleep(0.05)
