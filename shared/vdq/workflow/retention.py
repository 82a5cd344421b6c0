"""Retention: done items, their records, content and files expire through DynamoDB's TTL.

An item that enters a done state (succeeded, cancelled, unconfirmed: ``workflow.DONE_STATES``)
gets ``expiration`` = done time + ``VDQ_RETENTION_DAYS``, written in the transition's own
transaction with the history record of that write. No transition leaves a done state, so an
expiration once written never changes. ``errored`` is not done: an operator may still retry or
cancel it, so an errored item (and everything it needs) is kept until then.

Records of the item written before it was done (history, event marks) are stamped from the
table's stream, at least once, when the state record gains its expiration (``stamp_changes``);
records written while it is done carry the item's expiration from the start. A content expires
with the last item that uses it: its REFS count must be at zero (or absent: one item), checked
in the transaction that stamps it; a resend takes the expiration off again. Provider-ID mappings
carry an expiration from birth that outlives the item's (``mapping_expiration``).

DynamoDB deletes an expired record within about two days, so every read treats a record past
its expiration as gone (``vdq.store.expiry.gone``): lists and reads never show half an item.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pynamodb.exceptions import TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from vdq.core.settings import Settings

DAY = 86_400
# The REFS record outlives its content by this much: the daily purge, which finds idle
# contents through it, deletes the files first.
REFS_GRACE_SECONDS = 2 * DAY
STATE_SK = "STATE"
# The daily purge deletes an idle content's files this many days before its records expire.
FILES_LEAD_DAYS = 2


def expiration_at(done: datetime, settings: Settings) -> int | None:
    """Epoch seconds at which a record of an item done at ``done`` expires; None: never."""
    if settings.retention_days <= 0:
        return None
    return int(done.timestamp()) + settings.retention_days * DAY


def mapping_expiration(written: datetime, settings: Settings) -> int | None:
    """The expiration of a provider-ID mapping written at ``written``: after the item's, since
    the attempt it maps is done at the latest when its awaiting window ends, or moves on to a
    new attempt with a new ID (its events then find no item: they are late either way)."""
    if settings.retention_days <= 0:
        return None
    hours = max(settings.twilio_sms_timeout_hours, settings.email_timeout_hours)
    return int(written.timestamp() + hours * 3600) + settings.retention_days * DAY + DAY


def files_age_seconds(settings: Settings) -> int | None:
    """How long the files of an idle content are kept before the daily purge deletes them:
    the files-age setting, but at most ``FILES_LEAD_DAYS`` less than the retention (the purge,
    which runs daily, finds the files through their content, which must still be there);
    unset, that much. None: forever (neither is set)."""
    if settings.retention_days <= 0:
        return settings.max_files_age_seconds
    latest = max(0, settings.retention_days - FILES_LEAD_DAYS) * DAY
    age = settings.max_files_age_seconds
    return latest if age is None else min(age, latest)


# ---- stamping from the stream -----------------------------------------------------------------


def _plain(image: dict[str, Any]) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeDeserializer

    deserialize = TypeDeserializer().deserialize
    return {k: deserialize(v) for k, v in image.items()}


def newly_expiring(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The state items that gained their expiration in a batch of stream records (MODIFY of a
    STATE record only: TTL deletions are REMOVE records and change nothing here)."""
    from vdq.core.resources import TABLE_TTL_ATTRIBUTE as TTL

    out = []
    for record in records:
        if record.get("eventName") != "MODIFY":
            continue
        change = record.get("dynamodb") or {}
        new, old = change.get("NewImage") or {}, change.get("OldImage") or {}
        if (new.get("sk") or {}).get("S") != STATE_SK or TTL not in new or TTL in old:
            continue
        out.append(_plain(new))
    return out


def stamp_changes(records: Iterable[dict[str, Any]], runtime: Any) -> int:
    """Stamp the records of every item that entered a done state in this batch; returns how
    many items. A failure raises, so Lambda delivers the batch again (stamping is idempotent)."""
    items = newly_expiring(records)
    for item in items:
        stamp_item(item["id"], item["content_id"], int(item["expiration"]), runtime,
                   counted=bool(item.get("counted")), files=bool(item.get("has_files")))
    return len(items)


def stamp_item(item_id: str, content_id: str, expiration: int, runtime: Any, *,
               counted: bool, files: bool) -> int:  # fmt: skip
    """Give the item's records written before it was done (history, event marks) its
    expiration, then its content's if no other item uses it. Returns records stamped."""
    stamped = runtime.store.stamp_item_records(item_id, expiration)
    stamp_content(content_id, expiration, runtime, counted=counted or files, files=files)
    return stamped


def stamp_content(content_id: str, expiration: int, runtime: Any, *, counted: bool,
                  files: bool) -> bool:  # fmt: skip
    """Give a content ``expiration`` if no item of it is open; a later expiration already
    there is kept. True when stamped.

    The content of one item (not ``counted``): one UpdateItem, conditional on no resend having
    made it shared since (``shared``). A counted content (with files, or of several items):
    one transaction with its REFS record, conditional on its open count being zero, and with
    its attachments' records (``files``: read from the content)."""
    from vdq.store import (
        FILE_SK,
        AttachmentRecord,
        ContentRecord,
        ContentRefsRecord,
        attachment_pk,
        content_key,
        refs_key,
        transact,
    )

    later = ContentRecord.expiration.does_not_exist() | (ContentRecord.expiration < expiration)
    if not counted:
        try:
            ContentRecord(*content_key(content_id)).update(
                actions=[ContentRecord.expiration.set(expiration)],
                condition=ContentRecord.pk.exists() & later
                & ContentRecord.shared.does_not_exist(),
            )  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True
    content = runtime.store.get_content(content_id) if files else {}
    if content is None:
        return False
    idle = (ContentRefsRecord.open_items <= 0) & ContentRefsRecord.pending.does_not_exist()

    def fill(tx: TransactWrite) -> None:
        tx.update(ContentRecord(*content_key(content_id)),
                  [ContentRecord.expiration.set(expiration)],
                  condition=ContentRecord.pk.exists() & later)  # fmt: skip
        tx.update(ContentRefsRecord(*refs_key(content_id)),
                  [ContentRefsRecord.expiration.set(expiration + REFS_GRACE_SECONDS)],
                  condition=idle)  # fmt: skip
        for attachment_id in content.get("attachments") or []:
            tx.update(AttachmentRecord(attachment_pk(attachment_id), FILE_SK),
                      [AttachmentRecord.expiration.set(expiration)],
                      condition=AttachmentRecord.pk.exists())  # fmt: skip

    try:
        transact(fill)
    except TransactWriteError as exc:
        if any(r is not None and r.code == "ConditionalCheckFailed"
               for r in exc.cancellation_reasons or []):  # fmt: skip
            # Another item is open (it stamps the content when it is done), or a later
            # expiration is there already, or the content is gone.
            return False
        raise
    return True
