"""How the state item keeps its history entries (vdq.store.history): a compact JSON array
since 2026-12-04, an object with the field names before. Both read back the same, through
the store, the detail view's history and the archive."""

from __future__ import annotations

import gzip
import json

import boto3
import pytest

from tests.support.operator import email, move
from tests.unit.test_retention import _removed
from vdq.schedules import archive
from vdq.store import item_pk
from vdq.store.history import ENTRY_FIELDS, entry_data, recent_json


def _record(sk: str, values: dict):
    from vdq.store import HistoryRecord

    return HistoryRecord(item_pk("01ITEM"), sk, at=sk.split("#")[1], **values)


def fields_of(record) -> dict:
    return {f: getattr(record, f) for f in ("sk", *ENTRY_FIELDS)}


def test_an_entry_is_an_array_without_names_and_reads_back_whole():
    full = _record("H#2026-01-01T00:00:00.000001Z#ab12", {
        "actor": "ops@example.org", "source": "operator", "kind": "action", "name": "retry",
        "from_state": None, "to_state": "queued", "attempt": 2, "text": 'Ünïcödé "quoted" | x'})
    [text] = recent_json([full])
    assert text.startswith('["2026-01-01T00:00:00.000001Z#ab12",') and '"actor"' not in text
    data = entry_data(text)
    assert data.pop("sk") == full.sk
    assert data == {f: getattr(full, f) for f in ENTRY_FIELDS if getattr(full, f) is not None}


def test_trailing_empty_fields_are_left_out():
    bare = _record("H#2026-01-01T00:00:00.000001Z#send1",
                   {"actor": "worker", "source": "server", "kind": "transition", "name": "send"})
    [text] = recent_json([bare])
    assert json.loads(text) == ["2026-01-01T00:00:00.000001Z#send1", "worker", "server",
                                "transition", "send"]  # fmt: skip


def test_a_key_without_the_history_prefix_is_kept_as_an_object():
    odd = _record("X#2026-01-01T00:00:00.000001Z#1", {"actor": "a", "source": "server",
                                                       "kind": "event", "name": "Open"})
    [text] = recent_json([odd])
    assert json.loads(text)["sk"] == odd.sk
    assert entry_data(text)["sk"] == odd.sk


@pytest.mark.parametrize("text", [
    "[]", "[1, 2]", '["no-time"]',
    '["2026-01-01T00:00:00Z#a","w","s","k","n",null,null,1,"t","extra"]',
    '{"name": "send"}', '"just a string"', "{truncated",
])  # fmt: skip
def test_a_text_no_release_wrote_is_refused(text):
    with pytest.raises(ValueError):
        entry_data(text)


OLD_SEND = ('{"sk":"H#2026-01-01T00:00:00.000000Z#send1","actor":"worker","source":"server",'
            '"kind":"transition","name":"send","from_state":"queued","to_state":"sending",'
            '"attempt":1}')  # fmt: skip


def test_an_item_with_entries_of_the_old_form_reads_and_grows_in_the_new(aws, runtime):
    """An item written by the release before keeps its object entries; later writes append
    arrays; the history reads both, in order, each once."""
    [item] = email(runtime, "ada@example.org")
    boto3.client("dynamodb").update_item(
        TableName=aws["table"], Key={"pk": {"S": item_pk(item.id)}, "sk": {"S": "STATE"}},
        UpdateExpression="SET recent = :r", ExpressionAttributeValues={":r": {"L": [
            {"S": OLD_SEND}]}})  # fmt: skip
    runtime.clock.advance(1)
    move(runtime, item.id, "send", "error")
    stored = runtime.store.get_item(item.id)
    assert [str(t)[0] for t in stored.recent] == ["{", "[", "["]
    history = runtime.store.history(item.id)
    first = history[0]
    assert (first.name, first.from_state, first.to_state) == ("send", "queued", "sending")
    assert history[0].at == "2026-01-01T00:00:00.000000Z" and len(history) == 3
    assert [h.sk for h in history] == sorted(h.sk for h in history)


def test_the_archive_writes_the_same_history_line_for_either_form():
    new = _record("H#2026-01-01T00:00:00.000000Z#send1", {
        "actor": "worker", "source": "server", "kind": "transition", "name": "send",
        "from_state": "queued", "to_state": "sending", "attempt": 1})
    [new_text] = recent_json([new])
    day1 = 1_767_225_600
    lines = {}
    for name, text in (("old", OLD_SEND), ("new", new_text)):
        record = _removed("STATE", day1 + 5, event_id=name, state="succeeded", recent=[text])
        [body] = archive.objects([record]).values()
        found = [json.loads(x) for x in gzip.decompress(body).splitlines()]
        assert [x["kind"] for x in found] == ["item", "history"]
        lines[name] = found[1]
    assert lines["old"] == lines["new"]
    assert json.loads(lines["new"]["attributes"])["at"] == "2026-01-01T00:00:00.000000Z"


def test_a_history_record_of_several_entries_archives_as_a_line_per_entry():
    """A write's entries that went to a record share it (the last one's key, the earlier ones
    in ``more``): the archive writes each as a history line of its own, as it does the state
    item's, so an item's history is its history lines whichever place held an entry."""
    from vdq.store.history import pack_history

    first = _record("H#2026-01-01T00:00:00.000001Z#aa", {
        "actor": "worker", "source": "server", "kind": "transition", "name": "send",
        "from_state": "queued", "to_state": "sending", "attempt": 1})
    last = _record("H#2026-01-01T00:00:00.000002Z#bb", {
        "actor": "worker", "source": "server", "kind": "transition", "name": "error",
        "from_state": "sending", "to_state": "errored", "attempt": 1, "text": "boom"})
    [stored] = pack_history([first, last])
    image = {k: v for k, v in stored.serialize().items()}
    from boto3.dynamodb.types import TypeDeserializer

    plain = {k: TypeDeserializer().deserialize(v) for k, v in image.items()}
    record = _removed(stored.sk, 1_767_225_600 + 5, event_id="h",
                      **{k: v for k, v in plain.items() if k not in ("pk", "sk")})
    [body] = archive.objects([record]).values()
    found = [json.loads(x) for x in gzip.decompress(body).splitlines()]
    assert [(x["kind"], x["sk"]) for x in found] == [("history", last.sk), ("history", first.sk)]
    own, earlier = (json.loads(x["attributes"]) for x in found)
    assert "more" not in own and own["text"] == "boom"
    assert earlier == {"at": "2026-01-01T00:00:00.000001Z", "actor": "worker",
                       "source": "server", "kind": "transition", "name": "send",
                       "from_state": "queued", "to_state": "sending", "attempt": 1}  # fmt: skip


def test_a_history_record_whose_entries_are_not_as_written_keeps_them_on_its_line():
    record = _removed("H#2026-01-01T00:00:00.000002Z#bb", 1_767_225_600 + 5, event_id="h",
                      actor="w", source="server", kind="transition", name="error",
                      more='[{"name": "send"}]')  # no key: not an entry VDQ writes
    [body] = archive.objects([record]).values()
    [line] = [json.loads(x) for x in gzip.decompress(body).splitlines()]
    assert json.loads(line["attributes"])["more"] == '[{"name": "send"}]'
