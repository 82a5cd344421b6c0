"""The Python API of a producing service (``vdq.add_email``, ``vdq.add_sms``): a request body
built from arguments, checked as the REST API checks it (vdq.intake.messages) and enqueued."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from vdq.intake import messages
from vdq.intake.enqueue import enqueue_email, enqueue_sms
from vdq.runtime import Runtime
from vdq.store import QueueItemRecord


def _origin(origin: tuple[str, str] | Mapping[str, str]) -> Any:
    return {"type": origin[0], "id": origin[1]} if isinstance(origin, tuple) else origin


def _dispatch(body: dict[str, Any], priority: str | None,
              send_at: str | datetime | None) -> None:  # fmt: skip
    if priority is not None:
        body["priority"] = priority
    if send_at is not None:
        body["send_at"] = send_at.isoformat() if isinstance(send_at, datetime) else send_at


def _listed(values: Iterable[Any] | str | Mapping[str, str] | None) -> list[Any]:
    """One receiver given alone (a string, or a mapping) as a list of it: a string read as a
    list would be a list of its characters."""
    if isinstance(values, (str, Mapping)):
        return [values]
    return list(values or [])


def _addresses(values: Iterable[Any] | str | Mapping[str, str] | None) -> list[Any]:
    return [{"email": v} if isinstance(v, str) else v for v in _listed(values)]


def add_email(
    sender: str | Mapping[str, str],
    to: str | Mapping[str, str] | Iterable[str | Mapping[str, str]],
    subject: str,
    text: str,
    *,
    html: str | None = None,
    cc: str | Mapping[str, str] | Iterable[str | Mapping[str, str]] | None = None,
    bcc: str | Mapping[str, str] | Iterable[str | Mapping[str, str]] | None = None,
    reply_to: str | Mapping[str, str] | Iterable[str | Mapping[str, str]] | None = None,
    attachments: Iterable[Mapping[str, Any]] | None = None,
    origin: tuple[str, str] | Mapping[str, str] | None = None,
    list_unsubscribe: bool = False,
    list_name: str | None = None,
    priority: str | None = None,
    send_at: str | datetime | None = None,
    runtime: Runtime | None = None,
) -> list[QueueItemRecord]:
    """Queue an email: one item per receiver across to, cc and bcc (each a list, or one
    address alone). Validates all first.
    ``list_unsubscribe``: each copy carries one-click unsubscribe headers (vdq.results.unsubscribe);
    ``list_name``: the mailing list it belongs to (the headers leave that list only);
    ``priority``: high, normal or bulk; ``send_at``: not before this time (aware datetime or
    RFC 3339 text)."""
    runtime = runtime or Runtime.default()
    body: dict[str, Any] = {
        "sender": {"email": sender} if isinstance(sender, str) else dict(sender),
        "to": _addresses(to),
        "cc": _addresses(cc),
        "bcc": _addresses(bcc),
        "reply_to": _addresses(reply_to),
        "subject": subject,
        "text": text,
    }
    if html is not None:
        body["html"] = html
    if attachments:
        body["attachments"] = list(attachments)
    if origin is not None:
        body["origin"] = _origin(origin)
    if list_unsubscribe:
        body["list_unsubscribe"] = True
    if list_name is not None:
        body["list"] = list_name
    _dispatch(body, priority, send_at)
    email = messages.parse_email(
        body,
        max_receivers=runtime.settings.max_receivers,
        max_attachment_bytes=runtime.settings.max_attachment_bytes,
        sender_identities=runtime.settings.sender_identities,
        now=runtime.clock.now(),
        max_schedule_days=runtime.settings.max_schedule_days,
    )
    return enqueue_email(email, runtime)


def add_sms(
    sender: str,
    to: str | Mapping[str, str] | Iterable[str | Mapping[str, str]],
    body: str,
    *,
    media_urls: Iterable[str] | None = None,
    origin: tuple[str, str] | Mapping[str, str] | None = None,
    priority: str | None = None,
    send_at: str | datetime | None = None,
    runtime: Runtime | None = None,
) -> list[QueueItemRecord]:
    """Queue an SMS: one item per receiver (E.164 numbers), from ``sender``, a number of the
    account or a Messaging Service SID (MG...); ``priority`` and ``send_at`` as for
    ``add_email``."""
    runtime = runtime or Runtime.default()
    data: dict[str, Any] = {
        "sender": {"messaging_service_sid" if sender[:2] == "MG" else "cell": sender},
        "to": [{"cell": v} if isinstance(v, str) else v for v in _listed(to)],
        "body": body,
    }
    if media_urls:
        data["media_urls"] = list(media_urls)
    if origin is not None:
        data["origin"] = _origin(origin)
    _dispatch(data, priority, send_at)
    sms = messages.parse_sms(data, max_receivers=runtime.settings.max_receivers,
                             max_segments=runtime.settings.sms_max_segments,
                             now=runtime.clock.now(),
                             max_schedule_days=runtime.settings.max_schedule_days)  # fmt: skip
    return enqueue_sms(sms, runtime)
