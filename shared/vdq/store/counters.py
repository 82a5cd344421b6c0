"""Quota counters: queue items a producer enqueued per fixed window (second, minute, UTC day).

One record per producer and window (pk ``QUOTA#<producer>``, sk ``<window>#<index>``) with the
count ``used`` and a TTL just past the window's end, so old windows cost nothing to keep.
Charging a request is one TransactWriteItems of a conditional ADD per window: either every
window has room for all of the request's items and each counts them, or none changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError


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

    def charge(self, producer: str, windows: Sequence[Window], count: int) -> bool:
        """Count ``count`` items in every window if each has room; False (nothing counted)
        when any would pass its limit."""
        items = [
            {"Update": {
                "TableName": self._table,
                "Key": self._key(producer, w),
                "UpdateExpression": "ADD #used :n SET #exp = :exp",
                "ConditionExpression": "attribute_not_exists(#used) OR #used <= :room",
                "ExpressionAttributeNames": {"#used": "used", "#exp": "expiration"},
                "ExpressionAttributeValues": {":n": {"N": str(count)},
                                              ":room": {"N": str(w.limit - count)},
                                              ":exp": {"N": str(w.ends_at + 60)}},
            }}
            for w in windows
        ]  # fmt: skip
        try:
            self._client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            if any(r.get("Code") not in ("ConditionalCheckFailed", "None", None)
                   for r in reasons):  # fmt: skip
                raise  # a conflict with another transaction, not a full window: retryable
            return False
        return True

    def refund(self, producer: str, windows: Sequence[Window], count: int) -> None:
        """Take back a charge whose items were not stored."""
        for w in windows:
            self._client.update_item(
                TableName=self._table, Key=self._key(producer, w),
                UpdateExpression="ADD #used :n", ConditionExpression="attribute_exists(#used)",
                ExpressionAttributeNames={"#used": "used"},
                ExpressionAttributeValues={":n": {"N": str(-count)}})  # fmt: skip

    def used(self, producer: str, windows: Sequence[Window]) -> dict[str, int]:
        """Each window's count (strongly consistent), by window name."""
        if not windows:
            return {}
        answer = self._client.batch_get_item(RequestItems={self._table: {
            "Keys": [self._key(producer, w) for w in windows], "ConsistentRead": True}})
        found = {item["sk"]["S"]: int(item.get("used", {}).get("N", "0"))
                 for item in answer.get("Responses", {}).get(self._table, [])}  # fmt: skip
        return {w.name: found.get(w.sk, 0) for w in windows}
