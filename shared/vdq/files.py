"""Attachment files in S3 under random keys; downloads through short-lived presigned URLs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote


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

    def delete(self, keys: Sequence[str]) -> None:
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            self._s3.delete_objects(
                Bucket=self._bucket,
                Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
            )

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
