"""Opaque list cursors: the read position in each shard of a sparse index, signed.

A cursor names the list it belongs to (index, filters, shard count), so a cursor of another
list, another deployment or one edited by hand is refused with a 400 instead of reading from a
made-up position. It names the filters by their digest: a search's values (an origin of two
256-character parts) would not fit the 2,048 characters a cursor may take, and deflates the
positions (a list at 32 index shards holds 32). The signature is an integrity check, not a
secret: a caller who may list may start anywhere, so the key is derived from the table name.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from vdq.core.errors import BadRequest

VERSION = 1
PATTERN = r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$"  # what ``encode`` writes: payload.signature
MAX_POSITION = 200
_SIG_BYTES = 16


@dataclass(frozen=True)
class ListKey:
    """What a cursor is valid for."""

    index: str
    filters: tuple[str | None, ...]
    shards: int


def _key(table_name: str) -> bytes:
    return hashlib.sha256(b"vdq-cursor\0" + table_name.encode()).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _digest(filters: tuple[str | None, ...]) -> str:
    return _b64(hashlib.sha256(json.dumps(list(filters)).encode()).digest()[:_SIG_BYTES])


def encode(positions: Sequence[str | None], key: ListKey, table_name: str) -> str:
    payload = json.dumps(
        {"v": VERSION, "i": key.index, "f": _digest(key.filters), "n": key.shards,
         "p": list(positions)},
        separators=(",", ":"),
    ).encode()  # fmt: skip
    payload = min(payload, zlib.compress(payload, 9), key=len)
    signature = hmac.new(_key(table_name), payload, hashlib.sha256).digest()[:_SIG_BYTES]
    return f"{_b64(payload)}.{_b64(signature)}"


def decode(cursor: str, key: ListKey, table_name: str) -> list[str | None]:
    """The per-shard positions of ``cursor``; BadRequest unless it is a cursor of this list."""
    invalid = BadRequest("the cursor is not valid for this list; start again without it",
                         details={"field": "cursor"})  # fmt: skip
    try:
        encoded_payload, encoded_signature = cursor.split(".")
        payload, signature = _unb64(encoded_payload), _unb64(encoded_signature)
    except (ValueError, UnicodeError):
        raise invalid from None
    expected = hmac.new(_key(table_name), payload, hashlib.sha256).digest()[:_SIG_BYTES]
    if not hmac.compare_digest(signature, expected):
        raise invalid
    try:
        # Deflated (a zlib stream never starts with "{"), or JSON as a short one is written.
        data = json.loads(payload if payload[:1] == b"{" else zlib.decompress(payload))
    except (ValueError, zlib.error):
        raise invalid from None
    if (
        not isinstance(data, dict)
        or data.get("v") != VERSION
        or data.get("i") != key.index
        # A cursor of the release before names its filters in full.
        or data.get("f") not in (_digest(key.filters), list(key.filters))
        or data.get("n") != key.shards
    ):
        raise invalid
    positions = data.get("p")
    if not isinstance(positions, list) or len(positions) != key.shards:
        raise invalid
    for position in positions:
        if position is not None and (
            not isinstance(position, str) or not 0 < len(position) <= MAX_POSITION
        ):
            raise invalid
    return positions
