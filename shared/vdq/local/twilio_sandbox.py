"""Twilio sandbox: the Messages API the real ``twilio`` client talks to, on loopback.

``POST /2010-04-01/Accounts/{sid}/Messages.json`` creates a message, ``GET .../Messages/{sid}.json``
fetches it, in Twilio's JSON shapes. Magic numbers behave as documented (DESIGN.md §5); any other
number is delivered. When the create names a ``StatusCallback``, each status change is posted
there, signed with the auth token as Twilio signs it (``X-Twilio-Signature``).
``POST /_sandbox/inbound`` (JSON ``{"from", "to"?, "body"}``) plays someone texting one of the
account's numbers: the incoming-message webhook (``inbound_url``) gets the form, signed alike,
so STOP, START and HELP can be tried locally.
"""

from __future__ import annotations

import base64
import functools
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any
from urllib.parse import parse_qs

import requests
from vdq.local.faults import Faults
from vdq.local.ratelimit import RateLimit
from vdq.local.serving import Later, QuietHandler, Server, log, web_page_refusal

API_VERSION = "2010-04-01"
# To numbers Twilio refuses at create: (HTTP status, error code, message).
REFUSED = {
    "+15005550001": (400, 21211, "The 'To' number +15005550001 is not a valid phone number."),
    "+15005550002": (400, 21612, "The 'To' phone number: +15005550002, is not currently "
                     "reachable using the 'From' phone number via SMS."),
    "+15005550004": (400, 21610, "Attempt to send to unsubscribed recipient"),
    "+15005550009": (400, 21614, "'To' number is not a valid mobile number"),
}  # fmt: skip
# To numbers whose message ends in a status other than delivered; None: never final.
ENDINGS: dict[str, tuple[str, int, str] | None] = {
    "+15005550010": ("undelivered", 30003, "Unreachable destination handset"),
    "+15005550011": ("failed", 30008, "Unknown error"),
    "+15005550012": None,
}
# The number a Messaging Service's pool sends from.
SERVICE_NUMBER = "+15005550006"
# Seconds after the create at which each status is reached.
TIMELINE = (("queued", 0.0), ("sent", 0.3), ("final", 0.7))


@dataclass
class Message:
    sid: str
    account_sid: str
    to: str
    from_: str
    body: str
    media: list[str]
    callback: str | None
    created: float = field(default_factory=time.monotonic)
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def status(self, now: float | None = None) -> tuple[str, int | None, str | None]:
        elapsed = (now or time.monotonic()) - self.created
        reached = [name for name, at in TIMELINE if elapsed >= at]
        name = reached[-1]
        if name != "final":
            return name, None, None
        ending = ENDINGS.get(self.to, ("delivered", None, None))
        if ending is None:
            return "sent", None, None
        return ending[0], ending[1], ending[2] if ending[1] else None

    def resource(self) -> dict[str, Any]:
        status, code, text = self.status()
        stamp = format_datetime(self.created_at)
        uri = f"/{API_VERSION}/Accounts/{self.account_sid}/Messages/{self.sid}"
        return {
            "account_sid": self.account_sid, "api_version": API_VERSION, "body": self.body,
            "date_created": stamp, "date_updated": format_datetime(datetime.now(UTC)),
            "date_sent": stamp if status != "queued" else None,
            "direction": "outbound-api", "error_code": code, "error_message": text,
            "from": self.from_, "messaging_service_sid": None, "num_media": str(len(self.media)),
            "num_segments": "1", "price": None, "price_unit": "USD", "sid": self.sid,
            "status": status, "to": self.to, "uri": f"{uri}.json",
            "subresource_uris": {"media": f"{uri}/Media.json"},
        }  # fmt: skip


class TwilioSandbox:
    def __init__(self, account_sid: str, auth_token: str, faults: Faults, port: int = 0,
                 rate: float | None = None) -> None:  # fmt: skip
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.faults = faults
        self.rate = RateLimit(rate)  # per sender (From), as Twilio queues per number
        self.messages: dict[str, Message] = {}
        self.callbacks_posted = 0
        self.inbound_url: str | None = None  # the incoming-message webhook (the local stack's)
        self._lock = threading.Lock()
        self._later = Later("twilio-callbacks")
        sandbox = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                sandbox._route(self, "POST")

            def do_GET(self) -> None:
                sandbox._route(self, "GET")

        self.server = Server("twilio-sandbox", Handler, port)
        self.url = self.server.url

    def start(self) -> TwilioSandbox:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()
        self._later.stop()

    def pending(self) -> int:
        return self._later.pending()

    def _route(self, request: QuietHandler, method: str) -> None:
        # Read the body first, whatever the answer: a keep-alive connection must not keep it.
        body = request.read_body()
        refusal = web_page_refusal(request.headers.get("Host"), request.headers.get("Origin"),
                                   self.server.port)  # fmt: skip
        if refusal is not None:  # a web page's (vdq.local.aws.Guard): never served
            self._error(request, 403, 20403, refusal)
            return
        path = request.path.split("?")[0]
        if method == "GET" and path.rstrip("/") == "/_sandbox/messages":
            with self._lock:
                listed = [{**m.resource(), "status_callback": m.callback}
                          for m in self.messages.values()]  # fmt: skip
            request.answer(200, {"messages": listed})
            return
        if method == "POST" and path.rstrip("/") == "/_sandbox/inbound":
            self._inbound(request, body)
            return
        parts = path.strip("/").split("/")
        if len(parts) < 4 or parts[0] != API_VERSION or parts[1] != "Accounts":
            self._error(request, 404, 20404, f"The requested resource {path} was not found")
            return
        if parts[2] != self.account_sid or not self._authorized(request):
            self._error(request, 401, 20003, "Authenticate")
            return
        if self.faults.hit("slow"):
            time.sleep(self.faults.delay_seconds)
        if self.faults.hit("throttle"):
            self._error(request, 429, 20429, "Too Many Requests")
            return
        if self.faults.hit("5xx"):
            self._error(request, 500, 20500, "Internal Server Error (injected)")
            return
        if method == "POST" and parts[3:] == ["Messages.json"]:
            self._create(request, body)
        elif method == "GET" and len(parts) == 5 and parts[3] == "Messages":
            with self._lock:
                message = self.messages.get(parts[4].removesuffix(".json"))
            if message is None:
                self._error(request, 404, 20404, f"The requested resource {path} was not found")
            else:
                request.answer(200, message.resource())
        else:
            self._error(request, 404, 20404, f"The requested resource {path} was not found")

    def _authorized(self, request: QuietHandler) -> bool:
        header = request.headers.get("Authorization") or ""
        if not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except ValueError:
            return False
        return user == self.account_sid and password == self.auth_token

    @staticmethod
    def _error(request: QuietHandler, status: int, code: int, message: str) -> None:
        request.answer(status, {"code": code, "message": message, "status": status,
                                "more_info": f"https://www.twilio.com/docs/errors/{code}"})

    def _create(self, request: QuietHandler, body: bytes) -> None:
        form = dict(parse_qs(body.decode(), keep_blank_values=True))
        to = (form.get("To") or [""])[0]
        # A Messaging Service's pool picks the number: the sandbox's own (Twilio's magic From).
        service = (form.get("MessagingServiceSid") or [""])[0]
        sender = (form.get("From") or [""])[0] or (SERVICE_NUMBER if service else "")
        text = (form.get("Body") or [""])[0]
        if not to:
            self._error(request, 400, 21604, "A 'To' phone number is required.")
            return
        if not sender:
            self._error(request, 400, 21603, "A 'From' or 'MessagingServiceSid' parameter "
                                             "is required to send a message")  # fmt: skip
            return
        if not text and not form.get("MediaUrl"):
            self._error(request, 400, 21619, "A text message body or media urls must be "
                                             "specified.")  # fmt: skip
            return
        validity = next(iter(form.get("ValidityPeriod") or []), None)
        if validity is not None and not (validity.isdigit() and 1 <= int(validity) <= 36_000):
            self._error(request, 400, 21624, "Validity period can only be set to integers "
                                             "between 1 and 36,000 seconds")  # fmt: skip
            return
        if not self.rate.take(sender):
            self._error(request, 429, 20429, "Too Many Requests")
            return
        refused = REFUSED.get(to)
        if refused:
            self._error(request, *refused)
            return
        message = Message(
            sid="SM" + secrets.token_hex(16), account_sid=self.account_sid, to=to,
            from_=sender, body=text, media=form.get("MediaUrl", []),
            callback=next(iter(form.get("StatusCallback") or []), None),
        )  # fmt: skip
        with self._lock:
            self.messages[message.sid] = message
        if message.callback:
            self._schedule_callbacks(message)
        request.answer(201, message.resource())

    def _schedule_callbacks(self, message: Message) -> None:
        plan: list[tuple[float, str, int | None, bool]] = []
        for name, at in TIMELINE:
            status, code, _ = message.status(message.created + at + 0.001)
            if not plan or plan[-1][1] != status:
                plan.append((at, status, code, name == "final"))
        if self.faults.hit("reordered"):
            times = [p[0] for p in plan]
            plan = [(t, *p[1:]) for t, p in zip(times, reversed(plan), strict=True)]
        for at, status, code, final in plan:
            if not final and self.faults.hit("missing"):
                continue
            delay = at + (self.faults.delay_seconds if self.faults.hit("late") else 0.0)
            copies = 2 if self.faults.hit("duplicate") else 1
            for n in range(copies):
                self._later.call(delay + 0.1 * n,
                                 functools.partial(self._post_callback, message, status, code))

    def _inbound(self, request: QuietHandler, body: bytes) -> None:
        """Someone texts the account: post the signed incoming-message form, answer what the
        webhook answered."""
        import json

        try:
            data = json.loads(body or b"{}")
            sender, text = str(data["from"]), str(data["body"])
        except (ValueError, KeyError, TypeError):
            request.answer(400, {"message": 'send JSON {"from": "+1...", "body": "STOP"}'})
            return
        if not self.inbound_url:
            request.answer(409, {"message": "no incoming-message webhook is set"})
            return
        params = {"AccountSid": self.account_sid, "ApiVersion": API_VERSION,
                  "MessageSid": "SM" + secrets.token_hex(16), "SmsSid": "", "From": sender,
                  "To": str(data.get("to") or "+15005550006"), "Body": text, "NumMedia": "0"}
        params["SmsSid"] = params["MessageSid"]
        headers = {"X-Twilio-Signature": self.signature(self.inbound_url, params),
                   "User-Agent": "TwilioProxy/1.1"}  # fmt: skip
        try:
            answer = _post(self.inbound_url, params, headers)
        except requests.RequestException as exc:
            request.answer(502, {"message": f"the webhook did not answer: {exc}"})
            return
        request.answer(200, {"webhook_status": answer.status_code, "message_sid":
                             params["MessageSid"]})  # fmt: skip

    def callback_params(self, message: Message, status: str, code: int | None) -> dict[str, str]:
        params = {
            "AccountSid": self.account_sid, "ApiVersion": API_VERSION, "From": message.from_,
            "MessageSid": message.sid, "MessageStatus": status, "SmsSid": message.sid,
            "SmsStatus": status, "To": message.to,
        }  # fmt: skip
        if code is not None:
            params["ErrorCode"] = str(code)
        return params

    def signature(self, url: str, params: dict[str, str]) -> str:
        from twilio.request_validator import RequestValidator

        return RequestValidator(self.auth_token).compute_signature(url, params)

    def _post_callback(self, message: Message, status: str, code: int | None) -> None:
        assert message.callback
        params = self.callback_params(message, status, code)
        headers = {"X-Twilio-Signature": self.signature(message.callback, params),
                   "User-Agent": "TwilioProxy/1.1"}  # fmt: skip
        try:
            answer = _post(message.callback, params, headers)
            with self._lock:
                self.callbacks_posted += 1
            if answer.status_code >= 400:
                log.warning("status callback for %s answered %s", message.sid, answer.status_code)
        except requests.RequestException as exc:
            log.warning("status callback for %s failed: %s", message.sid, exc)


def _post(url: str, params: dict[str, str], headers: dict[str, str]) -> requests.Response:
    """A webhook request on a connection of its own, as Twilio makes them. A pooled one could
    be closed by the local front (its idle timeout) just as the request went out: the request
    then fails with "Remote end closed connection", and a POST is not sent again. The callbacks'
    thread and the inbound handler's also never share a session."""
    return requests.post(url, data=params, headers={**headers, "Connection": "close"}, timeout=30)
