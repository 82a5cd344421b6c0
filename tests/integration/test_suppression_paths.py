"""The suppression list and one-click unsubscribe under attack: every
path to a provider honours the list, the feeds take what SES and Twilio really send, and what
a mail scanner or an attacker sends changes nothing. Against moto."""

from __future__ import annotations

import json
from dataclasses import replace

import boto3
import pytest
from functions.webhook import handler as webhook

import vdq
from tests.integration.test_suppression_api import (
    KEY,
    UNSUBSCRIBE_URL,
    inbound,
    sent_raw,
    unsubscribe_event,
)
from tests.support.aws import drain
from tests.support.fake_twilio import fake_twilio
from tests.support.operator import call, succeed
from tests.support.results import (
    SAMPLE_ACCOUNT_SID,
    SAMPLE_AUTH_TOKEN,
    SAMPLE_WEBHOOK_URL,
    LambdaContext,
    ses_event,
    sqs_event,
)
from vdq.dispatch import send
from vdq.results import suppression, unsubscribe
from vdq.runtime import Runtime
from vdq.workflow.sendqueue import SendMessage

SENDER = "shop@example.com"
OPS = ("vdq-suppressions",)


@pytest.fixture
def rt(aws, settings, clock):
    boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
    rt = Runtime(settings=replace(settings, twilio_account_sid=SAMPLE_ACCOUNT_SID,
                                  twilio_auth_token=SAMPLE_AUTH_TOKEN,
                                  twilio_webhook_url=SAMPLE_WEBHOOK_URL, unsubscribe_key=KEY,
                                  unsubscribe_url=UNSUBSCRIBE_URL), clock=clock)  # fmt: skip
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    yield rt
    Runtime.reset_default()


def use(rt: Runtime) -> Runtime:
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    return rt


def no_ses(rt):
    calls: list = []
    rt.overrides["ses_provider"] = type("NoSes", (), {
        "send_raw": lambda *a, **k: calls.append(a) or "never"})()  # fmt: skip
    return calls


# ---- every path to a provider -------------------------------------------------------------


def test_an_operator_retry_after_twilio_21610_is_cancelled_without_calling_twilio(aws, rt):
    http = fake_twilio(rt)
    http.answer(400, {"code": 21610, "message": "Attempt to send to unsubscribed recipient",
                      "status": 400})  # fmt: skip
    [item] = vdq.add_sms("+15552000000", ["+15552230004"], "Hi", runtime=rt)
    [first] = drain(aws)
    assert send.process_body(json.dumps(first), rt) == send.ERRORED
    answer = call("transition", params={"id": item.id, "name": "retry"}, query={})
    assert answer.status == 200
    [again] = drain(aws)
    assert send.process_body(json.dumps(again), rt) == send.SUPPRESSED
    assert len(http.requests) == 1  # only the first attempt reached Twilio
    stored = rt.store.get_item(item.id)
    assert stored.state == "cancelled"
    assert "+15552230004 is on the suppression list" in stored.result


def test_a_resent_copy_to_an_address_suppressed_since_is_not_sent(aws, rt):
    [item] = vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", runtime=rt)
    succeed(rt, item.id)
    drain(aws)
    suppression.suppress("ada@example.org", "complaint", actor="ses", text=None, runtime=rt)
    calls = no_ses(rt)
    answer = call("resend", params={"id": item.id})
    assert answer.status == 201, answer.body
    [copy] = drain(aws)
    assert send.process_body(json.dumps(copy), rt) == send.SUPPRESSED
    assert calls == [] and rt.store.get_item(copy["id"]).state == "cancelled"


def test_a_scheduled_release_without_the_receiver_is_refused_from_the_item(aws, rt):
    # The schedule publishes long waits from their bucket without reading the items: the
    # message names no receiver, and the worker reads it from the item.
    [item] = vdq.add_email(SENDER, ["Ada@Example.org"], "Hi", "Hello", runtime=rt)
    drain(aws)
    suppression.suppress("ada@example.org", "bounce", actor="ses", text=None, runtime=rt)
    calls = no_ses(rt)
    assert send.process_body(SendMessage(item.id, 1).body(), rt) == send.SUPPRESSED
    assert calls == [] and rt.store.get_item(item.id).state == "cancelled"


# ---- SES events ---------------------------------------------------------------------------


def results(*bodies):
    return webhook.handler(sqs_event(*bodies), LambdaContext("webhook"))


def test_an_ses_address_in_name_form_or_another_case_is_stored_as_the_worker_reads_it(aws, rt):
    results(ses_event("bounce_permanent", message_id="m-1",
                      bouncedRecipients=[{"emailAddress": "Ada Lovelace <Ada@Example.ORG>"}]))
    [item] = vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", runtime=rt)
    calls = no_ses(rt)
    [message] = drain(aws)
    assert send.process_body(json.dumps(message), rt) == send.SUPPRESSED
    assert calls == [] and rt.store.get_item(item.id).state == "cancelled"


def test_each_recipient_of_a_bounce_is_suppressed_once_whatever_the_duplicates(aws, rt):
    event = ses_event("bounce_permanent", message_id="m-2", bouncedRecipients=[
        {"emailAddress": "a@example.org"}, {"emailAddress": "B@example.org"}])  # fmt: skip
    results(event)
    rt.clock.advance(60)
    results(event)  # SNS and SQS deliver at least once
    for who in ("a@example.org", "b@example.org"):
        assert rt.store.get_suppression(who).since == "2026-01-01T00:00:00.000000Z"
        assert [e.action for e in rt.store.suppression_history(who)] == ["added"]


def test_a_complaint_naming_no_recipient_suppresses_nothing(aws, rt):
    results(ses_event("complaint", message_id="m-3", complainedRecipients=[]))
    assert call("list_suppressions", groups=OPS).body["suppressions"] == []


def test_a_complaint_from_ses_account_suppression_list_says_so(aws, rt):
    # SES did not send: the address is on the account's list (for an old complaint). The
    # receiver did not complain about this message, and the event has no feedback type.
    event = ses_event("complaint", message_id="m-4", complaintSubType="OnAccountSuppressionList")
    event["complaint"].pop("complaintFeedbackType", None)
    results(event)
    [who] = event["complaint"]["complainedRecipients"]
    record = rt.store.get_suppression(who["emailAddress"].lower())
    assert record.reason == "ses_suppression_list"
    assert "OnAccountSuppressionList" in record.text


# ---- inbound SMS --------------------------------------------------------------------------


def test_help_never_suppresses_not_even_after_a_start(aws, rt):
    for word in ("HELP", "info", " Help "):
        inbound(word)
    assert rt.store.get_suppression("+15552230001") is None
    assert [e.action for e in rt.store.suppression_history("+15552230001")] == ["noted"] * 3


def test_a_start_does_not_lift_a_suppression_that_changed_since_it_was_read(
        aws, rt, monkeypatch):  # fmt: skip
    # START read an opt-out; before it removed it, the opt-out was lifted and an operator
    # suppressed the number: START must not remove the operator's suppression.
    suppression.suppress("+15552230001", "sms_opt_out", actor="twilio", text=None, runtime=rt)
    stale = rt.store.get_suppression("+15552230001")
    suppression.unsuppress("+15552230001", actor="twilio", text="START", runtime=rt)
    rt.clock.advance(1)
    suppression.suppress("+15552230001", "operator", actor="op", text=None, runtime=rt)
    reads = iter([stale])
    real = rt.store.get_suppression
    monkeypatch.setattr(rt.store, "get_suppression",
                        lambda r, *more: next(reads, None) or real(r, *more))
    inbound("START")
    assert rt.store.get_suppression("+15552230001").reason == "operator"


# ---- operators ----------------------------------------------------------------------------


@pytest.mark.parametrize("group", ["vdq-viewers", "vdq-senders", "vdq-operators"])
def test_every_suppression_route_is_a_403_without_the_suppression_permissions(aws, rt, group):
    suppression.suppress("+15552230009", "operator", actor="op", text=None, runtime=rt)
    for name, kwargs in (("list_suppressions", {}),
                         ("add_suppression", {"body": {"receiver": "bob@example.org"}}),
                         ("suppression_history", {"params": {"receiver": "%2B15552230009"}}),
                         ("remove_suppression", {"params": {"receiver": "%2B15552230009"}})):
        assert call(name, groups=(group,), **kwargs).status == 403, name
    assert rt.store.get_suppression("+15552230009") is not None
    assert rt.store.get_suppression("bob@example.org") is None


@pytest.mark.parametrize("segment", ["A%2BB%40Example.org", "a+b@example.org",
                                     "a%2Bb%40example.org"])
def test_delete_takes_a_receiver_with_plus_and_at_encoded_or_not(aws, rt, segment):
    suppression.suppress("a+b@example.org", "operator", actor="op", text=None, runtime=rt)
    rt.clock.advance(1)
    answer = call("remove_suppression", params={"receiver": segment}, groups=OPS)
    assert answer.status == 200 and answer.body["suppression"]["receiver"] == "a+b@example.org"
    assert rt.store.get_suppression("a+b@example.org") is None
    actors = [(e.action, e.actor) for e in rt.store.suppression_history("a+b@example.org")]
    assert actors[-1][0] == "removed" and actors[-1][1] != "op"


# ---- one-click unsubscribe ----------------------------------------------------------------


def token_for(rt, receiver="ada@example.org", list_name="general"):
    return unsubscribe.make_token(receiver, list_name, unsubscribe.key(rt.settings),
                                  rt.settings.table_name)  # fmt: skip


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"])
def test_only_a_post_unsubscribes(aws, rt, method):
    answer = webhook.handler(unsubscribe_event(method, token_for(rt)), LambdaContext("webhook"))
    assert answer["statusCode"] in (200, 405)
    assert rt.store.get_suppression("ada@example.org") is None
    assert rt.store.get_suppression("ada@example.org", "general") is None


def test_an_unreadable_unsubscribe_key_delays_a_bulk_email_instead_of_failing_it(aws, rt):
    # A deploy reads the key from Secrets Manager: when it cannot (throttled, not yet there),
    # nothing was sent, so the email is retried like an SES throttle, not errored for good.
    rt = use(Runtime(settings=replace(rt.settings, unsubscribe_key=None,
                                      unsubscribe_secret_name="vdq-no-such-secret"),
                     clock=rt.clock))  # fmt: skip
    [item] = vdq.add_email(SENDER, ["ada@example.org"], "News", "Hello", list_unsubscribe=True,
                           runtime=rt)  # fmt: skip
    [message] = drain(aws)
    assert send.process_body(json.dumps(message), rt) == send.DELAYED
    stored = rt.store.get_item(item.id)
    assert stored.state == "delayed" and "unsubscribe key" in stored.result


def test_a_deploys_key_from_secrets_manager_signs_the_links_the_webhook_accepts(aws, rt):
    boto3.client("secretsmanager").create_secret(Name="vdq-test-unsubscribe-key",
                                                 SecretString="a generated key")  # fmt: skip
    rt = use(Runtime(settings=replace(rt.settings, unsubscribe_key=None,
                                      unsubscribe_secret_name="vdq-test-unsubscribe-key"),
                     clock=rt.clock))  # fmt: skip
    vdq.add_email(SENDER, ["ada@example.org"], "News", "Hello", list_unsubscribe=True,
                  runtime=rt)  # fmt: skip
    [message] = drain(aws)
    assert send.process_body(json.dumps(message), rt) == send.ACCEPTED
    [sent] = sent_raw()
    token = sent["List-Unsubscribe"][1:-1].rsplit("/", 1)[1]
    assert token == token_for(rt)
    answer = webhook.handler(unsubscribe_event("POST", token), LambdaContext("webhook"))
    assert answer["statusCode"] == 200
    assert rt.store.get_suppression("ada@example.org", "general").reason == "unsubscribe"


def test_an_automatic_retry_to_an_address_suppressed_meanwhile_is_not_sent(aws, rt):
    from vdq.providers import TransientProviderError
    from vdq.workflow.lanes import message_for

    def throttled(*_a, **_k):
        raise TransientProviderError("SES", "throttled")

    rt.overrides["ses_provider"] = type("Throttled", (), {"send_raw": throttled})()
    [item] = vdq.add_email(SENDER, ["ada@example.org"], "Hi", "Hello", runtime=rt)
    [message] = drain(aws)
    assert send.process_body(json.dumps(message), rt) == send.DELAYED
    suppression.suppress("ada@example.org", "bounce", actor="ses", text=None, runtime=rt)
    calls = no_ses(rt)
    retry = message_for(rt.store.get_item(item.id))  # what the delayed publish carries
    assert send.process_body(retry.body(), rt) == send.SUPPRESSED
    assert calls == [] and rt.store.get_item(item.id).state == "cancelled"
