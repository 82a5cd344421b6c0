"""Retention arithmetic and the stream records it acts on (vdq.workflow.retention)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from vdq.core.settings import Settings
from vdq.store import expiry
from vdq.workflow import retention, stateevents
from vdq.workflow import table as workflow

DONE = datetime(2026, 3, 1, 12, 0, 0, 500_000, tzinfo=UTC)


def test_a_done_item_expires_the_retention_after_its_done_time():
    settings = replace(Settings(), retention_days=30)
    assert retention.expiration_at(DONE, settings) == int(DONE.timestamp()) + 30 * 86_400
    assert retention.expiration_at(DONE, replace(settings, retention_days=1)) == (
        int(DONE.timestamp()) + 86_400)


def test_retention_zero_keeps_everything():
    settings = replace(Settings(), retention_days=0)
    assert retention.expiration_at(DONE, settings) is None
    assert retention.mapping_expiration(DONE, settings) is None
    assert retention.content_expiration(DONE, settings) == retention.NEVER


def test_a_content_outlives_an_item_done_within_its_horizon():
    settings = replace(Settings(), retention_days=30, email_timeout_hours=72.0,
                       twilio_sms_timeout_hours=2.0)  # fmt: skip
    horizon = retention.horizon_seconds(settings)
    assert horizon == 72 * 3600 + 86_400  # the longer timeout, and a day
    born = retention.content_expiration(DONE, settings)
    exact = DONE.timestamp() + 30 * 86_400 + horizon
    assert born % 3600 == 0 and exact <= born < exact + 3600  # rounded up to the hour
    latest = DONE + timedelta(seconds=horizon)
    assert retention.expiration_at(latest, settings) <= born
    assert retention.expiration_at(latest + timedelta(hours=1, seconds=1), settings) > born
    # The longer of the two timeouts bounds the wait.
    sms = replace(settings, twilio_sms_timeout_hours=100.0)
    assert retention.horizon_seconds(sms) == 100 * 3600 + 86_400


def test_the_watch_margin_leaves_room_for_missed_daily_runs_and_spares_new_contents():
    settings = replace(Settings(), retention_days=30)
    assert retention.watch_margin(settings) == retention.WATCH_MARGIN_SECONDS == 3 * 86_400
    # The shortest retention and timeouts: a content written now is not within the margin.
    short = replace(settings, retention_days=1, email_timeout_hours=0.1,
                    twilio_sms_timeout_hours=0.1)  # fmt: skip
    margin = retention.watch_margin(short)
    assert margin < retention.WATCH_MARGIN_SECONDS
    assert retention.content_expiration(DONE, short) >= DONE.timestamp() + margin


def test_a_record_is_gone_from_its_expiration_on():
    at = int(DONE.timestamp())
    assert not expiry.gone(None, DONE)
    assert not expiry.gone(at + 1, DONE)
    assert expiry.gone(at, DONE.replace(microsecond=0))
    assert expiry.gone(at, DONE)


@pytest.mark.parametrize("days", [1, 30, 365])
def test_a_mapping_outlives_an_item_done_by_the_end_of_its_awaiting_window(days):
    settings = replace(Settings(), retention_days=days)
    written = DONE
    window = max(settings.email_timeout_hours, settings.twilio_sms_timeout_hours)
    latest_done = written + timedelta(hours=window)
    assert retention.mapping_expiration(written, settings) > retention.expiration_at(
        latest_done, settings)


@pytest.mark.parametrize(("days", "age", "expected"), [
    (30, None, 28 * 86_400),  # unset: the files go two days before their records
    (30, 3600, 3600),
    (30, 90 * 86_400, 28 * 86_400),  # never after their records
    (2, None, 0),
    (0, None, None),  # no retention, no files age: kept
    (0, 3600, 3600),
])  # fmt: skip
def test_files_are_purged_before_their_records_expire(days, age, expected):
    settings = replace(Settings(), retention_days=days, max_files_age_seconds=age)
    assert retention.files_age_seconds(settings) == expected


def _image(sk, **extra):
    image = {"pk": {"S": "QI#X"}, "sk": {"S": sk}, "id": {"S": "X"}, "content_id": {"S": "C"},
             "state": {"S": "succeeded"}}
    for name, value in extra.items():
        image[name] = {"N": str(value)}
    return image


def _record(event, new, old, **more):
    change = {"NewImage": new, "OldImage": old} if new else {"OldImage": old}
    return {"eventName": event, "dynamodb": change, "eventSource": "aws:dynamodb", **more}


TTL_DELETE = _record("REMOVE", None, _image("STATE", expiration=1),
                     userIdentity={"type": "Service", "principalId": "dynamodb.amazonaws.com"})


def test_only_a_state_record_gaining_its_expiration_is_stamped():
    gained = _record("MODIFY", _image("STATE", expiration=99), _image("STATE"))
    again = _record("MODIFY", _image("STATE", expiration=99), _image("STATE", expiration=99))
    history = _record("MODIFY", _image("H#1", expiration=99), _image("H#1"))
    found = retention.newly_expiring([gained, again, history, TTL_DELETE])
    assert [(i["id"], i["content_id"], i["expiration"]) for i in found] == [("X", "C", 99)]


def test_a_ttl_deletion_publishes_no_state_event():
    for mode in ("default", "all"):
        assert stateevents.detail_of(TTL_DELETE, mode) is None


def test_no_transition_leaves_a_done_state():
    """Retention rests on it: an expiration, once written, never has to be taken back."""
    for t in workflow.TRANSITIONS.values():
        for source in t.sources:
            if source in workflow.DONE_STATES:
                assert t.target in workflow.DONE_STATES, t.name
    assert workflow.State.ERRORED not in workflow.DONE_STATES  # errored waits for an operator


# ---- the archive (VDQ_ARCHIVE=s3) -------------------------------------------------------------


def _removed(sk, when, *, by_ttl=True, event_id="e1", **attributes):
    from boto3.dynamodb.types import TypeSerializer

    serialize = TypeSerializer().serialize
    old = {"pk": {"S": "QI#X"}, "sk": {"S": sk}, **{k: serialize(v) for k, v in
                                                     attributes.items()}}  # fmt: skip
    record = {"eventID": event_id, "eventName": "REMOVE", "eventSource": "aws:dynamodb",
              "dynamodb": {"OldImage": old, "ApproximateCreationDateTime": when}}
    if by_ttl:
        record["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    return record


def test_the_archive_keeps_ttl_deletions_as_gzip_json_lines_by_day():
    import gzip
    import json

    from vdq.schedules import archive
    from vdq.store import encode_content

    day1, day2 = 1_767_225_600, 1_767_312_000  # 2026-01-01 and 2026-01-02, 00:00 UTC
    records = [
        _removed("STATE", day1 + 5, event_id="a", state="succeeded", expiration=day1 - 60),
        _removed("CONTENT", day1 + 9, event_id="b", data=encode_content({"subject": "Hi"})),
        _removed("H#2026", day2 + 1, event_id="c", name="succeed"),
        _removed("STATE", day1 + 7, by_ttl=False),  # an application's delete: not archived
        {"eventName": "MODIFY", "dynamodb": {"NewImage": {"sk": {"S": "STATE"}}}},
    ]
    objects = archive.objects(records)
    assert sorted(objects) == ["archive/dt=2026-01-01/a_b.json.gz",
                              "archive/dt=2026-01-02/c.json.gz"]
    lines = [json.loads(x) for x in
             gzip.decompress(objects["archive/dt=2026-01-01/a_b.json.gz"]).splitlines()]
    assert [(x["kind"], x["id"], x["expiration"]) for x in lines] == [
        ("item", "X", day1 - 60), ("content", "X", None)]
    assert json.loads(lines[0]["attributes"]) == {"state": "succeeded"}
    assert json.loads(lines[1]["attributes"]) == {"data": {"subject": "Hi"}}
    assert lines[0]["deleted_at"].startswith("2026-01-01T00:00:05")
    # Delivered again, the batch makes the same objects, byte for byte.
    assert archive.objects(records) == objects


def test_a_batch_given_again_in_part_never_overwrites_the_whole_batchs_object():
    """A bisected retry gives a batch's first half again: written over the whole batch's object
    (the same first record), it left the second half's lines to the bucket's noncurrent
    versions, deleted after vdq:filesNoncurrentDays, when that half was not archived again."""
    from vdq.schedules import archive

    day = 1_767_225_600
    records = [_removed("STATE", day + n, event_id=f"e{n}", state="succeeded", expiration=day)
               for n in range(4)]  # fmt: skip
    whole, half = archive.objects(records), archive.objects(records[:2])
    assert not set(whole) & set(half)
    assert archive.objects(records[2:]).keys().isdisjoint(whole)


def test_the_archive_writes_the_history_a_state_item_held_as_history_lines():
    import gzip
    import json

    from vdq.schedules import archive

    day1 = 1_767_225_600
    recent = ['{"sk":"H#2026-01-01T00:00:00.000001Z#send1","actor":"worker","source":"server",'
              '"kind":"transition","name":"send","attempt":1}',
              '{"sk":"H#2026-01-01T00:00:02.000000Z#ab12cd","actor":"ses","source":"provider",'
              '"kind":"transition","name":"succeed","text":"SES delivered it"}']
    records = [_removed("STATE", day1 + 5, event_id="a", state="succeeded", recent=recent),
               _removed("H#2026-01-01T00:00:03.000000Z#ef34", day1 + 5, event_id="b",
                        at="2026-01-01T00:00:03.000000Z", name="Open")]
    [body] = archive.objects(records).values()
    lines = [json.loads(x) for x in gzip.decompress(body).splitlines()]
    assert [(x["kind"], x["sk"]) for x in lines] == [
        ("item", "STATE"), ("history", "H#2026-01-01T00:00:00.000001Z#send1"),
        ("history", "H#2026-01-01T00:00:02.000000Z#ab12cd"),
        ("history", "H#2026-01-01T00:00:03.000000Z#ef34")]
    assert json.loads(lines[0]["attributes"]) == {"state": "succeeded"}  # no recent left
    second = json.loads(lines[2]["attributes"])
    assert (second["at"], second["name"], second["text"]) == (
        "2026-01-01T00:00:02.000000Z", "succeed", "SES delivered it")
    assert {x["id"] for x in lines} == {"X"} and lines[1]["deleted_at"] == lines[0]["deleted_at"]


def test_the_archive_of_an_origins_content_is_a_content_line_with_its_id_and_data():
    # A request with an origin keeps its content and REFS records in one of the origin's
    # partitions (``CO#<origin key>-<shard>``, sort keys ``C#<ulid>`` and ``R#<ulid>``): TTL
    # deletes them as any content's, and the archive says what they are, whose, and the data
    # decompressed, as docs/architecture/data.md promises for every content.
    import json

    from boto3.dynamodb.types import TypeSerializer

    from vdq.schedules import archive
    from vdq.store import encode_content
    from vdq.store.models import content_key, origin_content_id, refs_key

    content_id = origin_content_id("01KBQ0000000000000000000AB", "campaign", "winter")

    def removed(keys, **attributes):
        record = _removed("X", 1_767_225_600, **attributes)
        serialize = TypeSerializer().serialize
        record["dynamodb"]["OldImage"].update(pk=serialize(keys[0]), sk=serialize(keys[1]))
        return record

    [content] = archive.lines_of(removed(content_key(content_id),
                                         data=encode_content({"subject": "Hi"})))  # fmt: skip
    [refs] = archive.lines_of(removed(refs_key(content_id), open=2))
    assert (content["kind"], content["id"]) == ("content", content_id)
    assert json.loads(content["attributes"]) == {"data": {"subject": "Hi"}}
    assert (refs["kind"], refs["id"]) == ("content_refs", content_id)


def test_the_archive_keeps_an_items_records_and_leaves_the_tables_bookkeeping_out():
    # TTL deletes more than an item's records: the stream's postings and checkpoints, hourly
    # counters, quota windows, pacing, Idempotency-Key answers, scheduled buckets, parked
    # entries and suppression event marks. docs/architecture/data.md names the kinds the
    # archive keeps (an item's: all the rest is derived from them or is bookkeeping); none of
    # those others may reach it as an undocumented "other" line or, as a suppression's event
    # mark did, as an item's event mark whose id is a receiver.
    import gzip
    import json

    from boto3.dynamodb.types import TypeSerializer

    from vdq.schedules import archive

    serialize = TypeSerializer().serialize
    day1 = 1_767_225_600

    def removed(pk, sk, **attributes):
        record = _removed(sk, day1 + 5, event_id=f"{pk}{sk}", **attributes)
        record["dynamodb"]["OldImage"]["pk"] = serialize(pk)
        return record

    bookkeeping = [
        removed("CNT#2026-01-01T00", "all#0", **{"email.queued": 2}),
        removed("PT#2026-01-01T00", "fjienj6e#00000000000000000011", e=b"\x01"),
        removed("DN#2026-01", "01T00:00#fjienj6e#00000000000000000011", e=b"\x01"),
        removed("CK#fjienj6e", "CK", seq="AAAA"),
        removed("QUOTA#producer-1", "W", s=3),
        removed("PACE#ses", "PACE", tat=5),
        removed("idempotency#vdq-enqueue", "5f1b2c", status="COMPLETED", data="{}"),
        removed("SCHED#3", "2026-01-01T00:20:00Z#01KDV#0", item_ids="01KDV"),
        removed("HELD#producer-1", "01KDVDNA00NTMCJGW7KAPTEG2D", priority="normal"),
        removed("SUPH#ada@example.org", "EV#0123456789abcdef"),
    ]
    assert archive.objects(bookkeeping) == {}
    kept = [removed("QI#A", "STATE", state="succeeded"), removed("QI#A", "H#2026#x", name="n"),
            removed("QI#A", "EV#0123456789abcdef"), removed("CT#C", "CONTENT"),
            removed("CT#C", "REFS", open_items=0), removed("AT#F", "FILE", filename="a.pdf"),
            removed("PID#SM1", "MAP", item_id="A")]
    [body] = archive.objects(bookkeeping + kept).values()
    lines = [json.loads(x) for x in gzip.decompress(body).splitlines()]
    assert [(x["kind"], x["id"]) for x in lines] == [
        ("item", "A"), ("history", "A"), ("event_mark", "A"), ("content", "C"),
        ("content_refs", "C"), ("attachment", "F"), ("provider_map", "SM1")]
