"""Retention on moto: done items, their records and content expire through the table's TTL
attribute; reads hide what is past it; the stream stamps what the done write did not."""

from __future__ import annotations

import base64
import json

import boto3
import pytest
from functions.schedule import handler as schedule

from tests.support.aws import stream_records
from tests.support.operator import call, email, move, sms, succeed
from tests.support.results import LambdaContext
from vdq.core import resources
from vdq.store import (
    CONTENT_SK,
    FILE_SK,
    REFS_SK,
    ContentRecord,
    ContentRefsRecord,
    attachment_pk,
    content_key,
    item_pk,
    refs_key,
)
from vdq.workflow import retention
from vdq.workflow.transitions import Step, apply

DAY = 86_400
PDF = {"filename": "a.pdf", "content_type": "application/pdf",
       "content_base64": base64.b64encode(b"%PDF").decode()}  # fmt: skip
TTL = resources.TABLE_TTL_ATTRIBUTE


def records_of(aws, pk):
    """Every record under ``pk`` as stored: {sk: expiration or None}."""
    client = boto3.client("dynamodb")
    rows = client.query(TableName=aws["table"], KeyConditionExpression="pk = :p",
                        ExpressionAttributeValues={":p": {"S": pk}})["Items"]  # fmt: skip
    return {r["sk"]["S"]: int(r[TTL]["N"]) if TTL in r else None for r in rows}


def content_records(aws, content_id):
    """The content's own records as stored, by kind: {CONTENT_SK | REFS_SK: expiration}. A
    content of a request with an origin shares its origin's partition with the origin's other
    contents (vdq.store.search)."""
    pk, content_sk = content_key(content_id)
    names = {content_sk: CONTENT_SK, refs_key(content_id)[1]: REFS_SK}
    return {names[sk]: v for sk, v in records_of(aws, pk).items() if sk in names}


def run_stream(aws):
    """Hand every STATE MODIFY of the table's stream so far to the schedule function, as the
    deployed event source mapping (its filter) does. In-process moto serves no stream API:
    its stream backend is read directly."""
    records = stream_records(aws["table"])
    wanted = [dict(r, eventSource="aws:dynamodb") for r in records
              if r["eventName"] == "MODIFY" and r["dynamodb"]["NewImage"]["sk"]["S"] == "STATE"]
    return schedule.handler({"Records": wanted}, LambdaContext()) if wanted else {}


def ttl_deleter(aws, now):
    """What DynamoDB's TTL process does (moto never does it): delete every record whose
    expiration has passed. Returns how many."""
    client = boto3.client("dynamodb")
    rows = client.scan(TableName=aws["table"])["Items"]
    expired = [r for r in rows if TTL in r and int(r[TTL]["N"]) <= now.timestamp()]
    for r in expired:
        client.delete_item(TableName=aws["table"], Key={"pk": r["pk"], "sk": r["sk"]})
    return len(expired)


def expected(runtime, item_id):
    item = runtime.store.get_item(item_id)
    return int(item.expiration)


def test_the_done_transition_writes_the_expiration_on_the_item_and_its_history(aws, runtime,
                                                                               clock):
    [item] = email(runtime, "ada@example.org")
    move(runtime, item.id, "send")
    assert records_of(aws, item_pk(item.id))["STATE"] is None  # not done: no expiration
    move(runtime, item.id, "succeed")
    stored = runtime.store.get_item(item.id)
    done = int(stored.expiration)
    assert done == retention.expiration_at(clock.now(), runtime.settings)
    assert done == int(retention.expiration_at(_parsed(stored.done_at), runtime.settings))
    # Its history rides on the state item, so it expires with it: no record of its own.
    assert records_of(aws, item_pk(item.id)) == {"STATE": done}
    assert [h.name for h in runtime.store.history(item.id)] == ["send", "succeed"]


def test_the_done_transition_stamps_its_history_record_when_the_state_item_is_full(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    import vdq.store.history

    monkeypatch.setattr(vdq.store.history, "RECENT_LIMIT", 0)  # every entry is a record
    [item] = email(runtime, "ada@example.org")
    move(runtime, item.id, "send", "succeed")
    done = expected(runtime, item.id)
    history = records_of(aws, item_pk(item.id))
    [succeed_sk] = [sk for sk in history if sk.startswith("H#")
                    and runtime.store.history(item.id)[-1].sk == sk]
    assert history[succeed_sk] == done  # written in the same transaction
    # The history of the send, written before the item was done, waits for the stream.
    assert None in history.values()
    assert run_stream(aws)["expiring"] == 1
    assert set(records_of(aws, item_pk(item.id)).values()) == {done}


def _parsed(text):
    from vdq.core.clock import parse_iso

    return parse_iso(text)


def test_the_stream_stamps_older_records_and_the_content_of_a_single_item(aws, runtime):
    [item] = email(runtime, "ada@example.org")
    succeed(runtime, item.id)
    done = expected(runtime, item.id)
    assert run_stream(aws)["expiring"] == 1
    assert set(records_of(aws, item_pk(item.id)).values()) == {done}
    assert content_records(aws, item.content_id) == {CONTENT_SK: done}
    run_stream(aws)  # delivered again (at least once): nothing changes
    assert set(records_of(aws, item_pk(item.id)).values()) == {done}


def test_a_shared_content_expires_only_when_its_last_item_is_done(aws, runtime, clock):
    [a, b] = email(runtime, "ada@example.org", "bob@example.org")
    succeed(runtime, a.id)
    run_stream(aws)
    assert content_records(aws, a.content_id)[CONTENT_SK] is None  # b is open
    move(runtime, b.id, "send", "error")  # errored is not done: b keeps it alive
    run_stream(aws)
    assert content_records(aws, a.content_id)[CONTENT_SK] is None
    clock.advance(3 * DAY)
    call("transition", params={"id": b.id, "name": "cancel"}, query={})
    run_stream(aws)
    last = expected(runtime, b.id)
    assert last > expected(runtime, a.id)
    content = content_records(aws, a.content_id)
    assert content == {CONTENT_SK: last, REFS_SK: last + retention.REFS_GRACE_SECONDS}


def test_a_content_with_files_expires_with_its_attachment_records(aws, runtime):
    [a, cc] = email(runtime, attachments=[PDF])
    for item in (a, cc):
        succeed(runtime, item.id)
    run_stream(aws)
    last = max(expected(runtime, a.id), expected(runtime, cc.id))
    [attachment_id] = runtime.store.get_content(a.content_id)["attachments"]
    assert records_of(aws, attachment_pk(attachment_id)) == {FILE_SK: last}
    assert content_records(aws, a.content_id)[CONTENT_SK] == last


def test_an_errored_item_has_no_expiration_and_a_retry_keeps_it_without(aws, runtime):
    [item] = sms(runtime)
    move(runtime, item.id, "send", "error")
    assert runtime.store.get_item(item.id).expiration is None
    answer = call("transition", params={"id": item.id, "name": "retry"}, query={})
    assert answer.status == 200, answer.body
    retried = runtime.store.get_item(item.id)
    assert (retried.state, retried.expiration) == ("queued", None)
    run_stream(aws)
    assert set(records_of(aws, item_pk(item.id)).values()) == {None}
    assert content_records(aws, item.content_id)[CONTENT_SK] is None
    move(runtime, item.id, "send", "succeed")
    assert runtime.store.get_item(item.id).expiration is not None


@pytest.mark.parametrize("on_state", [True, False], ids=["on-the-state-item", "records"])
def test_history_written_while_done_carries_the_expiration(aws, runtime, monkeypatch,
                                                           on_state):  # fmt: skip
    import vdq.store.history

    if not on_state:
        monkeypatch.setattr(vdq.store.history, "RECENT_LIMIT", 0)  # every entry is a record
    [item] = sms(runtime)
    move(runtime, item.id, "send", "error")
    call("transition", params={"id": item.id, "name": "cancel"}, query={})
    done = expected(runtime, item.id)
    before = set(records_of(aws, item_pk(item.id)))
    # An ignored transition on the cancelled item, and a late one, each write history.
    apply(item.id, Step("succeed", actor="vdq", source="provider", event_id="ev-1"), runtime)
    apply(item.id, Step("timeout", actor="vdq", late="record", event_id="ev-2"), runtime)
    new = {sk: e for sk, e in records_of(aws, item_pk(item.id)).items() if sk not in before}
    if on_state:  # the state item, which has the expiration, holds them
        assert new == {} and records_of(aws, item_pk(item.id))["STATE"] == done
        assert [h.name for h in runtime.store.history(item.id)][-2:] == ["succeed", "timeout"]
    else:
        assert len(new) >= 2 and set(new.values()) == {done}


def test_lists_and_reads_hide_an_expired_item_before_it_is_deleted(aws, runtime, clock):
    [item] = email(runtime, "ada@example.org")
    succeed(runtime, item.id)
    run_stream(aws)
    assert call("get_sent_item", params={"id": item.id}).status == 200
    listed = call("list_sent_items", query={"limit": "10"}).body["items"]
    assert [i["id"] for i in listed] == [item.id]
    clock.advance(runtime.settings.retention_days * DAY + 1)
    assert call("get_sent_item", params={"id": item.id}).status == 404
    assert call("get_queue_item", params={"id": item.id}).status == 404
    assert call("list_sent_items", query={"limit": "10"}).body["items"] == []
    assert runtime.store.history(item.id) == []
    assert runtime.store.get_content(item.content_id) is None
    assert call("resend", params={"id": item.id}).status == 404
    # Still stored (TTL deletes within about two days): the deleter takes it all.
    stored = len(records_of(aws, item_pk(item.id))) + 1  # and its content
    assert ttl_deleter(aws, clock.now()) == stored
    assert records_of(aws, item_pk(item.id)) == {}


def test_an_item_whose_content_expired_first_is_not_shown_half(aws, runtime, clock):
    [item] = email(runtime, "ada@example.org")
    succeed(runtime, item.id)
    # A content's expiration is never before its items'; were it (a stamp racing), the item
    # would show without its content: it is shown as gone instead.
    ContentRecord(*content_key(item.content_id)).update(
        actions=[ContentRecord.expiration.set(int(clock.now().timestamp()))])
    assert call("get_queue_item", params={"id": item.id}).status == 404


def test_a_resend_takes_the_content_expiration_off_and_the_copy_sets_it_again(aws, runtime,
                                                                               clock):
    [item] = email(runtime, "ada@example.org")
    succeed(runtime, item.id)
    run_stream(aws)
    first = expected(runtime, item.id)
    assert content_records(aws, item.content_id)[CONTENT_SK] == first
    clock.advance(10 * DAY)
    answer = call("resend", params={"id": item.id})
    assert answer.status == 201, answer.body
    [copy] = answer.body["items"]
    content = content_records(aws, item.content_id)
    assert content[CONTENT_SK] is None
    assert ContentRefsRecord.get(*refs_key(item.content_id)).open_items == 1
    # The original's stamp coming late (the stream) must not put it back while the copy is open.
    retention.stamp_content(item.content_id, first, runtime, counted=False, files=False)
    assert content_records(aws, item.content_id)[CONTENT_SK] is None
    clock.advance(DAY)
    succeed(runtime, copy["id"])
    run_stream(aws)
    assert content_records(aws, item.content_id)[CONTENT_SK] == expected(
        runtime, copy["id"]) > first
    # The original expires on its day; the content, and so the copy, lives on.
    clock.advance(first - int(clock.now().timestamp()))
    assert runtime.store.get_item(item.id) is None
    assert call("get_sent_item", params={"id": copy["id"]}).status == 200


def test_a_provider_mapping_expires_after_its_item(aws, runtime, clock):
    [item] = sms(runtime)
    move(runtime, item.id, "send")
    apply(item.id, Step("await", actor="vdq", provider_id="SM123"), runtime)
    mapping = runtime.store.find_by_provider_id("SM123")
    assert mapping.expiration == retention.mapping_expiration(clock.now(), runtime.settings)
    move(runtime, item.id, "succeed")
    assert mapping.expiration > expected(runtime, item.id)


def test_the_archive_writes_what_ttl_deleted_to_s3(aws, runtime, clock):
    import gzip
    from dataclasses import replace

    [item] = sms(runtime)
    move(runtime, item.id, "send", "succeed")
    client = boto3.client("dynamodb")
    key = {"pk": {"S": item_pk(item.id)}, "sk": {"S": "STATE"}}
    old = client.get_item(TableName=aws["table"], Key=key)["Item"]
    removal = {"eventID": "ev-9", "eventName": "REMOVE", "eventSource": "aws:dynamodb",
               "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
               "dynamodb": {"Keys": key, "OldImage": old,
                            "ApproximateCreationDateTime": clock.now().timestamp()}}
    batch = {"Records": [removal]}
    assert schedule.handler(batch, LambdaContext())["archived"] == 0  # off by default
    runtime.settings = replace(runtime.settings, archive="s3")
    # A line for the item, and one for each of the two history entries it held.
    assert schedule.handler(batch, LambdaContext())["archived"] == 3
    s3 = boto3.client("s3")
    [stored] = s3.list_objects_v2(Bucket=aws["bucket"], Prefix="archive/")["Contents"]
    assert stored["Key"] == f"archive/dt={clock.now().date().isoformat()}/ev-9.json.gz"
    body = s3.get_object(Bucket=aws["bucket"], Key=stored["Key"])["Body"].read()
    [line, *history] = [json.loads(x) for x in gzip.decompress(body).splitlines()]
    assert (line["kind"], line["id"], line["expiration"]) == ("item", item.id,
                                                              expected(runtime, item.id))
    assert json.loads(line["attributes"])["state"] == "succeeded"
    # The history the state item held: a line each, as a history record's.
    assert [(h["kind"], h["id"], json.loads(h["attributes"])["name"]) for h in history] == [
        ("history", item.id, "send"), ("history", item.id, "succeed")]
