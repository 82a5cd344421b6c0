"""Enqueue: one queue item per receiver, written before anything is published.

An item for now is stored without a publish timer, and its publish follows the write. A
publish that SQS refuses moves the item to ``errored`` (or, that write failing, gives it its
timer, and the re-publish sweep sends it later); a crash between write and publish leaves an
item the schedule finds a grace period later and gives its timer (vdq.schedules.strays). A
scheduled item is stored with its timer, due from its send time. Nothing accepted is lost.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from vdq.core import ids
from vdq.core.clock import iso
from vdq.core.errors import PartiallyEnqueued, ValidationError
from vdq.core.observability import logger, metrics
from vdq.intake.files import file_records, store_files
from vdq.intake.messages import Email, Origin, Sms
from vdq.intake.scheduling import buckets, delay_for, is_long, publish_after
from vdq.intake.segments import count as count_segments
from vdq.intake.uploads import discard as discard_uploads
from vdq.intake.uploads import find_uploads
from vdq.results.suppression import normalize
from vdq.store import (
    NEVER,
    STATE_SK,
    ContentRecord,
    ContentRefsRecord,
    QueueItemRecord,
    WriteFailed,
    content_id_of,
    content_key,
    encode_content,
    item_pk,
    origin_content_id,
    refs_key,
    shard,
)
from vdq.store.search import excerpt as excerpt_of
from vdq.store.search import receiver_key
from vdq.workflow import unpublished
from vdq.workflow.lanes import DEFAULT_PRIORITY, message_for
from vdq.workflow.retention import content_expiration
from vdq.workflow.table import INITIAL_STATE
from vdq.workflow.transitions import (
    TIMER_PUBLISH,
    Step,
    active_partition,
    apply,
    timer_partition,
)

if TYPE_CHECKING:
    from vdq.runtime import Runtime


def new_item(
    *,
    method: str,
    sender: str,
    sender_name: str | None,
    receiver: str,
    receiver_name: str | None,
    content_id: str,
    has_files: bool,
    origin: Origin | None,
    created_by: str | None,
    now: datetime,
    runtime: Runtime,
    resent_from: str | None = None,
    encoding: str | None = None,
    segments: int | None = None,
    counted: bool = False,
    priority: str = DEFAULT_PRIORITY,
    send_at: str | None = None,
    list_name: str | None = None,
    excerpt: str | None = None,
    cx: int | None = None,
) -> QueueItemRecord:
    """A new ``queued`` item, in the active index (an SMS item also with its body's encoding
    and segments). A scheduled item has its publish timer, counted from its ``send_at``: the
    re-publish sweep never sends it early; an item for now has none (its publish follows at
    once: vdq.schedules.strays). It is in the receiver index
    (``rx``) from birth, and keeps ``excerpt`` (the start of its subject or body) for lists.
    ``cx``: the expiration its content has from birth (vdq.workflow.retention); None for an
    item of a counted content."""
    s = runtime.settings
    item_id = ids.new_id(int(now.timestamp() * 1000))
    at = iso(now)
    after = publish_after(send_at, now)
    due = iso(after + timedelta(seconds=s.publish_grace_seconds))
    timed = after > now  # a scheduled item: its timer; one for now is published at once
    return QueueItemRecord(
        item_pk(item_id),
        STATE_SK,
        id=item_id,
        method=method,
        state=INITIAL_STATE.value,
        attempt=1,
        sender=sender,
        sender_name=sender_name,
        receiver=receiver,
        receiver_name=receiver_name,
        content_id=content_id,
        has_files=has_files or None,  # every attribute at its default is left out
        counted=counted or None,
        queued_at=at,
        updated_at=at,
        origin_type=origin.type if origin else None,
        origin_id=origin.id if origin else None,
        created_by=created_by,
        resent_from=resent_from,
        encoding=encoding,
        segments=segments,
        priority=None if priority == DEFAULT_PRIORITY else priority,
        send_at=send_at,
        list_name=list_name,
        active_pk=active_partition(item_id, s.index_shards),
        active_sk=f"{at}#{item_id}",
        timer_pk=timer_partition(TIMER_PUBLISH, item_id, s.index_shards, priority) if timed
        else None,
        timer_sk=f"{due}#{item_id}" if timed else None,
        rx=receiver_key(normalize(receiver)),
        sj=excerpt,
        cx=cx,
        apart=0,  # no record beside its state item yet (vdq.store.expiry.unstamped)
    )


def store_and_publish(
    records: list[Any],
    items: list[QueueItemRecord],
    runtime: Runtime,
    *,
    inline_content: dict[str, Any] | None,
    file_keys: list[str] | None = None,
    store_files: Callable[[], None] | None = None,
) -> list[QueueItemRecord]:
    """Write the records (content, files, refs), then the files (``store_files``: to
    ``file_keys``), then the items, then publish each item's first send.

    The records go first and alone: an item is accepted only once everything it needs is
    stored, and a request that dies before its items leaves its pending refs in the purge
    index, which deletes every file it may have stored. When the store fails part-way, the
    answer names exactly the items stored (each is published and sent once) and the receivers
    that were not; when it stores no item, what the request wrote (records, ``file_keys``) is
    removed and nothing was accepted.
    """
    store = runtime.store
    try:
        store.put_new(records)
        if store_files is not None:
            store_files()
        store.put_new(items)
    except ValidationError:  # an upload gone before its copy (vdq.intake.uploads.gone)
        _discard(records, file_keys or [], runtime)
        raise
    except WriteFailed as exc:
        _confirm(records, runtime)
        written = {r.pk for r in exc.written}
        stored = [i for i in items if i.pk in written]
        if len(stored) == len(items):  # the failed request was applied after all (read back)
            return publish_new(items, runtime, inline_content)
        if not stored:
            _discard(records, file_keys or [], runtime)
            raise WriteFailed([], f"{exc.message.removeprefix('the store refused the write: ')}; "
                              "nothing was stored, the request can be sent again") from exc
        _publish(stored, runtime, inline_content)
        kept = {i.id for i in stored}
        rejected = [i for i in items if i.id not in kept]
        _release_unborn(rejected, runtime)
        metrics.add_metric(name="ItemsEnqueued", unit="Count", value=len(stored))
        raise PartiallyEnqueued(
            f"stored {len(stored)} of {len(items)} items before the store failed: the stored "
            "items will be sent; send the rejected receivers again",
            details={"accepted": [i.id for i in stored],
                     "rejected": [i.receiver for i in rejected]},
        ) from exc  # fmt: skip
    _confirm(records, runtime)
    return publish_new(items, runtime, inline_content)


def publish_new(items: list[QueueItemRecord], runtime: Runtime,
                inline_content: dict[str, Any] | None = None) -> list[QueueItemRecord]:  # fmt: skip
    """Publish the first send of stored new items, and count them."""
    _publish(items, runtime, inline_content)
    if items:  # a zero is no news: CloudWatch bills each metric that gets a value
        metrics.add_metric(name="ItemsEnqueued", unit="Count", value=len(items))
    return items


def _confirm(records: list[Any], runtime: Runtime) -> None:
    """The items are written (all, some or none): the content's count is no longer pending.
    A failure here is left to the purge, which settles a pending count itself."""
    for record in records:
        if isinstance(record, ContentRefsRecord) and record.pending is not None:
            try:
                runtime.store.confirm_refs(content_id_of(record.pk, record.sk))
            except Exception:
                logger.exception("refs of %s left pending for the purge", record.pk)


def _discard(records: list[Any], file_keys: list[str], runtime: Runtime) -> None:
    """Remove what a request that stored no item wrote: no file outlives the request that
    failed to reference it. Best effort: a failure is logged (the bucket's lifecycle rule is
    the backstop)."""
    try:
        runtime.store.delete_new(records)
        if file_keys:
            runtime.files.delete(file_keys)
    except Exception:
        logger.exception("cleanup of a refused request failed: %d records, %d files left",
                         len(records), len(file_keys))  # fmt: skip


def _release_unborn(rejected: list[QueueItemRecord], runtime: Runtime) -> None:
    """The content's open count included the items that were not stored: count them off."""
    from collections import Counter

    from vdq.workflow.attachments import release

    # A bulk resend copies items of several contents: each content gets back its own count.
    counted = [i for i in rejected if i.has_files or i.counted]
    files = {i.content_id: bool(i.has_files) for i in counted}
    for content_id, n in Counter(i.content_id for i in counted).items():
        try:
            release(content_id, n, runtime, files=files[content_id])
        except Exception:  # the files are kept (never deleted early); the count stays high
            logger.exception("release of %d unstored items of %s failed", n, content_id)


def _publish(
    items: list[QueueItemRecord], runtime: Runtime, content: dict[str, Any] | None
) -> None:
    """Publish each item's first send in its lane, delayed until its send_at; an item that
    waits longer than SQS can delay is published later from its due-time bucket."""
    now = runtime.clock.now()
    items = [i for i in items if not is_long(i.send_at, now)]
    failed = runtime.send_queue.publish(
        [message_for(i, delay_seconds=delay_for(i.send_at, now), content=content) for i in items]
    )
    for item in items:
        if item.id in failed:
            logger.error("publish of new item %s failed: %s", item.id, failed[item.id])
            try:
                apply(
                    item,
                    Step("error", actor="vdq", result=failed[item.id],
                         attempt=int(item.attempt), late="record"),
                    runtime,
                )  # fmt: skip
            except Exception:
                # The item is stored and accepted: failing here would tell the client it was
                # not. It gets its publish timer, and the re-publish sweep sends it (or, that
                # write failing too, the schedule finds it: vdq.schedules.strays).
                logger.exception("%s stays queued for the re-publish sweep", item.id)
                _arm(item, runtime)


def _arm(item: QueueItemRecord, runtime: Runtime) -> None:
    if item.timer_pk:
        return  # a scheduled item has its timer
    try:
        unpublished.arm(item, runtime)
    except Exception:
        logger.exception("publish timer of %s not written: the schedule finds it", item.id)


def new_content_id(origin: Origin | None, now: datetime) -> str:
    """A new content's id, of the request's time (as its items' are): a request with an origin
    keeps its content in one of the origin's partitions (vdq.store.search: the search by
    origin, whose time window is a range of these ids), any other its own."""
    ulid = ids.new_id(int(now.timestamp() * 1000))
    return origin_content_id(ulid, origin.type, origin.id) if origin else ulid


def content_record(content_id: str, method: str, content: dict[str, Any], now: datetime,
                   items: list[QueueItemRecord], cx: int | None) -> ContentRecord:  # fmt: skip
    """The content's record, with its expiration from birth (``cx``: None for a counted
    content, which gets it when its last item is done); one in an origin's partition lists
    its items."""
    record = ContentRecord(*content_key(content_id), method=method,
                           data=encode_content(content), created_at=iso(now))  # fmt: skip
    if cx is not None and cx != NEVER:
        record.expiration = cx
    if content_key(content_id)[1] != "CONTENT":
        record.items = " ".join(i.id for i in items)
    return record


def birth_expiration(send_at: str | None, now: datetime, runtime: Runtime) -> int:
    """The expiration of a new content without files, counted from its items' send time
    (vdq.workflow.retention: its items carry it as ``cx``)."""
    return content_expiration(publish_after(send_at, now), runtime.settings)


def enqueue_email(
    email: Email, runtime: Runtime, *, created_by: str | None = None
) -> list[QueueItemRecord]:
    now = runtime.clock.now()
    content_id = new_content_id(email.origin, now)
    uploads = find_uploads(email.attachments, created_by, runtime)
    files = file_records(content_id, email.attachments, uploads)
    # A content with files counts its open items (the purge deletes the files when none is
    # left); any other expires from birth.
    cx = None if files else birth_expiration(email.send_at, now, runtime)
    content = {**email.content(), "attachments": [f.id for f in files]}
    receivers = email.receivers()
    items = [
        new_item(
            method="email",
            sender=email.sender.email,
            sender_name=email.sender.name,
            receiver=r.email,
            receiver_name=r.name,
            content_id=content_id,
            has_files=bool(files),
            counted=bool(files),
            origin=email.origin,
            created_by=created_by,
            now=now,
            runtime=runtime,
            priority=email.priority,
            send_at=email.send_at,
            list_name=email.list_name,
            excerpt=excerpt_of(email.subject),
            cx=cx,
        )
        for r in receivers
    ]
    records: list[Any] = [content_record(content_id, "email", content, now, items, cx), *files]
    if files:
        records.append(pending_refs(content_id, items, now, runtime))
    records += scheduled_buckets(items, content_id, now, runtime)
    accepted = store_and_publish(
        records, items, runtime, inline_content=content,
        file_keys=[f.s3_key for f in files],
        store_files=lambda: store_files(files, email.attachments, runtime, uploads),
    )  # fmt: skip
    # Taken: the copies are the content's files. A request that stored nothing keeps its
    # uploads, so the same request can be sent again; so does a partial one (PartiallyEnqueued),
    # whose answer says to send the rejected receivers again. The lifecycle rule removes them.
    discard_uploads(uploads, runtime)
    return accepted


def scheduled_buckets(items: list[QueueItemRecord], content_id: str, now: datetime,
                      runtime: Runtime) -> list[Any]:  # fmt: skip
    """The due-time buckets of a request whose items wait longer than SQS can delay, written
    with its content: a bucket whose items were not stored publishes messages the worker drops
    (no such item)."""
    first = items[0] if items else None
    if first is None or first.send_at is None or not is_long(first.send_at, now):
        return []
    return buckets(items, content_id, first.send_at, first.priority or DEFAULT_PRIORITY,
                   runtime.settings.index_shards)  # fmt: skip


PENDING_SECONDS = 900  # the longest a Lambda runs: an enqueue still unconfirmed after it died


def pending_refs(content_id: str, items: list[QueueItemRecord], now: datetime,
                 runtime: Runtime) -> ContentRefsRecord:  # fmt: skip
    """The open-item count of a new content with files or several items, written before its
    items and pending until they are: a request that dies between the two leaves it in the
    purge index, where the purge finds which of ``items`` exist, counts the others off, and
    lets the content expire (and deletes its files) once they are done."""
    due = iso(now + timedelta(seconds=PENDING_SECONDS))
    pending = json.dumps([i.id for i in items], separators=(",", ":"))
    return ContentRefsRecord(
        *refs_key(content_id), open_items=len(items), pending=pending,
        purge_pk=f"P#{shard(content_id, runtime.settings.index_shards)}",
        purge_sk=f"{due}#{content_id}",
    )  # fmt: skip


def enqueue_sms(
    sms: Sms, runtime: Runtime, *, created_by: str | None = None
) -> list[QueueItemRecord]:
    now = runtime.clock.now()
    content_id = new_content_id(sms.origin, now)
    content = sms.content()
    # An MMS of media alone has no text to encode: no segments (Twilio bills one MMS).
    counted_body = count_segments(sms.body) if sms.body is not None else None
    receivers = sms.receivers()
    cx = birth_expiration(sms.send_at, now, runtime)
    items = [
        new_item(
            method="sms",
            sender=sms.sender,
            sender_name=None,
            receiver=r.cell,
            receiver_name=r.name,
            content_id=content_id,
            has_files=False,
            origin=sms.origin,
            created_by=created_by,
            now=now,
            runtime=runtime,
            encoding=counted_body.encoding if counted_body else None,
            segments=counted_body.segments if counted_body else 0,
            priority=sms.priority,
            send_at=sms.send_at,
            excerpt=excerpt_of(sms.body),
            cx=cx,
        )
        for r in receivers
    ]
    records: list[Any] = [content_record(content_id, "sms", content, now, items, cx)]
    records += scheduled_buckets(items, content_id, now, runtime)
    return store_and_publish(records, items, runtime, inline_content=content)
