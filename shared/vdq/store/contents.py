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
    FILE_SK,
    AttachmentRecord,
    ContentRecord,
    ContentRefsRecord,
    QueueItemRecord,
    Release,
    attachment_pk,
    content_id_of,
    content_key,
    refs_key,
)
from vdq.store.tx import TRANSACT_MAX_ACTIONS, WriteFailed, condition_failed, transact


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
            record = ContentRecord.get(*content_key(content_id), consistent_read=True)
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
            return ContentRefsRecord.get(*refs_key(content_id), consistent_read=True)
        except DoesNotExist:
            return None

    # ---- expiration from birth (vdq.workflow.retention) -------------------------------------

    def extend_content(self, content_id: str, expiration: int) -> bool:
        """Give a live content ``expiration`` if its own is earlier: one UpdateItem, conditional
        on the content being there, not past its expiration, and expiring earlier (an
        expiration only ever moves later). True when the content expires at ``expiration`` or
        later now; False when it is gone."""
        now = int(self.clock.now().timestamp())
        record = ContentRecord(*content_key(content_id))
        try:
            record.update(
                actions=[ContentRecord.expiration.set(expiration)],
                condition=ContentRecord.pk.exists() & (ContentRecord.expiration > now)
                & (ContentRecord.expiration < expiration),
            )  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
            try:
                found = ContentRecord.get(*content_key(content_id), consistent_read=True,
                                          attributes_to_get=["pk", "expiration"])  # fmt: skip
            except DoesNotExist:
                return False
            # No expiration: the content was written without a retention, and never expires.
            return found.expiration is None or (self._live(found)
                                                and found.expiration >= expiration)
        return True

    # ---- content references (attachment cleanup) -------------------------------------------

    def release_content(
        self, content_id: str, now_iso: str, shard: str, count: int = 1, *, files: bool = True
    ) -> ContentRefsRecord:
        """``count`` items of the content were reserved and never created: count them off and
        put a content with files in the purge index (the purge checks the count)."""
        refs = ContentRefsRecord(*refs_key(content_id))
        actions = Release(content_id, shard, now_iso, files=files).actions()
        actions[0] = ContentRefsRecord.open_items.add(-count)
        refs.update(actions=actions)
        return refs

    def store_copies(self, content_id: str, copies: list[QueueItemRecord], *,
                     files: bool) -> bool:  # fmt: skip
        """Store new items of an existing content (a resend's copies) with their count on its
        REFS record (made if it had none: the content of one item becomes shared), taking the
        expiration off the content and its files' (``files``: it has some, read from the
        content). The count and the items it counts are written together, one transaction
        per chunk: a worker that dies between two chunks leaves no count without its item.

        Copies of a content that expires from birth (their ``cx`` set: the expiration they
        need) extend it instead, in the same transaction (``_store_expiring``).

        Returns False, with nothing written, when the files were purged or the content expired
        (only the first chunk can find that: once it is written, the content has open items).
        A chunk that fails after others were stored raises ``WriteFailed`` naming exactly the
        copies stored (its caller answers with them: they are counted and will be sent).
        """
        if all(c.cx is not None for c in copies):
            files_of: list[str] = []
            per_chunk = TRANSACT_MAX_ACTIONS - 1
        else:
            content = self.get_content(content_id) if files else {}
            if content is None:
                return False
            files_of = list(content.get("attachments") or [])
            per_chunk = TRANSACT_MAX_ACTIONS - 2 - len(files_of)
        assert per_chunk >= 1, f"{len(files_of)} attachments leave no room for a copy"
        stored: list[QueueItemRecord] = []
        for start in range(0, len(copies), per_chunk):
            chunk = copies[start : start + per_chunk]
            try:
                ok = (self._store_chunk(content_id, chunk, files_of) if chunk[0].cx is None
                      else self._store_expiring(content_id, chunk))  # fmt: skip
            except Exception as exc:
                if not stored:
                    raise
                raise WriteFailed(stored, f"{exc}; {len(stored)} copies were stored") from exc
            if not ok:
                if not stored:
                    return False
                raise WriteFailed(stored, f"content {content_id} refused more copies")
            stored.extend(chunk)
        return True

    def _store_chunk(self, content_id: str, chunk: list[QueueItemRecord],
                     files_of: list[str]) -> bool:  # fmt: skip
        now = int(self.clock.now().timestamp())
        unexpired = ContentRecord.pk.exists() & (
            ContentRecord.expiration.does_not_exist() | (ContentRecord.expiration > now)
        )

        refs = [ContentRefsRecord.open_items.add(len(chunk)), ContentRefsRecord.idle_since.remove(),
                ContentRefsRecord.expiration.remove()]  # fmt: skip
        if files_of:
            # Open again: out of the purge index until a copy's release puts it back. A content
            # without files is there only while an enqueue's count is pending, and no release
            # of its puts it back: it stays for the purge to settle the count.
            refs += [ContentRefsRecord.purge_pk.remove(), ContentRefsRecord.purge_sk.remove()]

        def fill(tx: TransactWrite) -> None:
            tx.update(ContentRefsRecord(*refs_key(content_id)), refs,
                      condition=ContentRefsRecord.purged_at.does_not_exist())  # fmt: skip
            tx.update(ContentRecord(*content_key(content_id)), [ContentRecord.expiration.remove(),
                                                      ContentRecord.shared.set(True)],
                      condition=unexpired)  # fmt: skip
            for attachment_id in files_of:
                tx.update(AttachmentRecord(attachment_pk(attachment_id), FILE_SK),
                          [AttachmentRecord.expiration.remove()],
                          condition=AttachmentRecord.pk.exists())  # fmt: skip
            for copy in chunk:
                tx.save(copy, condition=QueueItemRecord.pk.does_not_exist())

        try:
            transact(fill)
        except Exception as exc:
            # An error answer does not say the transaction was not applied: its answer may have
            # been lost (PynamoDB raises TransactWriteError without reasons), or botocore sent
            # it again after it was applied and the copies' own conditions cancelled the retry
            # (no request token). It was applied if its first copy exists (read consistent).
            if self.get_item(chunk[0].id) is not None:
                return True
            if isinstance(exc, TransactWriteError) and any(
                    condition_failed(r) for r in exc.cancellation_reasons or []):  # fmt: skip
                return False
            raise
        return True

    def _store_expiring(self, content_id: str, chunk: list[QueueItemRecord]) -> bool:
        """Store copies of a content that expires from birth with it living at least until
        their ``cx``, in one transaction without a read: the content's expiration moves to
        ``cx`` when it is live and earlier; when that condition fails, the copies are stored
        again beside a check that it expires later (or never). An expiration never moves
        earlier, so only a content that is gone (or past its expiration) fails both: False,
        nothing written."""
        needed = max(int(c.cx) for c in chunk)
        now = int(self.clock.now().timestamp())
        key = content_key(content_id)
        for copy in chunk:
            copy.cx = needed
        moved = ContentRecord.pk.exists() & (ContentRecord.expiration > now) & (
            ContentRecord.expiration <= needed)
        outlives = ContentRecord.pk.exists() & (ContentRecord.expiration.does_not_exist()
                                                | (ContentRecord.expiration > needed))

        def extending(tx: TransactWrite) -> None:
            tx.update(ContentRecord(*key), [ContentRecord.expiration.set(needed)],
                      condition=moved)  # fmt: skip
            for copy in chunk:
                tx.save(copy, condition=QueueItemRecord.pk.does_not_exist())

        def checking(tx: TransactWrite) -> None:
            tx.condition_check(ContentRecord, *key, condition=outlives)
            for copy in chunk:
                tx.save(copy, condition=QueueItemRecord.pk.does_not_exist())

        for fill in (extending, checking):
            try:
                transact(fill)
            except Exception as exc:
                # Applied if its first copy exists (see _store_chunk).
                if self.get_item(chunk[0].id) is not None:
                    return True
                if not (isinstance(exc, TransactWriteError) and any(
                        condition_failed(r) for r in exc.cancellation_reasons or [])):  # fmt: skip
                    raise
                continue
            return True
        return False

    def confirm_refs(self, content_id: str) -> None:
        """The enqueue that wrote a content's refs wrote its items: no longer pending."""
        refs = ContentRefsRecord(*refs_key(content_id))
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
        stored (read strongly consistent), once; the content is marked ``unstamped`` until
        the purge that settled it takes it out of the purge index."""
        assert refs.pending is not None
        item_ids = json.loads(refs.pending)
        missing = len(item_ids) - len(self.get_items(item_ids))
        try:
            refs.update(
                actions=[ContentRefsRecord.open_items.add(-missing),
                         ContentRefsRecord.pending.remove(),
                         ContentRefsRecord.unstamped.set(True)],
                condition=ContentRefsRecord.pending == refs.pending,
            )  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise

    def mark_purged(self, content_id: str, now_iso: str) -> bool:
        """Mark a content's files purged, if no item of it is open; True when its files may be
        deleted (also when an earlier purge marked it and died before deleting them: the
        content stays in the purge index until ``unqueue_purge``)."""
        refs = ContentRefsRecord(*refs_key(content_id))
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

    def unqueue_purge(self, content_id: str, *, settled: bool = False) -> None:
        """Take a content out of the purge index: its files are deleted, or it has open items
        again (a later release puts it back); ``settled``: it has no files and its pending
        count was settled (a later enqueue of it would be pending again)."""
        refs = ContentRefsRecord(*refs_key(content_id))
        done = (ContentRefsRecord.open_items > 0) | ContentRefsRecord.purged_at.exists()
        try:
            refs.update(
                actions=[ContentRefsRecord.purge_pk.remove(), ContentRefsRecord.purge_sk.remove(),
                         ContentRefsRecord.unstamped.remove()],
                condition=ContentRefsRecord.pending.does_not_exist() if settled else done,
            )
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise

    def idle_contents(self, shard: str, before: str, limit: int) -> Iterator[str]:
        for row in ContentRefsRecord.purge_index.query(
            shard, ContentRefsRecord.purge_sk < before, limit=limit
        ):
            yield content_id_of(row.pk, row.sk)
