"""Attachment files: stored once per content under random S3 keys, shared by every item of the
content (receivers and resends), and deleted when cleanup is on and all those items are done.
"""

from __future__ import annotations

from vdq import ids
from vdq.clock import iso
from vdq.messages import Attachment
from vdq.observability import logger
from vdq.runtime import Runtime
from vdq.store import FILE_SK, AttachmentRecord, QueueItemRecord, attachment_pk


def store_files(
    content_id: str, attachments: tuple[Attachment, ...], runtime: Runtime
) -> list[AttachmentRecord]:
    """Upload each file under a random key; returns the records to write with the content."""
    records = []
    for attachment in attachments:
        attachment_id = ids.new_id()
        key = f"files/{content_id}/{attachment_id}"
        runtime.files.put(key, attachment.content, attachment.content_type)
        records.append(
            AttachmentRecord(
                attachment_pk(attachment_id),
                FILE_SK,
                id=attachment_id,
                content_id=content_id,
                filename=attachment.filename,
                content_type=attachment.content_type,
                size=len(attachment.content),
                s3_key=key,
                inline=attachment.inline,
                cid=attachment.content_id,
            )
        )
    return records


def purge_content_files(content_id: str, runtime: Runtime) -> int:
    """Delete a content's files if none of its items is open; returns files deleted."""
    now = iso(runtime.clock.now())
    if not runtime.store.mark_purged(content_id, now):
        return 0
    content = runtime.store.get_content(content_id) or {}
    records = runtime.store.get_attachments(content.get("attachments", []))
    runtime.files.delete([r.s3_key for r in records])
    for record in records:
        record.update(actions=[AttachmentRecord.purged_at.set(now)])
    logger.info("purged %d files of content %s", len(records), content_id)
    return len(records)


def release_files(item: QueueItemRecord, runtime: Runtime) -> None:
    """An item with files entered a done state: count it, and purge when cleanup is immediate."""
    from vdq.transitions import shard

    settings = runtime.settings
    partition = f"P#{shard(item.content_id, settings.index_shards)}"
    refs = runtime.store.release_content(item.content_id, iso(runtime.clock.now()), partition)
    if settings.max_files_age_seconds == 0 and refs.open_items <= 0:
        purge_content_files(item.content_id, runtime)
