"""The archive of expired records (``VDQ_ARCHIVE=s3``): what DynamoDB's TTL deleted, kept in S3.

TTL deletions reach the table's stream as REMOVE records made by the service itself (user
identity ``dynamodb.amazonaws.com``), with the record as it was (the old image). The deletions
of an item's records (``ITEM_PARTITIONS``) in each batch become one gzip JSON-lines object per
day of deletion, under
``archive/dt=<YYYY-MM-DD>/<first event id>_<last event id>.json.gz`` in the attachments bucket:
a batch delivered again writes the same keys again (no duplicate), a part of it given again
one of its own (its lines may then be in two objects), and Athena reads the ``dt``
partitions (docs/architecture/data.md has the table definition). A content's data is stored
decompressed, so its JSON can be queried.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from vdq.core.resources import ARCHIVE_PREFIX, TABLE_TTL_ATTRIBUTE
from vdq.store import content_id_of
from vdq.store.history import entry_data, more_entries
from vdq.store.models import ORIGIN_PREFIX

TTL_PRINCIPAL = "dynamodb.amazonaws.com"
KINDS = {"STATE": "item", "CONTENT": "content", "REFS": "content_refs", "FILE": "attachment",
         "MAP": "provider_map"}  # fmt: skip


def is_ttl_delete(record: dict[str, Any]) -> bool:
    identity = record.get("userIdentity") or {}
    return (record.get("eventName") == "REMOVE" and identity.get("type") == "Service"
            and identity.get("principalId") == TTL_PRINCIPAL)  # fmt: skip


# A request with an origin keeps its content and REFS records in its origin's partitions
# (vdq.store.models.content_key, refs_key), under these sort keys' prefixes.
ORIGIN_KINDS = {"C#": "content", "R#": "content_refs"}


# The partitions of an item's records: its own (state, history, event marks), its content's
# (its own, or its origin's), its attachments' and its provider IDs'. TTL deletes other
# records too (the stream's postings and checkpoints, hourly counters, quota windows, pacing,
# Idempotency-Key answers, scheduled buckets, parked entries, suppression event marks): those
# are derived from an item's records or are bookkeeping, and are not archived.
ITEM_PARTITIONS = ("QI#", "CT#", ORIGIN_PREFIX, "AT#", "PID#")


def _kind(pk: str, sk: str) -> str | None:
    """The kind of an item's record; None for a record of the table's other kinds."""
    if not pk.startswith(ITEM_PARTITIONS):
        return None
    if sk.startswith("H#"):
        return "history"
    if sk.startswith("EV#"):
        return "event_mark"
    if pk.startswith(ORIGIN_PREFIX):
        return ORIGIN_KINDS.get(sk[:2], "other")
    return KINDS.get(sk, "other")


def archived(record: dict[str, Any]) -> bool:
    """A TTL deletion of an item's record: the archive keeps it."""
    old = (record.get("dynamodb") or {}).get("OldImage") or {}
    pk, sk = ((old.get(name) or {}).get("S", "") for name in ("pk", "sk"))
    return is_ttl_delete(record) and _kind(pk, sk) is not None


def _id(pk: str, sk: str, kind: str) -> str:
    """The record's id: an origin's content or REFS record says its content's."""
    if pk.startswith(ORIGIN_PREFIX) and kind in ORIGIN_KINDS.values():
        return content_id_of(pk, sk)
    return pk.split("#", 1)[-1]


def _plain(value: Any) -> Any:
    """JSON-able: numbers as int or float, bytes as base64, sets as sorted lists."""
    from decimal import Decimal

    from boto3.dynamodb.types import Binary

    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Binary | bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, set):
        return sorted(_plain(v) for v in value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def line_of(record: dict[str, Any]) -> dict[str, Any]:
    """One archived record: its keys, kind, expiration, deletion time and attributes."""
    from boto3.dynamodb.types import TypeDeserializer

    from vdq.store.contents import decode_content

    change = record.get("dynamodb") or {}
    deserialize = TypeDeserializer().deserialize
    old = {k: deserialize(v) for k, v in (change.get("OldImage") or {}).items()}
    pk, sk = str(old.pop("pk", "")), str(old.pop("sk", ""))
    expiration = old.pop(TABLE_TTL_ATTRIBUTE, None)
    kind = _kind(pk, sk) or "other"
    if kind == "content" and old.get("data") is not None:
        old["data"] = decode_content(bytes(old["data"]))
    deleted = float(change.get("ApproximateCreationDateTime") or 0)
    return {
        "pk": pk,
        "sk": sk,
        "kind": kind,
        "id": _id(pk, sk, kind),
        "expiration": _plain(expiration),
        "deleted_at": datetime.fromtimestamp(deleted, UTC).isoformat(),
        "attributes": json.dumps(_plain(old), separators=(",", ":"), sort_keys=True),
    }


def lines_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A deleted record's archive lines: its own, then one ``history`` line per further entry
    it held (a state item's ``recent``; a history record's ``more``, the entries of its write
    before its own), so that an item's history is its ``history`` lines, one per entry,
    whichever place an entry lived in. Entries not as VDQ writes them stay on the record's
    line as they are."""
    line = line_of(record)
    attributes = json.loads(line["attributes"])
    name = {"item": "recent", "history": "more"}.get(line["kind"])
    if name is None or not attributes.get(name):
        return [line]
    try:
        held = attributes[name]
        base = attributes.get("queued_at")  # a v2 entry's time counts from it
        entries = (more_entries(held) if name == "more"
                   else [entry_data(text, base) for text in held])  # fmt: skip
    except (ValueError, TypeError):
        return [line]
    if not entries:
        return [line]
    del attributes[name]
    line["attributes"] = json.dumps(attributes, separators=(",", ":"), sort_keys=True)
    out = [line]
    for entry in entries:
        sk = entry.pop("sk")
        out.append({**line, "sk": sk, "kind": "history",
                    "attributes": json.dumps(entry, separators=(",", ":"), sort_keys=True)})
    return out


def objects(records: Iterable[dict[str, Any]]) -> dict[str, bytes]:
    """S3 key -> gzip JSON lines, one object per day of deletion, of the TTL deletions of
    items' records in a batch of stream records (other records are left out)."""
    by_day: dict[str, list[dict[str, Any]]] = {}
    ends: dict[str, list[str]] = {}  # the day's first and last record
    for record in records:
        if not archived(record):
            continue
        lines = lines_of(record)
        line = lines[0]
        day = line["deleted_at"][:10]
        by_day.setdefault(day, []).extend(lines)
        name = str(record.get("eventID") or line["pk"] + line["sk"])
        ends.setdefault(day, [name, name])[1] = name
    out = {}
    for day, lines in by_day.items():
        body = "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines).encode()
        # Named by its first and last record: the same batch again writes the same object, and
        # a part of it given again (a bisected retry) one of its own, never one over the whole.
        first, last = ends[day]
        name = first if first == last else f"{first}_{last}"
        key = f"{ARCHIVE_PREFIX}dt={day}/{name}.json.gz"
        out[key] = gzip.compress(body, mtime=0)
    return out


def archive(records: Iterable[dict[str, Any]], runtime: Any) -> int:
    """Write the TTL deletions of a batch to S3 when ``VDQ_ARCHIVE=s3``; returns the lines
    written (a line a record, and one per history entry a state item held). A failure raises:
    Lambda delivers the batch again (the keys are the same)."""
    if runtime.settings.archive != "s3":
        return 0
    written = 0
    s3 = runtime.client("s3")
    for key, body in objects(records).items():
        s3.put_object(Bucket=runtime.settings.attachments_bucket, Key=key, Body=body,
                      ContentType="application/gzip")  # fmt: skip
        written += gzip.decompress(body).count(b"\n")
    return written
