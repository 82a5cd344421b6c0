"""SMS through the local stack: Twilio's magic numbers, signed and forged status callbacks, the
SMS timeout with a short window, and polling mode."""

from __future__ import annotations

import pytest
from twilio.request_validator import RequestValidator

import requests
from tests.e2e.conftest import SMS_TIMEOUT_HOURS, TWILIO_SID, TWILIO_TOKEN, requires

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator")]


@pytest.mark.parametrize(
    "number,state,text",
    [
        ("+15005550001", "errored", "21211"),
        ("+15005550002", "errored", "21612"),
        # 21610 (opted out) also suppresses the number: when an earlier test of this stack (vdq
        # smoke) met it first, the item ends cancelled unsent, its result naming 21610.
        ("+15005550004", ("errored", "cancelled"), "21610"),
        ("+15005550009", "errored", "21614"),
        ("+15005550010", "errored", "undelivered"),
        ("+15005550011", "errored", "failed"),
        ("+14155550100", "succeeded", "delivered"),
    ],
)
def test_every_magic_number_reaches_its_documented_state(stack, number, state, text):
    [item] = stack.send_sms(number)
    done = stack.wait(item["id"], state)
    assert text in (done["result"] or ""), done["result"]


def test_an_sms_from_a_messaging_service_is_delivered_from_its_pool(stack):
    service = "MG" + "0123456789abcdef" * 2
    answer = stack.api("POST", "/sms", groups=("vdq-senders",), json={
        "sender": {"messaging_service_sid": service}, "to": [{"cell": "+14155550123"}],
        "body": "e2e code 456"})  # fmt: skip
    assert answer.status_code == 201, answer.text
    [item] = answer.json()["items"]
    done = stack.wait(item["id"], "succeeded")
    assert done["sender"] == {"messaging_service_sid": service}
    assert "delivered" in (done["result"] or "")


@requires("schedule")
def test_an_sms_without_a_final_status_times_out_to_unconfirmed(stack):
    [item] = stack.send_sms("+15005550012")
    stack.wait(item["id"], "awaiting")
    window = SMS_TIMEOUT_HOURS * 3600
    done = stack.wait(item["id"], ("unconfirmed", "succeeded", "errored"), timeout=window + 20)
    assert done["state"] == "unconfirmed"


def _callback(stack, item, status="delivered"):
    url = f"{stack.url}/twilio/status-callback?queue_item={item['id']}"
    params = {"AccountSid": TWILIO_SID, "ApiVersion": "2010-04-01", "From": "+15005550006",
              "MessageSid": item["provider_id"], "MessageStatus": status,
              "SmsSid": item["provider_id"], "SmsStatus": status, "To": item["receiver"]["cell"]}
    return url, params


def test_a_signed_callback_is_accepted_and_a_forged_one_refused(stack):
    [item] = stack.send_sms("+15005550012")  # never final: our callback decides
    item = stack.wait(item["id"], "awaiting")
    url, params = _callback(stack, item)
    forged = requests.post(url, data=params, timeout=10,
                           headers={"X-Twilio-Signature": "bm90IGEgc2lnbmF0dXJl"})
    assert forged.status_code == 403
    signature = RequestValidator(TWILIO_TOKEN).compute_signature(url, params)
    other = f"{stack.url}/twilio/status-callback?queue_item=01AAAAAAAAAAAAAAAAAAAAAAAA"
    changed_key = requests.post(other, data=params, timeout=10,
                                headers={"X-Twilio-Signature": signature})
    assert changed_key.status_code == 403
    assert stack.item(item["id"])["state"] == "awaiting", "a refused callback changes nothing"
    signed = requests.post(url, data=params, timeout=10, headers={"X-Twilio-Signature": signature})
    assert signed.status_code == 204
    assert stack.wait(item["id"], "succeeded", timeout=5)["state"] == "succeeded"


def test_callbacks_from_the_sandbox_are_signed_and_posted(stack):
    [item] = stack.send_sms("+14155550101")
    done = stack.wait(item["id"], "succeeded")
    [message] = [m for m in stack.sandbox("twilio")["messages"] if m["sid"] == done["provider_id"]]
    assert message["status_callback"].endswith(f"queue_item={item['id']}&attempt=1")
    assert stack.status()["sandboxes"]["twilio"]["callbacks_posted"] > 0


@requires("schedule")
@pytest.mark.parametrize("number,state", [("+14155550102", "succeeded"),
                                          ("+15005550011", "errored")])
def test_polling_mode_fetches_each_awaiting_sms(polling_stack, number, state):
    [item] = polling_stack.send_sms(number)
    done = polling_stack.wait(item["id"], state, timeout=30)
    [message] = [m for m in polling_stack.sandbox("twilio")["messages"]
                 if m["sid"] == done["provider_id"]]  # fmt: skip
    assert message["status_callback"] is None, "polling mode asks for no callbacks"
    status = polling_stack.status()
    assert status["twilio_mode"] == "polling"
    assert status["sandboxes"]["twilio"]["callbacks_posted"] == 0
