"""The reputation guard's records: each producer's level, and the items a hold parked.

| record  | pk                  | sk              | what                                        |
|---------|---------------------|-----------------|---------------------------------------------|
| level   | ``GUARD``           | ``P#<producer>`` | ok, warn, hold or released; why; the figures |
|         |                     |                 | (``watch``: judged again each minute)       |
|         |                     | ``A#account``   | the whole account's (warns, never holds)    |
| parked  | ``HELD#<producer>`` | ``<item id>``   | an item a hold kept from its provider       |

One partition holds every level record: the send path reads them all in one small Query (and
keeps them for ``VDQ_HOLD_CACHE_SECONDS``). A **hold** has an id (``hold_id``, the time it
began); parking an item is one transaction that checks the producer's record still holds
*that* hold, so a send path whose cache is stale cannot park an item after its release: the
check fails and the item is sent. The release moves the record out of ``hold`` first, then
gives each parked item back; an item parked before it is in ``HELD#``, none can be parked
after it.

Every write is conditional; a failed condition is an outcome (False, or ``NotHeld``), never an
exception past this module. A write DynamoDB refuses for a conflict with another transaction
(a release's unpark and a send path's park meet on one item) or throttling is tried again, and
is ``StoreBusy`` (503, nothing written) when it keeps being refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from vdq.store.models import STATE_SK, item_pk
from vdq.store.tx import UPDATE_TRIES, cancellation_codes, client_code, client_refused, retried

GUARD_PK = "GUARD"
ACCOUNT_SK = "A#account"
# The name the whole account's figures and record go by: one no producer can have (a
# producer's name begins with a letter or a digit), so a client called "account" is rated,
# held and recorded as itself. The API and the events show it as ACCOUNT_SHOWN.
ACCOUNT = "*account"
ACCOUNT_SHOWN = "account"
HELD_PREFIX = "HELD#"
HOLD, RELEASED = "hold", "released"


def level_sk(producer: str) -> str:
    return f"P#{producer}"


@dataclass(frozen=True)
class Level:
    """One producer's (or the account's) guard record."""

    producer: str  # ACCOUNT for the account's
    level: str  # ok | warn | hold | released
    reason: str = ""
    hold_id: str | None = None  # while or since held: when the hold began
    updated_at: str = ""
    figures: Mapping[str, int] = field(default_factory=dict)
    since: str | None = None  # after a release: the first hour its rates count again
    baseline: Mapping[str, int] = field(default_factory=dict)  # of that hour, at the release
    released_by: str | None = None
    released_at: str | None = None
    # Its event and metric are still to be emitted: set with a warn or a hold, cleared once
    # they are (a failure between the write and the event is put right at the retry).
    unsignalled: bool = False
    # At ok, with bounces (complaints) that would warn or hold once the emails a rate needs
    # are counted or the window's older hours leave it: the minute sweep judges it again
    # (vdq.results.judging; reputation.may_reach_a_level).
    watch: bool = False

    @property
    def held(self) -> bool:
        return self.level == HOLD

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, "reason": self.reason or None, "hold_id": self.hold_id,
                "updated_at": self.updated_at or None, "released_by": self.released_by,
                "released_at": self.released_at, "since": self.since}  # fmt: skip


@dataclass(frozen=True)
class Parked:
    """An item a hold parked: what its send message said, to publish it again."""

    item_id: str
    attempt: int
    priority: str
    hold_id: str
    parked_at: str


class NotHeld(Exception):
    """The producer's hold ended (or is another hold) before the item could be parked."""


class Holds:
    """Reads and conditional writes of the guard's records (a boto3 DynamoDB client's calls)."""

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    # ---- levels ---------------------------------------------------------------------------

    def levels(self) -> list[Level]:
        """Every producer's record and the account's (one Query; strongly consistent: a
        release is read as soon as it is written)."""
        out: list[Level] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table, "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": GUARD_PK}}, "ConsistentRead": True,
        }  # fmt: skip
        while True:
            answer = self._client.query(**kwargs)
            out.extend(_level(row) for row in answer.get("Items", []))
            after = answer.get("LastEvaluatedKey")
            if not after:
                return out
            kwargs["ExclusiveStartKey"] = after

    def level(self, producer: str) -> Level | None:
        row = self._client.get_item(TableName=self._table, ConsistentRead=True,
                                    Key=self._level_key(producer)).get("Item")  # fmt: skip
        return _level(row) if row else None

    def set_level(self, current: Level | None, new: Level) -> bool:
        """Write ``new`` over ``current`` (None: no record yet) if the record is still as it
        was read; False when it changed first (another evaluation, a release)."""
        item: dict[str, Any] = {
            **self._level_key(new.producer),
            "level": {"S": new.level}, "reason": {"S": new.reason or "-"},
            "updated_at": {"S": new.updated_at},
            "figures": {"S": json.dumps(dict(new.figures), separators=(",", ":"))},
        }  # fmt: skip
        for name in ("hold_id", "since", "released_by", "released_at"):
            value = getattr(new, name)
            if value:
                item[name] = {"S": value}
        if new.unsignalled:
            item["unsignalled"] = {"BOOL": True}
        if new.watch:
            item["watch"] = {"BOOL": True}
        if new.baseline:
            item["baseline"] = {"S": json.dumps(dict(new.baseline), separators=(",", ":"))}
        if current is None:
            condition, names, values = "attribute_not_exists(pk)", None, None
        else:
            condition = "#level = :level AND #updated = :updated"
            names = {"#level": "level", "#updated": "updated_at"}
            values = {":level": {"S": current.level}, ":updated": {"S": current.updated_at}}
        kwargs: dict[str, Any] = {"TableName": self._table, "Item": item,
                                  "ConditionExpression": condition}  # fmt: skip
        if names:
            kwargs["ExpressionAttributeNames"] = names
            kwargs["ExpressionAttributeValues"] = values
        try:
            self._write(self._client.put_item, **kwargs)
        except ClientError as exc:
            if client_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def drop_level(self, current: Level) -> bool:
        """Delete the record ``current`` read, if it is still as it was read; False when it
        changed first."""
        return self._as_read(self._client.delete_item, current)

    def signalled(self, level: Level) -> bool:
        """Clear ``unsignalled`` of the record ``level`` read (its event was put); False when
        the record changed first."""
        return self._as_read(self._client.update_item, level,
                             UpdateExpression="REMOVE unsignalled")  # fmt: skip

    def _as_read(self, call: Callable[..., Any], level: Level, **request: Any) -> bool:
        """A write of ``level``'s record on condition that it is still as ``level`` read it."""
        try:
            self._write(
                call, TableName=self._table, Key=self._level_key(level.producer),
                ConditionExpression="#level = :level AND #updated = :updated",
                ExpressionAttributeNames={"#level": "level", "#updated": "updated_at"},
                ExpressionAttributeValues={":level": {"S": level.level},
                                           ":updated": {"S": level.updated_at}},
                **request)  # fmt: skip
        except ClientError as exc:
            if client_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    @staticmethod
    def _write(call: Callable[..., Any], **request: Any) -> None:
        """One write, tried again while DynamoDB refuses it for a conflict with a transaction
        or throttling (botocore retries neither; a release's unpark meets the send path's
        park on the same item); ``StoreBusy`` (503, nothing written) when it keeps refusing."""
        retried(lambda: call(**request), client_refused, UPDATE_TRIES)

    def _level_key(self, producer: str) -> dict[str, Any]:
        sk = ACCOUNT_SK if producer == ACCOUNT else level_sk(producer)
        return {"pk": {"S": GUARD_PK}, "sk": {"S": sk}}

    # ---- parked items ---------------------------------------------------------------------

    def park(self, item_id: str, attempt: int, producer: str, hold_id: str, reason: str,
             priority: str, now: str, expiration: int,
             entry: dict[str, Any] | None = None) -> bool:  # fmt: skip
        """Park a queued (or delayed) item at ``attempt`` under the producer's hold
        ``hold_id``: the item shows why (``held``), and ``HELD#<producer>`` lists it for the
        release; ``entry`` (a serialized history record) is written with them, the item then
        keeping records apart. One transaction; False when the item moved first (another
        attempt, done, claimed) or is parked by this hold already (a message delivered twice);
        ``NotHeld`` when the hold ended first."""
        history = _history_put(self._table, entry)
        try:
            self._write(self._client.transact_write_items, TransactItems=[
                {"ConditionCheck": {
                    "TableName": self._table, "Key": self._level_key(producer),
                    "ConditionExpression": "#level = :hold AND hold_id = :hid",
                    "ExpressionAttributeNames": {"#level": "level"},
                    "ExpressionAttributeValues": {":hold": {"S": HOLD}, ":hid": {"S": hold_id}},
                }},
                {"Update": {
                    "TableName": self._table,
                    "Key": {"pk": {"S": item_pk(item_id)}, "sk": {"S": STATE_SK}},
                    # Without its timer the re-publish sweep leaves it be: parked, it
                    # costs nothing until the release arms the timer again.
                    "UpdateExpression": "SET held = :why" + (", ap = :one" if history else "")
                                        + " REMOVE timer_pk, timer_sk",
                    "ConditionExpression": "#state IN (:queued, :delayed) AND attempt = :a "
                                           "AND created_by = :p AND (attribute_not_exists(held) "
                                           "OR held <> :why)",
                    "ExpressionAttributeNames": {"#state": "state"},
                    "ExpressionAttributeValues": {
                        ":why": {"S": reason}, ":queued": {"S": "queued"},
                        ":delayed": {"S": "delayed"}, ":a": {"N": str(attempt)},
                        ":p": {"S": producer}, **({":one": {"N": "1"}} if history else {})},
                }},
                {"Put": {
                    "TableName": self._table,
                    "Item": {"pk": {"S": HELD_PREFIX + producer}, "sk": {"S": item_id},
                             "attempt": {"N": str(attempt)}, "priority": {"S": priority},
                             "hold_id": {"S": hold_id}, "at": {"S": now},
                             "expiration": {"N": str(expiration)}},
                    "ConditionExpression": "attribute_not_exists(pk) OR attempt <= :a",
                    "ExpressionAttributeValues": {":a": {"N": str(attempt)}},
                }},
                *history,
            ])  # fmt: skip
        except ClientError as exc:
            reasons = cancellation_codes(exc)
            if reasons and reasons[0] == "ConditionalCheckFailed":
                raise NotHeld(producer) from None
            if "ConditionalCheckFailed" in reasons:
                return False
            raise
        return True

    def parked(self, producer: str, *, limit: int = 100,
               after: str | None = None) -> tuple[list[Parked], str | None]:  # fmt: skip
        """A page of the producer's parked items, in id order (enqueue order), and the id to
        go on after (None: the last page)."""
        kwargs: dict[str, Any] = {
            "TableName": self._table, "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": HELD_PREFIX + producer}},
            "Limit": limit, "ConsistentRead": True,
        }  # fmt: skip
        if after:
            kwargs["ExclusiveStartKey"] = {"pk": {"S": HELD_PREFIX + producer},
                                           "sk": {"S": after}}  # fmt: skip
        answer = self._client.query(**kwargs)
        rows = [Parked(r["sk"]["S"], int(r["attempt"]["N"]), r["priority"]["S"],
                       r["hold_id"]["S"], r["at"]["S"]) for r in answer.get("Items", [])]
        last = answer.get("LastEvaluatedKey")
        return rows, (last["sk"]["S"] if last else None)

    def unpark(self, producer: str, parked: Parked, timer: tuple[str, str] | None = None,
               entry: dict[str, Any] | None = None) -> bool:  # fmt: skip
        """Take a parked item off the list and clear its ``held``; with ``timer`` (its publish
        timer's partition and sort key), arm it, so a send message lost after this write is
        published again by the re-publish sweep. One transaction, on the condition that the
        item is still queued (or delayed) at the parked attempt and its entry is still the one
        ``parked`` read (the same attempt and hold); False when not (it was cancelled, retried
        or claimed meanwhile: its entry alone is dropped; or it was sent and parked again by a
        newer hold: that entry stays, for that hold's release)."""
        history = _history_put(self._table, entry)  # (``entry``: as ``park``'s)
        sets = []
        values: dict[str, Any] = {":queued": {"S": "queued"}, ":delayed": {"S": "delayed"},
                                  ":a": {"N": str(parked.attempt)}}  # fmt: skip
        if timer is not None:
            sets.append("timer_pk = :tpk, timer_sk = :tsk")
            values.update({":tpk": {"S": timer[0]}, ":tsk": {"S": timer[1]}})
        if history:
            sets.append("ap = :one")
            values[":one"] = {"N": "1"}
        update = "REMOVE held" + (f" SET {', '.join(sets)}" if sets else "")
        try:
            self._write(self._client.transact_write_items, TransactItems=[
                {"Delete": {
                    "TableName": self._table,
                    "Key": {"pk": {"S": HELD_PREFIX + producer}, "sk": {"S": parked.item_id}},
                    "ConditionExpression": "attempt = :a AND hold_id = :h",
                    "ExpressionAttributeValues": {":a": {"N": str(parked.attempt)},
                                                  ":h": {"S": parked.hold_id}},
                }},
                {"Update": {
                    "TableName": self._table,
                    "Key": {"pk": {"S": item_pk(parked.item_id)}, "sk": {"S": STATE_SK}},
                    "UpdateExpression": update,
                    "ConditionExpression": "#state IN (:queued, :delayed) AND attempt = :a",
                    "ExpressionAttributeNames": {"#state": "state"},
                    "ExpressionAttributeValues": values,
                }},
                *history,
            ])  # fmt: skip
        except ClientError as exc:
            if "ConditionalCheckFailed" not in cancellation_codes(exc):
                raise
            self._forget(producer, parked)
            return False
        return True

    def _forget(self, producer: str, parked: Parked) -> None:
        """Drop the list entry alone (its item is gone, or moved on), unless it is no longer
        the one ``parked`` read."""
        try:
            self._write(
                self._client.delete_item,
                TableName=self._table,
                Key={"pk": {"S": HELD_PREFIX + producer}, "sk": {"S": parked.item_id}},
                ConditionExpression="attempt = :a AND hold_id = :h",
                ExpressionAttributeValues={":a": {"N": str(parked.attempt)},
                                           ":h": {"S": parked.hold_id}})  # fmt: skip
        except ClientError as exc:
            if client_code(exc) != "ConditionalCheckFailedException":
                raise

    def all_parked(self, producer: str) -> Iterator[Parked]:
        after: str | None = None
        while True:
            rows, after = self.parked(producer, after=after)
            yield from rows
            if after is None:
                return


def _level(row: Mapping[str, Any]) -> Level:
    def text(name: str) -> str | None:
        value = row.get(name, {}).get("S")
        return str(value) if value is not None else None

    sk = str(row["sk"]["S"])
    producer = ACCOUNT if sk == ACCOUNT_SK else sk.removeprefix("P#")
    reason = text("reason")
    return Level(producer, text("level") or "ok", "" if reason in (None, "-") else str(reason),
                 text("hold_id"), text("updated_at") or "",
                 json.loads(text("figures") or "{}"), text("since"),
                 json.loads(text("baseline") or "{}"), text("released_by"),
                 text("released_at"),
                 bool(row.get("unsignalled", {}).get("BOOL", False)),
                 bool(row.get("watch", {}).get("BOOL", False)))  # fmt: skip


def _history_put(table: str, entry: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The transaction's Put of a history record (``entry``: its attributes, serialized), if
    any: a new record (its key has a random part), so a repeat cannot overwrite it."""
    if entry is None:
        return []
    return [{"Put": {"TableName": table, "Item": entry,
                     "ConditionExpression": "attribute_not_exists(pk)"}}]  # fmt: skip
