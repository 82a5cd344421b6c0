"""The bodies of presigned attachment uploads (vdq.uploads), for the OpenAPI document only.

Beside vdq.operations.schemas, which imports them: generator-only, as that module is.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from vdq import ids, messages
from vdq.settings import Settings

_DEFAULTS = Settings()
_C = messages.CONTROL_CHARS
_SPACE = "".join(f"\\u{ord(c):04x}" for c in map(chr, range(0x10000)) if c.isspace())
FILENAME = f"^[^/\\\\{_C}]*[^{_SPACE}/\\\\{_C}][^/\\\\{_C}]*$"
_FILENAME_TEXT = "The file's name as the receiver sees it; a name, not a path (no slashes, not "
_UPLOAD_ID = Field(description="The upload_id that POST /attachments/uploads answered; the "
                   "file must be PUT to its URL first. Each upload is taken by one email.",
                   pattern=ids.PATTERN)  # fmt: skip


class UploadedAttachmentIn(BaseModel):
    """A file uploaded through a presigned URL, sent with the email."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "description": (
                "A file PUT through POST /attachments/uploads, named by its upload_id: for files "
                "too large to send inline. Its type and size are the upload's; it counts "
                "towards VDQ_MAX_ATTACHMENT_BYTES with the inline files. A 422 on "
                "`attachments[i].upload_id` when the upload does not exist for this caller "
                "(never made, another caller's, already taken by an email, or expired) or "
                "holds another size than declared."
            ),
            "if": {"required": ["content_id"],
                   "properties": {"content_id": {"type": "string"}}},
            "then": {"required": ["inline"], "properties": {"inline": {"const": True}}},
        },
    )  # fmt: skip
    upload_id: str = _UPLOAD_ID
    filename: str | None = Field(None, description=_FILENAME_TEXT + "`.` or `..`); left out, "
                                 "the name the upload was declared with.",
                                 max_length=messages.MAX_FILENAME, pattern=FILENAME,
                                 json_schema_extra={"not": {"enum": [".", ".."]}})  # fmt: skip
    inline: bool = Field(False, description="Show the file in the HTML body (referenced by "
                         "`cid:<content_id>`) instead of as an attachment.")  # fmt: skip
    content_id: str | None = Field(
        None, description="The Content-ID an inline file is referenced by (inline files only).",
        pattern=f"^[{messages.CONTENT_ID_CHARS}]{{1,{messages.MAX_CONTENT_ID}}}$",
    )  # fmt: skip


class UploadRequest(BaseModel):
    """A file to upload: what the presigned URL will accept."""

    model_config = ConfigDict(extra="forbid")
    filename: str = Field(description=_FILENAME_TEXT + "`.` or `..`).",
                          max_length=messages.MAX_FILENAME, pattern=FILENAME,
                          json_schema_extra={"not": {"enum": [".", ".."]}})  # fmt: skip
    content_type: str = Field(description="The file's MIME type: the PUT must send it as its "
                              "Content-Type.", examples=["application/pdf"],
                              max_length=messages.MAX_CONTENT_TYPE, pattern=messages.MIME_TYPE)
    size: int = Field(description="The file's size in bytes: the PUT must send exactly this "
                      "many. At most VDQ_MAX_ATTACHMENT_BYTES (default "
                      f"{_DEFAULTS.max_attachment_bytes:,}).", ge=1,
                      le=_DEFAULTS.max_attachment_bytes)  # fmt: skip


class Upload(BaseModel):
    """Where to PUT the file, and the reference an email names it by."""

    upload_id: str = Field(description="Name it in an email's attachments as "
                           "`{\"upload_id\": ...}` once the PUT succeeded.",
                           pattern=ids.PATTERN)  # fmt: skip
    url: str = Field(description="The presigned S3 URL to PUT the file's bytes to (no token: "
                     "the URL carries its signature).")  # fmt: skip
    method: str = Field(description="Always `PUT`.", json_schema_extra={"const": "PUT"})
    headers: dict[str, str] = Field(description="Send exactly these headers with the PUT: "
                                    "they are signed, and S3 refuses a PUT whose Content-Type, "
                                    "Content-Length or metadata differ.")  # fmt: skip
    expires_at: str = Field(description="When the URL stops working (VDQ_UPLOAD_URL_SECONDS "
                            "after it was made). An upload no email takes is deleted a day "
                            "after it was made.", json_schema_extra={"format": "date-time"})
