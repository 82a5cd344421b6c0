"""Hostile and unusual requests at the local stack: refused up front with a clear 4xx naming the
problem, never a 5xx, never a Python message, and answered as API Gateway's REST API would."""

from __future__ import annotations

import json
import random
import socket

import pytest

from tests.e2e.conftest import Stack, patient, requires

pytestmark = [pytest.mark.e2e, requires("enqueue", "operator")]

EMAIL = {"sender": {"email": "shop@example.com"}, "to": [{"email": "ada@example.org"}],
         "subject": "Hi", "text": "hello"}  # fmt: skip
SMS = {"sender": {"cell": "+15005550006"}, "to": [{"cell": "+14155550100"}], "body": "x"}


def raw_request(stack: Stack, head: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """Send bytes as written (requests would fix a bad header); the status, headers and body."""
    from vdq.local.front import make_token

    token = make_token("e2e-secret-" + "x" * 32, ["vdq-admins"])
    request = head.replace("\n", "\r\n").format(port=stack.port, token=token).encode() + body
    with socket.create_connection(("127.0.0.1", stack.port), timeout=patient(30)) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head_bytes, _, rest = data.partition(b"\r\n\r\n")
    lines = head_bytes.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, rest


@pytest.mark.parametrize("path", ["/emails", "/sms", "/sent-items/resend"])
def test_deeply_nested_json_is_a_400_naming_the_problem(stack, path):
    answer = stack.api("POST", path, data="[" * 100_000,
                       headers={"Content-Type": "application/json"})  # fmt: skip
    assert answer.status_code == 400, answer.text
    assert "nests more than 32 levels" in answer.json()["error"]["message"]


@pytest.mark.parametrize("body,words", [
    ('{"n": ' + "1" * 5000 + "}", "number too long"),
    ('{"subject": "', "not valid JSON"),
])  # fmt: skip
def test_malformed_bodies_never_show_python_internals(stack, body, words):
    answer = stack.api("POST", "/emails", data=body, headers={"Content-Type": "application/json"})
    message = answer.json()["error"]["message"]
    assert answer.status_code == 400 and words in message
    assert "int_max_str_digits" not in message and "Exceeds" not in message


@pytest.mark.parametrize("changes,field", [
    ({"subject": "Hi\u2028Bcc: x@example.org"}, "subject"),
    ({"subject": "Hi\u0085there"}, "subject"),
    ({"to": [{"email": "ada@example.org", "name": "Ada\u2029"}]}, "to[0].name"),
    ({"subject": "Hi \ud800"}, "subject"),
    ({"text": "body \udfff"}, "text"),
    ({"origin": {"type": "\ud800", "id": "1"}}, "origin.type"),
    ({"attachments": [{"filename": "\ud800.txt", "content_type": "text/plain",
                       "content_base64": "aGk="}]}, "attachments[0].filename"),
])  # fmt: skip
def test_text_that_cannot_be_sent_is_refused_at_enqueue_naming_the_field(stack, changes, field):
    answer = stack.api("POST", "/emails", json={**EMAIL, **changes}, groups=("vdq-senders",))
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["details"]["field"] == field


def test_a_lone_surrogate_in_an_sms_name_is_a_422_not_a_502(stack):
    body = {**SMS, "to": [{"cell": "+14155550100", "name": "\udc00"}]}
    answer = stack.api("POST", "/sms", json=body, groups=("vdq-senders",))
    assert answer.status_code == 422 and answer.json()["error"]["details"]["field"] == "to[0].name"


def test_a_body_that_cannot_be_stored_in_one_item_is_a_422_naming_the_limit(stack):
    noise = "".join(random.Random(5).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=900_000))
    answer = stack.api("POST", "/emails", json={**EMAIL, "html": noise}, groups=("vdq-senders",))
    assert answer.status_code == 422, answer.text[:300]
    error = answer.json()["error"]
    assert error["details"]["field"] == "html" and "380000" in error["message"]


def test_a_body_over_10_mb_is_a_413(stack):
    """10 MB is API Gateway's payload limit; over it the answer is 413 before any function."""
    answer = stack.api("POST", "/emails", data=b" " * (10 * 1024 * 1024 + 1),
                       headers={"Content-Type": "application/json"})  # fmt: skip
    assert answer.status_code == 413


def test_trace_head_and_unknown_methods_are_405_with_allow(stack):
    """A REST API serves only the methods defined on a resource: HEAD is a method of its own (the
    console adds it like any other; aws-apigateway-importer#176), never implied by GET, and a
    method no resource has is API Gateway's 403 "Missing Authentication Token" (a routing
    failure). The local front says what that means: 405 naming the methods in ``Allow``; the
    resource is picked as API Gateway picks it (a static path before a parameter)."""
    for method in ("TRACE", "HEAD", "PURGE", "DELETE"):
        answer = stack.api(method, "/queue-items")
        assert answer.status_code == 405, method
        assert answer.headers["Allow"] == "GET"
    assert stack.api("TRACE", "/sent-items/resend").headers["Allow"] == "POST"
    assert stack.api("PUT", "/queue-items/01AAAAAAAAAAAAAAAAAAAAAAAA").headers["Allow"] == "GET"
    assert stack.api("TRACE", "/no-such-thing").status_code == 404


def test_a_trailing_slash_reaches_the_same_resource(stack):
    """API Gateway's REST API routes /x/ to the resource /x (and keeps the slash in the event's
    path): the local front does the same, and so does the operator function's router."""
    assert stack.api("GET", "/queue-items/").status_code == 200
    assert stack.api("GET", "/sent-items/?limit=1").json()["items"] is not None
    assert stack.api("POST", "/sms/", json=SMS, groups=("vdq-senders",)).status_code == 201


def test_a_chunked_body_is_read_whole(stack):
    """API Gateway takes a chunked request body, hands the function the whole body and drops the
    Transfer-Encoding header (AWS re:Post "handle http request smuggling in api gateway", citing
    API Gateway's known issues; tests/unit/test_local_front.py checks the event)."""
    data = json.dumps(SMS).encode()
    chunks = (data[i : i + 7] for i in range(0, len(data), 7))
    answer = stack.api("POST", "/sms", data=chunks, groups=("vdq-senders",),
                       headers={"Content-Type": "application/json"})  # fmt: skip
    assert answer.status_code == 201, answer.text
    assert answer.request.headers.get("Transfer-Encoding") == "chunked"


def test_a_content_length_that_is_not_a_number_is_a_400(stack):
    """API Gateway's edge (CloudFront) refuses a request whose framing it cannot read with 400
    before any stage sees it; a malformed chunked body is the same. The connection is closed,
    as the rest of the body cannot be skipped."""
    status, _, body = raw_request(stack, (
        "POST /sms HTTP/1.1\nHost: 127.0.0.1:{port}\nAuthorization: Bearer {token}\n"
        "Content-Type: application/json\nContent-Length: twelve\n\n"), b"{}")  # fmt: skip
    assert status == 400 and "Content-Length" in json.loads(body)["error"]["message"]
    status, _, body = raw_request(stack, (
        "POST /sms HTTP/1.1\nHost: 127.0.0.1:{port}\nAuthorization: Bearer {token}\n"
        "Transfer-Encoding: chunked\n\nzz\r\n"))  # fmt: skip
    assert status == 400 and "chunked" in json.loads(body)["error"]["message"]
