"""Review s13b of d90a402 (entry_data reads back strictly) and b398e21 (the archive expands a
history record's ``more`` into history lines of their own).

Each test here fails on b398e21 and names a defect of that change; see the review report.
"""

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


# ---- 1. a malformed ``more`` that holds no entry is dropped from the archive -----------------


@pytest.mark.parametrize("more", ["[]", "{}", '""'])
def test_a_more_that_holds_no_entry_stays_on_the_records_line(more):
    """Low (pack_history sets ``more`` only for two entries or more, so no release writes
    these). lines_of checks ``attributes.get("more")`` on the raw text ("[]" is a non-empty
    string), expands it to no entries at all, and then deletes ``more`` from the record's
    line: the value is gone from the archive, although b398e21 says data not as VDQ writes it
    stays on the record's line as it is. Fix: keep the line as it is when ``more`` parses to
    anything but a non-empty list (``if not isinstance(parsed, list) or not parsed:
    return [line]``)."""
    lines = _lines(more)
    assert [x["sk"] for x in lines] == [OWN]
    assert json.loads(lines[0]["attributes"]).get("more") == more


# ---- 2. ``more`` in the state item's array form is expanded, but unreadable by the store ------


ARRAY_MORE = '[["2026-01-01T00:00:00.000001Z#aa","worker","server","transition","send"]]'


def test_a_more_of_arrays_is_not_an_entry_as_vdq_writes_it():
    """Low. pack_history writes ``more`` as a list of objects (``_entry_json``), never of the
    state item's compact arrays, and Store.history (unpack_history's ``data.pop("sk")``)
    cannot read such a ``more`` at all. lines_of re-encodes each element and hands it to
    entry_data, which takes the array form, so the archive turns an unreadable record into two
    clean history lines: the archive and the store disagree on what an entry is (the
    defect class review s13 named for arrays no release wrote). Fix: for ``more``, take only
    dict elements (``if not all(isinstance(e, dict) for e in parsed): return [line]``)."""
    record = HistoryRecord(item_pk("01ITEM"), OWN, at=OWN.split("#")[1], actor="worker",
                           source="server", kind="transition", name="error", more=ARRAY_MORE)
    with pytest.raises((AttributeError, TypeError)):
        unpack_history([record])  # the store cannot read it
    lines = _lines(ARRAY_MORE)  # so the archive should keep it as it is
    assert [x["sk"] for x in lines] == [OWN]
    assert json.loads(lines[0]["attributes"])["more"] == ARRAY_MORE


# ---- 3. entry_data checks every field's type but "at" --------------------------------------


@pytest.mark.parametrize("at", [5, "1999-01-01T00:00:00Z"])
def test_a_more_entry_whose_at_is_not_its_keys_time_stays_on_the_records_line(at):
    """Low (hand edits only: pack_history's "at" is always the key's time). d90a402 makes
    entry_data refuse any entry not as a release writes one and checks the type of every
    field but "at", which it accepts as anything and silently replaces with the key's time.
    An entry in ``more`` carries "at"; Store.history reads it as stored (unpack_history), the
    archive line shows the key's time instead, so the detail view and the archive disagree
    and the stored value is lost from the archive. Fix: in entry_data, refuse an "at" that is
    present and differs from ``parts[1]``."""
    more = json.dumps([{"sk": "H#2026-01-01T00:00:00.000001Z#aa", "at": at, "actor": "worker",
                        "source": "server", "kind": "transition", "name": "send"}])
    lines = _lines(more)
    assert [x["sk"] for x in lines] == [OWN]
    assert json.loads(lines[0]["attributes"])["more"] == more
