"""Done postings for the items done before the sent list was read from them.

A release before the done postings listed done items from an index, keyed on the item
(``sent_pk``, ``sent_sk``); those items have no done posting, so the sent list leaves them out.
``backfill`` posts them: a one-off Scan of the table, run by an operator after the upgrade
(``vdq backfill-done``), never by VDQ itself. It never loses an entry and may repeat one:

- each page's items are posted a minute at a time, under a key of their own that no window
  writes (a put only where no record is, else under a fresh key): nothing is overwritten;
- then each item's old keys are removed (a write conditional on them), so a run again, or
  one after a crash, posts only what is left; an item posted twice is one entry to a reader
  (the same position: vdq.operations.done_list drops it).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

from vdq.core import resources
from vdq.store.postings import DONE_PREFIX, DONE_STATES, LANES, METHODS, Done
from vdq.store.tx import UPDATE_TRIES, client_refused, retried

SHARD = "backfill"  # the shard tag of its postings' keys


def backfill(client: Any, table: str, *, page: int = 500) -> Iterator[int]:
    """Post every state item that still has the old index's keys; yields the items posted a
    page of the Scan."""
    kwargs: dict[str, Any] = {
        "TableName": table, "Limit": page,
        "FilterExpression": "sk = :state AND attribute_exists(sent_pk)",
        "ProjectionExpression": "pk, sk, id, #s, done_at, #m, priority, #exp",
        "ExpressionAttributeNames": {"#s": "state", "#m": "method",
                                     "#exp": resources.TABLE_TTL_ATTRIBUTE},
        "ExpressionAttributeValues": {":state": {"S": "STATE"}},
    }  # fmt: skip
    while True:
        answer = client.scan(**kwargs)
        minutes: dict[str, list[Done]] = {}
        kept: dict[str, list[int | None]] = {}  # each minute's items' expirations
        keys: list[dict[str, Any]] = []
        for row in answer.get("Items", []):
            entry = _entry(row)
            if entry is not None:
                minutes.setdefault(entry.done_at[:16], []).append(entry)
                expiration = row.get(resources.TABLE_TTL_ATTRIBUTE, {}).get("N")
                kept.setdefault(entry.done_at[:16], []).append(
                    int(expiration) if expiration else None)
            keys.append({"pk": row["pk"], "sk": row["sk"]})
        for minute, entries in sorted(minutes.items()):
            # Kept as long as its last item; for good when one of them is.
            ends = kept[minute]
            _post(client, table, minute, entries,
                  None if None in ends else max(e for e in ends if e is not None))
        for key in keys:
            remove = partial(client.update_item, TableName=table, Key=key,
                             UpdateExpression="REMOVE sent_pk, sent_sk",
                             ConditionExpression="attribute_exists(sent_pk)")  # fmt: skip
            try:  # beside live traffic: a late event's transaction may be writing the item
                retried(remove, client_refused, UPDATE_TRIES)
            except client.exceptions.ConditionalCheckFailedException:
                continue  # removed meanwhile (another run), or expired and deleted
        yield sum(len(e) for e in minutes.values())
        after = answer.get("LastEvaluatedKey")
        if not after:
            return
        kwargs["ExclusiveStartKey"] = after


def _entry(row: dict[str, Any]) -> Done | None:
    """The done entry of a state item of an older release; None for one not done."""
    text = {k: v.get("S") for k, v in row.items() if isinstance(v, dict) and "S" in v}
    state, done_at = text.get("state"), text.get("done_at") or ""
    if state not in DONE_STATES or len(done_at) < 23 or not text.get("id"):
        return None
    method = text.get("method") or "email"
    lane = text.get("priority") or "normal"
    if method not in METHODS:
        return None
    return Done(str(text["id"]), done_at, method, lane if lane in LANES else "normal", state)


def _post(client: Any, table: str, minute: str, entries: list[Done],
          expiration: int | None) -> None:  # fmt: skip
    first = min(e.item_id for e in entries)
    item: dict[str, Any] = {"pk": {"S": DONE_PREFIX + minute[:7]},
                            "sk": {"S": f"{minute[8:16]}#{SHARD}#{first}"},
                            "e": {"B": b"".join(e.encode() for e in entries)}}  # fmt: skip
    if expiration is not None:
        item[resources.TABLE_TTL_ATTRIBUTE] = {"N": str(expiration)}
    try:
        client.put_item(TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)")
    except client.exceptions.ConditionalCheckFailedException:
        item["sk"] = {"S": f"{item['sk']['S']}#{uuid.uuid4().hex}"}
        client.put_item(TableName=table, Item=item)
