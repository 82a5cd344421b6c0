"""A new content's attachment files: their records, then their bytes in S3 under random keys.

The records are written with the content before any file is stored, so an enqueue that dies
between the two leaves records in the purge index (vdq.workflow.attachments) naming each file
it stored, never a file that no record names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from vdq.core import ids
from vdq.intake import uploads as uploads_module
from vdq.intake.messages import Attachment
from vdq.intake.uploads import Upload
from vdq.store import FILE_SK, AttachmentRecord, WriteFailed, attachment_pk

if TYPE_CHECKING:
    from vdq.runtime import Runtime


def file_records(
    content_id: str, attachments: tuple[Attachment, ...],
    uploads: Mapping[int, Upload] | None = None,
) -> list[AttachmentRecord]:
    """The record of each file, under a random key, written with the content before any file
    is stored (``store_files``): an enqueue that dies between the two leaves records in the
    purge index that name each file it stored, never a file that no record names."""
    uploads = uploads or {}
    records: list[AttachmentRecord] = []
    for i, attachment in enumerate(attachments):
        attachment_id = ids.new_id()
        upload = uploads.get(i)
        records.append(
            AttachmentRecord(
                attachment_pk(attachment_id),
                FILE_SK,
                id=attachment_id,
                content_id=content_id,
                filename=upload.filename if upload else attachment.filename,
                content_type=upload.content_type if upload else attachment.content_type,
                size=upload.size if upload else len(attachment.content),
                s3_key=f"files/{content_id}/{attachment_id}",
                inline=attachment.inline,
                cid=attachment.content_id,
            )
        )
    return records


def store_files(
    records: list[AttachmentRecord], attachments: tuple[Attachment, ...], runtime: Runtime,
    uploads: Mapping[int, Upload] | None = None,
) -> None:
    """Store each file under its record's key: an inline one uploaded, a presigned upload
    copied from where it was put (see vdq.intake.uploads). A failure is a 503 (WriteFailed), or a
    422 when the upload is gone; the caller removes what was stored
    (vdq.intake.enqueue._discard)."""
    uploads = uploads or {}
    for i, (record, attachment) in enumerate(zip(records, attachments, strict=True)):
        upload = uploads.get(i)
        try:
            if upload is not None:
                runtime.files.copy(upload.key, record.s3_key)
            else:
                runtime.files.put(record.s3_key, attachment.content, attachment.content_type)
        except Exception as exc:
            if upload is not None and attachment.upload_id and uploads_module.gone(upload,
                                                                                   runtime):
                raise uploads_module.missing(f"attachments[{i}].upload_id",
                                             attachment.upload_id) from exc  # fmt: skip
            raise WriteFailed([], f"storing attachment {record.filename!r} failed: "
                              f"{exc}; nothing was stored") from exc  # fmt: skip
