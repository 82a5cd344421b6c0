"""Cursors are opaque, round-trip their positions, and refuse anything not made for the list."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import zlib

import pytest

from vdq.core.errors import BadRequest
from vdq.operations import cursor

KEY = cursor.ListKey("active", ("email", None), 4)
POSITIONS = ["2026-01-01T00:00:00.000000Z#01A", None, "2026-01-02T00:00:00.000000Z#01B", None]


def test_a_cursor_round_trips_its_positions():
    text = cursor.encode(POSITIONS, KEY, "vdq")
    assert cursor.decode(text, KEY, "vdq") == POSITIONS
    assert "2026" not in text  # opaque: not the positions in clear text


def _tamper(text: str) -> str:
    payload, signature = text.split(".")
    raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    data = json.loads(raw if raw[:1] == b"{" else zlib.decompress(raw))  # deflated when shorter
    data["p"][1] = "2020-01-01T00:00:00.000000Z#X"
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    return f"{forged}.{signature}"


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: _tamper(cursor.encode(POSITIONS, KEY, "vdq")), id="edited positions"),
        pytest.param(lambda: cursor.encode(POSITIONS, KEY, "another-table"), id="other deployment"),
        pytest.param(lambda: cursor.encode(POSITIONS, cursor.ListKey("sent", KEY.filters, 4),
                                           "vdq"), id="other list"),
        pytest.param(lambda: cursor.encode(POSITIONS, cursor.ListKey("active", ("sms", None), 4),
                                           "vdq"), id="other filters"),
        pytest.param(lambda: cursor.encode(POSITIONS[:2], cursor.ListKey("active", KEY.filters,
                                                                         2), "vdq"),
                     id="other shard count"),
        pytest.param(lambda: "not-a-cursor", id="garbage"),
        pytest.param(lambda: "a.b.c", id="three parts"),
        pytest.param(lambda: "%%%.&&&", id="not base64"),
        pytest.param(lambda: "", id="empty"),
    ],
)  # fmt: skip
def test_a_cursor_not_made_for_this_list_is_a_bad_request(make):
    with pytest.raises(BadRequest) as err:
        cursor.decode(make(), KEY, "vdq")
    assert err.value.status == 400 and err.value.details["field"] == "cursor"


def test_a_cursor_of_the_longest_filters_fits_and_one_naming_them_in_full_still_reads():
    long_key = cursor.ListKey("search", ("origin", "é" * 256 + "\x1f" + "\U0001f4e6" * 256), 1)
    text = cursor.encode(POSITIONS[:1], long_key, "vdq")
    assert len(text) <= 2048 and cursor.decode(text, long_key, "vdq") == POSITIONS[:1]
    # A cursor a release before wrote (its filters in full) reads on after an upgrade.
    payload = json.dumps({"v": 1, "i": "active", "f": list(KEY.filters), "n": 4, "p": POSITIONS},
                         separators=(",", ":")).encode()  # fmt: skip
    signature = hmac.new(cursor._key("vdq"), payload, hashlib.sha256).digest()[:16]
    old = f"{cursor._b64(payload)}.{cursor._b64(signature)}"
    assert cursor.decode(old, KEY, "vdq") == POSITIONS


@pytest.mark.parametrize("shards", [16, 32])
def test_a_cursor_with_a_position_in_every_shard_fits_its_2048_characters(shards):
    # VDQ_INDEX_SHARDS is 32 from about 2,400 emails a second (vdq:peakSendRate): a list
    # whose every shard had a position wrote a cursor of 2,538 characters, and its next page
    # was a 422 naming cursor.
    import random

    rnd = random.Random(shards)
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    positions = [f"2026-12-03T08:{rnd.randrange(60):02d}:{rnd.randrange(60):02d}."
                 f"{rnd.randrange(10**6):06d}Z#01JD3Q{''.join(rnd.choices(alphabet, k=20))}"
                 for _ in range(shards)]  # fmt: skip
    key = cursor.ListKey("active", ("email", "errored", "bulk", "False"), shards)
    text = cursor.encode(positions, key, "vdq")
    assert len(text) <= 2048 and re.fullmatch(cursor.PATTERN, text)
    assert cursor.decode(text, key, "vdq") == positions
