"""Attachment files in S3 under random keys; downloads and uploads through short-lived presigned
URLs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote


class FilesNotDeleted(RuntimeError):
    """DeleteObjects left some of the objects (its answer's ``Errors``)."""


class FileStore:
    def __init__(self, s3: Any, bucket: str) -> None:
        self._s3 = s3
        self._bucket = bucket

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self._s3.put_object(
            Bucket=self._bucket, Key=key, Body=data, ContentType=content_type,
            ServerSideEncryption="AES256",
        )  # fmt: skip

    def get(self, key: str) -> bytes:
        return self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()

    def head(self, key: str) -> dict[str, Any] | None:
        """The object's size, type and metadata; None when there is none. Without
        s3:ListBucket (the roles have none) S3 answers a missing key with 403, not 404."""
        from botocore.exceptions import ClientError

        try:
            answer = self._s3.head_object(Bucket=self._bucket, Key=key)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status in (403, 404):
                return None
            raise
        return {"size": answer["ContentLength"], "content_type": answer.get("ContentType", ""),
                "metadata": answer.get("Metadata") or {}}  # fmt: skip

    def copy(self, source: str, key: str) -> None:
        """A server-side copy (type and metadata kept): no byte passes through the function."""
        self._s3.copy_object(
            Bucket=self._bucket, Key=key, CopySource={"Bucket": self._bucket, "Key": source},
            ServerSideEncryption="AES256",
        )  # fmt: skip

    def upload_url(self, key: str, content_type: str, size: int, metadata: dict[str, str],
                   seconds: int, sha256: str | None = None) -> str:  # fmt: skip
        """A presigned PUT of exactly this type, length and metadata (and with ``sha256``, its
        digest in base64): each is a signed header, so S3 refuses a PUT that sends another
        value (or leaves one out), and checks the bytes against the digest."""
        params: dict[str, Any] = {"Bucket": self._bucket, "Key": key,
                                  "ContentType": content_type, "ContentLength": size,
                                  "Metadata": metadata}  # fmt: skip
        if sha256 is not None:
            params["ChecksumSHA256"] = sha256
        return self._s3.generate_presigned_url("put_object", Params=params, ExpiresIn=seconds)

    def delete(self, keys: Sequence[str]) -> None:
        """Delete the objects; raises when S3 deleted not all of them. DeleteObjects answers
        200 whatever happened to each key and lists the keys it did not delete in ``Errors``
        (AccessDenied, InternalError...): unread, a refused delete passes for a done one."""
        failed: list[str] = []
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            answer = self._s3.delete_objects(
                Bucket=self._bucket,
                Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
            )
            failed += [f"{e.get('Key')}: {e.get('Code')}" for e in answer.get("Errors") or []]
        if failed:
            raise FilesNotDeleted(f"S3 did not delete {len(failed)} of {len(keys)} objects "
                                  f"({', '.join(failed[:3])})")  # fmt: skip

    def download_url(self, key: str, filename: str, content_type: str, seconds: int) -> str:
        disposition = f"attachment; filename*=UTF-8''{quote(filename)}"
        return self._s3.generate_presigned_url(
            "get_object",
            Params={
                "Bucket": self._bucket,
                "Key": key,
                "ResponseContentDisposition": disposition,
                "ResponseContentType": content_type,
            },
            ExpiresIn=seconds,
        )
