"""Faults injected at the AWS and provider calls of the send and result paths, each with the
outcome VDQ promises: the item is never lost, SES/Twilio is never called twice for one attempt,
and the item ends where the seed (improved by DESIGN.md) says."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError
from functions.send import handler as send_handler

import requests
import vdq
from tests.reliability.support import (
    FIGURES,
    Crash,
    FakeSes,
    RecordingQueue,
    check_history,
    make_settings,
    moto_aws,
    runtime_for,
)
from tests.support.events import load_event
from tests.support.fake_twilio import fake_twilio
from tests.support.results import LambdaContext, ses_event
from vdq.dispatch import send
from vdq.providers.ses import SesProvider
from vdq.results import matching as results
from vdq.schedules import sweeps as schedules
from vdq.store import QueueItemRecord
from vdq.store import tx as store_tx
from vdq.workflow.sendqueue import SendMessage, SendQueue


@pytest.fixture
def env() -> Iterator[dict[str, Any]]:
    with moto_aws() as urls:
        ses, queue = FakeSes(), RecordingQueue()
        rt = runtime_for(make_settings(urls), ses_provider=ses, send_queue=queue)
        yield {"rt": rt, "ses": ses, "queue": queue, "urls": urls}


def aws_error(client: Any, operation: str, code: str, status: int = 400, times: int = 1,
              when: Callable[[dict[str, Any]], bool] | None = None) -> list:  # fmt: skip
    """Make the next ``times`` calls of ``operation`` on ``client`` (those whose request
    ``when`` accepts) answer ``code``."""
    left = [times]

    def answer(params: dict[str, Any], **_: Any) -> Any:
        if left[0] <= 0 or (when is not None and not when(params)):
            return None
        left[0] -= 1
        FIGURES["faults injected"] += 1
        body = {"Error": {"Code": code, "Message": f"injected {code}"},
                "ResponseMetadata": {"HTTPStatusCode": status}}  # fmt: skip
        return AWSResponse("https://injected", status, {}, None), body

    service = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register(f"before-call.{service}.{operation}", answer)
    return left


def dynamodb_client() -> Any:
    return QueueItemRecord._get_connection().connection.client


# Tries of a state write the store makes while DynamoDB throttles it.
RECORD_TRIES = store_tx.UPDATE_TRIES


def writes_history(params: dict[str, Any]) -> bool:
    """A state write that carries history entries (a claim, the record of an outcome or an
    event), not a pace reservation or a timer move."""
    return "recent" in str(params.get("body"))


def claims(params: dict[str, Any]) -> bool:
    """The worker's claim: a state write that asks for the item as it was when its condition
    fails (it reads nothing first)."""
    return "ReturnValuesOnConditionCheckFailure" in str(params.get("body"))


def records_outcome(params: dict[str, Any]) -> bool:
    """A state write that carries history entries and is no claim."""
    return writes_history(params) and not claims(params)


def run_checks(rt: Any) -> list[str]:
    """The checks the send published to the results queue, handled now (their delay over)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    from vdq.results import checks

    name = rt.settings.results_queue_url.rsplit("/", 1)[-1]
    queue = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].queues[name]
    bodies = [json.loads(m.body) for m in queue._messages]
    return [checks.handle(b, rt) for b in bodies if b.get("kind") == checks.KIND]


def email(rt: Any) -> QueueItemRecord:
    (item,) = vdq.add_email({"email": "shop@example.com"}, ["ada@example.org"], "Hi", "Text",
                            runtime=rt)  # fmt: skip
    return item


def first(queue: RecordingQueue) -> SendMessage:
    return SendMessage.parse(queue.bodies[0])


def assert_sound(rt: Any, item_id: str) -> QueueItemRecord:
    item = rt.store.get_item(item_id)
    assert item is not None, "the accepted item was lost"
    assert check_history(item, rt.store.history(item_id)) == []
    return item


def test_sqs_publish_failure_at_enqueue_moves_the_item_to_errored_with_the_reason(env):
    rt = env["rt"]
    rt.overrides.pop("send_queue")
    import boto3

    sqs = boto3.client("sqs")
    rt.overrides["send_queue"] = SendQueue(sqs, rt.settings.send_queue_url)
    aws_error(sqs, "SendMessageBatch", "ServiceUnavailable", 503)
    item = email(rt)
    stored = assert_sound(rt, item.id)
    assert stored.state == "errored" and "ServiceUnavailable" in stored.result


def test_dynamodb_throttling_on_the_claim_leaves_the_message_for_sqs_and_calls_no_provider(
        env, monkeypatch):  # fmt: skip
    """The claim is tried again while DynamoDB throttles it (as every state write is); when it
    keeps throttling, the message's record fails and nothing is sent."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    monkeypatch.setattr(store_tx.time, "sleep", lambda _s: None)
    item = email(rt)
    left = aws_error(dynamodb_client(), "UpdateItem", "ProvisionedThroughputExceededException",
                     times=RECORD_TRIES, when=claims)  # fmt: skip
    with pytest.raises(Exception, match="ProvisionedThroughputExceeded"):
        send.process(first(queue), rt)
    assert left == [0] and not ses.calls
    # SQS delivers it again once the table answers: sent once.
    assert send.process(first(queue), rt) == send.ACCEPTED
    assert assert_sound(rt, item.id).state == "sending" and sum(ses.calls.values()) == 1
    assert run_checks(rt) == ["checked 1, 1 given their timeout's timer"]
    assert assert_sound(rt, item.id).state == "awaiting"


def test_a_refused_check_is_written_as_the_acceptance_before_the_message_is_done(env):
    """SQS refuses the check: the worker writes SES's acceptance itself (awaiting, the ID,
    its entry and its timeout's timer) before its message is deleted."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    item = email(rt)
    aws_error(rt.client("sqs"), "SendMessage", "ServiceUnavailable", 503)
    assert send.process(first(queue), rt) == send.ACCEPTED
    stored = assert_sound(rt, item.id)
    (message_id,) = ses.accepted
    assert (stored.state, stored.provider_id) == ("awaiting", message_id)
    assert stored.timer_pk.startswith("mailwait#")
    assert run_checks(rt) == []  # none was published


def test_dynamodb_throttling_on_the_record_is_not_a_second_send(env, monkeypatch):
    """SES took the email, SQS refused its check, then the acceptance the worker writes
    instead failed (the table kept throttling it through the store's own retries): the
    message comes again, waits while the claim's lease lasts, then marks the outcome unknown
    instead of sending again."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    monkeypatch.setattr(store_tx.time, "sleep", lambda _s: None)
    item = email(rt)
    aws_error(rt.client("sqs"), "SendMessage", "ServiceUnavailable", 503)
    # The claim's UpdateItem carries its history entry too: the record is the second.
    left = aws_error(dynamodb_client(), "UpdateItem", "ProvisionedThroughputExceededException",
                     times=RECORD_TRIES, when=records_outcome)  # fmt: skip
    with pytest.raises(Exception, match="neither published nor done"):
        send.process(first(queue), rt)
    assert left == [0]
    assert send.process(first(queue), rt) == send.WAITING
    rt.clock.advance(rt.settings.lease_seconds + 1)
    assert send.process(first(queue), rt) == send.ERRORED
    stored = assert_sound(rt, item.id)
    assert stored.state == "errored" and stored.result.startswith("outcome unknown")
    assert sum(ses.calls.values()) == 1


def test_a_delivery_before_the_provider_call_returns_is_the_acceptance_and_the_result(env):
    """The SES Delivery event is handled before the worker's call returns: it stores the ID
    and the acceptance with its own result; the worker writes nothing, and the check finds
    the email done."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    item = email(rt)
    original = ses.send_raw

    def accept_then_deliver(**kwargs: Any) -> str:
        message_id = original(**kwargs)
        results.handle_ses_event(ses_event("delivery", message_id=message_id, item_id=item.id),
                                 rt)  # fmt: skip
        FIGURES["faults injected"] += 1
        return message_id

    ses.send_raw = accept_then_deliver  # type: ignore[method-assign]
    assert send.process(first(queue), rt) == send.ACCEPTED
    stored = assert_sound(rt, item.id)
    assert stored.state == "succeeded" and stored.provider_id in ses.accepted
    assert [h.name for h in rt.store.history(item.id)] == ["send", "await", "succeed"]
    assert run_checks(rt) == ["checked 1, 0 given their timeout's timer"]
    assert rt.store.get_item(item.id).updated_at == stored.updated_at


def test_ses_throttling_puts_the_email_back_at_the_same_attempt_and_never_errors_it(env):
    # Throttling is not a failure of the item (vdq.dispatch.pacing): no new attempt, no retry
    # counted.
    rt, queue = env["rt"], env["queue"]
    import boto3

    boto3.client("ses").verify_email_identity(EmailAddress="shop@example.com")
    client = boto3.client("sesv2")
    rt.overrides["ses_provider"] = SesProvider(client)
    aws_error(client, "SendEmail", "TooManyRequestsException", 429)
    item = email(rt)
    assert send.process(first(queue), rt) == send.PACED
    stored = assert_sound(rt, item.id)
    assert (stored.state, stored.attempt, stored.retries or 0) == ("queued", 1, 0)
    assert "Maximum sending rate" in stored.result or "TooManyRequests" in stored.result
    assert [json.loads(b)["attempt"] for b in queue.bodies] == [1, 1]
    again = SendMessage.parse(queue.bodies[1])
    assert send.process(again, rt) == send.ACCEPTED
    # The first copy: already claimed, and sending until its first event or its check.
    assert send.process(first(queue), rt) == send.WAITING
    run_checks(rt)
    assert send.process(first(queue), rt) == send.DROPPED
    assert assert_sound(rt, item.id).state == "awaiting"


@pytest.mark.parametrize(("code", "status"), [("InternalFailure", 500),
                                              ("ServiceUnavailable", 503)])  # fmt: skip
def test_ses_5xx_delay_the_email_and_publish_a_new_attempt(env, code, status):
    rt, queue = env["rt"], env["queue"]
    import boto3

    client = boto3.client("sesv2")
    rt.overrides["ses_provider"] = SesProvider(client)
    aws_error(client, "SendEmail", code, status)
    item = email(rt)
    assert send.process(first(queue), rt) == send.DELAYED
    stored = assert_sound(rt, item.id)
    assert (stored.state, stored.attempt, stored.retry_delay) == ("delayed", 2, 16)
    assert [json.loads(b)["attempt"] for b in queue.bodies] == [1, 2]
    assert send.process(first(queue), rt) == send.DROPPED  # the old attempt revoked


def test_an_ses_read_timeout_is_an_unknown_outcome_not_a_retry(env):
    rt, queue = env["rt"], env["queue"]
    import boto3

    client = boto3.client("sesv2")
    rt.overrides["ses_provider"] = SesProvider(client)

    def timeout(**_: Any) -> None:
        FIGURES["faults injected"] += 1
        raise ReadTimeoutError(endpoint_url="https://email.us-east-1.amazonaws.com")

    client.meta.events.register("before-call.sesv2.SendEmail", timeout)
    item = email(rt)
    assert send.process(first(queue), rt) == send.ERRORED
    stored = assert_sound(rt, item.id)
    assert stored.state == "errored" and stored.result.startswith("outcome unknown")
    assert len(queue.bodies) == 1  # not resent on its own


def sms(rt: Any) -> QueueItemRecord:
    (item,) = vdq.add_sms("+15005550006", ["+14155550100"], "Your code", runtime=rt)
    return item


@pytest.mark.parametrize("fault", ["500", "503", "read_timeout", "connect_timeout"])
def test_twilio_5xx_and_timeouts(env, fault):
    rt, queue = env["rt"], env["queue"]
    http = fake_twilio(rt)
    if fault in ("500", "503"):
        http.answer(int(fault), {"code": 20500, "message": "Internal Server Error",
                                 "status": int(fault)})  # fmt: skip
    elif fault == "read_timeout":
        http.answers.append(requests.ReadTimeout("read timed out"))
    else:
        http.answers.append(requests.ConnectTimeout("connect timed out"))
    FIGURES["faults injected"] += 1
    item = sms(rt)
    assert send.process(first(queue), rt) == send.ERRORED
    stored = assert_sound(rt, item.id)
    # A 500 on a create may have sent the SMS (Twilio's error 20500 page says so): unknown.
    expected = ("outcome unknown" if fault in ("500", "read_timeout")
                else "SMS has no automatic retry")  # fmt: skip
    assert stored.state == "errored" and expected in stored.result
    assert len(http.requests) == 1


def test_lambda_timeout_after_the_claim_is_recovered_by_its_message(env):
    """The send message is the claim's lease: delivered again within the lease, it waits (no
    second send); after it, the attempt is over and the item errored "outcome unknown"."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    item = email(rt)
    ses.plan = "crash"
    with pytest.raises(Crash):
        send.process(first(queue), rt)
    FIGURES["faults injected"] += 1
    ses.plan = "ok"
    assert send.process(first(queue), rt) == send.WAITING  # redelivered: no second send
    schedules.run(["sweep"], rt)
    assert rt.store.get_item(item.id).state == "sending"  # lease not over yet
    rt.clock.advance(rt.settings.lease_seconds + 1)
    assert send.process(first(queue), rt) == send.ERRORED
    stored = assert_sound(rt, item.id)
    assert stored.state == "errored" and stored.result.startswith("outcome unknown")
    assert sum(ses.calls.values()) == 1
    # SES's own events still find the item by its tag, and are recorded, not lost: a Delivery
    # after the lease is history, the unknown outcome stays for an operator to read beside it.
    (message_id,) = ses.accepted
    assert results.handle_ses_event(ses_event("delivery", message_id=message_id,
                                              item_id=item.id), rt) == "late"  # fmt: skip
    stored = rt.store.get_item(item.id)
    assert stored.state == "errored" and stored.result.startswith("outcome unknown")
    late = rt.store.history(item.id)[-1]
    assert (late.kind, late.name) == ("late", "succeed") and "250 2.0.0 OK" in late.text


def test_a_lease_end_whose_write_is_refused_fails_its_message_and_the_next_delivery_ends_it(
        env, monkeypatch):  # fmt: skip
    """The write that ends a lease (errored, with its history entry) conflicts on every try:
    the message's record fails (SQS delivers it again), the item stays sending, and the next
    delivery ends it (the model's schedule: a crash after the claim, the lease passing, a
    delivery under a TransactionConflict)."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    monkeypatch.setattr(store_tx.time, "sleep", lambda _s: None)
    item = email(rt)
    ses.plan = "crash"
    with pytest.raises(Crash):
        send.process(first(queue), rt)
    ses.plan = "ok"
    rt.clock.advance(rt.settings.lease_seconds + 1)
    left = aws_error(dynamodb_client(), "UpdateItem", "TransactionConflictException",
                     times=RECORD_TRIES, when=records_outcome)  # fmt: skip
    with pytest.raises(Exception, match="kept refusing"):
        send.process(first(queue), rt)
    assert left == [0]
    assert rt.store.get_item(item.id).state == "sending"
    assert send.process(first(queue), rt) == send.ERRORED
    stored = assert_sound(rt, item.id)
    assert stored.state == "errored" and stored.result.startswith("outcome unknown")
    assert sum(ses.calls.values()) == 1


def test_a_poison_send_message_fails_only_its_record_so_sqs_moves_it_to_the_dlq(env):
    rt, queue = env["rt"], env["queue"]
    item = email(rt)
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    try:
        event = load_event("sqs_send_message")
        good = dict(event["Records"][0], messageId="good", body=queue.bodies[0])
        poison = dict(event["Records"][0], messageId="poison", body='{"id": 7, "attempt": "x"')
        FIGURES["faults injected"] += 1
        answer = send_handler.handler({"Records": [poison, good]}, LambdaContext())
    finally:
        runtime_module._DEFAULT = None
    assert answer == {"batchItemFailures": [{"itemIdentifier": "poison"}]}
    assert assert_sound(rt, item.id).state == "sending"  # sent: its check names it
    assert run_checks(rt) == ["checked 1, 1 given their timeout's timer"]


def test_a_poison_results_message_is_dropped_and_a_failing_one_is_retried(env, monkeypatch):
    rt = env["rt"]
    monkeypatch.setattr(store_tx.time, "sleep", lambda _s: None)
    from functions.webhook import handler as webhook

    item = email(rt)
    send.process(first(env["queue"]), rt)
    (message_id,) = env["ses"].accepted
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    try:
        template = load_event("sqs_ses_delivery")["Records"][0]
        bad = dict(template, messageId="bad", body="{not json")
        good = dict(template, messageId="good",
                    body=json.dumps(ses_event("delivery", message_id=message_id,
                                              item_id=item.id)))  # fmt: skip
        left = aws_error(dynamodb_client(), "UpdateItem",
                         "ProvisionedThroughputExceededException", times=RECORD_TRIES,
                         when=writes_history)  # fmt: skip
        FIGURES["faults injected"] += 1
        answer = webhook.handler({"Records": [bad, good]}, LambdaContext())
        assert answer == {"batchItemFailures": [{"itemIdentifier": "good"}]}
        assert left == [0]
        assert webhook.handler({"Records": [good]}, LambdaContext()) == {"batchItemFailures": []}
    finally:
        runtime_module._DEFAULT = None
    assert assert_sound(rt, item.id).state == "succeeded"




@pytest.mark.parametrize("kind", ["delivery", "bounce_permanent", "delivery_delay", "send"])
def test_an_event_for_an_item_whose_worker_died_after_ses_took_it_records_the_send(env, kind):
    """Regression (found by test_model): the worker dies after SES accepted, then SES's event
    moves the item out of ``sending``; the deferred ``send`` entry must not be lost. The first
    event is the email's outcome or its delay (Send is not subscribed; one published before an
    upgrade still does the same)."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    item = email(rt)
    ses.plan = "crash"
    with pytest.raises(Crash):
        send.process(first(queue), rt)
    (message_id,) = ses.accepted
    event = ses_event(kind, message_id=message_id, item_id=item.id)
    assert results.handle_ses_event(event, rt) == "moved"
    stored = assert_sound(rt, item.id)
    assert stored.provider_id == message_id
    names = [(h.kind, h.name) for h in rt.store.history(item.id)]
    assert names[0] == ("transition", "send")
