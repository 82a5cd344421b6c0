"""Finding items without a scan: by receiver (the ``receiver`` index) and by origin (the
contents a request with an origin keeps in that origin's partitions).

The receiver index's partition is a hash of the receiver in the form the suppression list
compares (an address in lower case, an E.164 number: the caller normalises), its sort key the
item's id, a ULID whose first characters are its enqueue time: a descending Query is "newest
first", and a time window is a range of ids. An entry is written once, with the item, and
never moved, so the index costs one write unit an item and nothing afterwards.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from heapq import merge
from itertools import islice
from typing import Any

from vdq.store.models import (
    ContentRecord,
    QueueItemRecord,
    origin_partitions,
)
from vdq.store.tx import UPDATE_TRIES, client_refused, retried

# Characters of the subject (email) or body (SMS) kept on the state item as ``sj``: a list's
# column, without reading the content. About 45 bytes on each state write.
EXCERPT_CHARS = 40
RECEIVER_KEY_CHARS = 13  # 65 bits: no two receivers of one deployment share a key in practice


def receiver_key(normalised: str) -> str:
    """The receiver index's partition of a receiver already in its compared form. A hash: the
    index holds no address, and every key is as short. Readers compare the item's receiver too,
    so even a collision shows no other receiver's items."""
    digest = hashlib.blake2b(normalised.encode(), digest_size=9).digest()
    return base64.b32encode(digest).decode().rstrip("=").lower()[:RECEIVER_KEY_CHARS]


def excerpt(text: str | None) -> str | None:
    """What a list shows of a subject or an SMS body: its first line, cut short."""
    if not text:
        return None
    line = " ".join(text.split())
    return line[:EXCERPT_CHARS] or None


class Search:
    """Reads of the receiver index and of the origin partitions."""

    def query_receiver(self, key: str, *, below: str | None = None, above: str | None = None,
                       limit: int) -> list[str]:  # fmt: skip
        """Ids of the receiver's items, newest first: below the id ``below`` (exclusive, a
        cursor) and above ``above`` (exclusive, a time window's start), at most ``limit``."""
        index = QueueItemRecord.receiver_index
        condition: Any = None
        if below is not None and above is not None:
            condition = QueueItemRecord.id.between(above, below)
        elif below is not None:
            condition = QueueItemRecord.id < below
        elif above is not None:
            condition = QueueItemRecord.id > above
        rows = index.query(key, condition, scan_index_forward=False, limit=limit + 2,
                           page_size=limit + 2)  # fmt: skip
        found = [row.id for row in rows if row.id not in (below, above)]
        return found[:limit]

    def query_origin(self, origin_type: str, origin_id: str, *, below: str | None = None,
                     above: str | None = None,
                     limit: int) -> list[tuple[str, list[str]]]:  # fmt: skip
        """(content ulid, its item ids) of the origin's requests, newest first: contents below
        the ulid ``below`` and above ``above`` (both exclusive), at most ``limit``. The origin's
        partitions are read side by side, each up to ``limit`` contents, and merged."""
        high = f"C#{below}" if below is not None else "C$"  # "$" sorts after "#"
        low = f"C#{above}" if above is not None else "C#"

        def read(pk: str) -> list[tuple[str, list[str]]]:
            rows = ContentRecord.query(pk, ContentRecord.sk.between(low, high),
                                       scan_index_forward=False, limit=limit + 2,
                                       page_size=limit + 2,
                                       attributes_to_get=["sk", "items"])  # fmt: skip
            out = []
            for row in rows:
                ulid = row.sk.removeprefix("C#")
                if ulid in (below, above) or not row.sk.startswith("C#"):
                    continue
                out.append((ulid, (row.items or "").split()))
            return out[:limit]

        first, *others = origin_partitions(origin_type, origin_id)
        # The first read on this thread: PynamoDB makes its client on first use (a session a
        # thread), so threads that met none would each make one, a cold start's worth of CPU
        # apiece; made here, they share it.
        shards = [read(first)]
        with ThreadPoolExecutor(ORIGIN_READERS, thread_name_prefix="vdq-origin") as pool:
            shards += pool.map(read, others)
        newest_first = merge(*shards, key=lambda found: found[0], reverse=True)
        return list(islice(newest_first, limit))


# Queries of an origin's partitions in flight at once: its 17 partitions in three round trips.
ORIGIN_READERS = 6

def backfill(client: Any, table: str, normalise: Callable[[str], str], *,
             page: int = 500) -> Iterator[int]:
    """Give every state item written before the receiver index its key (``rx``): a Scan of
    the table, run once by an operator after the upgrade (``vdq backfill-receivers``), never by
    VDQ itself. Each write is conditional on the item still lacking the key, so a second run
    (or one beside new enqueues) changes nothing twice. Yields the items keyed per page."""
    kwargs: dict[str, Any] = {
        "TableName": table, "Limit": page,
        "FilterExpression": "sk = :state AND attribute_not_exists(rx)",
        "ProjectionExpression": "pk, sk, receiver",
        "ExpressionAttributeValues": {":state": {"S": "STATE"}},
    }  # fmt: skip
    while True:
        answer = client.scan(**kwargs)
        keyed = 0
        for row in answer.get("Items", []):
            receiver = (row.get("receiver") or {}).get("S")
            if not receiver:
                continue
            request: dict[str, Any] = {
                "TableName": table, "Key": {"pk": row["pk"], "sk": row["sk"]},
                "UpdateExpression": "SET rx = :rx",
                "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(rx)",
                "ExpressionAttributeValues": {":rx": {"S": receiver_key(normalise(receiver))}},
            }  # fmt: skip
            try:  # beside live traffic: the item may be in a transaction's write meanwhile
                retried(partial(client.update_item, **request), client_refused, UPDATE_TRIES)
            except client.exceptions.ConditionalCheckFailedException:
                continue  # keyed meanwhile, or expired and deleted
            keyed += 1
        yield keyed
        after = answer.get("LastEvaluatedKey")
        if not after:
            return
        kwargs["ExclusiveStartKey"] = after
