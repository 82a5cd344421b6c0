"""The local front's request handling that no client can see from outside: the event it builds."""

from __future__ import annotations

import io
from http.client import HTTPMessage
from types import SimpleNamespace

import pytest

from vdq.local.front import ROUTES, BadBody, _find, build_event, read_body


def test_the_event_of_a_chunked_request_has_the_whole_body_and_no_transfer_encoding():
    headers = HTTPMessage()
    headers["Content-Type"] = "application/json"
    headers["Transfer-Encoding"] = "chunked"
    request = SimpleNamespace(path="/sms/?x=1", headers=headers, client_address=("127.0.0.1", 1),
                              server=SimpleNamespace(server_port=8765))  # fmt: skip
    route = next(r for r in ROUTES if r.resource == "/sms")
    event = build_event(request, route, {}, b'{"a": 1}', None)  # type: ignore[arg-type]
    assert event["body"] == '{"a": 1}' and not event["isBase64Encoded"]
    assert "Transfer-Encoding" not in event["headers"]
    assert event["path"] == "/sms/" and event["resource"] == "/sms"  # the slash is kept


def test_a_static_resource_is_chosen_before_a_parameter_and_lists_its_methods():
    assert _find("GET", "/sent-items/resend") == ["POST"]
    found = _find("GET", "/sent-items/01AAAAAAAAAAAAAAAAAAAAAAAA")
    assert isinstance(found, tuple) and found[1] == {"id": "01AAAAAAAAAAAAAAAAAAAAAAAA"}
    assert _find("TRACE", "/emails") == ["POST"] and _find("GET", "/nowhere") is None


def _request(**fields: str) -> SimpleNamespace:
    headers = HTTPMessage()
    for name, value in fields.items():
        headers[name.replace("_", "-")] = value
    return SimpleNamespace(headers=headers, rfile=io.BytesIO(b"{}" * 8))


@pytest.mark.parametrize(("length", "status"), [("\u00b2", 400), ("1" * 5000, 413), ("1_0", 400),
                                                ("+2", 400), ("0x10", 400), ("2, 2", 400)])
def test_a_content_length_that_is_no_ascii_number_is_answered_not_a_dropped_connection(
        length, status):  # fmt: skip
    """http.server reads headers as Latin-1: a superscript digit passes str.isdigit and then
    int() raises, as 5,000 digits do (the integer digit limit); either left the handler with
    an exception and the client with a closed connection instead of API Gateway's answer."""
    with pytest.raises(BadBody) as refused:
        read_body(_request(Content_Length=length))  # type: ignore[arg-type]
    assert refused.value.status == status
    assert ("Content-Length" if status == 400 else "limit") in refused.value.message


@pytest.mark.parametrize("size_line", [b"0x2", b"+2", b"2_0", b"-0", b" "])
def test_a_chunk_size_that_is_not_hex_digits_is_a_400(size_line):
    request = _request(Transfer_Encoding="chunked")
    request.rfile = io.BytesIO(size_line + b"\r\n{}\r\n0\r\n\r\n")
    with pytest.raises(BadBody) as refused:
        read_body(request)  # type: ignore[arg-type]
    assert refused.value.status == 400
