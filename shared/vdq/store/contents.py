"""Contents and attachments: content blobs, file metadata, reference counts and the purge.

A content with files counts its open items; when none is left, the purge may delete the files.
"""

from __future__ import annotations

import bz2
import json
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from pynamodb.exceptions import DoesNotExist, TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from vdq.store.items import Items
from vdq.store.models import (
    CONTENT_SK,
    FILE_SK,
    REFS_SK,
    AttachmentRecord,
    ContentRecord,
    ContentRefsRecord,
    Release,
    attachment_pk,
    content_pk,
)
from vdq.store.tx import condition_failed, transact


def encode_content(data: dict[str, Any]) -> bytes:
    """The content as stored: the smaller of deflate and bzip2 (each KB written is a write
    unit; bzip2 often wins on long, repetitive HTML, deflate on short texts)."""
    raw = json.dumps(data, separators=(",", ":")).encode()
    deflated = zlib.compress(raw, 9)
    if len(raw) < 2048:
        return deflated
    return min(deflated, bz2.compress(raw, 9), key=len)


def decode_content(blob: bytes) -> dict[str, Any]:
    # bzip2 streams start with "BZh"; a zlib stream never does (its first byte is 0x78).
    return json.loads(bz2.decompress(blob) if blob[:3] == b"BZh" else zlib.decompress(blob))


class Contents(Items):
    """Reads of contents and attachments, and the reference counts of contents with files
    (settling an enqueue's pending count reads its items: hence built on ``Items``)."""

    def get_content(self, content_id: str, *, expired: bool = False) -> dict[str, Any] | None:
        """The content, None when it does not exist or expired (``expired``: also then, while
        DynamoDB has not deleted it)."""
        try:
            record = ContentRecord.get(content_pk(content_id), CONTENT_SK, consistent_read=True)
        except DoesNotExist:
            return None
        return decode_content(record.data) if expired or self._live(record) else None

    def get_attachment(self, attachment_id: str) -> AttachmentRecord | None:
        try:
            record = AttachmentRecord.get(attachment_pk(attachment_id), FILE_SK,
                                          consistent_read=True)  # fmt: skip
        except DoesNotExist:
            return None
        return record if self._live(record) else None

    def get_attachments(self, attachment_ids: Iterable[str], *,
                        expired: bool = False) -> list[AttachmentRecord]:  # fmt: skip
        keys = [(attachment_pk(a), FILE_SK) for a in dict.fromkeys(attachment_ids)]
        # Strongly consistent: a send can follow the enqueue that wrote these by milliseconds.
        found = AttachmentRecord.batch_get(keys, consistent_read=True) if keys else []
        return [r for r in found if expired or self._live(r)]

    def get_refs(self, content_id: str) -> ContentRefsRecord | None:
        try:
            return ContentRefsRecord.get(content_pk(content_id), REFS_SK, consistent_read=True)
        except DoesNotExist:
            return None

    # ---- content references (attachment cleanup) -------------------------------------------

    def release_content(
        self, content_id: str, now_iso: str, shard: str, count: int = 1, *, files: bool = True
    ) -> ContentRefsRecord:
        """``count`` items of the content were reserved and never created: count them off and
        put a content with files in the purge index (the purge checks the count)."""
        refs = ContentRefsRecord(content_pk(content_id), REFS_SK)
        actions = Release(content_id, shard, now_iso, files=files).actions()
        actions[0] = ContentRefsRecord.open_items.add(-count)
        refs.update(actions=actions)
        return refs

    def reserve_content(self, content_id: str, count: int, *, files: bool = True) -> bool:
        """Count ``count`` new items of a content (its REFS record is made if it had none: the
        content of one item becomes shared) and take its expiration off, with its files'
        (``files``: it has some, read from the content); one transaction. False if its files
        were purged or it expired."""
        content = self.get_content(content_id) if files else {}
        if content is None:
            return False
        pk = content_pk(content_id)
        now = int(self.clock.now().timestamp())
        unexpired = ContentRecord.pk.exists() & (
            ContentRecord.expiration.does_not_exist() | (ContentRecord.expiration > now)
        )

        def fill(tx: TransactWrite) -> None:
            tx.update(ContentRefsRecord(pk, REFS_SK), [
                ContentRefsRecord.open_items.add(count),
                ContentRefsRecord.idle_since.remove(),
                ContentRefsRecord.purge_pk.remove(),
                ContentRefsRecord.purge_sk.remove(),
                ContentRefsRecord.expiration.remove(),
            ], condition=ContentRefsRecord.purged_at.does_not_exist())  # fmt: skip
            tx.update(ContentRecord(pk, CONTENT_SK), [ContentRecord.expiration.remove(),
                                                      ContentRecord.shared.set(True)],
                      condition=unexpired)  # fmt: skip
            for attachment_id in content.get("attachments") or []:
                tx.update(AttachmentRecord(attachment_pk(attachment_id), FILE_SK),
                          [AttachmentRecord.expiration.remove()],
                          condition=AttachmentRecord.pk.exists())  # fmt: skip

        try:
            transact(fill)
        except TransactWriteError as exc:
            if any(condition_failed(r) for r in exc.cancellation_reasons or []):
                return False
            raise
        return True

    def confirm_refs(self, content_id: str) -> None:
        """The enqueue that wrote a content's refs wrote its items: no longer pending."""
        refs = ContentRefsRecord(content_pk(content_id), REFS_SK)
        try:
            refs.update(
                actions=[ContentRefsRecord.pending.remove(), ContentRefsRecord.purge_pk.remove(),
                         ContentRefsRecord.purge_sk.remove()],
                condition=ContentRefsRecord.pending.exists(),
            )  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise

    def settle_pending(self, refs: ContentRefsRecord) -> None:
        """An enqueue died before confirming its items: count off those that were never
        stored (read strongly consistent), once."""
        assert refs.pending is not None
        item_ids = json.loads(refs.pending)
        missing = len(item_ids) - len(self.get_items(item_ids))
        try:
            refs.update(
                actions=[ContentRefsRecord.open_items.add(-missing),
                         ContentRefsRecord.pending.remove()],
                condition=ContentRefsRecord.pending == refs.pending,
            )  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise

    def mark_purged(self, content_id: str, now_iso: str) -> bool:
        """Mark a content's files purged, if no item of it is open; True when its files may be
        deleted (also when an earlier purge marked it and died before deleting them: the
        content stays in the purge index until ``unqueue_purge``)."""
        refs = ContentRefsRecord(content_pk(content_id), REFS_SK)
        try:
            refs.update(
                actions=[ContentRefsRecord.purged_at.set(ContentRefsRecord.purged_at | now_iso)],
                condition=(ContentRefsRecord.open_items <= 0)
                & (ContentRefsRecord.purged_at.does_not_exist()
                   | ContentRefsRecord.purge_pk.exists()),
            )  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def unqueue_purge(self, content_id: str) -> None:
        """Take a content out of the purge index: its files are deleted, or it has open items
        again (a later release puts it back)."""
        refs = ContentRefsRecord(content_pk(content_id), REFS_SK)
        try:
            refs.update(
                actions=[ContentRefsRecord.purge_pk.remove(), ContentRefsRecord.purge_sk.remove()],
                condition=(ContentRefsRecord.open_items > 0) | ContentRefsRecord.purged_at.exists(),
            )
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise

    def idle_contents(self, shard: str, before: str, limit: int) -> Iterator[str]:
        for row in ContentRefsRecord.purge_index.query(
            shard, ContentRefsRecord.purge_sk < before, limit=limit
        ):
            yield row.pk.removeprefix("CT#")
