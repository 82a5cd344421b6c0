"""GET /attachments/{id}: a short-lived presigned URL of a file, for a caller who may read it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vdq.core import ids
from vdq.core.errors import Forbidden, NotFound, VdqError

if TYPE_CHECKING:
    from vdq.api import Caller
    from vdq.runtime import Runtime

READ_PERMISSION = "vdq.read_queueitem"


class FilesPurged(VdqError):
    """The attachment's file was deleted by cleanup; its metadata stays."""

    status = 410
    code = "purged"


def download_url(attachment_id: str, who: Caller, runtime: Runtime) -> str:
    """A presigned URL of the file, for a caller who may read an item it belongs to.

    Read permission is global (``vdq.read_queueitem`` reads every item), so "may read an item
    the attachment belongs to" is: the caller holds it, and the attachment's content has items.
    The content's REFS record is written with its first items and exists exactly for contents
    with files that were queued; an attachment without one belongs to no item and is refused.
    """
    who.require(READ_PERMISSION)
    store = runtime.store
    record = store.get_attachment(attachment_id) if ids.is_id(attachment_id) else None
    if record is None:
        raise NotFound(f"attachment {attachment_id} does not exist", details={"id": attachment_id})
    refs = store.get_refs(record.content_id)
    if refs is None:
        raise Forbidden(f"attachment {attachment_id} belongs to no queue item")
    if record.purged_at is not None or refs.purged_at is not None:
        raise FilesPurged(
            f"the file of attachment {attachment_id} was deleted by cleanup "
            f"at {record.purged_at or refs.purged_at}",
            details={"id": attachment_id},
        )
    return runtime.files.download_url(
        record.s3_key, record.filename, record.content_type,
        runtime.settings.attachment_url_seconds,
    )  # fmt: skip
