"""What goes out to the provider for one claimed item, and the call: the email's MIME (its
content, its files read from S3, the one-click unsubscribe headers and the tracking tags) through
SES, or the SMS with its signed status-callback URL through Twilio (vdq.dispatch.send records the
outcome)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from vdq.core.clock import parse_iso
from vdq.core.observability import metrics
from vdq.dispatch import mime
from vdq.results import tracking, unsubscribe
from vdq.store import QueueItemRecord

if TYPE_CHECKING:
    from vdq.runtime import Runtime


class MissingContent(Exception):
    """The content or a file the message needs is gone; sending cannot succeed."""


def read_files(content: dict[str, Any], runtime: Runtime) -> list[mime.File]:
    attachment_ids = content.get("attachments") or []
    if not attachment_ids:
        return []
    records = {r.id: r for r in runtime.store.get_attachments(attachment_ids)}
    files: list[mime.File] = []
    for attachment_id in attachment_ids:
        record = records.get(attachment_id)
        if record is None or record.purged_at is not None:
            name = record.filename if record else attachment_id
            raise MissingContent(f"the file of attachment {name} was deleted; cannot send")
        try:
            data = runtime.files.get(record.s3_key)
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise MissingContent(f"the file of attachment {record.filename} is gone") from exc
            raise
        files.append(mime.File(record.filename, record.content_type, data, bool(record.inline),
                               record.cid))  # fmt: skip
    return files


def send_email(item: QueueItemRecord, content: dict[str, Any], runtime: Runtime) -> str:
    from vdq.providers.ses import get_ses

    raw = mime.build_email(
        sender=item.sender,
        sender_name=item.sender_name,
        content=content,
        files=read_files(content, runtime),
        date=runtime.clock.now(),
        headers=unsubscribe.headers(item, content, runtime.settings),
    )
    tags = tracking.tags_for(item, runtime)
    message_id = get_ses(runtime).send_raw(sender=item.sender, receiver=item.receiver, raw=raw,
                                           tags=tags)  # fmt: skip
    metrics.add_metric(name="EmailsSent", unit="Count", value=1)
    return message_id


def send_sms(item: QueueItemRecord, content: dict[str, Any], runtime: Runtime) -> str:
    from vdq.providers.twilio import get_twilio, validity_seconds

    settings = runtime.settings
    webhook = settings.twilio_webhook_url
    now = runtime.clock.now()
    elapsed = (now - parse_iso(item.claimed_at)).total_seconds() if item.claimed_at else 0.0
    sid = get_twilio(runtime).send(
        item.sender,
        item.receiver,
        content.get("body") or None,  # an MMS of media alone has none
        list(content.get("media_urls") or ()),
        status_callback_url(webhook, item.id, int(item.attempt)) if webhook else None,
        validity=validity_seconds(settings.twilio_sms_timeout_hours, elapsed),
    )
    metrics.add_metric(name="SmsSent", unit="Count", value=1)
    return sid


def status_callback_url(webhook_url: str, item_id: str, attempt: int | None = None) -> str:
    """``webhook_url`` with ``queue_item=<id>`` and ``attempt=<n>``, replacing any it has.

    Twilio signs the whole URL, so the attempt a status names is as authentic as the key: a
    late status of an earlier attempt never moves a later one."""
    parts = urlsplit(webhook_url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
             if k not in ("queue_item", "attempt")]  # fmt: skip
    query.append(("queue_item", item_id))
    if attempt is not None:
        query.append(("attempt", str(attempt)))
    return urlunsplit(parts._replace(query=urlencode(query)))
