"""Flush markers and repair leases: how the stream consumer's windows say they were written,
and how a repair of a batch the stream mapping gave up on takes it alone.

A **flush marker** says that an invocation of the stream mapping wrote its window: key
``FL#<shard>`` / ``<last>#<first>`` (the invocation's first and last sequence number), written
before the window's writes and marked ``written`` after them, with the producers whose bounces
or complaints the window counted (and whether the account's), which the reputation guard looks
at after the writes. When the mapping gives up on a batch, its repair (vdq.schedules.repair)
reads whether a window holding the batch was written (and is not to be counted again), begun
and never finished, or never begun, and whom its look was for. A **repair lease**
(``RL#<batch>``) lets one repair at a time apply a batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

FLUSH_PREFIX = "FL#"
LEASE_PREFIX = "RL#"
LEASE_SK = "RL"


@dataclass(frozen=True)
class Flush:
    """What the flush marker of a window says: whether every write of it landed (False: begun,
    never finished), and what the guard's look after them is for: the producers whose bounces
    or complaints of email it counted, and whether it counted the account's."""

    written: bool
    producers: tuple[str, ...] = ()
    account: bool = False


class Flushes:
    """The flush markers' and repair leases' reads and writes (a boto3 DynamoDB client's
    calls, as the postings' beside them: ``vdq.store.postings.Tallies``)."""

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def begin_flush(self, shard: str, first: str, last: str, expiration: int,
                    producers: Iterable[str] = (), account: bool = False) -> None:  # fmt: skip
        """An invocation whose records are ``first``..``last`` starts writing its window, whose
        look is for ``producers`` (and the account's rates with ``account``); a marker of it
        already there, begun or written, stays as it is."""
        item: dict[str, Any] = {"pk": {"S": FLUSH_PREFIX + shard},
                                "sk": {"S": _flush_sk(first, last)},
                                "expiration": {"N": str(expiration)}}  # fmt: skip
        names = sorted(set(producers))
        if names:
            item["producers"] = {"SS": names}
        if account:
            item["account"] = {"BOOL": True}
        try:
            self._client.put_item(TableName=self._table, Item=item,
                                  ConditionExpression="attribute_not_exists(pk)")  # fmt: skip
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def end_flush(self, shard: str, first: str, last: str, expiration: int) -> None:
        """Every write of the window of that invocation landed."""
        self._client.update_item(
            TableName=self._table,
            Key={"pk": {"S": FLUSH_PREFIX + shard}, "sk": {"S": _flush_sk(first, last)}},
            UpdateExpression="SET #w = :w, #exp = :exp",
            ExpressionAttributeNames={"#w": "written", "#exp": "expiration"},
            ExpressionAttributeValues={":w": {"BOOL": True}, ":exp": {"N": str(expiration)}},
        )  # fmt: skip

    def flushed(self, shard: str, first: str, last: str) -> Flush | None:
        """Whether an invocation of ``shard`` whose records held ``first``..``last`` wrote its
        window (None: none began to), and whom its look was for: a marker written (every write
        landed), else what the markers begun and never finished say together. Strongly
        consistent Queries of the shard's markers that end at or after ``last``."""
        kwargs: dict[str, Any] = {
            "TableName": self._table, "ConsistentRead": True,
            "KeyConditionExpression": "pk = :pk AND sk >= :from",
            "ExpressionAttributeValues": {":pk": {"S": FLUSH_PREFIX + shard},
                                          ":from": {"S": f"{int(last):040d}"}},
        }  # fmt: skip
        found: Flush | None = None
        while True:
            answer = self._client.query(**kwargs)
            for row in answer.get("Items", []):
                ends, _, begins = row["sk"]["S"].partition("#")
                if begins.isdigit() and int(begins) <= int(first) and int(ends) >= int(last):
                    marker = Flush(row.get("written", {}).get("BOOL") is True,
                                   tuple(row.get("producers", {}).get("SS") or ()),
                                   row.get("account", {}).get("BOOL") is True)  # fmt: skip
                    if marker.written:
                        return marker
                    found = marker if found is None else Flush(
                        False, tuple(sorted({*found.producers, *marker.producers})),
                        found.account or marker.account)  # fmt: skip
            after = answer.get("LastEvaluatedKey")
            if not after:
                return found
            kwargs["ExclusiveStartKey"] = after

    def take_lease(self, name: str, holder: str, now: int, seconds: int) -> int | None:
        """Hold the lease ``name`` for ``seconds`` from ``now`` (epoch seconds). None: taken;
        else when the lease another holder has ends (nothing written)."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item={"pk": {"S": LEASE_PREFIX + name}, "sk": {"S": LEASE_SK},
                      "holder": {"S": holder}, "until": {"N": str(now + seconds)},
                      "expiration": {"N": str(now + seconds + 86_400)}},
                ConditionExpression="attribute_not_exists(pk) OR #until < :now",
                ExpressionAttributeNames={"#until": "until"},
                ExpressionAttributeValues={":now": {"N": str(now)}},
            )  # fmt: skip
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            found = self._client.get_item(
                TableName=self._table, ConsistentRead=True,
                Key={"pk": {"S": LEASE_PREFIX + name}, "sk": {"S": LEASE_SK}},
            ).get("Item") or {}  # fmt: skip
            return int(found.get("until", {}).get("N") or now + seconds)
        return None

    def keep_lease(self, name: str, holder: str, now: int, seconds: int) -> bool:
        """Hold the lease ``name`` for ``seconds`` more from ``now``, if ``holder`` still has
        it (one that ran out and that no one took since is still its). False: another holder
        took it."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": LEASE_PREFIX + name}, "sk": {"S": LEASE_SK}},
                UpdateExpression="SET #until = :until, #exp = :exp",
                ConditionExpression="#holder = :holder",
                ExpressionAttributeNames={"#until": "until", "#exp": "expiration",
                                          "#holder": "holder"},
                ExpressionAttributeValues={":until": {"N": str(now + seconds)},
                                           ":exp": {"N": str(now + seconds + 86_400)},
                                           ":holder": {"S": holder}},
            )  # fmt: skip
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def drop_lease(self, name: str, holder: str) -> None:
        """Give the lease back (not one another holder took since it ran out)."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key={"pk": {"S": LEASE_PREFIX + name}, "sk": {"S": LEASE_SK}},
                ConditionExpression="#holder = :holder",
                ExpressionAttributeNames={"#holder": "holder"},
                ExpressionAttributeValues={":holder": {"S": holder}},
            )  # fmt: skip
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise


def _flush_sk(first: str, last: str) -> str:
    """A flush marker's sort key: by its last sequence number, then its first."""
    return f"{int(last):040d}#{int(first):040d}"
