"""Parts of the local stack under moto: the SQS poller behaves as Lambda's event source mapping
(partial batch failures, redrive to the DLQ), and the front verifies tokens as the authorizer."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
from moto import mock_aws

from vdq import resources
from vdq.local import resources as local_resources
from vdq.local.front import make_token, verify_token
from vdq.local.pollers import Poller


class FakeFunctions:
    """Fails every message whose body says so, as a handler returning batchItemFailures."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def available(self, name: str) -> bool:
        return True

    def invoke(self, name: str, event: dict[str, Any], lane: str = "") -> dict[str, Any]:
        self.events.append(event)
        failed = [r["messageId"] for r in event["Records"] if json.loads(r["body"])["fail"]]
        return {"batchItemFailures": [{"itemIdentifier": m} for m in failed]}


def _depth(sqs: Any, url: str) -> int:
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(
        attrs["ApproximateNumberOfMessagesNotVisible"])  # fmt: skip


def test_the_poller_deletes_successes_and_redrives_a_failing_message_to_the_dlq():
    with mock_aws():
        made = local_resources.create(boto3.session.Session(), visibility_seconds=0)
        sqs = boto3.client("sqs")
        send, dlq = made.queues[resources.SEND_QUEUE], made.queues["send-dlq"]
        sqs.send_message(QueueUrl=send, MessageBody=json.dumps({"fail": False}))
        sqs.send_message(QueueUrl=send, MessageBody=json.dumps({"fail": True}))
        functions = FakeFunctions()
        poller = Poller(sqs, send, "send", functions, resources.SEND_BATCH_SIZE)
        for _ in range(resources.MAX_RECEIVE_COUNT + 3):
            poller.poll_once()
            time.sleep(0.01)
        record = functions.events[0]["Records"][0]
        assert record["eventSource"] == "aws:sqs" and record["eventSourceARN"].endswith("send")
        assert "ApproximateReceiveCount" in record["attributes"]
        assert _depth(sqs, send) == 0
        [moved] = sqs.receive_message(QueueUrl=dlq)["Messages"]
        assert json.loads(moved["Body"]) == {"fail": True}
        receives = sum(1 for e in functions.events for r in e["Records"]
                       if json.loads(r["body"])["fail"])  # fmt: skip
        assert receives == resources.MAX_RECEIVE_COUNT


def test_ses_events_reach_the_results_queue_raw_through_the_topic():
    with mock_aws():
        made = local_resources.create(boto3.session.Session(), visibility_seconds=30)
        boto3.client("sns").publish(TopicArn=made.topic_arn, Message='{"eventType": "Send"}')
        got = boto3.client("sqs").receive_message(QueueUrl=made.queues[resources.RESULTS_QUEUE])
        assert json.loads(got["Messages"][0]["Body"]) == {"eventType": "Send"}


def test_the_front_passes_claims_only_from_a_token_it_can_verify():
    secret = "s" * 40
    claims = verify_token(secret, "Bearer " + make_token(secret, ["vdq-senders", "vdq-viewers"]))
    assert claims is not None
    assert claims["cognito:groups"] == "vdq-senders,vdq-viewers" and claims["sub"]
    assert verify_token("t" * 40, "Bearer " + make_token(secret, ["vdq-admins"])) is None
    assert verify_token(secret, "Bearer " + make_token(secret, ["x"], hours=-1)) is None
    assert verify_token(secret, None) is None
