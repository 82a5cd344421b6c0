"""A fake Twilio HTTP client: the real ``twilio`` client talks to it instead of api.twilio.com.

It records every request and answers from a queue of canned responses (or a default success),
so tests exercise the real client's request building and error handling.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twilio.http import HttpClient
from twilio.http.response import Response

from vdq.providers.twilio import TwilioProvider

ACCOUNT_SID = "AC" + "0" * 32
AUTH_TOKEN = "test-auth-token"


@dataclass
class Request:
    method: str
    url: str
    data: dict[str, Any]
    auth: tuple[str, str] | None


class FakeTwilioHttp(HttpClient):
    def __init__(self, clock: Any = None) -> None:
        super().__init__(logging.getLogger("fake-twilio"), False, None)
        self.clock = clock  # a FakeClock moves on by 50 ms per request, as a real call takes time
        self.requests: list[Request] = []
        self.answers: list[Response | Exception | Callable[[Request], Response]] = []
        self._numbers = itertools.count(1)  # next() of a count is atomic; a generator's is not

    def answer(self, status: int, body: dict[str, Any]) -> None:
        self.answers.append(Response(status, json.dumps(body)))

    def request(self, method: str, uri: str, params: Any = None, data: Any = None,
                headers: Any = None, auth: Any = None, timeout: Any = None,
                allow_redirects: bool = False) -> Response:  # fmt: skip
        if self.clock is not None:
            self.clock.advance(0.05)
        request = Request(method, uri, dict(data or {}), auth)
        self.requests.append(request)
        if self.answers:
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer(request) if callable(answer) else answer
        if method == "POST":
            sid = f"SM{next(self._numbers):032d}"
            return Response(201, json.dumps({"sid": sid, "status": "queued"}))
        return Response(200, json.dumps({"sid": uri.rsplit("/", 1)[-1].removesuffix(".json"),
                                         "status": "delivered"}))  # fmt: skip


def fake_twilio(runtime: Any) -> FakeTwilioHttp:
    """Install a real TwilioProvider on a fake HTTP client as ``runtime.overrides["twilio"]``."""
    http = FakeTwilioHttp(runtime.clock if hasattr(runtime.clock, "advance") else None)
    runtime.overrides["twilio"] = TwilioProvider(lambda: (ACCOUNT_SID, AUTH_TOKEN),
                                                 http_client=http)  # fmt: skip
    return http
