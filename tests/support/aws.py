"""Fixtures for tests under moto: the table, queues, bucket and bus, and a Runtime on them."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from vdq.core import resources
from vdq.core.clock import FakeClock
from vdq.core.settings import Settings
from vdq.local import resources as local_resources
from vdq.runtime import Runtime

TABLE = "vdq-test"  # also the prefix of the bucket's, queues' and bus's names


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    """Fresh moto AWS with VDQ's resources, built from the same definitions as the CDK app."""
    with mock_aws():
        created = local_resources.create(
            boto3, prefix=TABLE, table=TABLE, dead_letters_and_topic=False
        )
        yield {
            "table": created.table,
            "bucket": created.bucket,
            "bus": created.bus,
            "queues": created.queues,
            "sqs": boto3.client("sqs"),
        }


@pytest.fixture
def atomic_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make each AWS request atomic under threads, as DynamoDB makes each request.

    In-process moto checks a write's condition and makes the write without a lock, so two
    threads can both pass the same condition: a race no real table allows. One lock around
    moto's dispatch restores it; our code still interleaves freely between requests.
    """
    from moto.core.botocore_stubber import BotocoreStubber

    lock = threading.RLock()
    original = BotocoreStubber.__call__

    def atomic(self: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
        with lock:
            return original(self, event_name, request, **kwargs)

    monkeypatch.setattr(BotocoreStubber, "__call__", atomic)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def settings(aws: dict[str, Any]) -> Settings:
    return replace(
        Settings(),
        table_name=aws["table"],
        attachments_bucket=aws["bucket"],
        send_queue_url=aws["queues"][resources.SEND_QUEUE],
        high_send_queue_url=aws["queues"][resources.SEND_QUEUES["high"]],
        bulk_send_queue_url=aws["queues"][resources.SEND_QUEUES["bulk"]],
        results_queue_url=aws["queues"][resources.RESULTS_QUEUE],
        event_bus_name="",
    )


@pytest.fixture
def runtime(settings: Settings, clock: FakeClock) -> Iterator[Runtime]:
    rt = Runtime(settings=settings, clock=clock)
    Runtime.reset_default()
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    yield rt
    Runtime.reset_default()


@pytest.fixture
def guarded(aws: dict[str, Any], runtime: Runtime) -> Iterator[Runtime]:
    """The runtime with the sender verified and the reputation guard judging from 10 sends, its
    cache of held producers empty before and after."""
    from vdq.results import guard

    boto3.client("ses").verify_email_identity(EmailAddress=GUARDED_SENDER)
    runtime.settings = replace(runtime.settings, reputation_min_sent=10)
    guard._cache.clear()
    yield runtime
    guard._cache.clear()


GUARDED_SENDER = "shop@example.com"


def drain(aws: dict[str, Any], queue: str = resources.SEND_QUEUE) -> list[dict[str, Any]]:
    """Every message waiting on a queue (received and deleted), bodies parsed."""
    sqs, url = aws["sqs"], aws["queues"][queue]
    out = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        messages = got.get("Messages", [])
        if not messages:
            return out
        for m in messages:
            out.append(json.loads(m["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def held(aws: dict[str, Any], queue: str = resources.RESULTS_QUEUE) -> list[dict[str, Any]]:
    """Every message a queue holds, delayed ones too (read from moto's backend: a receive
    sees a delayed message only after its delay, in real time), bodies parsed; nothing is
    received or deleted."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    name = aws["queues"][queue].rsplit("/", 1)[-1]
    found = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].queues[name]
    return [json.loads(m.body) for m in found._messages]


def checks(aws: dict[str, Any]) -> list[list[Any]]:
    """The sends every check on the results queue names ([item, attempt, provider ID, at]),
    oldest first (vdq.results.checks)."""
    return [sent for body in held(aws) if body.get("kind") == "vdq.check"
            for sent in body["sent"]]  # fmt: skip


def accepted_ids(aws: dict[str, Any]) -> dict[str, str]:
    """The provider ID each checked send was accepted as, by item (the item stores it only
    once its first result, or its check, came)."""
    return {item_id: provider_id for item_id, _, provider_id, _ in checks(aws)}


def run_checks(aws: dict[str, Any], runtime: Any) -> list[str]:
    """Handle every check on the results queue now, as the results function does when its
    delay ends (the messages stay queued); what each did."""
    from vdq.results import checks as sent_checks

    return [sent_checks.handle(body, runtime) for body in held(aws)
            if body.get("kind") == "vdq.check"]  # fmt: skip


def stream_records(table: str, client: Any = None) -> list[dict[str, Any]]:
    """Every record of ``table``'s stream, from its start, as JSON. In-process moto routes no
    dynamodbstreams request (its HTTP API answers "Not yet implemented" under mock_aws; the
    local stack's server mode serves it), so this reads moto's stream backend directly.
    ``client``: a DynamoDB client to ask for the stream's ARN (default: a new one)."""
    import json

    import boto3
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    streams = dynamodbstreams_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    described = (client or boto3.client("dynamodb")).describe_table(TableName=table)
    arn = described["Table"]["LatestStreamArn"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(arn)["Shards"]:
        iterator = streams.get_shard_iterator(arn, shard["ShardId"], "TRIM_HORIZON", None)
        records.extend(json.loads(json.dumps(streams.get_records(iterator.arn, 10_000)["Records"],
                                             default=str)))  # fmt: skip
    return records


def conflicting(client: Any, operation: str, times: int, monkeypatch: Any) -> dict[str, int]:
    """DynamoDB refuses the next ``times`` calls of ``operation`` as it does a write that meets
    another transaction on one of its items (botocore retries none of them). Returns
    the count of refusals left."""
    from botocore.awsrequest import AWSResponse

    from vdq.store import tx

    monkeypatch.setattr(tx.time, "sleep", lambda s: None)
    left = {"n": times}
    if operation == "TransactWriteItems":
        error = {"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                 "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}]}
    else:
        error = {"Error": {"Code": "TransactionConflictException", "Message": "in a tx"}}

    def refuse(**_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if left["n"] <= 0:
            return None
        left["n"] -= 1
        return AWSResponse("https://dynamodb.invalid", 400, {}, None), error

    client.meta.events.register(f"before-call.dynamodb.{operation}", refuse)
    return left
