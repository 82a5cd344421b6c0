"""State-change events on EventBridge, published from the table's stream by the schedule function
(moto: the table's stream read as Lambda's event source mapping reads it, a rule on the bus with
an SQS target)."""

from __future__ import annotations

import json
from dataclasses import replace

import boto3
import pytest
from functions.schedule import handler as schedule
from functions.webhook import handler as webhook

from tests.support.aws import stream_records as support_stream_records
from tests.support.results import (
    LambdaContext,
    new_email,
    ses_event,
    sqs_event,
    to_awaiting,
)
from vdq.runtime import Runtime
from vdq.workflow.transitions import Step, apply


@pytest.fixture
def bus_queue(aws):
    sqs, events = aws["sqs"], boto3.client("events")
    url = sqs.create_queue(QueueName="vdq-test-state-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"]
    events.put_rule(Name="vdq-states", EventBusName=aws["bus"],
                    EventPattern=json.dumps({"source": ["vdq"]}))
    events.put_targets(Rule="vdq-states", EventBusName=aws["bus"],
                       Targets=[{"Id": "queue", "Arn": arn}])
    return url


def stream_records(aws):
    return support_stream_records(aws["table"])


def received(aws, url):
    """Run the stream consumer over every record so far, then read what the bus delivered."""
    records = [r for r in stream_records(aws) if r["eventName"] == "MODIFY"
               and r["dynamodb"]["NewImage"]["sk"]["S"] == "STATE"]  # the mapping's filter
    if records:
        schedule.handler({"Records": [dict(r, eventSource="aws:dynamodb") for r in records]},
                         LambdaContext())  # fmt: skip
    out = []
    while True:
        got = aws["sqs"].receive_message(QueueUrl=url, MaxNumberOfMessages=10)
        if not got.get("Messages"):
            return out
        for m in got["Messages"]:
            out.append(json.loads(m["Body"]))
            aws["sqs"].delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def with_mode(settings, clock, aws, mode):
    rt = Runtime(settings=replace(settings, event_bus_name=aws["bus"], state_events=mode),
                 clock=clock)
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    return rt


def journey(rt):
    """queued -> sending -> awaiting (worker) -> succeeded (SES Delivery)."""
    item = to_awaiting(new_email(rt), rt, "MSG-STATE")
    answer = webhook.handler(sqs_event(ses_event("delivery", message_id="MSG-STATE",
                                                 item_id=item.id)), LambdaContext())
    assert answer == {"batchItemFailures": []}
    return item


def test_outcomes_mode_announces_done_states_with_the_outcome(aws, settings, clock, bus_queue):
    rt = with_mode(settings, clock, aws, "outcomes")
    item = journey(rt)
    (event,) = received(aws, bus_queue)
    assert (event["source"], event["detail-type"]) == ("vdq", "Queue Item State Change")
    detail = event["detail"]
    assert {k: detail[k] for k in ("id", "method", "transition", "from", "to", "attempt")} == {
        "id": item.id, "method": "email", "transition": "succeed", "from": "awaiting",
        "to": "succeeded", "attempt": 1}
    assert "250 2.0.0 OK" in detail["result"] and detail["origin"] is None
    Runtime.reset_default()


@pytest.mark.parametrize("mode", ["outcomes", "errored"])
def test_errored_is_announced_in_the_default_mode_and_with_outcomes(aws, settings, clock,
                                                                    bus_queue, mode):  # fmt: skip
    rt = with_mode(settings, clock, aws, mode)
    item = new_email(rt)
    apply(item, Step("error", actor="vdq", result="publishing failed"), rt)
    (event,) = received(aws, bus_queue)
    assert event["detail"]["to"] == "errored"
    Runtime.reset_default()


def test_the_default_mode_leaves_delivered_messages_unannounced(aws, settings, clock,
                                                                bus_queue):  # fmt: skip
    """One event per delivered message is EventBridge's US$1.00 per million: by default only
    what waits for an operator is announced."""
    assert settings.state_events == "errored"
    rt = with_mode(settings, clock, aws, settings.state_events)
    item = journey(rt)
    assert rt.store.get_item(item.id).state == "succeeded"
    assert received(aws, bus_queue) == []
    Runtime.reset_default()


def test_all_mode_announces_every_transition(aws, settings, clock, bus_queue):
    rt = with_mode(settings, clock, aws, "all")
    journey(rt)
    assert [e["detail"]["transition"] for e in received(aws, bus_queue)] == [
        "send", "await", "succeed"]
    Runtime.reset_default()


def test_a_function_that_dies_after_its_write_still_announces_it(aws, settings, clock,
                                                                  bus_queue, monkeypatch):
    """The event comes from the committed change, not from the function that made it."""
    from vdq.workflow import transitions

    def dies(*args, **kwargs):
        raise SystemExit("the Lambda was killed right after its write")

    rt = with_mode(settings, clock, aws, "outcomes")
    item = new_email(rt)
    monkeypatch.setattr(transitions, "after_transition", dies)
    with pytest.raises(SystemExit):
        apply(item, Step("error", actor="vdq", result="publishing failed"), rt)
    (event,) = received(aws, bus_queue)
    assert (event["detail"]["id"], event["detail"]["to"]) == (item.id, "errored")
    Runtime.reset_default()


def test_a_redelivered_batch_repeats_events_with_the_same_event_id(aws, settings, clock,
                                                                   bus_queue):
    rt = with_mode(settings, clock, aws, "outcomes")
    journey(rt)
    first = received(aws, bus_queue)
    again = received(aws, bus_queue)  # the whole stream once more, as a retried batch
    assert [e["detail"]["event_id"] for e in first] == [e["detail"]["event_id"] for e in again]
    Runtime.reset_default()


def test_a_refused_publish_fails_the_batch_so_lambda_delivers_it_again(aws, settings, clock,
                                                                        bus_queue):
    rt = with_mode(settings, clock, aws, "outcomes")
    journey(rt)
    records = [dict(r, eventSource="aws:dynamodb") for r in stream_records(aws)
               if r["eventName"] == "MODIFY"]  # fmt: skip

    class Refusing:
        def put_events(self, Entries):
            return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "ThrottlingException"}]}

    rt.overrides["state_events"] = None
    from vdq.workflow.stateevents import StateEvents

    rt.__dict__["state_events"] = StateEvents(Refusing(), aws["bus"], "outcomes")
    with pytest.raises(RuntimeError, match="refused"):
        schedule.handler({"Records": records}, LambdaContext())
    Runtime.reset_default()


def test_none_mode_announces_nothing(aws, settings, clock, bus_queue):
    rt = with_mode(settings, clock, aws, "none")
    journey(rt)
    assert received(aws, bus_queue) == []
    Runtime.reset_default()
