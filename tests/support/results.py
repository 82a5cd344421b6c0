"""Provider results in tests: SES events and signed Twilio callbacks from the samples in
events/, queue items walked to the state a test needs, and a fake Twilio status source."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import vdq
from tests.support.events import load_event
from tests.support.lambda_context import LambdaContext  # noqa: F401 (re-exported)
from vdq.runtime import Runtime
from vdq.store import QueueItemRecord
from vdq.workflow.transitions import Step, apply

# What the samples were made with (events/twilio_status_*.json are signed with these).
SAMPLE_AUTH_TOKEN = "vdq-sample-auth-token-0123456789"
SAMPLE_WEBHOOK_URL = "https://abc123.execute-api.us-east-1.amazonaws.com/prod/twilio/status-callback"
SAMPLE_ACCOUNT_SID = "AC1f2e3d4c5b6a79880f1e2d3c4b5a6978"
SAMPLE_ITEM = "01KBF3ZQ0M8Y4T6R2W9X5N7C3D"


def ses_body(name: str) -> dict[str, Any]:
    return json.loads(load_event(f"sqs_ses_{name}")["Records"][0]["body"])


def ses_event(name: str, *, message_id: str, item_id: str | None = None,
              attempt: int | None = 1, **detail: Any) -> dict[str, Any]:  # fmt: skip
    """The SES event of sample ``sqs_ses_<name>`` for ``message_id``; tags name ``item_id``
    (no vdq tags when None); ``detail`` replaces keys of the event's detail object."""
    body = ses_body(name)
    body["mail"]["messageId"] = message_id
    body["mail"]["commonHeaders"]["messageId"] = message_id
    tags = body["mail"]["tags"]
    tags.pop("vdq_item")
    tags.pop("vdq_attempt")
    if item_id is not None:
        tags["vdq_item"] = [item_id]
        if attempt is not None:
            tags["vdq_attempt"] = [str(attempt)]
    if detail:
        key = next(k for k in body if k not in ("eventType", "mail"))
        body[key].update(detail)
    return body


def sqs_event(*bodies: dict[str, Any] | str) -> dict[str, Any]:
    """An SQS event whose records carry ``bodies`` (SNS raw delivery: the body is the JSON)."""
    template = load_event("sqs_ses_delivery")["Records"][0]
    records = []
    for n, body in enumerate(bodies):
        record = dict(template, messageId=f"msg-{n}")
        record["body"] = body if isinstance(body, str) else json.dumps(body)
        records.append(record)
    return {"Records": records}


def twilio_event(status: str, *, sid: str, item_id: str | None, token: str = SAMPLE_AUTH_TOKEN,
                 url: str = SAMPLE_WEBHOOK_URL, sign: bool = True, attempt: int | None = None,
                 **params: str) -> dict[str, Any]:  # fmt: skip
    """The API Gateway event of a Twilio callback for ``sid``, signed as Twilio signs it; its
    URL names ``item_id`` and, when given, ``attempt`` (as the send's do: without it, the URL
    of an SMS sent before attempts were in it)."""
    from twilio.request_validator import RequestValidator

    sample = "twilio_status_undelivered" if status not in ("sent", "delivered", "failed") else (
        f"twilio_status_{status}"
    )
    event = load_event(sample)
    form = dict(parse_qsl(event["body"]))
    form.update(MessageSid=sid, SmsSid=sid, MessageStatus=status, SmsStatus=status, **params)
    event["body"] = urlencode(form)
    if item_id is None:
        event["queryStringParameters"] = None
        event["multiValueQueryStringParameters"] = None
        signed_url = url
    else:
        query = {"queue_item": item_id, **({} if attempt is None else {"attempt": str(attempt)})}
        event["queryStringParameters"] = query
        event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()}
        signed_url = f"{url}?{urlencode(query)}"
    headers = dict(event["headers"])
    headers.pop("X-Twilio-Signature")
    if sign:
        headers["X-Twilio-Signature"] = RequestValidator(token).compute_signature(signed_url, form)
    event["headers"] = headers
    return event


# ---- items in the state a test needs ---------------------------------------------------------


def new_email(runtime: Runtime, receiver: str = "ada@example.org") -> QueueItemRecord:
    (item,) = vdq.add_email({"email": "shop@example.com"}, [receiver], "Hi", "Text",
                            runtime=runtime)  # fmt: skip
    return runtime.store.get_item(item.id)


def new_sms(runtime: Runtime, receiver: str = "+14155550100") -> QueueItemRecord:
    (item,) = vdq.add_sms("+15005550006", [receiver], "Your code", runtime=runtime)
    return runtime.store.get_item(item.id)


def to_sending(item: QueueItemRecord, runtime: Runtime) -> QueueItemRecord:
    """The worker's claim (the ``send`` transition, its history entry with it)."""
    from vdq.dispatch import send
    from vdq.workflow.lanes import message_for

    send.claim(message_for(item), runtime.clock.now(), runtime)
    return runtime.store.get_item(item.id)


def to_awaiting(item: QueueItemRecord, runtime: Runtime, provider_id: str) -> QueueItemRecord:
    """Claimed and accepted by the provider as ``provider_id``."""
    item = to_sending(item, runtime)
    apply(item, Step("await", actor="worker", provider_id=provider_id), runtime)
    return runtime.store.get_item(item.id)


def kinds(runtime: Runtime, item_id: str) -> list[tuple[str, str]]:
    """(kind, name) of each history entry of an item, oldest first."""
    return [(h.kind, h.name) for h in runtime.store.history(item_id)]


@dataclass
class Status:
    status: str
    error_code: int | None = None
    error_message: str | None = None


@dataclass
class FakeTwilio:
    """Statuses by SID (an exception value raises, a BaseException too: the function dies
    there); records each fetch."""

    statuses: dict[str, Any] = field(default_factory=dict)
    fetched: list[str] = field(default_factory=list)

    def fetch(self, sid: str) -> Status:
        self.fetched.append(sid)
        answer = self.statuses.get(sid, Status("sent"))
        if isinstance(answer, BaseException):
            raise answer
        return answer


