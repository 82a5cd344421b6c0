"""The local front answers what API Gateway answers itself (no token, no route, too large) in the
error shape the deployed API's gateway responses produce, with the same codes."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator

import requests
from tests.e2e.conftest import patient
from vdq import api, openapi

DOC = json.loads(openapi.DOCUMENT.read_text())


def _check_error(response_status: int, body: dict, response_type: str) -> None:
    gateway = api.GATEWAY_BY_TYPE[response_type]
    assert response_status == gateway.status
    assert body["error"]["code"] == gateway.code and body["error"]["message"]
    schema = {"$ref": "#/components/schemas/Error", "components": DOC["components"]}
    assert not list(Draft202012Validator(schema).iter_errors(body))
    assert gateway.code in DOC["components"]["schemas"]["ErrorDetail"]["properties"]["code"][
        "enum"]  # fmt: skip


def test_a_private_route_without_a_token_is_401_in_the_error_shape(stack):
    answer = requests.get(f"{stack.url}/queue-items", timeout=patient(10))
    _check_error(answer.status_code, answer.json(), "UNAUTHORIZED")
    forged = requests.get(f"{stack.url}/queue-items", timeout=patient(10),
                          headers={"Authorization": "Bearer not-a-token"})  # fmt: skip
    _check_error(forged.status_code, forged.json(), "UNAUTHORIZED")


def test_an_unknown_route_is_404_in_the_error_shape(stack):
    answer = stack.api("GET", "/no-such-thing")
    _check_error(answer.status_code, answer.json(), "RESOURCE_NOT_FOUND")


def test_a_body_over_api_gateways_limit_is_413_in_the_error_shape_without_being_read(stack):
    url = urlsplit(stack.url)
    with socket.create_connection((url.hostname, url.port), timeout=patient(10)) as conn:
        conn.sendall((f"POST /emails HTTP/1.1\r\nHost: {url.netloc}\r\n"
                      "Content-Type: application/json\r\n"
                      f"Content-Length: {api.GATEWAY_MAX_BODY_BYTES + 1}\r\n\r\n{{").encode())
        raw = b""
        while chunk := conn.recv(65536):
            raw += chunk  # the front closes the connection: the body is never read
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    assert b"Connection: close" in head
    _check_error(status, json.loads(body), "REQUEST_TOO_LARGE")
