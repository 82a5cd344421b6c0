"""The local stack's AWS endpoint (moto behind vdq.local.aws.Guard) serves the SDK and refuses a
web page: no CORS headers for any origin, a cross-origin request refused before moto runs it,
and only loopback Host names (a DNS-rebinding page arrives under its own name)."""

from __future__ import annotations

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
