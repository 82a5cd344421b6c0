"""Bad input against the public endpoints and the provider event parsers: malformed JSON,
wrong types, huge fields, header injection, forged signatures and keys, replayed callbacks.
Never a 5xx, and no request that is unauthenticated or invalid changes any item."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from functions.enqueue import handler as enqueue_handler
from functions.operator import handler as operator_handler
from functions.webhook import handler as webhook_handler
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import vdq
import vdq.runtime as runtime_module
from tests.reliability.support import FIGURES, RecordingQueue, make_settings, moto_aws, runtime_for
from tests.support.events import api_event
from tests.support.results import (
    SAMPLE_ACCOUNT_SID,
    SAMPLE_AUTH_TOKEN,
    SAMPLE_WEBHOOK_URL,
    LambdaContext,
    sqs_event,
    twilio_event,
)
from vdq.results import matching as results
from vdq.workflow.transitions import Step, apply

FUZZ = settings(max_examples=120, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))  # fmt: skip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=4),
    max_leaves=12,
)
nasty_text = st.sampled_from([
    "a\r\nBcc: victim@example.org", "x" * 70_000, "\x00", "\ud800".encode("utf-8", "surrogatepass")
    .decode("latin-1"), "../../etc/passwd", "<script>", "' OR 1=1 --", "ad@a\nb.org",
]) | st.text(max_size=60)  # fmt: skip
EMAIL = {"sender": {"email": "shop@example.com"}, "to": [{"email": "ada@example.org"}],
         "subject": "Hi", "text": "Text"}  # fmt: skip
SMS = {"sender": {"cell": "+15005550006"}, "to": [{"cell": "+14155550100"}], "body": "Code"}


@pytest.fixture(scope="module")
def fuzz_rt():
    with moto_aws() as urls:
        rt = runtime_for(replace(make_settings(urls), twilio_webhook_url=SAMPLE_WEBHOOK_URL,
                                 twilio_auth_token=SAMPLE_AUTH_TOKEN,
                                 twilio_account_sid=SAMPLE_ACCOUNT_SID))  # fmt: skip
        rt.overrides["send_queue"] = RecordingQueue()
        runtime_module._DEFAULT = rt
        (item,) = vdq.add_sms("+15005550006", ["+14155550100"], "Code", runtime=rt)
        rt.item_id = item.id  # type: ignore[attr-defined]
        yield rt
        runtime_module._DEFAULT = None


def snapshot(rt: Any) -> tuple[Any, ...]:
    item = rt.store.get_item(rt.item_id)
    return item.state, item.attempt, item.result, item.provider_id, len(rt.send_queue.bodies)


def mutated(base: dict[str, Any]) -> Any:
    return st.tuples(st.sampled_from([*base, "attachments", "origin", "cc", "media_urls"]),
                     json_values | nasty_text).map(lambda kv: {**base, kv[0]: kv[1]})  # fmt: skip


def anonymous(event: dict[str, Any]) -> dict[str, Any]:
    event["requestContext"]["authorizer"] = None
    return event


def check(status: int) -> None:
    FIGURES["inputs tried"] += 1
    assert status < 500


@given(body=json_values.map(json.dumps) | st.text(max_size=300) | mutated(EMAIL).map(json.dumps),
       path=st.sampled_from(["emails", "sms"]))  # fmt: skip
@FUZZ
def test_enqueue_refuses_anonymous_callers_whatever_they_send(fuzz_rt, body, path):
    before = snapshot(fuzz_rt)
    answer = enqueue_handler.handler(anonymous(api_event(f"apigw_post_{path}", body=body)),
                                     LambdaContext())  # fmt: skip
    check(answer["statusCode"])
    assert answer["statusCode"] == 401 and snapshot(fuzz_rt) == before


@given(body=mutated(EMAIL) | mutated(SMS) | json_values,
       headers=st.dictionaries(st.sampled_from(["Idempotency-Key", "Content-Type", "X-Real-Ip"]),
                               nasty_text, max_size=2))  # fmt: skip
@example(body={**EMAIL, "subject": "S" * 1_000_000}, headers={})
@example(body={**EMAIL, "to": [{"email": f"r{n}@example.org"} for n in range(5000)]}, headers={})
@FUZZ
def test_enqueue_never_fails_with_5xx_and_invalid_input_queues_nothing(fuzz_rt, body, headers):
    path = "sms" if isinstance(body, dict) and "body" in body else "emails"
    queued = len(fuzz_rt.send_queue.bodies)
    event = api_event(f"apigw_post_{path}", body=json.dumps(body), groups=["vdq-senders"],
                      headers=headers)  # fmt: skip
    answer = enqueue_handler.handler(event, LambdaContext())
    check(answer["statusCode"])
    if answer["statusCode"] >= 400:
        assert len(fuzz_rt.send_queue.bodies) == queued
        assert "error" in json.loads(answer["body"])


@pytest.mark.parametrize("sample,handler", [
    ("apigw_post_emails", enqueue_handler), ("apigw_post_sms", enqueue_handler),
    ("apigw_operator_bulk_resend", operator_handler),
])  # fmt: skip
@pytest.mark.parametrize("raw,status,words", [
    ("[" * 100_000, 400, "nests more than 32 levels"),  # was RecursionError: 502 and 500
    ('{"ids": [' * 40 + "]}" * 40, 400, "nests more than 32 levels"),
    ('{"n": ' + "9" * 5000 + "}", 400, "number too long"),
    ('{"x": "\\ud800"}', 422, "lone surrogate"),
])  # fmt: skip
def test_a_malformed_body_is_a_4xx_naming_the_problem_at_every_json_endpoint(
    fuzz_rt, sample, handler, raw, status, words
):
    before = snapshot(fuzz_rt)
    event = api_event(sample, body=raw, groups=["vdq-admins"])
    answer = handler.handler(event, LambdaContext())
    check(answer["statusCode"])
    assert answer["statusCode"] == status
    assert words in json.loads(answer["body"])["error"]["message"]
    assert snapshot(fuzz_rt) == before


OPERATOR_SAMPLES = ["transition", "resend", "bulk_resend", "get_queue_item", "get_sent_item",
                    "list_queue_items", "list_sent_items", "attachment"]  # fmt: skip


@given(sample=st.sampled_from(OPERATOR_SAMPLES),
       item=st.sampled_from(["own", "01JDQ5V7X3K9Q2M4N6P8R0S2T4"]) | nasty_text,
       name=st.sampled_from(["retry", "cancel", "send", "succeed", "timeout"]) | nasty_text,
       query=st.dictionaries(st.sampled_from(["dry_run", "limit", "cursor", "state", "method"]),
                             nasty_text, max_size=3),
       groups=st.lists(st.sampled_from(["vdq-viewers", "vdq-operators", "vdq-admins",
                                        "vdq-senders", "nobody"]), max_size=2) | st.none(),
       body=json_values)  # fmt: skip
@FUZZ
def test_operator_api_never_fails_with_5xx_nor_lets_anyone_in(fuzz_rt, sample, item, name, query,
                                                              groups, body):  # fmt: skip
    before = snapshot(fuzz_rt)
    item_id = fuzz_rt.item_id if item == "own" else item
    event = api_event(f"apigw_operator_{sample}", body=json.dumps(body),
                      groups=groups if groups is not None else [])  # fmt: skip
    if groups is None:
        anonymous(event)
    event["pathParameters"] = {"id": item_id, "name": name}
    event["queryStringParameters"] = query or None
    answer = operator_handler.handler(event, LambdaContext())
    check(answer["statusCode"])
    if groups is None:
        assert answer["statusCode"] == 401
    if answer["statusCode"] >= 400 or groups is None:
        assert snapshot(fuzz_rt)[:4] == before[:4]


@given(form=st.dictionaries(st.sampled_from(["MessageSid", "MessageStatus", "ErrorCode", "To",
                                             "AccountSid", "SmsSid"]) | st.text(max_size=8),
                            nasty_text, max_size=6),
       signature=st.none() | st.text(max_size=40),
       key=st.none() | nasty_text)  # fmt: skip
@FUZZ
def test_twilio_callbacks_with_forged_signatures_change_nothing(fuzz_rt, form, signature, key):
    from urllib.parse import urlencode

    before = snapshot(fuzz_rt)
    event = twilio_event("delivered", sid="SM" + "f" * 32, item_id=fuzz_rt.item_id)
    event["body"] = urlencode(form)
    event["queryStringParameters"] = {"queue_item": key} if key is not None else None
    event["headers"] = {k: v for k, v in event["headers"].items() if k != "X-Twilio-Signature"}
    if signature is not None:
        event["headers"]["X-Twilio-Signature"] = signature
    answer = webhook_handler.handler(event, LambdaContext())
    check(answer["statusCode"])
    assert answer["statusCode"] in (400, 403)
    assert snapshot(fuzz_rt) == before


def test_a_callback_signed_for_one_item_and_replayed_for_another_is_refused(fuzz_rt):
    event = twilio_event("delivered", sid="SM" + "e" * 32, item_id="01JDQ5V7X3K9Q2M4N6P8R0S2T4")
    event["queryStringParameters"] = {"queue_item": fuzz_rt.item_id}
    event["multiValueQueryStringParameters"] = {"queue_item": [fuzz_rt.item_id]}
    before = snapshot(fuzz_rt)
    assert webhook_handler.handler(event, LambdaContext())["statusCode"] == 403
    assert snapshot(fuzz_rt) == before


def test_a_replayed_authentic_callback_changes_nothing_the_second_time(fuzz_rt):
    (item,) = vdq.add_sms("+15005550006", ["+14155550101"], "Code", runtime=fuzz_rt)
    from vdq.dispatch.send import claim
    from vdq.workflow.sendqueue import SendMessage

    claim(SendMessage(item.id, 1), fuzz_rt.clock.now(), fuzz_rt)
    apply(item.id, Step("await", actor="worker", provider_id="SM" + "d" * 32), fuzz_rt)
    event = twilio_event("delivered", sid="SM" + "d" * 32, item_id=item.id)
    assert webhook_handler.handler(event, LambdaContext())["statusCode"] == 204
    first = fuzz_rt.store.get_item(item.id)
    history = len(fuzz_rt.store.history(item.id))
    assert webhook_handler.handler(event, LambdaContext())["statusCode"] == 204
    again = fuzz_rt.store.get_item(item.id)
    assert (again.state, again.updated_at) == (first.state, first.updated_at) == (
        "succeeded", first.updated_at)
    assert len(fuzz_rt.store.history(item.id)) == history


@given(bodies=st.lists(json_values.map(json.dumps) | st.text(max_size=200), min_size=1,
                       max_size=4))  # fmt: skip
@FUZZ
def test_garbage_on_the_results_queue_is_dropped_not_retried_for_ever(fuzz_rt, bodies):
    before = snapshot(fuzz_rt)
    answer = webhook_handler.handler(sqs_event(*bodies), LambdaContext())
    FIGURES["inputs tried"] += len(bodies)
    assert answer == {"batchItemFailures": []}
    assert snapshot(fuzz_rt) == before


@given(event=st.dictionaries(st.sampled_from(["eventType", "notificationType", "mail", "delivery",
                                              "bounce"]), json_values, max_size=4))  # fmt: skip
@FUZZ
def test_the_ses_parser_returns_an_update_or_bad_event(event):
    FIGURES["inputs tried"] += 1
    try:
        update = results.parse_ses_event(event)
    except results.BadEvent:
        return
    assert update.provider == "ses" and update.provider_id


@given(params=st.dictionaries(st.sampled_from(["MessageSid", "SmsSid", "MessageStatus",
                                               "SmsStatus", "ErrorCode", "ErrorMessage"]),
                              st.text(max_size=30), max_size=6),
       key=st.none() | st.text(max_size=30))  # fmt: skip
@FUZZ
def test_the_twilio_parser_returns_an_update_or_bad_event(params, key):
    FIGURES["inputs tried"] += 1
    try:
        update = results.parse_twilio_callback(params, key)
    except results.BadEvent:
        return
    assert update.provider == "twilio" and update.provider_id
