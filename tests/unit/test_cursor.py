"""Cursors are opaque, round-trip their positions, and refuse anything not made for the list."""

from __future__ import annotations

import base64
import json

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
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
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
