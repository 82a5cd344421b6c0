"""The send function's batch, sent several at a time (vdq.dispatch.sendbatch), against moto.

Provider fakes that wait on a barrier prove sends are in flight together without timing
anything: if the handler sent one at a time, the barrier would never fill and would break.
moto's requests are made atomic (``atomic_requests``), as DynamoDB's are.
"""

from __future__ import annotations

import io
import json
import threading
from dataclasses import replace

import boto3
import pytest
from functions.send import handler as send_handler

import vdq
from tests.support.aws import checks, drain, run_checks
from tests.support.lambda_context import LambdaContext
from vdq.core.observability import logger, metrics
from vdq.dispatch import pacing, sendbatch
from vdq.providers import PermanentProviderError, ThrottledProviderError
from vdq.results import checks as sent_checks

SENDER = "shop@example.com"
BARRIER_TIMEOUT = 20.0  # s: only a broken pipeline ever waits this long


class Crash(BaseException):
    """The function's process dies (as a timeout or an out-of-memory kill would)."""


class BarrierSes:
    """Each send waits until ``together`` sends are in flight at once, then answers with
    ``answer(receiver)``: a message ID, or an exception to raise."""

    def __init__(self, together: int, answer=None) -> None:
        self.barrier = threading.Barrier(together, timeout=BARRIER_TIMEOUT)
        self.answer = answer or (lambda receiver: f"0100-{receiver}")
        self.lock = threading.Lock()
        self.flying = self.most = 0
        self.threads: set[str] = set()
        self.receivers: list[str] = []

    def send_raw(self, *, receiver: str, **_):
        with self.lock:
            self.flying += 1
            self.most = max(self.most, self.flying)
            self.threads.add(threading.current_thread().name)
            self.receivers.append(receiver)
        try:
            self.barrier.wait()
            answer = self.answer(receiver)
        finally:
            with self.lock:
                self.flying -= 1
        if isinstance(answer, BaseException):
            raise answer
        return answer


@pytest.fixture
def rt(aws, runtime, atomic_requests):
    boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
    runtime.settings = replace(runtime.settings, ses_max_send_rate=1000.0)
    return runtime


def batch(rt, aws, count: int, *, parallelism: int | None = None) -> tuple[list, dict]:
    """``count`` emails enqueued; their items and the SQS event of their send messages."""
    if parallelism is not None:
        rt.settings = replace(rt.settings, send_parallelism=parallelism)
    items = vdq.add_email(SENDER, [f"r{n}@example.org" for n in range(count)], "Hi", "Hello",
                          runtime=rt)  # fmt: skip
    by_id = {m["id"]: m for m in drain(aws)}
    # As the mapping hands them over: the lane's queue and a receipt (a message handed back
    # changes its visibility through them).
    arn = f"arn:aws:sqs:us-east-1:123456789012:{rt.settings.send_queue_url.rsplit('/', 1)[-1]}"
    records = [{"messageId": f"m{n}", "receiptHandle": f"r{n}", "eventSourceARN": arn,
                "body": json.dumps(by_id[item.id])} for n, item in enumerate(items)]  # fmt: skip
    return items, {"Records": records}


def states(rt, items) -> list[str]:
    return [rt.store.get_item(item.id).state for item in items]


def recorded(rt, aws, items) -> list[str]:
    """The items' states once the batch's check has run: SES's acceptance is written by an
    accepted email's first event or its check (vdq.results.checks), not by the worker, which
    leaves it ``sending``."""
    run_checks(aws, rt)
    return states(rt, items)


def refuse_checks(rt):
    """SQS refuses the check (SendMessage to the results queue fails)."""
    def refuse(**_):
        raise ConnectionError("the results queue is out of reach")

    rt.client("sqs").meta.events.register("before-call.sqs.SendMessage", refuse)


def test_a_batchs_sends_are_in_flight_together_and_all_recorded(rt, aws):
    items, event = batch(rt, aws, 4)
    ses = rt.overrides["ses_provider"] = BarrierSes(together=4)
    assert send_handler.handler(event, LambdaContext()) == {"batchItemFailures": []}
    assert ses.most == 4 and threading.main_thread().name not in ses.threads
    assert states(rt, items) == ["sending"] * 4  # until their first events or their check
    assert [(i, a) for i, a, _, _ in checks(aws)] == [(i.id, 1) for i in items]
    assert recorded(rt, aws, items) == ["awaiting"] * 4
    assert sorted(rt.store.get_item(i.id).provider_id for i in items) == sorted(
        f"0100-r{n}@example.org" for n in range(4)
    )


def test_no_more_sends_are_in_flight_than_the_parallelism(rt, aws):
    items, event = batch(rt, aws, 9, parallelism=3)
    ses = rt.overrides["ses_provider"] = BarrierSes(together=3)
    assert send_handler.handler(event, LambdaContext()) == {"batchItemFailures": []}
    assert ses.most == 3 and len(ses.receivers) == 9
    assert recorded(rt, aws, items) == ["awaiting"] * 9


def test_parallelism_one_sends_each_in_the_calling_thread(rt, aws):
    items, event = batch(rt, aws, 3, parallelism=1)
    ses = rt.overrides["ses_provider"] = BarrierSes(together=1)
    assert send_handler.handler(event, LambdaContext()) == {"batchItemFailures": []}
    assert ses.threads == {threading.current_thread().name} and ses.most == 1
    assert recorded(rt, aws, items) == ["awaiting"] * 3


def test_a_throttled_send_slows_the_pace_in_the_main_thread_and_goes_back(rt, aws, monkeypatch):
    items, event = batch(rt, aws, 4)
    throttled = "r2@example.org"
    rt.overrides["ses_provider"] = BarrierSes(together=4, answer=lambda receiver: (
        ThrottledProviderError("SES", "Maximum sending rate exceeded.",
                               code="TooManyRequestsException")
        if receiver == throttled else f"0100-{receiver}"))  # fmt: skip
    cuts: list[str] = []
    pacer = pacing.get_pacer(rt)
    original = pacer.slow_down

    def slow_down(*args, **kwargs):
        cuts.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(pacer, "slow_down", slow_down)
    assert send_handler.handler(event, LambdaContext()) == {"batchItemFailures": []}
    assert cuts == [threading.current_thread().name]  # the pacer's own thread, once
    assert recorded(rt, aws, items) == ["awaiting", "awaiting", "queued", "awaiting"]
    delayed = aws["sqs"].get_queue_attributes(  # published again, after its delay
        QueueUrl=rt.settings.send_queue_url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    assert delayed["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"
    assert [h.name for h in rt.store.history(items[2].id)][-1] == "throttled"


def test_a_refused_check_is_written_as_each_items_acceptance_before_the_batch_returns(rt, aws):
    items, event = batch(rt, aws, 3)
    rt.overrides["ses_provider"] = BarrierSes(together=3)
    refuse_checks(rt)
    assert send_handler.handler(event, LambdaContext()) == {"batchItemFailures": []}
    assert checks(aws) == []
    # As the worker wrote SES's acceptance before checks: awaiting, the ID, its entry, and
    # (nothing else will look at it) its timeout's timer, in one write each.
    for n, item in enumerate(items):
        stored = rt.store.get_item(item.id)
        assert (stored.state, stored.provider_id) == ("awaiting", f"0100-r{n}@example.org")
        assert stored.timer_pk.startswith("mailwait#")
        assert rt.store.history(item.id)[-1].text == f"accepted by SES as 0100-r{n}@example.org"


def test_a_send_whose_outcome_was_not_recorded_is_the_only_one_redelivered(rt, aws, monkeypatch):
    items, event = batch(rt, aws, 3)
    rt.overrides["ses_provider"] = BarrierSes(together=3)
    refuse_checks(rt)
    original = sent_checks.accept

    def accept(item, *args, **kwargs):
        if item.id == items[1].id:
            raise OSError("the store failed")
        return original(item, *args, **kwargs)

    monkeypatch.setattr(sent_checks, "accept", accept)
    answer = send_handler.handler(event, LambdaContext())
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m1"}]}
    assert states(rt, items) == ["awaiting", "sending", "awaiting"]


def test_every_send_failing_to_record_fails_the_invocation(rt, aws, monkeypatch):
    _, event = batch(rt, aws, 2)
    rt.overrides["ses_provider"] = BarrierSes(together=2)
    refuse_checks(rt)
    monkeypatch.setattr(sent_checks, "accept", lambda *a, **k: (_ for _ in ()).throw(
        OSError("the store failed")))  # fmt: skip
    with pytest.raises(sendbatch.BatchFailed):
        send_handler.handler(event, LambdaContext())


def test_two_copies_of_one_attempt_in_a_batch_make_one_send(rt, aws, monkeypatch):
    """The copy's claim fails while the first is with its sending thread (SES answers once the
    copy was prepared): it finds the attempt claimed, at the very same instant (the clock
    stands still here), within its lease, and is handed back to SQS to come again at the
    lease's end (ChangeMessageVisibility)."""
    items, event = batch(rt, aws, 1)
    first = event["Records"][0]
    event["Records"].append({**first, "messageId": "copy"})
    copied = threading.Event()
    prepare = sendbatch.prepare

    def watched(message, upcoming, runtime, deadline=None):
        try:
            return prepare(message, upcoming, runtime, deadline)
        finally:
            if message["messageId"] == "copy":
                copied.set()

    class Ses(BarrierSes):
        def send_raw(self, **kwargs):
            copied.wait(timeout=5)
            return super().send_raw(**kwargs)

    monkeypatch.setattr(sendbatch, "prepare", watched)
    ses = rt.overrides["ses_provider"] = Ses(together=1)
    assert send_handler.handler(event, LambdaContext()) == {
        "batchItemFailures": [{"itemIdentifier": "copy"}]}  # fmt: skip
    assert ses.receivers == ["r0@example.org"] and recorded(rt, aws, items) == ["awaiting"]


def test_each_sending_thread_logs_with_its_own_items_id(rt, aws):
    items, event = batch(rt, aws, 4)
    rt.overrides["ses_provider"] = BarrierSes(together=4, answer=lambda receiver: (
        PermanentProviderError("SES", f"refused {receiver}")))  # fmt: skip
    handler, buffer = logger.registered_handler, io.StringIO()
    stream = handler.stream
    handler.setStream(buffer)
    try:
        assert send_handler.handler(event, LambdaContext()) == {"batchItemFailures": []}
    finally:
        handler.setStream(stream)
    lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
    failed = [line for line in lines if str(line.get("message", "")).startswith("send of ")]
    assert len(failed) == 4
    for line in failed:  # "send of <id> failed: ..." logged under the same item's id
        assert line["message"].split()[2] == line["correlation_id"]
    assert states(rt, items) == ["errored"] * 4


def test_sends_counted_from_threads_at_once_are_all_counted(rt, aws):
    _, event = batch(rt, aws, 8)
    rt.overrides["ses_provider"] = BarrierSes(together=4)
    metrics.clear_metrics()
    try:
        assert sendbatch.process(event["Records"], rt) == []
        assert sum(metrics.metric_set["EmailsSent"]["Value"]) == 8
    finally:
        metrics.clear_metrics()


def test_a_crash_in_a_sending_thread_ends_the_invocation_after_the_others(rt, aws):
    items, event = batch(rt, aws, 4)
    rt.overrides["ses_provider"] = BarrierSes(together=4, answer=lambda receiver: (
        Crash() if receiver == "r1@example.org" else f"0100-{receiver}"))  # fmt: skip
    with pytest.raises(Crash):
        send_handler.handler(event, LambdaContext())
    # The others finished, but the process died before the batch's check: every item stays
    # claimed (SES's acceptance is not written by the worker) until its first event, or SQS
    # redelivers its message and the lease ends it (tests/reliability/test_lease.py).
    assert states(rt, items) == ["sending"] * 4 and checks(aws) == []


def test_an_item_is_claimed_only_when_a_sending_thread_is_free_to_send_it(rt, aws, monkeypatch):
    """Claimed while every thread is busy, an item would sit ``sending`` past its slot at the
    provider's rate (and, at a timeout, be left there for the sweep)."""
    items, event = batch(rt, aws, 3, parallelism=2)
    order: list[str] = []
    third_prepared = threading.Event()
    prepare = sendbatch.prepare

    def watched(message, upcoming, runtime, deadline=None):
        if json.loads(message["body"])["id"] == items[2].id:
            order.append("third prepared")
            third_prepared.set()
        return prepare(message, upcoming, runtime, deadline)

    class Ses:
        def send_raw(self, *, receiver: str, **_):
            if receiver != "r2@example.org":  # in flight until the third is claimed (or 1 s)
                third_prepared.wait(timeout=1)
                order.append("a send finished")
            return f"0100-{receiver}"

    monkeypatch.setattr(sendbatch, "prepare", watched)
    rt.overrides["ses_provider"] = Ses()
    assert send_handler.handler(event, LambdaContext()) == {"batchItemFailures": []}
    assert order[0] == "a send finished"
    assert recorded(rt, aws, items) == ["awaiting"] * 3


def longest_provider_call() -> float:
    """The longest a provider call can take, from the clients' own timeouts: SES's connect
    and read timeouts (one attempt); requests applies Twilio's to the connect and the read."""
    from vdq.providers import ses, twilio

    config = ses._CLIENT_CONFIG
    return max(config.connect_timeout + config.read_timeout, 2 * twilio.TWILIO_REQUEST_TIMEOUT)


@pytest.mark.parametrize("paced", [True, False])
def test_no_send_is_started_that_cannot_finish_before_the_invocations_timeout(rt, aws, paced):
    """A send still in flight when the invocation times out leaves its item ``sending`` until
    its lease passes, then errored: the batch claims nothing that could not be sent and
    recorded in the time left, and puts those messages back on the queue unclaimed."""
    if not paced:
        rt.settings = replace(rt.settings, ses_max_send_rate=None)
        rt.overrides["pacer"] = pacing.Pacer(None, 5.0, wall=lambda: rt.clock.now().timestamp(),
                                             sleep=rt.clock.advance)  # fmt: skip
    items, event = batch(rt, aws, 4, parallelism=1)
    timeout = 60.0
    started = rt.clock.now().timestamp()
    starts: list[float] = []

    class SlowSes:
        max_send_rate = None

        def send_raw(self, *, receiver: str, **_):
            starts.append(rt.clock.now().timestamp() - started)
            rt.clock.advance(12)  # each send takes 12 s
            return f"0100-{receiver}"

    rt.overrides["ses_provider"] = SlowSes()
    context = LambdaContext(remaining_ms=int(timeout * 1000))
    assert send_handler.handler(event, context) == {"batchItemFailures": []}
    assert starts and all(s + longest_provider_call() < timeout for s in starts)
    sent = len(starts)
    assert recorded(rt, aws, items) == ["awaiting"] * sent + ["queued"] * (4 - sent)
    again = {m["id"]: m for m in drain(aws)}
    assert set(again) == {i.id for i in items[sent:]}  # back on the queue, same attempt
    assert all(again[i.id]["attempt"] == 1 for i in items[sent:])


def test_an_invocation_whose_whole_time_is_within_the_margin_says_so_in_its_log(rt, aws):
    """A send function whose timeout is no longer than pacing.TIMEOUT_MARGIN (set outside the
    stack's config, e.g. in the console) claims nothing and publishes its whole batch again,
    every invocation, for ever: the log must name the cause, not only a growing SendsPaced."""
    items, event = batch(rt, aws, 2, parallelism=1)
    handler, buffer = logger.registered_handler, io.StringIO()
    stream = handler.stream
    handler.setStream(buffer)
    try:
        context = LambdaContext(remaining_ms=int(pacing.TIMEOUT_MARGIN * 1000) - 5000)
        assert send_handler.handler(event, context) == {"batchItemFailures": []}
    finally:
        handler.setStream(stream)
    assert states(rt, items) == ["queued"] * 2  # nothing claimed, both back on the queue
    assert len(drain(aws)) == 2
    errors = [json.loads(line) for line in buffer.getvalue().splitlines()]
    errors = [e for e in errors if e.get("level") == "ERROR"]
    assert any("timeout" in str(e.get("message")) for e in errors), errors
