"""GET /queue-items/{id} and GET /sent-items/{id}: content, attachments, history."""

from __future__ import annotations

import base64

import pytest

from tests.support.operator import call, email, sms, succeed

PDF = {"filename": "invoice.pdf", "content_type": "application/pdf",
       "content_base64": base64.b64encode(b"%PDF-1.4 x").decode()}  # fmt: skip


def test_an_item_shows_its_content_attachments_and_history(aws, runtime, clock):
    [item, _cc] = email(runtime, attachments=[PDF])
    clock.advance(2)
    succeed(runtime, item.id)
    answer = call("get_queue_item", params={"id": item.id})
    assert answer.status == 200
    body = answer.body
    assert body["id"] == item.id and body["state"] == "succeeded"
    assert body["origin"] == {"type": "shop.order", "id": "7"}
    assert body["content"]["subject"] == "Hello"
    assert body["content"]["cc"] == [{"email": "cc@example.org"}]
    assert body["content"]["reply_to"] == [{"email": "help@example.com"}]
    [attachment] = body["attachments"]
    assert attachment["filename"] == "invoice.pdf" and attachment["size"] == 10
    assert attachment["content_type"] == "application/pdf" and attachment["purged"] is False
    assert attachment["download_path"] == f"/attachments/{attachment['id']}"
    names = [(h["name"], h["from_state"], h["to_state"]) for h in body["history"]]
    assert names == [("queued", None, "queued"), ("send", "queued", "sending"),
                     ("succeed", "sending", "succeeded")]  # fmt: skip
    assert body["history"][0]["at"] == body["queued_at"]


def test_a_queue_item_is_shown_in_any_state_a_sent_item_only_when_done(aws, runtime):
    [active, done] = sms(runtime, "+14155550100", "+14155550101")
    succeed(runtime, done.id)
    assert call("get_queue_item", params={"id": active.id}).status == 200
    assert call("get_queue_item", params={"id": done.id}).status == 200
    assert call("get_sent_item", params={"id": done.id}).status == 200
    answer = call("get_sent_item", params={"id": active.id})
    assert answer.status == 404 and "queued" in answer.body["error"]["message"]


@pytest.mark.parametrize("name", ["get_queue_item", "get_sent_item"])
def test_unknown_ids_are_404_and_reading_needs_read_permission(aws, runtime, name):
    [item] = sms(runtime)
    succeed(runtime, item.id)
    assert call(name, params={"id": "01JDQ5V7X3K9Q2M4N6P8R0S2T4"}).status == 404
    assert call(name, params={"id": "../etc"}).status == 404
    assert call(name, params={"id": item.id}, groups=["vdq-senders"]).status == 403
    assert call(name, params={"id": item.id}, anonymous=True).status == 401


def test_unknown_routes_are_404_in_the_error_shape(aws, runtime):
    answer = call("health")
    assert answer.status == 200 and answer.body == {"status": "ok"}
    from functions.operator import handler

    from tests.support.events import api_event
    from tests.support.operator import LambdaContext

    event = api_event("apigw_operator_list_queue_items", path="/nowhere")
    response = handler.handler(event, LambdaContext())
    assert response["statusCode"] == 404 and '"not_found"' in response["body"]
