"""History entries kept on the state item as JSON arrays (vdq.store.history): every entry
``recent_json`` keeps reads back through ``entry_data``, an array no release wrote is refused
(and kept whole in the archive), and one malformed entry does not fail its archive batch."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.support.operator import email
from tests.unit.test_retention import _removed
from vdq.schedules import archive
from vdq.store import HistoryRecord, item_pk
from vdq.store.history import EventMark, entry_data, recent_json

DAY1 = 1_767_225_600
GOOD = ('["2026-01-01T00:00:00.000001Z#send1","worker","server","transition","send","queued",'
        '"sending",1]')  # fmt: skip


# ---- 1. what recent_json keeps on the state item, entry_data must read back ------------------


@pytest.mark.parametrize("sk", ["H#2026-01-01T00:00:00.000001Z", "X#2026-01-01T00:00:00.000001Z"])
def test_every_entry_recent_json_keeps_reads_back_through_entry_data(sk):
    """Low (history_entry always adds a third key part, so no product writer makes such a key
    today). recent_json/_compact accept any key, but entry_data refuses a key of two parts
    ("has no time", although its time is there: the reader before this change took
    ``sk.split("#")[1]`` and read it). Once such an entry is on the state item, every
    Store.history of the item raises ValueError (the detail view fails) until it expires. The
    writer and the reader must agree: recent_json should keep as a record (None) what
    entry_data would refuse, or entry_data should take the time of a two-part key."""
    entry = HistoryRecord(item_pk("01ITEM"), sk, at=sk.split("#")[1], actor="worker",
                          source="server", kind="event", name="Open")  # fmt: skip
    texts = recent_json([entry])
    if texts is None:
        return  # kept as a record: fine
    [text] = texts
    data = entry_data(text)  # raises ValueError on 284ae2e
    assert (data["sk"], data["at"], data["name"]) == (sk, entry.at, "Open")


def test_a_state_item_entry_with_a_two_part_key_does_not_break_the_items_history(aws, runtime):
    """The same defect through the store: the write succeeds (the entry rides on the state
    item), and the item's history can no longer be read."""
    [item] = email(runtime, "ada@example.org")
    at = "2026-01-01T00:00:05.000000Z"
    entry = HistoryRecord(item_pk(item.id), f"H#{at}", at=at, actor="ses", source="provider",
                          kind="event", name="Open")  # fmt: skip
    runtime.store.append_history([entry], mark=EventMark(item.id, "d1"),
                                 item=runtime.store.get_item(item.id))  # fmt: skip
    history = runtime.store.history(item.id)  # ValueError on 284ae2e
    assert [h.at for h in history if h.name == "Open"] == [at]


# ---- 2. entry_data refuses arrays no release wrote ----------------------------------------------


NOT_WRITTEN = [
    '["#"]',  # sk "H##", "at" empty
    '["2026-01-01T00:00:00.000002Z#ab12"]',  # no actor, source, kind, name
    '["2026-01-01T00:00:00.000002Z#ab12",{"a":1},"server","event","Open"]',  # actor an object
]


@pytest.mark.parametrize("text", NOT_WRITTEN)
def test_entry_data_refuses_an_array_no_release_wrote(text):
    """Low (only a hand edit or a corrupted value makes one). entry_data's contract is
    "Raises ValueError for a text no VDQ release wrote", but for the array form it only checks
    that the first value is a string and that there are at most nine: an empty time, missing
    required fields (actor, source, kind, name: every VDQ entry has them) and values of the
    wrong type pass. Store.history then returns a HistoryRecord with actor/name None (the API's
    HistoryEntry declares them strings), and the archive writes a junk history line (see the
    next test). Suggested: check the key part is "<non-empty time>#<rest>", the four required
    fields are strings, from_state/to_state/text are strings or null, attempt an int (not a
    bool) or null; the same checks for the object form."""
    with pytest.raises(ValueError):
        entry_data(text)


@pytest.mark.parametrize("text", NOT_WRITTEN)
def test_the_archive_keeps_an_array_no_release_wrote_on_the_items_line(text):
    """lines_of's rule: entries "not as VDQ writes them" are kept on the item's line as they
    are. Before 284ae2e any array was (``entry["sk"]`` raised TypeError); now these become
    history lines of their own (sk "H##" with at "", a line with only "at", an actor that is
    an object) and the item's line loses its ``recent``."""
    record = _removed("STATE", DAY1 + 5, event_id="a", state="succeeded", recent=[GOOD, text])
    [body] = archive.objects([record]).values()
    lines = [json.loads(x) for x in gzip.decompress(body).splitlines()]
    assert [x["kind"] for x in lines] == ["item"], lines
    assert json.loads(lines[0]["attributes"])["recent"] == [GOOD, text]


# ---- 3. an entry json.loads cannot parse does not fail the whole batch ----------------------


def test_a_deeply_nested_recent_entry_does_not_fail_the_archive_of_the_batch():
    """Low, and not new in 284ae2e (the reader before also called json.loads unguarded), but it
    is in the except clause this change rewrote: json.loads raises RecursionError (not a
    ValueError) for deeply nested JSON, so lines_of raises, archive() raises and Lambda retries
    the stream batch until its retries run out: the other records of the batch are never
    archived (the failure test_history_on_state_duplicates' malformed-entry test is about).
    Suggested: catch RecursionError too in lines_of (or have entry_data turn it into
    ValueError)."""
    records = [
        _removed("STATE", DAY1 + 5, event_id="a", state="succeeded",
                 recent=[GOOD, "[" * 100_000 + "]" * 100_000]),
        _removed("STATE", DAY1 + 6, event_id="b", state="succeeded", recent=[GOOD]),
    ]  # fmt: skip
    [body] = archive.objects(records).values()  # RecursionError on 284ae2e
    kinds = [json.loads(x)["kind"] for x in gzip.decompress(body).splitlines()]
    assert kinds == ["item", "item", "history"]
