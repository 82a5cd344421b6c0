"""Quota counters: queue items a producer enqueued per fixed window (second, minute, UTC day).

One record per producer and window (pk ``QUOTA#<producer>``, sk ``<window>#<index>``) with the
count ``used`` and a TTL just past the window's end, so old windows cost nothing to keep.
Charging a request is one TransactWriteItems of a conditional ADD per window: either every
window has room for all of the request's items and each counts them, or none changes.

Concurrent requests of one producer write the same records: DynamoDB cancels a transaction that
meets another on one of them (TransactionConflict), and answers a refund's UpdateItem that
meets one TransactionConflictException; botocore retries neither. Both are tried again with
jittered back-off as every store write is (``vdq.store.tx.retried``), and become ``StoreBusy``
(503, nothing changed) when DynamoDB keeps refusing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from vdq.store.tx import (
    UPDATE_TRIES,
    batch_get,
    cancellation_codes,
    client_code,
    client_refused,
    retried,
)

TRIES = UPDATE_TRIES  # as a state write's: about 5 s of jittered back-off at most


def quota_pk(producer: str) -> str:
    return f"QUOTA#{producer}"


@dataclass(frozen=True)
class Window:
    """One fixed window of one limit: its name (``per_minute``), record key, limit and end."""

    name: str
    sk: str
    limit: int
    ends_at: int  # epoch seconds


class Counters:
    """Charges and reads of the quota counters (a boto3 DynamoDB client's calls)."""

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def _key(self, producer: str, window: Window) -> dict[str, Any]:
        return {"pk": {"S": quota_pk(producer)}, "sk": {"S": window.sk}}

    def charge(self, producer: str, windows: Sequence[Window], count: int,
               member: str | None = None) -> bool:  # fmt: skip
        """Count ``count`` items in every window if each has room; False (nothing counted)
        when any would pass its limit. ``member``: the client charged through a group's
        counters, added to each window's ``members`` (in the same write, so the usage view
        finds the counters a client is charged to at no extra request)."""
        names = {"#used": "used", "#exp": "expiration"}
        add = "ADD #used :n"
        if member is not None:
            names["#members"] = "members"
            add += ", #members :member"
        items = [
            {"Update": {
                "TableName": self._table,
                "Key": self._key(producer, w),
                "UpdateExpression": f"{add} SET #exp = :exp",
                "ConditionExpression": "attribute_not_exists(#used) OR #used <= :room",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": {":n": {"N": str(count)},
                                              ":room": {"N": str(w.limit - count)},
                                              ":exp": {"N": str(w.ends_at + 60)},
                                              **({":member": {"SS": [member]}} if member
                                                 else {})},
            }}
            for w in windows
        ]  # fmt: skip
        full = False

        def write() -> None:
            nonlocal full
            try:
                self._client.transact_write_items(TransactItems=items)
            except ClientError as exc:
                if "ConditionalCheckFailed" in cancellation_codes(exc):
                    full = True  # a window has no room: nothing was counted
                    return
                raise

        retried(write, client_refused, TRIES)
        return not full

    def refund(self, producer: str, windows: Sequence[Window], count: int) -> None:
        """Take back a charge whose items were not stored (each window's ADD tried again as a
        charge is; a window that expired meanwhile has nothing to take back)."""
        for w in windows:
            def write(w: Window = w) -> None:
                try:
                    self._client.update_item(
                        TableName=self._table, Key=self._key(producer, w),
                        UpdateExpression="ADD #used :n",
                        ConditionExpression="attribute_exists(#used)",
                        ExpressionAttributeNames={"#used": "used"},
                        ExpressionAttributeValues={":n": {"N": str(-count)}})  # fmt: skip
                except ClientError as exc:
                    if client_code(exc) != "ConditionalCheckFailedException":
                        raise

            retried(write, client_refused, TRIES)

    def used(self, producer: str, windows: Sequence[Window]) -> dict[str, int]:
        """Each window's count (strongly consistent), by window name."""
        if not windows:
            return {}
        keys = [self._key(producer, w) for w in windows]
        rows = batch_get(self._client, self._table, {"Keys": keys, "ConsistentRead": True})
        found = {item["sk"]["S"]: int(item.get("used", {}).get("N", "0")) for item in rows}
        return {w.name: found.get(w.sk, 0) for w in windows}

    def charged_as(self, client: str,
                   candidates: Sequence[tuple[str, Sequence[Window]]]) -> str | None:  # fmt: skip
        """The first of ``candidates`` (group producers, each with its current windows) whose
        counters list ``client`` as a member in one of those windows (strongly consistent,
        one BatchGetItem a hundred keys); None when none does."""
        keys = [(producer, w) for producer, windows in candidates for w in windows]
        found: set[str] = set()
        for start in range(0, len(keys), 100):
            chunk = keys[start : start + 100]
            rows = batch_get(self._client, self._table, {
                "Keys": [self._key(p, w) for p, w in chunk], "ConsistentRead": True,
                "ProjectionExpression": "pk, #members",
                "ExpressionAttributeNames": {"#members": "members"}})  # fmt: skip
            for item in rows:
                if client in item.get("members", {}).get("SS", []):
                    found.add(item["pk"]["S"])
        return next((p for p, _ in candidates if quota_pk(p) in found), None)

