"""The local stack's AWS endpoint (moto behind vdq.local.aws.Guard) serves the SDK and refuses a
web page: no CORS headers for any origin, a cross-origin request refused before moto runs it,
and only loopback Host names (a DNS-rebinding page arrives under its own name)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config

import requests
from vdq.local.aws import LocalAws
from vdq.local.serving import free_port


@pytest.fixture(scope="module")
def aws() -> Iterator[LocalAws]:
    server = LocalAws(free_port()).start()
    yield server
    server.stop()


def _sqs(url: str):
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="local", aws_secret_access_key="local",
                        config=Config(retries={"max_attempts": 1}))  # fmt: skip


def test_an_aws_sdk_on_loopback_is_served(aws):
    sqs = _sqs(aws.url)
    url = sqs.create_queue(QueueName="guarded")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "hello"
    assert _sqs(aws.url.replace("127.0.0.1", "localhost")).list_queues()["QueueUrls"]


def test_a_cross_origin_request_is_refused_and_no_answer_carries_cors_headers(aws):
    form = {"Action": "ListQueues", "Version": "2012-11-05"}
    page = requests.post(aws.url, data=form, headers={"Origin": "https://evil.example"},
                         timeout=10)  # fmt: skip
    assert page.status_code == 403 and "cross-origin" in page.text
    assert not [h for h in page.headers if h.lower().startswith("access-control-")]
    preflight = requests.options(aws.url, timeout=10, headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})  # fmt: skip
    assert preflight.status_code == 403
    assert "Access-Control-Allow-Origin" not in preflight.headers
    plain = requests.post(aws.url, data=form, timeout=10)  # what moto would have CORS-tagged
    assert plain.status_code == 200
    assert not [h for h in plain.headers if h.lower().startswith("access-control-")]


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io:{port}",
                                  "localhost:1", "0.0.0.0:{port}", ""])  # fmt: skip
def test_a_request_under_any_name_but_loopback_is_refused(aws, host):
    session = requests.Session()
    request = requests.Request("POST", aws.url, data={"Action": "ListQueues"}).prepare()
    request.headers["Host"] = host.format(port=aws.port)
    answer = session.send(request, timeout=10)
    assert answer.status_code == 403 and "loopback" in answer.text


def test_conditional_writes_and_transactions_are_atomic_under_concurrent_requests(aws):
    """DynamoDB makes each conditional write and transaction atomic; moto's server, asked from
    many threads, does not (a transaction deep-copies a table another thread is changing: a
    500; a condition passes in one thread while another thread's write lands). Threads race
    optimistic increments of one counter, alternating TransactWriteItems and conditional
    UpdateItem, with other items written meanwhile: every increment that succeeded is counted
    once, and no request fails with a server error."""
    import threading

    from botocore.exceptions import ClientError

    def client():
        return boto3.client("dynamodb", endpoint_url=aws.url, region_name="us-east-1",
                            aws_access_key_id="local", aws_secret_access_key="local",
                            config=Config(retries={"max_attempts": 1}))  # fmt: skip

    ddb = client()
    ddb.create_table(TableName="atomic", BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])  # fmt: skip
    ddb.put_item(TableName="atomic", Item={"pk": {"S": "counter"}, "n": {"N": "0"}})
    won: list[int] = []
    errors: list[str] = []

    def racer(me: int) -> None:
        db = client()
        for turn in range(40):
            db.put_item(TableName="atomic", Item={"pk": {"S": f"noise-{me}-{turn}"},
                                                  "blob": {"S": "x" * 200}})  # fmt: skip
            n = int(db.get_item(TableName="atomic", Key={"pk": {"S": "counter"}},
                                ConsistentRead=True)["Item"]["n"]["N"])  # fmt: skip
            update = {"TableName": "atomic", "Key": {"pk": {"S": "counter"}},
                      "UpdateExpression": "SET n = :new", "ConditionExpression": "n = :old",
                      "ExpressionAttributeValues": {":old": {"N": str(n)},
                                                    ":new": {"N": str(n + 1)}}}  # fmt: skip
            try:
                if turn % 2:
                    db.update_item(**update)
                else:
                    db.transact_write_items(TransactItems=[
                        {"Update": update},
                        {"Put": {"TableName": "atomic",
                                 "Item": {"pk": {"S": f"won-{n + 1}"}, "by": {"N": str(me)}},
                                 "ConditionExpression": "attribute_not_exists(pk)"}}])  # fmt: skip
                won.append(n + 1)
            except ClientError as exc:
                code = exc.response["Error"]["Code"]
                if code not in ("ConditionalCheckFailedException", "TransactionCanceledException"):
                    errors.append(f"{code}: {exc}")

    threads = [threading.Thread(target=racer, args=(me,)) for me in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = int(ddb.get_item(TableName="atomic", Key={"pk": {"S": "counter"}},
                             ConsistentRead=True)["Item"]["n"]["N"])  # fmt: skip
    assert not errors, errors[:3]
    assert sorted(won) == list(range(1, final + 1)), "an increment was lost or counted twice"
    assert aws.serial.requests > 0


class Overlaps:
    """A WSGI app that holds each request open for ``hold`` seconds and counts the most served
    at once; ``through(gates, environ)`` sends one request through each gate from a thread."""

    def __init__(self, hold: float) -> None:
        self.hold = hold
        self.inside = self.most = 0
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        with self._lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        threading.Event().wait(self.hold)  # overlapping requests would pile up meanwhile
        with self._lock:
            self.inside -= 1
        start_response("200 OK", [])
        return [b"{}"]

    def through(self, gates, environ) -> int:
        threads = [threading.Thread(target=g, args=(environ, lambda *a: None)) for g in gates]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return self.most


@pytest.mark.parametrize(("target", "serial"), [
    ("DynamoDB_20120810.TransactWriteItems", True),
    ("DynamoDBStreams_20120810.GetRecords", True),
    # moto's DeleteMessage rebuilds the queue's list from a copy: a message sent meanwhile
    # would be lost (an item left queued), so sends and deletes take turns.
    ("AmazonSQS.SendMessage", True),
    ("AmazonSQS.DeleteMessageBatch", True),
    ("AmazonSQS.ReceiveMessage", False),  # long-polls; it only adds to what it reads
    ("", False),  # S3 and the rest
])  # fmt: skip
def test_serial_lets_one_request_of_a_racy_service_in_at_a_time(target, serial):
    from vdq.local.aws import Serial

    app = Overlaps(hold=0.5)
    gate = Serial(app)
    assert app.through([gate] * 4, {"HTTP_X_AMZ_TARGET": target}) == (1 if serial else 4)


def test_two_local_endpoints_in_one_process_serve_one_request_at_a_time_between_them():
    """moto's backends are the process's, not a server's: a stopped stack's last request and
    the next stack's first must not overlap either."""
    from vdq.local.aws import Serial

    app = Overlaps(hold=0.2)
    environ = {"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.TransactWriteItems"}
    assert app.through([Serial(app), Serial(app)], environ) == 1
