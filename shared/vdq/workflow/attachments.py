"""Attachment files after enqueue: released as a content's items enter done states, and deleted
when cleanup is on and all those items are done. (A new content's files are stored by
vdq.intake.files; downloads are vdq.operations.downloads.)

Cleanup follows ``VDQ_MAX_FILES_AGE_IN_SECONDS``: 0 deletes a content's files as its last open
item enters a done state; N > 0 leaves that to the daily ``purge_idle``, which deletes the files
of contents idle (all items done) for longer than N seconds. Retention caps N: files go before
their records expire (unset: just before; vdq.workflow.retention.files_age_seconds); with
neither set, every file is kept. A content's
REFS record counts its open items; a resend writes its copies with their count there, refused
once the files are purged, so the files of a content being resent are never deleted under it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from vdq.core.clock import iso
from vdq.core.observability import logger
from vdq.store import AttachmentRecord, QueueItemRecord, Release, shard
from vdq.workflow.retention import expiration_at, files_age_seconds, stamp_content

if TYPE_CHECKING:
    from vdq.runtime import Runtime

PURGE_BATCH = 100  # idle contents read per shard and query
MAX_PURGE_PER_RUN = 2000  # contents purged by one run; the next run goes on


def purge_content_files(content_id: str, runtime: Runtime) -> int:
    """Delete a content's files if none of its items is open; returns files deleted.

    Marked first, deleted, then taken out of the purge index: a purge that dies on the way is
    finished by the next run, and a content with open items again just leaves the index.

    An enqueue that died before confirming its items left their count pending (and the
    content here, with files or without): the count is settled first, and the content then
    gets the expiration its items' stamps could not give it while the count was pending."""
    store = runtime.store
    now = runtime.clock.now()
    refs = store.get_refs(content_id)
    # Settled now, or by an earlier run that died before stamping (it left ``unstamped``).
    settled = refs is not None and (refs.pending is not None or bool(refs.unstamped))
    if refs is not None and refs.pending is not None:
        store.settle_pending(refs)
    # Read even past their expiration: the files go first, then their records.
    content = store.get_content(content_id, expired=True) or {}
    if not content.get("attachments"):  # no files: only a pending count brought it here
        stamp_settled(content_id, runtime, files=False)
        store.unqueue_purge(content_id, settled=True)
        return 0
    if not store.mark_purged(content_id, iso(now)):
        store.unqueue_purge(content_id)
        return 0
    records = store.get_attachments(content.get("attachments", []), expired=True)
    runtime.files.delete([r.s3_key for r in records])
    for record in records:
        if record.purged_at is None:
            record.update(actions=[AttachmentRecord.purged_at.set(iso(now))])
    if settled:
        stamp_settled(content_id, runtime, files=True)
    store.unqueue_purge(content_id)
    logger.info("purged %d files of content %s", len(records), content_id)
    return len(records)


def stamp_settled(content_id: str, runtime: Runtime, *, files: bool) -> None:
    """Give a content whose pending count was settled the expiration of an item done now, if
    none of its items is open (each is done by now: the content outlives them all)."""
    expiration = expiration_at(runtime.clock.now(), runtime.settings)
    if expiration is not None:
        stamp_content(content_id, expiration, runtime, counted=True, files=files)


def purge_partition(content_id: str, runtime: Runtime) -> str:
    return f"P#{shard(content_id, runtime.settings.index_shards)}"


def release_for(item: QueueItemRecord, now_iso: str, runtime: Runtime) -> Release | None:
    """The release that an item of a counted content (with files, or shared by several items)
    writes with its transition into a done state."""
    if not (item.has_files or item.counted):
        return None
    return Release(item.content_id, purge_partition(item.content_id, runtime), now_iso,
                   files=bool(item.has_files))  # fmt: skip


def release(content_id: str, count: int, runtime: Runtime, *, files: bool = True) -> None:
    """``count`` reserved items of a counted content were never created: count them off,
    and delete the files at once when cleanup is immediate and no item is open."""
    runtime.store.release_content(
        content_id, iso(runtime.clock.now()), purge_partition(content_id, runtime), count,
        files=files,
    )  # fmt: skip
    if files:
        purge_if_idle(content_id, runtime)


def purge_if_idle(content_id: str, runtime: Runtime) -> None:
    """After a release: with immediate cleanup, delete the files if no item is open. A crash
    before this leaves the content in the purge index, where the next purge run finds it."""
    if runtime.settings.max_files_age_seconds != 0:
        return
    refs = runtime.store.get_refs(content_id)
    if refs is not None and refs.open_items <= 0 and refs.purged_at is None:
        purge_content_files(content_id, runtime)


def purge_idle(runtime: Runtime) -> int:
    """The daily purge: delete the files of contents idle for longer than the files age.

    The files age is the setting's, at most the retention (unset: the retention; with neither,
    nothing is purged). With 0 it catches contents whose immediate purge was
    interrupted. Each purge is conditional on the content still having no open item, so a
    resend that counted itself in first keeps the files. Returns the files deleted.
    """
    age = files_age_seconds(runtime.settings)
    if age is None:
        return 0
    before = iso(runtime.clock.now() - timedelta(seconds=age))
    deleted = purged = 0
    for k in range(runtime.settings.index_shards):
        seen: set[str] = set()
        while purged < MAX_PURGE_PER_RUN:
            batch = [c for c in runtime.store.idle_contents(f"P#{k}", before, PURGE_BATCH)
                     if c not in seen]  # fmt: skip
            if not batch:
                break
            for content_id in batch:
                seen.add(content_id)
                purged += 1
                try:
                    deleted += purge_content_files(content_id, runtime)
                except Exception:  # it stays in the purge index; the next run tries again
                    logger.exception("purge of the files of content %s failed", content_id)
    if deleted:
        logger.info("file-age purge deleted %d files", deleted)
    return deleted
