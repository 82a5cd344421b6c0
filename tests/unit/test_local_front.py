"""The local front's request handling that no client can see from outside: the event it builds."""

from __future__ import annotations

from http.client import HTTPMessage
from types import SimpleNamespace

from vdq.local.front import ROUTES, _find, build_event


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
