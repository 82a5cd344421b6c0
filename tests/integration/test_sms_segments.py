"""SMS segments at enqueue: stored on each item, shown by every item view, and a body over
VDQ_SMS_MAX_SEGMENTS refused with a 400 that stores nothing."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from functions.enqueue import handler as enqueue_handler

import vdq
from tests.support.aws import drain
from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from tests.support.operator import call, succeed
from tests.support.stream import posted
from vdq import store as st
from vdq.core.errors import TooManySegments


def post_sms(body_text: str | None, headers: dict[str, str] | None = None,
             **changes: object) -> tuple[int, dict]:  # fmt: skip
    body = json.loads(api_event("apigw_post_sms")["body"])
    body.update(body=body_text, **changes)
    event = api_event("apigw_post_sms", body=body, groups=["vdq-senders"], headers=headers)
    answer = enqueue_handler.handler(event, LambdaContext())
    return answer["statusCode"], json.loads(answer["body"])


def _nothing_stored(aws) -> None:
    assert drain(aws) == []
    assert _records() == []


def _records() -> list[tuple[str, str]]:
    """The keys of every record in the table, of any kind."""
    return [(r.pk, r.sk) for r in st.QueueItemRecord.scan()]


def test_post_sms_stores_and_shows_the_encoding_and_segments(aws, runtime):
    status, answer = post_sms("a" * 159 + "{")  # 161 septets: two GSM-7 segments
    assert status == 201, answer
    assert [(i["encoding"], i["segments"]) for i in answer["items"]] == [("GSM-7", 2)]
    [item] = answer["items"]
    stored = runtime.store.get_item(item["id"])
    assert (stored.encoding, stored.segments) == ("GSM-7", 2)
    detail = call("get_queue_item", params={"id": item["id"]}).body
    assert (detail["encoding"], detail["segments"]) == ("GSM-7", 2)
    listed = call("list_queue_items", query={"method": "sms"}).body["items"]
    assert [(i["id"], i["encoding"], i["segments"]) for i in listed] == [
        (item["id"], "GSM-7", 2)]
    # The figures stay through the workflow: the sent list shows them too.
    succeed(runtime, item["id"])
    posted(aws["table"])
    sent = call("list_sent_items", query={"method": "sms"}).body["items"]
    assert [(i["id"], i["encoding"], i["segments"]) for i in sent] == [(item["id"], "GSM-7", 2)]


def test_an_sms_from_a_messaging_service_shows_the_service_as_its_sender(aws, runtime):
    service = "MG" + "0123456789abcdef" * 2
    status, answer = post_sms("hi", sender={"messaging_service_sid": service})
    assert status == 201, answer
    [item] = answer["items"]
    assert item["sender"] == {"messaging_service_sid": service}
    assert runtime.store.get_item(item["id"]).sender == service
    detail = call("get_queue_item", params={"id": item["id"]}).body
    assert detail["sender"] == {"messaging_service_sid": service}
    posted(aws["table"])
    found = call("search", query={"sender": service}).body["items"]
    assert [i["id"] for i in found] == [item["id"]]


def test_every_receiver_gets_the_figures_of_the_one_body_and_emails_none(aws, runtime):
    items = vdq.add_sms("+15005550006", ["+14155550100", "+14155550101"],
                        "Grüße aus Köln \U0001f600" * 3, runtime=runtime)  # fmt: skip
    # The emoji makes it UCS-2: 3 x (15 + 2) = 51 code units, one segment.
    assert [(i.encoding, i.segments) for i in items] == [("UCS-2", 1), ("UCS-2", 1)]
    [email] = vdq.add_email("shop@example.com", ["ada@example.org"], "Hi", "Text",
                            runtime=runtime)  # fmt: skip
    detail = call("get_queue_item", params={"id": email.id}).body
    assert (detail["encoding"], detail["segments"]) == (None, None)
    assert "encoding" not in runtime.store.get_item(email.id).serialize()


def test_an_mms_of_media_alone_takes_no_segment_and_has_no_encoding(aws, runtime):
    # Twilio bills it as one MMS: there is no text to encode nor to split into segments.
    status, answer = post_sms(None, media_urls=["https://cdn.example.com/a.png"])
    assert status == 201, answer
    [item] = answer["items"]
    assert (item["encoding"], item["segments"]) == (None, 0)
    stored = runtime.store.get_item(item["id"])
    assert (stored.encoding, stored.segments) == (None, 0)
    detail = call("get_queue_item", params={"id": item["id"]}).body
    assert (detail["encoding"], detail["segments"]) == (None, 0)
    assert detail["content"] == {"body": None, "media_urls": ["https://cdn.example.com/a.png"]}
    succeed(runtime, item["id"])
    answer = call("resend", params={"id": item["id"]})
    assert answer.status == 201, answer.body
    [copy] = answer.body["items"]
    assert (copy["encoding"], copy["segments"]) == (None, 0)


def test_a_resend_copies_the_figures_of_the_original(aws, runtime):
    [item] = vdq.add_sms("+15005550006", ["+14155550100"], "\u0436" * 71, runtime=runtime)
    succeed(runtime, item.id)
    answer = call("resend", params={"id": item.id})
    assert answer.status == 201, answer.body
    [copy] = answer.body["items"]
    assert (copy["encoding"], copy["segments"]) == ("UCS-2", 2)


def test_a_body_over_the_limit_is_a_400_naming_body_the_count_and_the_limit(aws, runtime):
    status, answer = post_sms("a" * 1600)  # 11 segments; the default limit is 10
    assert status == 400
    error = answer["error"]
    assert error["code"] == "too_many_segments"
    assert error["details"] == {"field": "body", "segments": 11, "limit": 10,
                                "encoding": "GSM-7"}  # fmt: skip
    assert error["message"].startswith("body: takes 11 SMS segments")
    assert "the limit is 10" in error["message"]
    _nothing_stored(aws)


def test_a_refused_body_occupies_no_idempotency_key(aws, runtime):
    headers = {"Idempotency-Key": "login-8731-code"}
    status, _ = post_sms("\U0001f600" * 331, headers=headers)  # 662 code units: 11 segments
    assert status == 400
    _nothing_stored(aws)
    status, answer = post_sms("\U0001f600" * 330, headers=headers)  # 10 segments: taken
    assert status == 201, answer
    assert [(i["encoding"], i["segments"]) for i in answer["items"]] == [("UCS-2", 10)]


def test_the_limit_is_the_setting_for_the_rest_api_and_the_python_api(aws, runtime):
    runtime.settings = replace(runtime.settings, sms_max_segments=2)
    assert post_sms("a" * 306)[0] == 201
    drain(aws)
    status, answer = post_sms("a" * 307)
    assert status == 400 and answer["error"]["details"]["limit"] == 2
    with pytest.raises(TooManySegments) as err:
        vdq.add_sms("+15005550006", ["+14155550100"], "a" * 307, runtime=runtime)
    assert err.value.details["segments"] == 3
    assert drain(aws) == []
    # The 306-septet body only: its content (in its origin's partition: the sample names one)
    # and its item.
    [(content_pk, content_sk), (_, state_sk)] = sorted(_records(), key=lambda r: r[1])
    assert content_pk.startswith("CO#") and content_sk.startswith("C#")
    assert state_sk == st.STATE_SK
