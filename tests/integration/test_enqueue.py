"""Enqueue through the Python API and the handler, against moto."""

from __future__ import annotations

import base64
import json
import threading

import pytest
from functions.enqueue import handler as enqueue_handler

import vdq
from tests.support.aws import drain
from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from vdq import store as st
from vdq.api import LAMBDA_MAX_PAYLOAD_BYTES
from vdq.core.errors import ValidationError
from vdq.workflow.transitions import Step, apply
from vdq.workflow.views import item_json


def post(name, body, groups=("vdq-senders",), headers=None):
    event = api_event(name, body=body, groups=list(groups), headers=headers)
    response = enqueue_handler.handler(event, LambdaContext())
    return response["statusCode"], json.loads(response["body"]) if response["body"] else None


def test_add_email_stores_one_small_item_per_receiver_and_publishes(aws, runtime):
    items = vdq.add_email(
        {"email": "shop@example.com", "name": "Shop"},
        ["a@example.org"],
        "Hello",
        "Text body",
        cc=["c@example.org"],
        bcc=["d@example.org"],
        reply_to=["help@example.com"],
        origin=("shop.order", "77"),
        runtime=runtime,
    )
    assert [i.receiver for i in items] == ["a@example.org", "c@example.org", "d@example.org"]
    stored = runtime.store.get_item(items[0].id)
    assert stored.state == "queued" and stored.attempt == 1
    # Nothing at its default is stored: done_since (the queueing, derived), has_files, retries,
    # priority; the API answers them as before.
    assert {"done_since", "has_files", "retries", "priority"}.isdisjoint(stored.serialize())
    assert item_json(stored)["done_since"] == stored.queued_at
    assert (item_json(stored)["priority"], stored.retries) == ("normal", None)
    assert (stored.origin_type, stored.origin_id) == ("shop.order", "77")
    # In the open items; no publish timer: its message followed the write (vdq.schedules.strays).
    assert stored.active_pk and stored.timer_pk is None
    assert len(json.dumps(stored.serialize())) < 1024
    content = runtime.store.get_content(stored.content_id)
    assert content["subject"] == "Hello" and content["reply_to"] == [{"email": "help@example.com"}]
    assert content["cc"] == [{"email": "c@example.org"}]
    # All receivers share one content record.
    assert {i.content_id for i in items} == {stored.content_id}
    sent = drain(aws)
    assert sorted(m["id"] for m in sent) == sorted(i.id for i in items)
    assert all(m["attempt"] == 1 and m["content"]["subject"] == "Hello" for m in sent)


def test_add_sms_validates_every_receiver_before_writing(aws, runtime):
    with pytest.raises(ValidationError) as err:
        vdq.add_sms("+15005550006", ["+14155550100", "555-0101"], "hi", runtime=runtime)
    assert err.value.field == "to[1].cell"
    assert drain(aws) == []
    assert list(st.QueueItemRecord.active_index.query("A#0")) == []


def test_the_python_api_takes_one_receiver_given_as_a_string(aws, runtime):
    # A string is an iterable of strings: read as a list, it was a list of its characters.
    items = vdq.add_email("shop@example.com", "ada@example.org", "Hi", "x", cc="c@example.org",
                          runtime=runtime)  # fmt: skip
    assert [i.receiver for i in items] == ["ada@example.org", "c@example.org"]
    (sms,) = vdq.add_sms("+15005550006", "+14155550100", "hi", runtime=runtime)
    assert sms.receiver == "+14155550100"


def test_post_emails_creates_items_and_answers_201(aws, runtime):
    status, body = post("apigw_post_emails", None)
    assert status == 201, body
    receivers = [i["receiver"]["email"] for i in body["items"]]
    assert receivers == ["ada@example.org", "grace@example.org"]
    item = body["items"][0]
    assert item["state"] == "queued" and item["origin"] == {"type": "shop.order", "id": "1042"}
    assert set(item) >= {"id", "method", "state", "sender", "receiver", "result", "attempt",
                         "retry_delay", "queued_at", "updated_at", "done_since", "origin",
                         "provider_id"}  # fmt: skip
    assert len(drain(aws)) == 2


def test_post_sms_creates_items(aws, runtime):
    status, body = post("apigw_post_sms", None)
    assert status == 201
    assert body["items"][0]["receiver"]["cell"] == "+14155550100"
    assert body["items"][0]["method"] == "sms"


def test_the_answer_of_the_most_receivers_with_the_longest_names_fits_what_lambda_returns(
        aws, runtime):  # fmt: skip
    # 1,000 receivers, each with the longest address and name, the longest origin: names and
    # origin outside ASCII. Escaped as \uXXXX the 201 took 15 MB, over the 6 MB Lambda returns:
    # API Gateway answered 502 for items stored and sent.
    wide = "\U0001f4e6" * 256
    domain = ".".join(label * 61 for label in "bcd") + ".ab.org"
    receivers = [{"email": f"{n:04d}{'a' * 57}@{domain}", "name": wide} for n in range(1000)]
    assert {len(r["email"]) for r in receivers} == {254}
    body = {"sender": {"email": "shop@example.com", "name": wide}, "to": receivers[:1],
            "bcc": receivers[1:], "subject": "\U0001f4e6" * 998, "text": "x",
            "origin": {"type": wide, "id": wide}}  # fmt: skip
    event = api_event("apigw_post_emails", body=body, groups=["vdq-senders"],
                      headers={"Idempotency-Key": "k" * 255})  # fmt: skip
    response = enqueue_handler.handler(event, LambdaContext())
    assert response["statusCode"] == 201
    # The Python runtime returns a response's text as it is, in UTF-8 (since Python 3.12).
    assert len(json.dumps(response, ensure_ascii=False).encode()) <= LAMBDA_MAX_PAYLOAD_BYTES
    answer = json.loads(response["body"])
    assert len(answer["items"]) == 1000 and answer["items"][0]["origin"]["id"] == wide
    # Its key keeps that answer (packed within a DynamoDB item): a repeat gets it, queues none.
    again = enqueue_handler.handler(event, LambdaContext())
    assert (again["statusCode"], again["body"]) == (201, response["body"])
    assert len(drain(aws)) == 1000


PICTURE = "https://cdn.example.com/receipt.png"


@pytest.mark.parametrize("text", [None, "   "])
def test_post_sms_of_media_alone_queues_an_mms_without_text(aws, runtime, text):
    sms = json.loads(api_event("apigw_post_sms")["body"])
    sms.update(body=text, media_urls=[PICTURE])
    status, answer = post("apigw_post_sms", sms)
    assert status == 201, answer
    [item] = answer["items"]
    assert (item["encoding"], item["segments"], item["excerpt"]) == (None, 0, None)
    [message] = drain(aws)
    assert message["content"] == {"body": None, "media_urls": [PICTURE]}
    detail = item_json(runtime.store.get_item(item["id"]))
    assert (detail["encoding"], detail["segments"]) == (None, 0)


@pytest.mark.parametrize("changes,message", [
    ({"body": None}, "body: is required when there are no media_urls"),
    ({"body": " ", "media_urls": []}, "body: must not be empty when there are no media_urls"),
])  # fmt: skip
def test_post_sms_with_neither_text_nor_media_is_a_422_naming_body(aws, runtime, changes,
                                                                   message):
    sms = json.loads(api_event("apigw_post_sms")["body"])
    sms.update(changes)
    status, answer = post("apigw_post_sms", sms)
    assert (status, answer["error"]["details"]["field"]) == (422, "body"), answer
    assert answer["error"]["message"].startswith(message)
    assert drain(aws) == []
    assert list(st.QueueItemRecord.active_index.query("A#0")) == []


def test_the_python_api_queues_an_mms_of_media_alone(aws, runtime):
    [item] = vdq.add_sms("+15005550006", "+14155550100", media_urls=[PICTURE], runtime=runtime)
    assert (item.encoding, item.segments) == (None, 0)
    with pytest.raises(ValidationError) as err:
        vdq.add_sms("+15005550006", "+14155550100", runtime=runtime)
    assert err.value.field == "body"
    [message] = drain(aws)
    assert message["content"]["body"] is None


@pytest.mark.parametrize(
    "body,status,field",
    [
        ("{not json", 400, None),
        ({"sender": {"email": "x@example.com"}, "to": [{"email": "a@example.org"}],
          "text": "no subject"}, 422, "subject"),
        ({"sender": {"email": "x@example.com"}, "to": [{"email": "a@example.org"}],
          "subject": "a\nBcc: b@example.org", "text": "t"}, 422, "subject"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(aws, runtime, body, status, field):
    got, answer = post("apigw_post_emails", body)
    assert got == status
    if field:
        assert answer["error"]["details"]["field"] == field
        assert field in answer["error"]["message"]
    assert drain(aws) == []


@pytest.mark.parametrize("cell,accepted", [
    ("+14155550100", True), ("+15005550006", True), ("+442071838750", True), ("+4930123", True),
    ("+1415555010", False),  # found in use: a digit short, Twilio's 21211 errored it later
    ("+141555501000", False), ("+10155550100", False), ("+11155550100", False),
    ("+14150550100", False),  # an exchange starts 2-9 in the North American plan
])  # fmt: skip
def test_a_north_american_number_has_ten_digits_of_the_plan_or_is_a_422(aws, runtime, cell,
                                                                        accepted):
    body = {"sender": {"cell": "+15005550006"}, "to": [{"cell": cell}], "body": "hi"}
    got, answer = post("apigw_post_sms", body)
    if accepted:
        assert got == 201, answer
        return
    assert got == 422 and answer["error"]["details"]["field"] == "to[0].cell", answer
    assert "10 digits" in answer["error"]["message"]
    assert drain(aws) == []


@pytest.mark.parametrize("sender,accepted", [
    ("shop@example.com", True),  # its domain is an identity
    ("Shop@EXAMPLE.com", True),
    ("alerts@ops.example.net", True),  # the address is an identity
    ("other@ops.example.net", False),  # another address of a domain that is not one
    ("shop@mail.example.com", False),  # a subdomain is an identity of its own
    ("shop@example.com.evil.org", False),
    ("alerts+x@ops.example.net", False),  # SES verifies the address, not its plus-variants
    ("shop@example.com.", False),  # a trailing dot is no address (sender.email names it)
    ("shop@EXAMPLE.COM", True),
])  # fmt: skip
def test_a_sender_outside_the_ses_identities_is_refused_naming_the_field(aws, runtime, sender,
                                                                        accepted):  # fmt: skip
    from dataclasses import replace

    runtime.settings = replace(runtime.settings,
                               sender_identities=("example.com", "alerts@ops.example.net"))
    body = {"sender": {"email": sender}, "to": [{"email": "a@example.org"}], "subject": "s",
            "text": "t"}  # fmt: skip
    got, answer = post("apigw_post_emails", body)
    if accepted:
        assert got == 201 and len(drain(aws)) == 1
        return
    assert got == 422 and answer["error"]["details"]["field"] == "sender.email"
    assert sender in answer["error"]["message"] and "example.com" in answer["error"]["message"]
    assert drain(aws) == []
    assert not list(st.QueueItemRecord.scan())
    with pytest.raises(ValidationError, match=r"sender\.email"):
        vdq.add_email({"email": sender}, ["a@example.org"], subject="s", text="t")


def test_a_caller_without_add_permission_is_refused(aws, runtime):
    status, body = post("apigw_post_emails", None, groups=("vdq-viewers",))
    assert status == 403 and body["error"]["code"] == "forbidden"
    event = api_event("apigw_post_emails")
    event["requestContext"]["authorizer"] = None
    assert enqueue_handler.handler(event, LambdaContext())["statusCode"] == 401


def test_idempotency_key_returns_the_same_items_and_refuses_another_body(aws, runtime):
    headers = {"Idempotency-Key": "order-1042-shipped"}
    first_status, first = post("apigw_post_emails", None, headers=headers)
    again_status, again = post("apigw_post_emails", None, headers=headers)
    assert first_status == again_status == 201
    assert [i["id"] for i in again["items"]] == [i["id"] for i in first["items"]]
    assert len(drain(aws)) == 2  # the repeat created and published nothing
    other = api_event("apigw_post_emails")
    other_body = json.loads(other["body"])
    other_body["subject"] = "Something else"
    status, body = post("apigw_post_emails", other_body, headers=headers)
    assert status == 422 and body["error"]["details"]["field"] == "Idempotency-Key"
    assert drain(aws) == []


def test_a_failed_read_of_the_holds_stores_nothing_and_a_retry_queues_once(aws, runtime,
                                                                          monkeypatch):  # fmt: skip
    """The reputation guard's holds are read for the answer's ``held`` notice. A read that
    fails must fail the request before any item is stored: the 500 says a repeat with the same
    Idempotency-Key is safe, and the failed request does not keep its key."""
    from botocore.exceptions import ClientError

    from vdq.intake import rest as intake

    notice = intake.guard.notice
    failures = [ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}},
                            "Query")]  # fmt: skip

    def fails_once(*args, **kwargs):
        if failures:
            raise failures.pop()
        return notice(*args, **kwargs)

    monkeypatch.setattr(intake.guard, "notice", fails_once)
    headers = {"Idempotency-Key": "order-1042-shipped"}
    status, body = post("apigw_post_emails", None, headers=headers)
    assert status == 500 and "same Idempotency-Key is safe" in body["error"]["message"]
    assert drain(aws) == [], "a failed request stored items"
    status, body = post("apigw_post_emails", None, headers=headers)
    assert status == 201
    assert sorted(m["id"] for m in drain(aws)) == sorted(i["id"] for i in body["items"])


def test_a_key_holds_an_answer_larger_than_a_dynamodb_item(aws, runtime):
    """The answer a key keeps can be larger as JSON than a DynamoDB item takes (400 KB): a
    request of VDQ_MAX_RECEIVERS receivers answers about 500 KB. It must still be kept, or the
    request answers 500 with every item queued, and the repeat that answer invites queues them
    all again."""
    name, origin = "N" * 256, {"type": "T" * 256, "id": "I" * 256}
    email = {"sender": {"email": "shop@example.com", "name": name}, "subject": "S" * 998,
             "text": "Hello", "origin": origin,
             "to": [{"email": f"reader{n}@example.org", "name": name} for n in range(300)]}
    headers = {"Idempotency-Key": "campaign-7"}
    first_status, first = post("apigw_post_emails", email, headers=headers)
    assert first_status == 201, first
    assert len(json.dumps(first)) > 400 * 1024
    again_status, again = post("apigw_post_emails", email, headers=headers)
    assert (again_status, again) == (201, first)  # the same items: nothing queued again


def test_a_key_that_cannot_keep_its_answer_still_answers_the_queued_items(aws, runtime,
                                                                        monkeypatch):  # fmt: skip
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    def refused(self, *args, **kwargs):
        raise RuntimeError("the store refused the write")

    monkeypatch.setattr(DynamoDBPersistenceLayer, "save_success", refused)
    status, body = post("apigw_post_emails", None, headers={"Idempotency-Key": "order-1043"})
    assert status == 201, body  # not a 5xx that invites a repeat
    assert sorted(m["id"] for m in drain(aws)) == sorted(i["id"] for i in body["items"])


def test_a_partial_enqueue_keeps_its_key_and_answers_a_repeat_the_same(aws, runtime,
                                                                      monkeypatch):  # fmt: skip
    """The stored items of a partial enqueue will be sent: a repeat with the key gets the same
    503 and stores nothing, and the reference says so (the rejected receivers need a new key)."""
    from vdq.core.errors import PartiallyEnqueued
    from vdq.intake import rest as intake
    from vdq.operations import docs

    calls = []

    def partly(email, runtime, **kwargs):
        calls.append(email)
        raise PartiallyEnqueued("stored 1 of 2 items", details={
            "accepted": ["01KDVDNA00NG7BG17T2CA55R75"], "rejected": ["bob@example.org"]})

    monkeypatch.setattr(intake, "enqueue_email", partly)
    headers = {"Idempotency-Key": "order-1044"}
    first = post("apigw_post_emails", None, headers=headers)
    again = post("apigw_post_emails", None, headers=headers)
    assert first[0] == 503 and first[1]["error"]["code"] == "partially_enqueued"
    assert again == first and len(calls) == 1
    rules = docs.IDEMPOTENCY_RULES
    assert "503 `partially_enqueued` keeps the key" in rules, rules


def test_a_repeat_while_the_first_runs_is_told_when_to_come_back(aws, runtime, monkeypatch):
    """A 409 alone reads as final; the repeat of a request still running is told to come back
    (Retry-After), and coming back gets the first request's answer."""
    from vdq.intake import rest as intake

    enqueue_email, meanwhile = intake.enqueue_email, []
    headers = {"Idempotency-Key": "order-1045"}

    def slow(*args, **kwargs):
        event = api_event("apigw_post_emails", groups=["vdq-senders"], headers=headers)
        meanwhile.append(enqueue_handler.handler(event, LambdaContext()))
        return enqueue_email(*args, **kwargs)

    monkeypatch.setattr(intake, "enqueue_email", slow)
    status, first = post("apigw_post_emails", None, headers=headers)
    [busy] = meanwhile
    assert status == 201 and busy["statusCode"] == 409
    assert int(busy["headers"]["Retry-After"]) >= 1
    assert "Retry-After" in json.loads(busy["body"])["error"]["message"]
    assert post("apigw_post_emails", None, headers=headers) == (201, first)


def test_a_refused_publish_moves_the_item_to_errored(aws, runtime):
    class RefusingQueue:
        def publish(self, messages):
            return {m.item_id: "publishing the send failed: throttled" for m in messages}

    runtime.overrides["send_queue"] = RefusingQueue()
    runtime.__dict__.pop("send_queue", None)
    items = vdq.add_sms("+15005550006", ["+14155550100"], "hi", runtime=runtime)
    stored = runtime.store.get_item(items[0].id)
    assert stored.state == "errored"
    assert "throttled" in stored.result
    assert stored.timer_pk is None  # nothing left for the re-publish sweep
    history = runtime.store.history(items[0].id)
    assert [(h.name, h.from_state, h.to_state) for h in history] == [
        ("error", "queued", "errored")
    ]


def test_an_item_stored_but_not_published_gets_its_timer_from_the_schedule(aws, runtime,
                                                                            clock):  # fmt: skip
    class CrashingQueue:
        def publish(self, messages):
            raise SystemExit("the function died between write and publish")

    runtime.overrides["send_queue"] = CrashingQueue()
    runtime.__dict__.pop("send_queue", None)
    with pytest.raises(SystemExit):
        vdq.add_sms("+15005550006", ["+14155550100"], "hi", runtime=runtime)
    clock.advance(runtime.settings.publish_grace_seconds + 1)
    from vdq.core.clock import iso
    from vdq.core.resources import TIMERS_INDEX
    from vdq.schedules import sweeps
    from vdq.workflow.transitions import shard

    # Written without a timer; the minute schedule finds it among the open items and arms it.
    report = sweeps.Report()
    sweeps.stray_sweep(runtime, report)
    assert report.counts == {"strays_armed": 1}

    due = []
    for k in range(runtime.settings.index_shards):
        due += runtime.store.query_index(TIMERS_INDEX, f"publish#{k}", below=iso(clock.now()))
    assert len(due) == 1
    assert shard(due[0][0], runtime.settings.index_shards) in range(runtime.settings.index_shards)


def test_attachments_are_stored_in_s3_under_random_keys(aws, runtime):
    att = {"filename": "invoice.pdf", "content_type": "application/pdf",
           "content_base64": base64.b64encode(b"%PDF-1.4 test").decode()}  # fmt: skip
    items = vdq.add_email("shop@example.com", ["a@example.org", "b@example.org"], "Invoice",
                          "attached", attachments=[att], runtime=runtime)  # fmt: skip
    content = runtime.store.get_content(items[0].content_id)
    [record] = runtime.store.get_attachments(content["attachments"])
    assert record.filename == "invoice.pdf" and record.size == 13
    assert record.id not in ("1", "2") and len(record.id) == 26
    assert runtime.files.get(record.s3_key) == b"%PDF-1.4 test"
    assert runtime.store.get_refs(items[0].content_id).open_items == 2


def test_two_concurrent_writers_on_one_item_never_lose_an_update(aws, runtime, atomic_requests):
    """Cancel and error race on one queued item: exactly one wins, the other re-decides."""
    [item] = vdq.add_sms("+15005550006", ["+14155550100"], "hi", runtime=runtime)
    stale = runtime.store.get_item(item.id)
    results = {}

    def run(name, step):
        try:
            results[name] = apply(runtime.store.get_item(item.id), step, runtime).kind
        except Exception as exc:
            results[name] = type(exc).__name__

    cancel = Step("cancel", actor="op", source="operator")
    error = Step("error", actor="vdq", result="boom", late="record")
    threads = [
        threading.Thread(target=run, args=("cancel", cancel)),
        threading.Thread(target=run, args=("error", error)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = runtime.store.get_item(item.id)
    history = runtime.store.history(item.id)
    moved = [h for h in history if h.kind == "transition"]
    # Whatever the order, the stored state is the last transition written, and a stale
    # writer's condition fails: the state from `stale` is never written over a newer one.
    assert final.state == moved[-1].to_state
    assert len(moved) in (1, 2)
    if len(moved) == 2:
        assert moved[0].to_state == moved[1].from_state
    from vdq.store import Moved

    with pytest.raises(Moved):
        runtime.store.commit(stale, st.StateWrite(set={"state": "sending"}))
