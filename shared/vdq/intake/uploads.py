"""Attachments too large for a request: a presigned S3 upload first, then the email names it.

A request reaches the function as a Lambda event of at most 6 MiB, and base64 adds a third to
a file: an email carries about 4.5 MB of files inline. A larger file goes straight to S3:
``POST /attachments/uploads`` checks the declared name, type and size and answers a presigned
PUT URL that binds all three (signed headers: S3 refuses a PUT that differs). The email then
names the upload (``{"upload_id": ...}``) instead of ``content_base64``; enqueue reads the
object's size and type (HEAD), counts it with the inline files against
``VDQ_MAX_ATTACHMENT_BYTES``, copies it server-side to where inline files go
(``files/<content>/<attachment>``, one AttachmentRecord like theirs), and deletes the upload
once the items are accepted. From there a file is a file: the send worker reads it, downloads
and the purge treat it alike.

Copied rather than referenced in place: the uploads prefix expires after a day (the lifecycle
rule is what removes uploads no email took), while a queued file lives as long as its items and
the purge say, possibly for ever. A copy costs one request and moves no byte through Lambda.

An upload's key holds a hash of its caller (``uploads/<hash>/<upload_id>``): another caller's
upload_id names no object of this caller, so it is refused like a missing one.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote, unquote

from vdq.api import Caller
from vdq.core import ids
from vdq.core.clock import iso
from vdq.core.errors import ValidationError
from vdq.core.observability import logger
from vdq.core.resources import UPLOADS_PREFIX
from vdq.intake import messages
from vdq.intake.fields import Body, Field

if TYPE_CHECKING:
    from vdq.runtime import Runtime

ADD_PERMISSION = "vdq.add_queueitem"
UPLOAD = Body("UploadRequest", "A file to upload: what the presigned URL will accept.", (
    Field("filename", "filename", "The file's name as the receiver sees it; a name, not a path "
          "(no slashes, not `.` or `..`), not of a type SES refuses (.exe, .bat, .js and the "
          "others of its unsupported attachment types: a 422).", required=True,
          max_length=messages.MAX_FILENAME),
    Field("content_type", "mime", "The file's MIME type: the PUT must send it as its "
          "Content-Type.", required=True, max_length=messages.MAX_CONTENT_TYPE,
          example="application/pdf"),
    Field("size", "integer", "The file's size in bytes: the PUT must send exactly this many. "
          "At most VDQ_MAX_ATTACHMENT_BYTES (default {max_attachment_bytes:,}).", required=True,
          minimum=1, maximum="max_attachment_bytes", unit="bytes"),
    Field("sha256", "sha256", "The file's SHA-256 digest in base64 (`openssl dgst -sha256 "
          "-binary FILE | base64`): the PUT must send it as `x-amz-checksum-sha256`, and S3 "
          "refuses bytes with another digest (no file is changed on its way). Required with "
          "an Idempotency-Key.", example="LCa0a2j/xo/5m0U8HTBBNBNCLXBkg7+g+YpeiGJm564="),
))
NAME_METADATA_CHARS = 1024  # a percent-encoded name longer than this is base64-encoded
_WORD = ("=?UTF-8?B?", "?=")  # an RFC 2047 encoded word (percent-encoding never starts so)


class Upload(NamedTuple):
    """An uploaded file as enqueue found it."""

    key: str
    filename: str
    content_type: str
    size: int


def upload_key(subject: str, upload_id: str) -> str:
    owner = hashlib.sha256(subject.encode()).hexdigest()[:32]
    return f"{UPLOADS_PREFIX}{owner}/{upload_id}"


def encode_name(name: str) -> str:
    """The file name as an S3 metadata value: ASCII, and short enough that a PUT's metadata
    stays within S3's 2 KB (each key and value, summed; S3 refuses the PUT otherwise).
    Percent-encoded, or when that is longer than ``NAME_METADATA_CHARS`` (3 characters a
    UTF-8 byte: 255 emoji take 3,060), an RFC 2047 encoded word (4 for 3 bytes: at most 1,372)."""
    text = quote(name, safe="")
    if len(text) <= NAME_METADATA_CHARS:
        return text
    return f"{_WORD[0]}{base64.b64encode(name.encode()).decode()}{_WORD[1]}"


def decode_name(value: str) -> str:
    """``encode_name`` undone; what is not its output reads as no name ("")."""
    try:
        if value.startswith(_WORD[0]) and value.endswith(_WORD[1]):
            return base64.b64decode(value[len(_WORD[0]) : -len(_WORD[1])], validate=True).decode()
        return unquote(value, errors="strict")
    except ValueError:
        return ""


def new_upload(body: Any, who: Caller, runtime: Runtime,
               idempotency_key: str | None = None) -> dict[str, Any]:  # fmt: skip
    """``POST /attachments/uploads``: the presigned PUT of one declared file.

    With an ``idempotency_key`` (which needs the file's ``sha256``: S3 then takes those bytes
    only), the upload's id is made from the caller, the key and the declaration
    (``ids.derived_id``): a client that runs again from the start (the upload, its
    PUT, the email, each under the key it used the first time) names the same upload, so its
    email's body is the first one's and the email's key answers as the first time, though
    that email took (and deleted) the upload. Each repeat signs a URL of its own: the first
    may have expired. Another declaration under the same key is another upload. The key is
    checked by the caller (vdq.intake.rest.check_key)."""
    who.require(ADD_PERMISSION)
    from vdq.intake.validation import check

    limits = {"max_attachment_bytes": runtime.settings.max_attachment_bytes}
    declared = check(UPLOAD, body, "", limits)
    name, kind, size = declared["filename"], declared["content_type"], declared["size"]
    digest = declared["sha256"]
    if idempotency_key is not None and digest is None:
        raise ValidationError("sha256", "is required with an Idempotency-Key: the upload_id "
                              "the key keeps is then of these bytes only")  # fmt: skip
    upload_id = ids.new_id() if idempotency_key is None else ids.derived_id(
        who.subject, idempotency_key, name, kind, str(size), str(digest))
    seconds = runtime.settings.upload_url_seconds
    metadata = {"filename": encode_name(name), "size": str(size)}
    from vdq.intake import quotas

    # An upload counts one against the caller's quota: over it, no URL lets S3 take more.
    url = quotas.charged(who.subject, who.groups, 1, runtime, lambda: runtime.files.upload_url(
        upload_key(who.subject, upload_id), kind, size, metadata, seconds, sha256=digest),
        log=logger.warning)  # fmt: skip
    headers = {"Content-Type": kind, "Content-Length": str(size),
               **{f"x-amz-meta-{k}": v for k, v in metadata.items()},
               **({"x-amz-checksum-sha256": digest} if digest else {})}  # fmt: skip
    return {
        "upload_id": upload_id,
        "url": url,
        "method": "PUT",
        "headers": headers,
        "expires_at": iso(runtime.clock.now() + timedelta(seconds=seconds)),
    }


def find_uploads(
    attachments: Sequence[messages.Attachment], owner: str | None, runtime: Runtime
) -> dict[int, Upload]:
    """The uploads the attachments name, by position, checked before anything is stored: each
    exists under ``owner``'s prefix and holds the size it was declared with, and all files
    together (inline ones too) stay within ``VDQ_MAX_ATTACHMENT_BYTES``; 422 otherwise."""
    found: dict[int, Upload] = {}
    limit = runtime.settings.max_attachment_bytes
    for i, attachment in enumerate(attachments):
        if attachment.upload_id is None:
            continue
        path = f"attachments[{i}].upload_id"
        if owner is None:
            raise ValidationError(path, "an upload is only named through the REST API")
        key = upload_key(owner, attachment.upload_id)
        head = runtime.files.head(key)
        if head is None:
            raise missing(path, attachment.upload_id)
        found[i] = _checked(head, key, attachment, path, limit)
    total = sum(len(a.content) for a in attachments) + sum(u.size for u in found.values())
    if total > limit:
        raise ValidationError("attachments", f"total {total} bytes is over the limit of {limit}")
    return found


def missing(path: str, upload_id: str) -> ValidationError:
    return ValidationError(path, f"no upload {upload_id} of this caller: it was never made, not "
                           "by this caller, already taken by an email, or expired")  # fmt: skip


def gone(upload: Upload, runtime: Runtime) -> bool:
    """After a failed copy: the upload is no longer there (another email of the caller took
    it after this one checked it, or it expired), rather than S3 failing."""
    try:
        return runtime.files.head(upload.key) is None
    except Exception:
        return False


def _checked(head: Mapping[str, Any], key: str, attachment: messages.Attachment, path: str,
             limit: int) -> Upload:  # fmt: skip
    from vdq.intake.validation import filename

    declared = str(head["metadata"].get("size", ""))
    size = int(head["size"])
    if not declared.isdigit() or int(declared) != size:
        raise ValidationError(path, f"the upload holds {size} bytes, not the {declared or '?'} "
                              "it was declared with: upload the file again")  # fmt: skip
    if size > limit:
        raise ValidationError(path, f"the upload's {size} bytes are over the limit of {limit}")
    name = attachment.filename or decode_name(str(head["metadata"].get("filename", "")))
    try:
        name = filename(name, f"{path[: -len('.upload_id')]}.filename") or ""
        kind = messages.content_type(head["content_type"], path)
    except ValidationError:
        raise ValidationError(
            path, "the upload was not made through POST /attachments/uploads"
        ) from None
    return Upload(key, name, kind, size)


def discard(uploads: Mapping[int, Upload], runtime: Runtime) -> None:
    """The uploads were copied to a content's files and its items accepted: delete them. A
    failure leaves them to the lifecycle rule (a day)."""
    if not uploads:
        return
    try:
        runtime.files.delete([u.key for u in uploads.values()])
    except Exception:
        logger.exception("%d taken uploads left for the lifecycle rule", len(uploads))
