"""The archive expands a history record's ``more`` into history lines of their own, and reads
its entries as strictly as the store does (``entry_data``): a ``more`` that holds no entry, or
entries in a form VDQ does not write, stays on the record's own line."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.unit.test_retention import _removed
from vdq.schedules import archive
from vdq.store import HistoryRecord, item_pk
from vdq.store.history import unpack_history

DAY1 = 1_767_225_600
OWN = "H#2026-01-01T00:00:00.000002Z#bb"


def _lines(more: str) -> list[dict]:
    record = _removed(OWN, DAY1 + 5, event_id="h", actor="worker", source="server",
                      kind="transition", name="error", more=more)  # fmt: skip
    [body] = archive.objects([record]).values()
    return [json.loads(x) for x in gzip.decompress(body).splitlines()]


# ---- a malformed ``more`` that holds no entry stays on the record's line -------------------


@pytest.mark.parametrize("more", ["[]", "{}", '""'])
def test_a_more_that_holds_no_entry_stays_on_the_records_line(more):
    """pack_history sets ``more`` only for two entries or more, so no release writes these
    (hand edits only). Data not as VDQ writes it stays on the record's line as it is: a
    ``more`` that parses to anything but a non-empty list is not expanded to no entries and
    then deleted from the line (as checking the raw text, "[]" being a non-empty string, did)."""
    lines = _lines(more)
    assert [x["sk"] for x in lines] == [OWN]
    assert json.loads(lines[0]["attributes"]).get("more") == more


# ---- ``more`` in the state item's array form: unreadable by the store, kept whole -------------


ARRAY_MORE = '[["2026-01-01T00:00:00.000001Z#aa","worker","server","transition","send"]]'


def test_a_more_of_arrays_is_not_an_entry_as_vdq_writes_it():
    """pack_history writes ``more`` as a list of objects (``_entry_json``), never of the state
    item's compact arrays, and Store.history (unpack_history's ``data.pop("sk")``) cannot read
    such a ``more`` at all. The archive must not turn that unreadable record into clean history
    lines (as re-encoding each element for entry_data, which takes the array form, did): the
    archive and the store agree on what an entry is (as for arrays no release wrote,
    test_history_entries_read_back). A ``more`` of anything but objects stays on its line."""
    record = HistoryRecord(item_pk("01ITEM"), OWN, at=OWN.split("#")[1], actor="worker",
                           source="server", kind="transition", name="error", more=ARRAY_MORE)
    with pytest.raises((AttributeError, TypeError)):
        unpack_history([record])  # the store cannot read it
    lines = _lines(ARRAY_MORE)  # so the archive should keep it as it is
    assert [x["sk"] for x in lines] == [OWN]
    assert json.loads(lines[0]["attributes"])["more"] == ARRAY_MORE


# ---- entry_data checks every field, "at" too ----------------------------------------------


@pytest.mark.parametrize("at", [5, "1999-01-01T00:00:00Z"])
def test_a_more_entry_whose_at_is_not_its_keys_time_stays_on_the_records_line(at):
    """Hand edits only: pack_history's "at" is always the key's time. entry_data refuses any
    entry not as a release writes one, "at" included: an entry in ``more`` carries "at", and
    Store.history reads it as stored (unpack_history), so an archive line showing the key's
    time instead would disagree with the detail view and lose the stored value. An "at" that
    differs from the key's time keeps the record's line as it is."""
    more = json.dumps([{"sk": "H#2026-01-01T00:00:00.000001Z#aa", "at": at, "actor": "worker",
                        "source": "server", "kind": "transition", "name": "send"}])
    lines = _lines(more)
    assert [x["sk"] for x in lines] == [OWN]
    assert json.loads(lines[0]["attributes"])["more"] == more
