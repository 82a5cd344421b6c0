"""How the state item keeps its history entries (vdq.store.history): a coded JSON array (v2:
its time counted from the item's queueing, six letters for its names and states) since the
compact state record, an array of the values (v1) for an entry the codes cannot say and from
2026-12-04 on, an object with the field names (v0) before. All read back the same, through
the store, the detail view's history and the archive."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.operator import email, move
from tests.unit.test_retention import _removed
from vdq.core.clock import iso
from vdq.schedules import archive
from vdq.store import item_pk
from vdq.store.history import CODES, ENTRY_FIELDS, entry_data, recent_json


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


# ---- v2: coded entries, their time counted from the item's queueing -------------------------

QUEUED_AT = "2026-12-02T13:45:10.000000Z"


def _coded_or_not(field: str):
    """Values of a coded field: every one the codes know, and a few they do not."""
    unknown = {"actor": ["ops@example.org", "op-1"], "name": ["Subscription2", "weird name"],
               "source": [], "kind": [], "from_state": [None], "to_state": [None]}[field]
    return st.sampled_from([*CODES[field], *unknown])


ENTRIES = st.builds(
    lambda at, rest, actor, source, kind, name, from_state, to_state, attempt, text: _record(
        f"H#{iso(at)}#{rest}",
        {"actor": actor, "source": source, "kind": kind, "name": name, "from_state": from_state,
         "to_state": to_state, "attempt": attempt, "text": text}),
    st.datetimes(min_value=datetime(2026, 11, 1), max_value=datetime(2027, 12, 1),
                 timezones=st.just(UTC)),
    st.one_of(st.sampled_from(["send1", "send12", "ab12cd"]),
              st.text("abcdef0123456789", min_size=6, max_size=6)),
    _coded_or_not("actor"), _coded_or_not("source"), _coded_or_not("kind"),
    _coded_or_not("name"), _coded_or_not("from_state"), _coded_or_not("to_state"),
    st.one_of(st.none(), st.integers(1, 10_000)),
    st.one_of(st.none(), st.text(max_size=40)),
)  # fmt: skip


@given(ENTRIES)
def test_any_entry_reads_back_whole_from_what_the_state_item_keeps(entry):
    """Coded (v2) when every field has a code, else an array of the values (v1): either way
    the entry the store reads back is the one written, key and time included."""
    texts = recent_json([entry], QUEUED_AT)
    if texts is None:  # too long for the state item: a record instead
        return
    [text] = texts
    coded = all(getattr(entry, f) is None or getattr(entry, f) in CODES[f] for f in CODES)
    assert text.startswith('["~') == coded, text
    data = entry_data(text, QUEUED_AT)
    assert data.pop("sk") == entry.sk
    assert data == {f: getattr(entry, f) for f in ENTRY_FIELDS if getattr(entry, f) is not None}


def test_a_delivered_emails_entries_take_less_than_half_the_room():
    send = _record("H#2026-12-02T13:45:11.123456Z#send1", {
        "actor": "worker", "source": "server", "kind": "transition", "name": "send",
        "from_state": "queued", "to_state": "sending", "attempt": 1})
    accepted = _record("H#2026-12-02T13:45:11.523456Z#0a1b2c", {
        "actor": "worker", "source": "server", "kind": "transition", "name": "await",
        "from_state": "sending", "to_state": "awaiting", "attempt": 1,
        "text": "accepted by SES as 0100019a2b3c4d5e-6f708192-a3b4-c5d6-e7f8-091a2b3c4d5e-000000"})
    delivered = _record("H#2026-12-02T13:45:14.000000Z#3d4e5f", {
        "actor": "ses", "source": "provider", "kind": "transition", "name": "succeed",
        "from_state": "awaiting", "to_state": "succeeded", "attempt": 1,
        "text": "SES delivered the message: 250 2.0.0 OK"})
    v1 = recent_json([send, accepted, delivered])
    v2 = recent_json([send, accepted, delivered], QUEUED_AT)
    assert json.loads(v2[0]) == ["~o2v4#send1", "wstsqs", 1]
    assert sum(map(len, v2)) * 2 < sum(map(len, v1))


def test_a_coded_entry_needs_its_items_queueing_to_read_back():
    send = _record("H#2026-12-02T13:45:11.123456Z#send1", {
        "actor": "worker", "source": "server", "kind": "transition", "name": "send",
        "from_state": "queued", "to_state": "sending", "attempt": 1})
    [text] = recent_json([send], QUEUED_AT)
    with pytest.raises(ValueError):
        entry_data(text)


@pytest.mark.parametrize("text", [
    '["~"]', '["~o2v4"]', '["~o2v4#send1"]', '["~o2v4#send1","wsts"]',
    '["~o2v4#send1","wstsqZ"]', '["~o2v4#send1","wstsqs",1,"t","x"]',
    '["~+o2v4#send1","wstsqs"]', '["~o_2v4#send1","wstsqs"]', '["~ o2v4#send1","wstsqs"]',
    '["~#send1","wstsqs"]', '["~o2v4#send1","-stsqs"]', '["~o2v4#send1","wstsqs","1"]',
    '["~o2v4#send1","wstsqs",1,2]', '["~zzzzzzzzzzzzzz#a","wstsqs"]',
])  # fmt: skip
def test_a_coded_text_no_release_wrote_is_refused(text):
    with pytest.raises(ValueError):
        entry_data(text, QUEUED_AT)


def test_an_item_keeps_entries_of_every_form_and_reads_them_in_order(aws, runtime):
    """An item written by releases before holds objects (v0) and arrays (v1); later writes
    append coded arrays (v2); the history reads all, in order, each once."""
    [item] = email(runtime, "ada@example.org")
    v1 = json.dumps([f"{item.queued_at}#x1", "worker", "server", "event", "paced", "sending",
                     "queued", 1, "older"], separators=(",", ":"))  # fmt: skip
    v0 = OLD_SEND.replace("2026-01-01T00:00:00.000000Z", item.queued_at)
    boto3.client("dynamodb").update_item(
        TableName=aws["table"], Key={"pk": {"S": item_pk(item.id)}, "sk": {"S": "STATE"}},
        UpdateExpression="SET recent = :r", ExpressionAttributeValues={":r": {"L": [
            {"S": v0}, {"S": v1}]}})  # fmt: skip
    runtime.clock.advance(1)
    move(runtime, item.id, "send", "error")
    stored = runtime.store.get_item(item.id)
    assert [str(t)[:3] for t in stored.recent] == ['{"s', '["2', '["~', '["~']
    history = runtime.store.history(item.id)
    assert [(h.name, h.from_state, h.to_state) for h in history] == [
        ("send", "queued", "sending"), ("paced", "sending", "queued"),
        ("send", "queued", "sending"), ("error", "sending", "errored")]
    assert [h.sk for h in history] == sorted(h.sk for h in history)


def test_the_archive_expands_entries_of_every_form_into_the_same_lines():
    """A state item's entries, whichever form each was written in, archive as one history
    line each with the same attributes (a v2 entry's time counted from the item's
    queued_at, which the item's own line carries)."""
    entry = _record("H#2026-01-01T00:00:01.000000Z#send1", {
        "actor": "worker", "source": "server", "kind": "transition", "name": "send",
        "from_state": "queued", "to_state": "sending", "attempt": 1})
    queued_at = "2026-01-01T00:00:00.000000Z"
    forms = {"v0": OLD_SEND.replace("00:00:00.000000Z", "00:00:01.000000Z"),
             "v1": recent_json([entry])[0], "v2": recent_json([entry], queued_at)[0]}
    assert forms["v2"].startswith('["~') and forms["v1"].startswith('["2')
    day1 = 1_767_225_600
    lines = {}
    for name, text in forms.items():
        record = _removed("STATE", day1 + 5, event_id=name, state="succeeded",
                          queued_at=queued_at, recent=[text])  # fmt: skip
        [body] = archive.objects([record]).values()
        found = [json.loads(x) for x in gzip.decompress(body).splitlines()]
        assert [x["kind"] for x in found] == ["item", "history"]
        lines[name] = {k: v for k, v in found[1].items()}
    assert lines["v0"] == lines["v1"] == lines["v2"]
    assert json.loads(lines["v2"]["attributes"])["at"] == "2026-01-01T00:00:01.000000Z"
