"""The Twilio status callback (POST /twilio/status-callback?queue_item=<id>) and deferred
lookups, against moto."""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import replace
from urllib.parse import parse_qsl, urlencode

import boto3
import pytest
from functions.webhook import handler as webhook

from tests.support.aws import drain
from tests.support.events import load_event
from tests.support.operator import dynamodb_requests
from tests.support.results import (
    SAMPLE_ACCOUNT_SID,
    SAMPLE_AUTH_TOKEN,
    SAMPLE_ITEM,
    SAMPLE_WEBHOOK_URL,
    LambdaContext,
    kinds,
    new_sms,
    sqs_event,
    to_awaiting,
    to_sending,
    twilio_event,
)
from vdq.core import resources
from vdq.results import matching as results
from vdq.runtime import Runtime

SID = "SM" + "a" * 32


@pytest.fixture
def runtime(settings, clock):
    rt = Runtime(settings=replace(settings, twilio_account_sid=SAMPLE_ACCOUNT_SID,
                                  twilio_auth_token=SAMPLE_AUTH_TOKEN,
                                  twilio_webhook_url=SAMPLE_WEBHOOK_URL), clock=clock)
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    yield rt
    Runtime.reset_default()


class SpySqs:
    """The real (moto) SQS client, with each send_message recorded (SQS delays are real time)."""

    def __init__(self, client):
        self._client = client
        self.sent = []

    def send_message(self, **kwargs):
        self.sent.append(kwargs)
        return self._client.send_message(**kwargs)

    def __getattr__(self, name):
        return getattr(self._client, name)


@pytest.fixture
def sqs(runtime):
    spy = SpySqs(boto3.client("sqs"))
    runtime.overrides["sqs"] = spy
    return spy


def call(event):
    answer = webhook.handler(event, LambdaContext())
    return answer["statusCode"]


def snapshot(runtime, item_id):
    item = runtime.store.get_item(item_id)
    return item.state, item.result, item.provider_id, item.updated_at, len(kinds(runtime, item_id))


def test_the_sample_callbacks_carry_a_valid_signature(aws, runtime, sqs):
    for status in ("sent", "delivered", "undelivered", "failed"):
        event = load_event(f"twilio_status_{status}")
        assert event["queryStringParameters"] == {"queue_item": SAMPLE_ITEM}
        assert call(event) == 204  # no such item: a deferred lookup, not a 403
    assert len(sqs.sent) == 4


def test_delivered_callback_succeeds_the_item_in_two_dynamodb_requests(aws, runtime, monkeypatch):
    item = to_awaiting(new_sms(runtime), runtime, SID)
    event = twilio_event("delivered", sid=SID, item_id=item.id)
    with dynamodb_requests(monkeypatch) as counts:
        assert call(event) == 204
    assert counts == {"GetItem": 1, "UpdateItem": 1}  # its history entry on the state item
    assert runtime.store.get_item(item.id).state == "succeeded"


def test_undelivered_callback_errors_the_item_with_the_error_code(aws, runtime):
    item = to_awaiting(new_sms(runtime), runtime, SID)
    assert call(twilio_event("undelivered", sid=SID, item_id=item.id, ErrorCode="30003")) == 204
    stored = runtime.store.get_item(item.id)
    assert stored.state == "errored" and "30003" in stored.result


def test_a_read_receipt_after_delivery_is_history_and_alone_it_succeeds_the_item(aws, runtime):
    delivered = to_awaiting(new_sms(runtime), runtime, SID)
    assert call(twilio_event("delivered", sid=SID, item_id=delivered.id)) == 204
    assert call(twilio_event("read", sid=SID, item_id=delivered.id)) == 204
    assert runtime.store.get_item(delivered.id).state == "succeeded"
    assert ("late", "succeed") in kinds(runtime, delivered.id)
    assert "Twilio reported read" in (runtime.store.history(delivered.id)[-1].text or "")
    other = "SM" + "b" * 32
    read_only = to_awaiting(new_sms(runtime), runtime, other)  # the delivered callback was lost
    assert call(twilio_event("read", sid=other, item_id=read_only.id)) == 204
    stored = runtime.store.get_item(read_only.id)
    assert stored.state == "succeeded" and "read" in stored.result


@pytest.mark.parametrize("status", ["canceled", "partially_delivered"])
def test_a_cancelled_or_partial_message_errors_the_item_naming_the_status(aws, runtime, status):
    item = to_awaiting(new_sms(runtime), runtime, SID)
    assert call(twilio_event(status, sid=SID, item_id=item.id)) == 204
    stored = runtime.store.get_item(item.id)
    assert stored.state == "errored" and f"Twilio reported {status}" in stored.result


@pytest.mark.parametrize("status", ["accepted", "scheduled"])
def test_a_status_before_queued_moves_a_sending_item_to_awaiting(aws, runtime, status):
    item = to_sending(new_sms(runtime), runtime)
    assert call(twilio_event(status, sid=SID, item_id=item.id)) == 204
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == ("awaiting", SID)


def test_tampered_body_is_refused_with_nothing_changed(aws, runtime, sqs):
    item = to_awaiting(new_sms(runtime), runtime, SID)
    before = snapshot(runtime, item.id)
    event = twilio_event("delivered", sid=SID, item_id=item.id)
    event["body"] = event["body"].replace("delivered", "failed")
    assert call(event) == 403
    assert snapshot(runtime, item.id) == before
    assert sqs.sent == []


def test_changed_queue_item_key_is_refused(aws, runtime):
    target = to_sending(new_sms(runtime, "+14155550101"), runtime)
    other = to_awaiting(new_sms(runtime), runtime, SID)
    before = snapshot(runtime, target.id)
    event = twilio_event("failed", sid=SID, item_id=other.id)
    event["queryStringParameters"] = {"queue_item": target.id}
    event["multiValueQueryStringParameters"] = {"queue_item": [target.id]}
    assert call(event) == 403
    assert snapshot(runtime, target.id) == before
    assert runtime.store.get_item(other.id).state == "awaiting"


def test_missing_signature_or_another_token_is_refused(aws, runtime):
    item = to_awaiting(new_sms(runtime), runtime, SID)
    assert call(twilio_event("delivered", sid=SID, item_id=item.id, sign=False)) == 403
    assert call(twilio_event("delivered", sid=SID, item_id=item.id, token="other")) == 403
    assert runtime.store.get_item(item.id).state == "awaiting"


KEY_ID = "KS0123456789abcdef0123456789abcdef"


def shared_key_event(item_id, key, algorithm="HMAC_SHA256", status="delivered"):
    """A callback a Webhook Rule of Twilio's signs: with its shared key instead of the auth
    token, in ``algorithm``, said in X-Twilio-Webhooks-Signature-Settings."""
    from twilio.request_validator import RequestValidator

    event = twilio_event(status, sid=SID, item_id=item_id, attempt=1)
    url = f"{SAMPLE_WEBHOOK_URL}?{urlencode(event['queryStringParameters'])}"
    form = dict(parse_qsl(event["body"]))
    event["headers"] = {**event["headers"],
                        "X-Twilio-Signature": RequestValidator(key).compute_signature(
                            url, form, algorithm),
                        "X-Twilio-Webhooks-Signature-Settings":
                            f"key={KEY_ID},algorithm={algorithm}"}  # fmt: skip
    return event


def test_a_callback_signed_with_a_webhooks_shared_key_is_refused_naming_the_cause(
        aws, runtime, caplog):  # fmt: skip
    # VDQ holds no shared key: each callback is refused, and the log says why and what to set,
    # not only "a bad signature".
    item = to_awaiting(new_sms(runtime), runtime, SID)
    with caplog.at_level(logging.WARNING):
        assert call(shared_key_event(item.id, "shared-secret")) == 403
    assert runtime.store.get_item(item.id).state == "awaiting"
    [line] = [r.getMessage() for r in caplog.records if "shared key" in r.getMessage()]
    assert KEY_ID in line and "TWILIO_WEBHOOK_SHARED_KEY" in line


@pytest.mark.parametrize("algorithm", ["HMAC_SHA256", "HMAC_SHA1"])
def test_a_callback_signed_with_the_configured_shared_key_is_applied(aws, runtime, algorithm):
    runtime.settings = replace(runtime.settings, twilio_webhook_shared_key="shared-secret")
    item = to_awaiting(new_sms(runtime), runtime, SID)
    assert call(shared_key_event(item.id, "other-secret", algorithm)) == 403
    assert call(shared_key_event(item.id, SAMPLE_AUTH_TOKEN, algorithm)) == 403  # not the token
    assert runtime.store.get_item(item.id).state == "awaiting"
    assert call(shared_key_event(item.id, "shared-secret", algorithm)) == 204
    assert runtime.store.get_item(item.id).state == "succeeded"
    # Without the header the auth token signs, as before.
    assert call(twilio_event("read", sid=SID, item_id=item.id, attempt=1)) == 204


def test_the_shared_key_may_come_from_the_twilio_secret(aws, settings, clock):
    import boto3
    from aws_lambda_powertools.utilities import parameters

    boto3.client("secretsmanager").create_secret(Name="vdq/twilio", SecretString=json.dumps(
        {"account_sid": SAMPLE_ACCOUNT_SID, "auth_token": SAMPLE_AUTH_TOKEN,
         "webhook_shared_key": "shared-secret"}))  # fmt: skip
    rt = Runtime(settings=replace(settings, twilio_account_sid=None, twilio_auth_token=None,
                                  twilio_secret_name="vdq/twilio",
                                  twilio_webhook_url=SAMPLE_WEBHOOK_URL), clock=clock)
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    try:
        item = to_awaiting(new_sms(rt), rt, SID)
        assert call(shared_key_event(item.id, "shared-secret")) == 204
        assert rt.store.get_item(item.id).state == "succeeded"
    finally:
        Runtime.reset_default()
        parameters.clear_caches()


def test_signature_of_a_webhook_url_with_its_own_query_is_checked(aws, runtime):
    url = SAMPLE_WEBHOOK_URL + "?env=prod"
    runtime.settings = replace(runtime.settings, twilio_webhook_url=url)
    item = to_awaiting(new_sms(runtime), runtime, SID)
    event = twilio_event("delivered", sid=SID, item_id=None, url=url + "&queue_item=" + item.id)
    event["queryStringParameters"] = {"env": "prod", "queue_item": item.id}
    event["multiValueQueryStringParameters"] = {"env": ["prod"], "queue_item": [item.id]}
    assert call(event) == 204
    assert runtime.store.get_item(item.id).state == "succeeded"


class RepeatedForm(dict):
    """A form with names posted more than once, as Twilio's validators read one (``getall``)."""

    def __init__(self, pairs):
        super().__init__(pairs)
        self.pairs = pairs

    def getall(self, name):
        return [v for k, v in self.pairs if k == name]


def test_a_form_that_repeats_a_name_is_checked_with_every_value(aws, runtime):
    # Twilio signs every value of a repeated parameter (each name, then its values sorted);
    # a check that keeps one value per name refuses an authentic callback.
    from twilio.request_validator import RequestValidator

    item = to_awaiting(new_sms(runtime), runtime, SID)
    event = twilio_event("delivered", sid=SID, item_id=item.id)
    pairs = [*parse_qsl(event["body"]), ("ChannelPrefix", "sms"), ("ChannelPrefix", "rcs")]
    url = f"{SAMPLE_WEBHOOK_URL}?{urlencode({'queue_item': item.id})}"
    signature = RequestValidator(SAMPLE_AUTH_TOKEN).compute_signature(url, RepeatedForm(pairs))
    event["headers"] = {**event["headers"], "X-Twilio-Signature": signature}
    forged = dict(event, body=urlencode([*pairs[:-1], ("ChannelPrefix", "mms")]))
    assert call(forged) == 403  # every value is signed: a changed one is refused
    event["body"] = urlencode(pairs)
    assert call(event) == 204
    assert runtime.store.get_item(item.id).state == "succeeded"


def test_base64_encoded_form_body_is_read(aws, runtime):
    item = to_awaiting(new_sms(runtime), runtime, SID)
    event = twilio_event("delivered", sid=SID, item_id=item.id)
    event["body"] = base64.b64encode(event["body"].encode()).decode()
    event["isBase64Encoded"] = True
    assert call(event) == 204
    assert runtime.store.get_item(item.id).state == "succeeded"


def test_auth_token_from_secrets_manager(aws, settings, clock):
    boto3.client("secretsmanager").create_secret(
        Name="vdq/twilio-test", SecretString=json.dumps(
            {"account_sid": SAMPLE_ACCOUNT_SID, "auth_token": SAMPLE_AUTH_TOKEN}))
    rt = Runtime(settings=replace(settings, twilio_account_sid=SAMPLE_ACCOUNT_SID,
                                  twilio_secret_name="vdq/twilio-test",
                                  twilio_webhook_url=SAMPLE_WEBHOOK_URL), clock=clock)
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    try:
        item = to_awaiting(new_sms(rt), rt, SID)
        assert call(twilio_event("delivered", sid=SID, item_id=item.id, token="wrong")) == 403
        assert call(twilio_event("delivered", sid=SID, item_id=item.id)) == 204
        assert rt.store.get_item(item.id).state == "succeeded"
    finally:
        Runtime.reset_default()


def test_a_callback_signed_with_a_rotated_token_is_taken_before_the_cached_one_expires(
        aws, settings, clock, monkeypatch):  # fmt: skip
    # Twilio signs with the primary auth token: once the secondary is promoted (and the secret
    # updated), callbacks come signed with the new one while the function still holds the old.
    from aws_lambda_powertools.utilities import parameters

    from vdq.providers import twilio as provider_module

    parameters.clear_caches()
    monkeypatch.setattr(provider_module, "_last_fresh_read", [float("-inf")])  # none yet
    secrets = boto3.client("secretsmanager")
    secrets.create_secret(Name="vdq/twilio-rotated", SecretString=json.dumps(
        {"account_sid": SAMPLE_ACCOUNT_SID, "auth_token": SAMPLE_AUTH_TOKEN}))
    rt = Runtime(settings=replace(settings, twilio_account_sid=SAMPLE_ACCOUNT_SID,
                                  twilio_secret_name="vdq/twilio-rotated",
                                  twilio_webhook_url=SAMPLE_WEBHOOK_URL), clock=clock)
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    try:
        first = to_awaiting(new_sms(rt), rt, SID)
        assert call(twilio_event("sent", sid=SID, item_id=first.id)) == 204  # token cached
        secrets.put_secret_value(SecretId="vdq/twilio-rotated", SecretString=json.dumps(
            {"account_sid": SAMPLE_ACCOUNT_SID, "auth_token": "promoted-secondary-token"}))
        assert call(twilio_event("delivered", sid=SID, item_id=first.id,
                                 token="promoted-secondary-token")) == 204  # fmt: skip
        assert rt.store.get_item(first.id).state == "succeeded"
        other = "SM" + "b" * 32
        second = to_awaiting(new_sms(rt), rt, other)
        old = twilio_event("delivered", sid=other, item_id=second.id, token=SAMPLE_AUTH_TOKEN)
        assert call(old) == 403  # the token before the rotation: refused
        assert call(twilio_event("delivered", sid=other, item_id=second.id, token="forged")) == 403
    finally:
        Runtime.reset_default()
        parameters.clear_caches()


def test_callback_without_key_matches_by_message_sid(aws, runtime):
    item = to_awaiting(new_sms(runtime), runtime, SID)
    assert call(twilio_event("delivered", sid=SID, item_id=None)) == 204
    assert runtime.store.get_item(item.id).state == "succeeded"


@pytest.mark.parametrize("attempt", [1, None])  # None: a URL from before attempts were in it
@pytest.mark.parametrize(("status", "state"), [("sent", "awaiting"), ("delivered", "succeeded"),
                                               ("failed", "errored")])
def test_key_finds_a_sending_item_without_sid_which_then_stores_it_and_its_acceptance(
        aws, runtime, status, state, attempt):  # fmt: skip
    # Twilio's acceptance writes nothing (vdq.dispatch.send): the first callback finds the item
    # sending by its URL's key and stores the SID, with the acceptance's entry, in one write.
    item = to_sending(new_sms(runtime), runtime)
    assert call(twilio_event(status, sid=SID, item_id=item.id, attempt=attempt)) == 204
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == (state, SID)
    assert stored.timer_pk is None if state != "awaiting" else stored.timer_pk.startswith("await#")
    assert runtime.store.find_by_provider_id(SID) is None  # an SMS's SID gets no mapping
    history = runtime.store.history(item.id)
    assert [(h.name, h.from_state, h.to_state) for h in history][:2] == [
        ("send", "queued", "sending"), ("await", "sending", "awaiting")]  # fmt: skip
    assert history[1].text == f"accepted by Twilio as {SID}"
    assert history[2].from_state == "awaiting"


def test_the_first_callback_of_an_attempt_reads_no_mapping(aws, runtime, monkeypatch):
    item = to_sending(new_sms(runtime), runtime)
    with dynamodb_requests(monkeypatch) as counts:
        assert call(twilio_event("sent", sid=SID, item_id=item.id, attempt=1)) == 204
    assert counts == {"GetItem": 1, "UpdateItem": 1}
    assert runtime.store.get_item(item.id).state == "awaiting"


def test_key_of_an_item_that_stores_another_sid_changes_nothing(aws, runtime, sqs):
    item = to_awaiting(new_sms(runtime), runtime, "SM" + "b" * 32)
    before = snapshot(runtime, item.id)
    assert call(twilio_event("failed", sid=SID, item_id=item.id)) == 204
    assert snapshot(runtime, item.id) == before
    assert sqs.sent == []


def test_late_failure_after_delivery_is_recorded_with_2xx(aws, runtime):
    item = to_awaiting(new_sms(runtime), runtime, SID)
    assert call(twilio_event("delivered", sid=SID, item_id=item.id)) == 204
    assert call(twilio_event("failed", sid=SID, item_id=item.id, ErrorCode="30008")) == 204
    assert runtime.store.get_item(item.id).state == "succeeded"
    assert ("late", "error") in kinds(runtime, item.id)


def test_duplicate_callback_changes_nothing_the_second_time(aws, runtime, clock):
    item = to_awaiting(new_sms(runtime), runtime, SID)
    event = twilio_event("delivered", sid=SID, item_id=item.id)
    assert call(event) == 204
    before = snapshot(runtime, item.id)
    clock.advance(30)
    assert call(event) == 204
    assert snapshot(runtime, item.id) == before


def test_callback_for_a_cancelled_item_keeps_it_cancelled(aws, runtime):
    from vdq.workflow.transitions import Step, apply

    item = new_sms(runtime)
    apply(item, Step("cancel", actor="ops", source="operator"), runtime)
    assert call(twilio_event("undelivered", sid=SID, item_id=item.id, ErrorCode="30003")) == 204
    stored = runtime.store.get_item(item.id)
    assert stored.state == "cancelled" and "30003" in stored.result


# ---- deferred lookups ------------------------------------------------------------------------


def test_unmatched_callback_queues_a_delayed_lookup_that_applies_once_the_sid_is_stored(
    aws, runtime, sqs, clock
):
    assert call(twilio_event("delivered", sid=SID, item_id=None)) == 204
    (sent,) = sqs.sent
    assert sent["QueueUrl"] == runtime.settings.results_queue_url
    assert sent["DelaySeconds"] == results.LOOKUP_FIRST_DELAY
    body = json.loads(sent["MessageBody"])
    assert body["kind"] == results.LOOKUP_KIND and body["tries"] == 1

    item = to_awaiting(new_sms(runtime), runtime, SID)
    clock.advance(30)
    answer = webhook.handler(sqs_event(sent["MessageBody"]), LambdaContext())
    assert answer == {"batchItemFailures": []}
    assert runtime.store.get_item(item.id).state == "succeeded"
    assert len(sqs.sent) == 1


def test_deferred_lookup_backs_off_then_gives_up_after_the_sms_timeout(aws, runtime, sqs, clock):
    assert call(twilio_event("delivered", sid=SID, item_id=None)) == 204
    message = sqs.sent[-1]["MessageBody"]
    delays = [sqs.sent[-1]["DelaySeconds"]]
    for _ in range(5):
        clock.advance(delays[-1])
        webhook.handler(sqs_event(message), LambdaContext())
        message = sqs.sent[-1]["MessageBody"]
        delays.append(sqs.sent[-1]["DelaySeconds"])
    assert delays == [30, 60, 120, 240, 480, 900]
    count = len(sqs.sent)
    clock.advance(runtime.settings.twilio_sms_timeout_hours * 3600)
    assert webhook.handler(sqs_event(message), LambdaContext()) == {"batchItemFailures": []}
    assert len(sqs.sent) == count  # dropped with an error in the log
    drain(aws, resources.RESULTS_QUEUE)


def test_an_attempt_of_thousands_of_digits_is_no_attempt_not_a_python_error(aws, runtime):
    """``attempt`` on the callback URL passes str.isdigit at any length; int() refuses 4,301
    digits with a ValueError, which would be a 502 and a Twilio retry for ever. It is read as
    no attempt (the SID then decides), as any other attempt VDQ never writes is."""
    item = to_awaiting(new_sms(runtime), runtime, SID)
    params = {"MessageSid": SID, "MessageStatus": "delivered"}
    outcome = results.handle_twilio_callback(params, item.id, runtime, attempt="1" * 5000)
    assert outcome == "moved" and runtime.store.get_item(item.id).state == "succeeded"


def test_a_late_callback_of_a_retried_sms_s_earlier_attempt_is_kept_in_its_history(aws, runtime):
    # Attempt 1 failed at Twilio (its SID stored by the callback), an operator retried, and
    # attempt 2's SID is stored. A later callback of attempt 1 (Twilio retries a callback that
    # timed out; an "undelivered" after "failed") names the item and attempt 1: it belongs to
    # the attempt the item left, and is recorded in its history as late, as an SMS's results
    # of older attempts always were (through the SID's mapping), never refused unrecorded.
    from vdq.workflow.transitions import Step, apply

    old_sid, new_sid = "SM" + "1" * 32, "SM" + "2" * 32
    item = to_sending(new_sms(runtime), runtime)
    assert call(twilio_event("failed", sid=old_sid, item_id=item.id, attempt=1)) == 204
    assert runtime.store.get_item(item.id).state == "errored"
    apply(item.id, Step("retry", actor="op", source="operator"), runtime)
    item = to_sending(runtime.store.get_item(item.id), runtime)
    assert call(twilio_event("sent", sid=new_sid, item_id=item.id, attempt=2)) == 204
    assert runtime.store.get_item(item.id).provider_id == new_sid
    before = len(kinds(runtime, item.id))
    assert call(twilio_event("undelivered", sid=old_sid, item_id=item.id, attempt=1)) == 204
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.provider_id, stored.attempt) == ("awaiting", new_sid, 2)
    history = runtime.store.history(item.id)
    assert len(history) == before + 1, [(h.kind, h.name, h.text) for h in history]
    late = [h for h in history if h.text and h.text.startswith("Twilio reported undelivered")]
    assert [(h.kind, h.attempt) for h in late] == [("late", 1)]  # the attempt it belongs to


@pytest.mark.parametrize("status", ["queued", "sent"])
def test_the_first_callback_of_a_retried_attempt_clears_the_last_attempts_error(
        aws, runtime, status):  # fmt: skip
    # Attempt 1 met a transient error (its result says so) and was delayed; attempt 2 is
    # accepted, and its first callback records the acceptance. The item awaits: the earlier
    # try's error no longer describes it (the acceptance clears it, as the worker's write did,
    # and as the check's does), or the console shows an awaiting SMS with an error.
    from vdq.workflow.transitions import Step, apply

    item = to_sending(new_sms(runtime), runtime)
    apply(item, Step("delay", actor="worker", retry_delay=30,
                     result="Twilio answered 503: try again later"), runtime)  # fmt: skip
    item = to_sending(runtime.store.get_item(item.id), runtime)
    assert (item.state, item.attempt) == ("sending", 2)
    assert call(twilio_event(status, sid=SID, item_id=item.id, attempt=2)) == 204
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == ("awaiting", SID)
    assert stored.result is None
