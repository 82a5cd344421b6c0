"""SES sandbox: a local SES v2 ``SendEmail`` endpoint that behaves as the mailbox simulator.

boto3 reaches it through ``AWS_ENDPOINT_URL_SESV2``. Each accepted email gets a message ID and,
as SES does through a configuration set, those of its events (``Send`` then ``Delivery``,
``Bounce`` or ``Complaint``) whose types the set subscribes (``vdq.core.resources.SES_EVENTS``: not
``Send``) go to the SNS topic, which delivers them raw to the results queue. Events carry
the message's tags as ``mail.tags`` (``{name: [value]}``). ``GET /_sandbox/emails`` lists what
was sent, each raw message with its headers (``List-Unsubscribe`` included), so what a
receiver would get can be checked.
"""

from __future__ import annotations

import base64
import email
import email.policy
import functools
import hashlib
import json
import secrets
import threading
import time
import uuid
from datetime import UTC, datetime
from email.utils import getaddresses
from typing import Any

from vdq.core import resources
from vdq.local.faults import Faults
from vdq.local.ratelimit import RateLimit
from vdq.local.serving import Later, QuietHandler, Server, log, web_page_refusal

SIMULATOR = "simulator.amazonses.com"
ACCOUNT = "123456789012"
REGION = "us-east-1"
# The account's MaxSendRate GetAccount reports when the sandbox has no rate (VDQ_LOCAL_SES_RATE).
UNLIMITED_RATE = 1000.0
MAX_24_HOUR_SEND = 50_000.0
# Seconds after the send at which each event is published.
SEND_EVENT_AFTER = 0.05
FINAL_EVENT_AFTER = 0.25


def outcome(address: str) -> str:
    """What the mailbox simulator does with ``address``: delivery, bounce, complaint, ..."""
    local, _, domain = address.strip().lower().rpartition("@")
    if domain != SIMULATOR:
        return "delivery"
    local = local.split("+", 1)[0]  # success+label@ behaves as success@
    return {
        "bounce": "bounce",
        "complaint": "complaint",
        "suppressionlist": "suppressed",
        "ooto": "ooto",
    }.get(local, "delivery")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SesSandbox:
    def __init__(self, sns: Any, topic_arn: str, faults: Faults, port: int = 0,
                 rate: float | None = None, later: Later | None = None) -> None:  # fmt: skip
        self.sns = sns
        self.topic_arn = topic_arn
        self.faults = faults
        self.rate = RateLimit(rate)
        self.sent: list[dict[str, Any]] = []
        self.events_published = 0
        self._lock = threading.Lock()
        self._later = later or Later("ses-events")
        sandbox = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                if not sandbox._refused(self):
                    sandbox._post(self)

            def do_GET(self) -> None:
                if sandbox._refused(self):
                    return
                if self.path.rstrip("/") == "/_sandbox/emails":
                    with sandbox._lock:
                        self.answer(200, {"emails": list(sandbox.sent)})
                elif self.path.split("?")[0].rstrip("/") == "/v2/email/account":
                    self.answer(200, sandbox._account())
                else:
                    self.answer(404, {"message": "not found"})

        self.server = Server("ses-sandbox", Handler, port)
        self.url = self.server.url

    def start(self) -> SesSandbox:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()
        self._later.stop()

    def _refused(self, request: QuietHandler) -> bool:
        """A web page's request (no credentials are asked for here, as moto asks for none):
        answered 403 before anything is sent, published or listed (vdq.local.aws.Guard)."""
        reason = web_page_refusal(request.headers.get("Host"), request.headers.get("Origin"),
                                  self.server.port)  # fmt: skip
        if reason is None:
            return False
        request.answer(403, {"message": reason}, {"Connection": "close",
                                                  "x-amzn-ErrorType": "AccessDeniedException"})
        request.close_connection = True
        return True

    # The SendEmail operation (REST-JSON: POST /v2/email/outbound-emails).
    def _post(self, request: QuietHandler) -> None:
        body = request.read_body()
        if request.path.split("?")[0].rstrip("/") != "/v2/email/outbound-emails":
            request.answer(404, {"message": f"the SES sandbox does not implement {request.path}"},
                           {"x-amzn-ErrorType": "NotFoundException"})  # fmt: skip
            return
        if self.faults.hit("slow"):
            time.sleep(self.faults.delay_seconds)
        if self.faults.hit("throttle") or not self.rate.take():
            request.answer(429, {"message": "Maximum sending rate exceeded."},
                           {"x-amzn-ErrorType": "TooManyRequestsException"})  # fmt: skip
            return
        if self.faults.hit("5xx"):
            request.answer(500, {"message": "Internal failure (injected)."},
                           {"x-amzn-ErrorType": "InternalFailure"})  # fmt: skip
            return
        try:
            mail = self._accept(json.loads(body or b"{}"))
        except ValueError as exc:
            request.answer(400, {"message": str(exc)}, {"x-amzn-ErrorType": "BadRequestException"})
            return
        request.answer(200, {"MessageId": mail["messageId"]})

    def _account(self) -> dict[str, Any]:
        """GetAccount's answer: the send quota is the sandbox's rate."""
        with self._lock:
            sent = len(self.sent)
        return {"SendQuota": {"Max24HourSend": MAX_24_HOUR_SEND,
                              "MaxSendRate": self.rate.rate or UNLIMITED_RATE,
                              "SentLast24Hours": float(sent)},
                "SendingEnabled": True, "ProductionAccessEnabled": True,
                "EnforcementStatus": "HEALTHY"}  # fmt: skip

    def _accept(self, data: dict[str, Any]) -> dict[str, Any]:
        source = data.get("FromEmailAddress")
        content = data.get("Content") or {}
        destination = data.get("Destination") or {}
        recipients = [
            *destination.get("ToAddresses", []),
            *destination.get("CcAddresses", []),
            *destination.get("BccAddresses", []),
        ]
        subject, attachments, digests = None, [], []
        raw_text, header_list = None, []
        if "Simple" in content:
            simple = content["Simple"]
            subject = (simple.get("Subject") or {}).get("Data")
            attachments = [a.get("FileName") for a in simple.get("Attachments", [])]
        elif "Raw" in content:
            raw = base64.b64decode(content["Raw"]["Data"])
            message = email.message_from_bytes(raw, policy=email.policy.default)
            raw_text = raw.decode("ascii", "replace")  # 7-bit by construction (vdq.dispatch.mime)
            header_list = [[name, str(value)] for name, value in message.items()]
            subject = str(message.get("Subject") or "")
            source = source or str(message.get("From") or "")
            if not recipients:
                headers = [str(message.get(h) or "") for h in ("To", "Cc", "Bcc")]
                recipients = [a for _, a in getaddresses(headers) if a]
            attachments = [p.get_filename() for p in message.iter_attachments()]
            # What each file holds, for a test to compare with what it sent.
            digests = [hashlib.sha256(_payload(p)).hexdigest()
                       for p in message.iter_attachments()]  # fmt: skip
        if not source or not recipients:
            raise ValueError("the email needs a sender and at least one recipient")
        # SES's form: the send time in milliseconds after "0100", a UUID, six digits.
        message_id = f"0100{int(time.time() * 1000):012x}-{uuid.uuid4()}-000000"
        tags = {t["Name"]: [t["Value"]] for t in data.get("EmailTags", [])}
        if data.get("ConfigurationSetName"):
            tags["ses:configuration-set"] = [data["ConfigurationSetName"]]
        tags.setdefault("ses:source-ip", ["127.0.0.1"])
        mail = {
            "timestamp": _now(),
            "source": source,
            "sourceArn": f"arn:aws:ses:{REGION}:{ACCOUNT}:identity/{source.rpartition('@')[2]}",
            "sendingAccountId": ACCOUNT,
            "messageId": message_id,
            "destination": recipients,
            "headersTruncated": False,
            "headers": [{"name": "Subject", "value": subject or ""}],
            "commonHeaders": {"from": [source], "to": recipients, "messageId": message_id,
                              "subject": subject or ""},
            "tags": tags,
        }  # fmt: skip
        with self._lock:
            self.sent.append({"message_id": message_id, "source": source,
                              "destination": recipients, "subject": subject, "tags": tags,
                              "attachments": attachments, "attachment_sha256": digests,
                              "headers": header_list, "raw": raw_text,
                              "at": mail["timestamp"]})  # fmt: skip
        self._schedule(mail)
        return mail

    # Events, as a configuration set publishes them: those of the types it subscribes.
    def _schedule(self, mail: dict[str, Any]) -> None:
        events = [(SEND_EVENT_AFTER, self._event("Send", mail, "send", {}), False)]
        for delay, event in self._results(mail):
            events.append((FINAL_EVENT_AFTER + delay, event, True))
        events = [e for e in events if e[1]["eventType"] in resources.SES_EVENTS]
        if self.faults.hit("reordered"):
            times = [t for t, _, _ in events]
            events = [(t, e, f) for t, (_, e, f) in zip(times, reversed(events), strict=True)]
        for delay, event, final in events:
            if not final and self.faults.hit("missing"):
                continue
            if self.faults.hit("late"):
                delay += self.faults.delay_seconds
            copies = 2 if self.faults.hit("duplicate") else 1
            for n in range(copies):
                self._later.call(delay + 0.1 * n, functools.partial(self._publish, event))

    def _results(self, mail: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
        by_outcome: dict[str, list[str]] = {}
        for address in mail["destination"]:
            by_outcome.setdefault(outcome(address), []).append(address)
        out: list[tuple[float, dict[str, Any]]] = []
        delivered = [
            a for kind in ("delivery", "ooto", "complaint") for a in by_outcome.get(kind, [])
        ]
        if delivered:
            out.append((0.0, self._event("Delivery", mail, "delivery", {
                "timestamp": _now(), "processingTimeMillis": 250, "recipients": delivered,
                "smtpResponse": "250 2.6.0 Message received",
                "reportingMTA": "a8-70.smtp-out.amazonses.com",
            })))  # fmt: skip
        for kind, sub in (("bounce", "General"), ("suppressed", "Suppressed")):
            if by_outcome.get(kind):
                out.append((0.0, self._event("Bounce", mail, "bounce", {
                    "feedbackId": secrets.token_hex(16), "bounceType": "Permanent",
                    "bounceSubType": sub, "timestamp": _now(),
                    "reportingMTA": "dsn; a8-70.smtp-out.amazonses.com",
                    "bouncedRecipients": [
                        {"emailAddress": a, "action": "failed", "status": "5.1.1",
                         "diagnosticCode": "smtp; 550 5.1.1 user unknown"
                         if kind == "bounce" else "Amazon SES has suppressed sending to this "
                         "address because it is on the suppression list"}
                        for a in by_outcome[kind]
                    ],
                })))  # fmt: skip
        if by_outcome.get("complaint"):
            out.append((0.2, self._event("Complaint", mail, "complaint", {
                "feedbackId": secrets.token_hex(16), "complaintSubType": None,
                "complainedRecipients": [{"emailAddress": a} for a in by_outcome["complaint"]],
                "timestamp": _now(), "userAgent": "Amazon SES Mailbox Simulator",
                "complaintFeedbackType": "abuse", "arrivalDate": _now(),
            })))  # fmt: skip
        return out

    @staticmethod
    def _event(event_type: str, mail: dict[str, Any], key: str, detail: dict) -> dict[str, Any]:
        return {"eventType": event_type, "mail": mail, key: detail}

    def _publish(self, event: dict[str, Any]) -> None:
        try:
            self.sns.publish(TopicArn=self.topic_arn, Message=json.dumps(event))
            with self._lock:
                self.events_published += 1
        except Exception:
            log.exception("publishing an SES event failed")

    def pending(self) -> int:
        return self._later.pending()


def _payload(part: Any) -> bytes:
    """A MIME part's decoded bytes."""
    data = part.get_payload(decode=True)
    return data if isinstance(data, bytes) else b""
