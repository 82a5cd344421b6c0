"""State-change events on EventBridge (moto: a rule on the bus with an SQS target)."""

from __future__ import annotations

import json
from dataclasses import replace

import boto3
import pytest
from functions.webhook import handler as webhook

from tests.support.results import (
    LambdaContext,
    new_email,
    ses_event,
    sqs_event,
    to_awaiting,
)
from vdq.runtime import Runtime
from vdq.transitions import Step, apply


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


def received(aws, url):
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


def test_default_mode_announces_done_states_with_the_outcome(aws, settings, clock, bus_queue):
    rt = with_mode(settings, clock, aws, "default")
    item = journey(rt)
    (event,) = received(aws, bus_queue)
    assert (event["source"], event["detail-type"]) == ("vdq", "Queue Item State Change")
    detail = event["detail"]
    assert {k: detail[k] for k in ("id", "method", "transition", "from", "to", "attempt")} == {
        "id": item.id, "method": "email", "transition": "succeed", "from": "awaiting",
        "to": "succeeded", "attempt": 1}
    assert "250 2.0.0 OK" in detail["result"] and detail["origin"] is None
    Runtime.reset_default()


def test_default_mode_announces_errored(aws, settings, clock, bus_queue):
    rt = with_mode(settings, clock, aws, "default")
    item = new_email(rt)
    apply(item, Step("error", actor="vdq", result="publishing failed"), rt)
    (event,) = received(aws, bus_queue)
    assert event["detail"]["to"] == "errored"
    Runtime.reset_default()


def test_all_mode_announces_every_transition(aws, settings, clock, bus_queue):
    rt = with_mode(settings, clock, aws, "all")
    journey(rt)
    assert [e["detail"]["transition"] for e in received(aws, bus_queue)] == ["await", "succeed"]
    Runtime.reset_default()


def test_none_mode_announces_nothing(aws, settings, clock, bus_queue):
    rt = with_mode(settings, clock, aws, "none")
    journey(rt)
    assert received(aws, bus_queue) == []
    Runtime.reset_default()
