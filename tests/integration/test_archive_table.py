"""The archive as Athena reads it: the table docs/architecture/data.md gives, checked against
the objects the schedule function writes from the TTL deletions of realistic items (an email
with a file and its cc, an SMS with its provider ID, a resent copy, a cancelled item, an
errored one cancelled later, one whose history overflowed its state item, entries of every
stored form), and what those items leave in the table and the bucket once retention and
TTL's lag are over."""

from __future__ import annotations

import base64
import gzip
import json
import re
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import boto3
from functions.schedule import handler as schedule

from tests.support.operator import call, email, move, sms, succeed
from tests.support.results import LambdaContext
from tests.support.stream import Stream
from vdq.core import resources
from vdq.schedules import sweeps
from vdq.store import QueueItemRecord, item_pk
from vdq.store.history import entry_data
from vdq.workflow.transitions import Step, apply

DAY = 86_400
TTL = resources.TABLE_TTL_ATTRIBUTE
DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture" / "data.md"
PDF = {"filename": "a.pdf", "content_type": "application/pdf",
       "content_base64": base64.b64encode(b"%PDF-1.4 receipt").decode()}  # fmt: skip
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def documented_table() -> dict:
    """The DDL of the docs' Athena table: its columns, partition columns, location and
    properties."""
    text = DOC.read_text()
    [ddl] = re.findall(r"CREATE EXTERNAL TABLE vdq_archive \((.*?)\)\s*PARTITIONED BY \((.*?)\)"
                       r".*?LOCATION '([^']*)'\s*TBLPROPERTIES \((.*?)\);", text, re.S)
    columns, partitions, location, properties = ddl

    def pairs(part: str) -> dict[str, str]:
        return dict(tuple(c.split()) for c in (c.strip() for c in part.split(",")) if c)

    return {"columns": pairs(columns), "partitions": pairs(partitions), "location": location,
            "properties": dict(re.findall(r"'([^']+)'\s*=\s*'([^']*)'", properties))}


def fits(value, hive_type: str) -> bool:
    """``value`` (a JSON value of a line) is one the OpenX JSON SerDe reads as ``hive_type``
    (or a null)."""
    if value is None:
        return True
    if hive_type == "string":
        return isinstance(value, str)
    if hive_type == "bigint":
        return isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63
    raise AssertionError(f"a column type the test does not know: {hive_type}")


def ttl_delete(aws, now, seq: list[int]) -> list[dict]:
    """What DynamoDB's TTL does past each record's expiration (moto never does): delete it,
    and put a REMOVE record made by the service itself, with the old image, on the stream."""
    client = boto3.client("dynamodb")
    rows = client.scan(TableName=aws["table"])["Items"]
    out = []
    for row in rows:
        if TTL in row and int(row[TTL]["N"]) <= now.timestamp():
            client.delete_item(TableName=aws["table"], Key={"pk": row["pk"], "sk": row["sk"]})
            seq[0] += 1
            out.append({"eventID": f"{seq[0]:032x}", "eventName": "REMOVE",
                        "eventSource": "aws:dynamodb", "userIdentity": TTL_IDENTITY,
                        "dynamodb": {"Keys": {"pk": row["pk"], "sk": row["sk"]},
                                     "OldImage": row,
                                     "ApproximateCreationDateTime": int(now.timestamp())}})
    return out


def archived_lines(aws) -> dict[str, list[dict]]:
    s3 = boto3.client("s3")
    listed = s3.list_objects_v2(Bucket=aws["bucket"], Prefix=resources.ARCHIVE_PREFIX)
    return {o["Key"]: [json.loads(x) for x in gzip.decompress(s3.get_object(
        Bucket=aws["bucket"], Key=o["Key"])["Body"].read()).splitlines()]
        for o in listed.get("Contents", [])}  # fmt: skip


def realistic_items(runtime, clock, stream: Stream) -> list[str]:
    """Items as a team makes them in a day, the stream handed on; their ids."""
    [mail, cc] = email(runtime, attachments=[PDF])
    succeed(runtime, mail.id)
    succeed(runtime, cc.id)
    [text] = sms(runtime)
    move(runtime, text.id, "send")
    apply(text.id, Step("await", actor="vdq", provider_id="SM0123456789abcdef"), runtime)
    move(runtime, text.id, "succeed")
    answer = call("resend", params={"id": text.id})
    assert answer.status == 201, answer.body
    copy = answer.body["items"][0]["id"]
    succeed(runtime, copy)
    [cancelled] = sms(runtime, "+14155550111")
    assert call("transition", params={"id": cancelled.id, "name": "cancel"}, query={}).status == 200
    # Errored, retried by an operator (an entry the codes cannot say: an array of its values),
    # errored again, then cancelled: its history overflows the state item into records.
    [errored] = sms(runtime, "+14155550112")
    for _ in range(2):
        move(runtime, errored.id, "send", "error")
        clock.advance(60)
        assert call("transition", params={"id": errored.id, "name": "retry"},
                    query={}).status == 200  # fmt: skip
    move(runtime, errored.id, "send", "error")
    assert call("transition", params={"id": errored.id, "name": "cancel"}, query={}).status == 200
    # An entry as releases before 2026-12-04 wrote it: an object with the field names.
    stored = runtime.store.get_item(mail.id)
    first = entry_data(stored.recent[0], stored.queued_at)
    QueueItemRecord(item_pk(mail.id), "STATE").update(actions=[QueueItemRecord.recent.set(
        [json.dumps(first, separators=(",", ":")), *stored.recent[1:]])])
    stream.window()
    return [mail.id, cc.id, text.id, copy, cancelled.id, errored.id]


def test_the_documented_athena_table_reads_every_line_the_archive_writes(aws, runtime, clock):
    table = documented_table()
    columns = table["columns"]
    assert set(columns) == {"pk", "sk", "kind", "id", "expiration", "deleted_at", "attributes"}
    assert table["partitions"] == {"dt": "string"}
    props = table["properties"]
    assert (props["projection.dt.type"], props["projection.dt.format"]) == ("date", "yyyy-MM-dd")
    assert table["location"].endswith("/" + resources.ARCHIVE_PREFIX)
    assert props["storage.location.template"] == table["location"] + "dt=${dt}/"
    start = props["projection.dt.range"].split(",")[0]

    runtime.settings = replace(runtime.settings, archive="s3")
    ids = realistic_items(runtime, clock, Stream(aws["table"]))
    histories = {i: [h.sk for h in runtime.store.history(i)] for i in ids}
    assert any(r["sk"]["S"].startswith("H#") for r in boto3.client("dynamodb").scan(
        TableName=aws["table"])["Items"])  # fmt: skip  # a history record of its own
    seq = [0]
    for _ in range(40):
        clock.advance(DAY)
        sweeps.run(["purge"], runtime)
        removals = ttl_delete(aws, clock.now(), seq)
        if removals:
            for _ in range(2):  # a batch delivered twice writes the same objects again
                answer = schedule.handler({"Records": removals}, LambdaContext())
                assert answer["expiring"] == 0 and answer["published"] == 0

    objects = archived_lines(aws)
    lines = [line for body in objects.values() for line in body]
    for key, body in objects.items():
        # The object's partition is a dt the projection makes: a day, in its format, in range.
        match = re.fullmatch(re.escape(resources.ARCHIVE_PREFIX)
                             + r"dt=(\d{4}-\d{2}-\d{2})/[^/]+\.json\.gz", key)  # fmt: skip
        assert match, key
        assert start <= match[1] and all(x["deleted_at"][:10] == match[1] for x in body)
    for line in lines:
        assert set(line) == set(columns), line
        assert all(fits(line[name], type_) for name, type_ in columns.items()), line
        assert all(line[name] for name in ("pk", "sk", "kind", "id", "deleted_at")), line
        assert datetime.fromisoformat(line["deleted_at"]).utcoffset() == timedelta(0)
        assert isinstance(json.loads(line["attributes"]), dict)
    # Every item: its line, with the state and done time the docs' query reads, and its whole
    # history as history lines, one an entry, whichever form and place each was stored in.
    for item_id in ids:
        [item] = [x for x in lines if x["kind"] == "item" and x["id"] == item_id]
        attributes = json.loads(item["attributes"])
        assert attributes["state"] in ("succeeded", "cancelled") and attributes["done_at"]
        history = [x for x in lines if x["kind"] == "history" and x["id"] == item_id]
        assert sorted(x["sk"] for x in history) == sorted(histories[item_id]), item_id
        for entry in map(json.loads, (x["attributes"] for x in history)):
            assert all(isinstance(entry[f], str) for f in ("at", "actor", "source", "kind",
                                                            "name")), entry  # fmt: skip
            assert isinstance(entry.get("attempt", 0), int)
    kinds = {x["kind"] for x in lines}
    assert kinds == {"item", "history", "content", "content_refs", "attachment",
                     "provider_map"}  # fmt: skip
    # Nothing but an item's records, each once, though every batch came twice.
    assert len({(x["pk"], x["sk"]) for x in lines}) == len(lines)


def test_a_delivered_email_and_sms_leave_nothing_after_retention_and_ttl_lag(aws, runtime,
                                                                           clock):  # fmt: skip
    stream = Stream(aws["table"])
    ids = realistic_items(runtime, clock, stream)
    client = boto3.client("dynamodb")
    before = {(r["pk"]["S"], r["sk"]["S"]) for r in client.scan(TableName=aws["table"])["Items"]}
    assert len(before) > 20
    seq = [0]
    horizon = 45  # retention, the content's horizon, TTL's lag; the hourly counters: 40 days
    for _ in range(horizon):
        clock.advance(DAY)
        sweeps.run(["purge"], runtime)
        ttl_delete(aws, clock.now(), seq)
        stream.window()
    left = {(r["pk"]["S"], r["sk"]["S"]) for r in client.scan(TableName=aws["table"])["Items"]}
    # The table's one marker of the release that says ``ap`` (written once, never per item).
    assert left == {("CFG#apart", "CFG")}
    s3 = boto3.client("s3")
    assert s3.list_objects_v2(Bucket=aws["bucket"]).get("KeyCount", 0) == 0
    for item_id in ids:
        assert call("get_queue_item", params={"id": item_id}).status == 404
