"""Operator actions: transitions through the one workflow, and resends of sent items."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from vdq.api import Caller
from vdq.core import ids
from vdq.core.clock import iso, parse_iso
from vdq.core.errors import Conflict, InvalidTransition, NotFound, PartiallyEnqueued
from vdq.core.observability import logger
from vdq.intake.enqueue import new_item, publish_new
from vdq.operations.detail import find_item
from vdq.store import QueueItemRecord, WriteFailed
from vdq.workflow import table as workflow
from vdq.workflow.lanes import priority_of
from vdq.workflow.retention import content_expiration
from vdq.workflow.table import State
from vdq.workflow.transitions import (
    Step,
    apply,
    email_wait_since,
    history_entry,
    sms_wait_since,
)
from vdq.workflow.views import item_json

if TYPE_CHECKING:
    from vdq.runtime import Runtime

RESEND_PERMISSION = "vdq.can_resend"
# details.reason of a 409: the item's content expired / cleanup deleted its files.
CONTENT_EXPIRED = "content_expired"
ATTACHMENTS_PURGED = "attachments_purged"
READ_PERMISSION = "vdq.read_queueitem"


def awaiting_hint(item: QueueItemRecord, runtime: Runtime) -> str:
    """What resolves an ``awaiting`` item that an operator cannot cancel: its timeout."""
    s = runtime.settings
    if item.method == "sms":
        start, hours = sms_wait_since(item), s.twilio_sms_timeout_hours
    else:
        start, hours = email_wait_since(item), s.email_timeout_hours
    until = iso(parse_iso(start) + timedelta(hours=hours))
    return (f"the provider has the message; a final status moves it on, and without one it "
            f"becomes unconfirmed at {until} (the {hours:g}-hour timeout)")


def run_transition(
    item_id: str, name: str, who: Caller, runtime: Runtime, *, dry_run: bool = False
) -> dict[str, Any]:
    """Apply operator transition ``name``: permission first (404 for an unknown name, 403 for
    a server transition or a missing permission), then the item (404) and its state (409)."""
    workflow.authorize(name, who.permissions)
    item = find_item(item_id, runtime)
    if name == "retry" and item.state in workflow.TRANSITIONS[name].sources:
        _refuse_expired(item, runtime)
    step = Step(name, actor=who.subject, source="operator", dry_run=dry_run)
    try:
        outcome = apply(item, step, runtime)
    except InvalidTransition as exc:
        if exc.state == State.AWAITING.value:
            raise InvalidTransition(exc.item_id, name, exc.state,
                                    hint=awaiting_hint(item, runtime)) from None
        if name == "retry" and exc.state == State.QUEUED.value and item.send_at and (
                parse_iso(item.send_at) > runtime.clock.now()):  # fmt: skip
            raise InvalidTransition(exc.item_id, name, exc.state, hint=(
                f"it waits for its send_at {item.send_at} and is sent then; to send it "
                "sooner, cancel it and queue it again")) from None
        raise
    assert outcome.decision is not None
    return {
        "transition": name,
        "dry_run": dry_run,
        "from_state": outcome.before.value,
        "to_state": outcome.decision.target.value,
        "item": item_json(outcome.item),
        "suppressed": _suppressed(item, runtime) if name == "retry" and dry_run else None,
    }


def _refuse_expired(item: QueueItemRecord, runtime: Runtime) -> None:
    """409 when the item's content expired (a daily watch that failed for days): a retry's
    send could only fail. Read only then: ``cx`` is at most its content's expiration, which
    only moves later, and a counted content (no ``cx``) does not expire while an item is open."""
    if item.cx is None or item.cx > runtime.clock.now().timestamp():
        return
    if runtime.store.get_content(item.content_id) is None:
        raise Conflict(f"the content of queue item {item.id} expired, so it cannot be sent "
                       "again; cancel it and queue a new message instead",
                       details={"id": item.id, "reason": CONTENT_EXPIRED})  # fmt: skip


def _suppressed(item: QueueItemRecord, runtime: Runtime) -> dict[str, Any] | None:
    """What stops the item's receiver, when anything does: its suppression or, for list mail,
    its unsubscribe from the item's list. A retry of it is cancelled by the worker at once,
    unsent (the worker's own read: vdq.results.suppression.refuse); a dry run shows it before
    anyone confirms."""
    from vdq.results.suppression import normalize, scope, stopping

    found = runtime.store.suppressions_of(normalize(item.receiver), item.list_name)
    record = stopping(found, item.list_name)
    if record is None:
        return None
    return {"receiver": record.receiver, "reason": record.reason, "since": record.since,
            "list": scope(record)}  # fmt: skip


class Resent(NamedTuple):
    """The copies a resend made, and their receivers that are suppressed (as an enqueue's
    ``suppressed``: each copy is queued all the same and ends cancelled, unsent)."""

    copies: list[QueueItemRecord]
    suppressed: list[dict[str, Any]]


def resend(item_ids: list[str], who: Caller, runtime: Runtime) -> list[QueueItemRecord]:
    """The copies of ``resend_flagged``."""
    return resend_flagged(item_ids, who, runtime).copies


def resend_flagged(item_ids: list[str], who: Caller, runtime: Runtime) -> Resent:
    """Copy each sent item into a new queued item (in its lane, sent now) and publish it.

    Every id is checked first (unknown or not done: 404 naming them). The copies share their
    original's content and files: each content stores its copies together with their count on
    it, in one transaction (``Store.store_copies``), so no count outlives a worker that dies
    in between. A content whose files cleanup deleted, or that expired, refuses its copies
    (409); when that or a store failure comes after other contents' copies were stored, the
    answer names exactly the copies stored (each is sent) and the receivers that were not.
    """
    who.require(RESEND_PERMISSION)
    # A resend answers with the copies' sender and receiver: the caller must be allowed to
    # read the items it copies (the read gates of the item views).
    who.require(READ_PERMISSION)
    wanted = list(dict.fromkeys(ids.typed(i) for i in item_ids))
    found = runtime.store.get_items(i for i in wanted if ids.is_id(i))
    missing = [i for i in wanted if i not in found or not workflow.is_done(found[i].state)]
    if missing:
        raise NotFound(f"not sent items (unknown or not done): {', '.join(missing)}",
                       details={"ids": missing})  # fmt: skip
    originals = [found[i] for i in wanted]
    _refuse_purged(originals, runtime)
    # Read before anything is stored, as an enqueue reads: a failed read changes nothing.
    suppressed = _flags(originals, runtime)
    from vdq.intake import quotas

    # Each copy counts against the operator's own quota (its client id or group), as a
    # producer's item does: a copy is sent as any new item is.
    copies = quotas.charged(who.subject, who.groups, len(originals), runtime,
                            lambda: _copy(originals, who, runtime), log=logger.warning,
                            field="ids")  # fmt: skip
    return Resent(copies, suppressed)


def _flags(originals: list[QueueItemRecord], runtime: Runtime) -> list[dict[str, Any]]:
    """The originals' receivers that are suppressed (for list mail, also unsubscribed from its
    list), in the originals' order: one BatchGetItem per list among them."""
    from vdq.results.suppression import flags, normalize

    lists: dict[str | None, list[str]] = {}
    for o in originals:
        lists.setdefault(o.list_name, []).append(o.receiver)
    found = {(f["receiver"], name): f for name, receivers in lists.items()
             for f in flags(receivers, runtime, name)}  # fmt: skip
    keys = dict.fromkeys((normalize(o.receiver), o.list_name) for o in originals)
    return [found[k] for k in keys if k in found]


def _copy(originals: list[QueueItemRecord], who: Caller,
          runtime: Runtime) -> list[QueueItemRecord]:  # fmt: skip
    now = runtime.clock.now()
    # A content that expires from birth (its items carry ``cx``) is extended for its copies as
    # for a content written now; a counted one counts them.
    born = content_expiration(now, runtime.settings)
    copies = [
        new_item(method=o.method, sender=o.sender, sender_name=o.sender_name,
                 receiver=o.receiver, receiver_name=o.receiver_name, content_id=o.content_id,
                 has_files=bool(o.has_files), origin=None, created_by=who.subject, now=now,
                 runtime=runtime, resent_from=o.id, encoding=o.encoding,
                 segments=None if o.segments is None else int(o.segments),
                 counted=o.cx is None, cx=None if o.cx is None else born,
                 priority=priority_of(o), list_name=o.list_name, excerpt=o.sj)
        for o in originals
    ]  # fmt: skip
    stored, why = _store_copies(originals, copies, runtime)
    publish_new(stored, runtime)
    kept = {c.id for c in stored}
    try:
        _note_resends([(o, c) for o, c in zip(originals, copies, strict=True) if c.id in kept],
                      who, now, runtime)  # fmt: skip
    except Exception:
        # The copies are stored and published (each will be sent): they are the answer, not a
        # 503 that invites the caller to resend them again; only the originals' notes are lost.
        logger.exception("the resend of %s stored its copies but not its notes", list(kept))
    if len(stored) < len(copies):
        raise PartiallyEnqueued(
            f"stored {len(stored)} of {len(copies)} copies (the stored copies will be sent); {why}",
            details={"accepted": [c.id for c in stored],
                     "rejected": [c.receiver for c in copies if c.id not in kept]},
        )  # fmt: skip
    return copies


def _refuse_purged(originals: list[QueueItemRecord], runtime: Runtime) -> None:
    """409 naming the items whose files cleanup deleted, read before anything is written when
    the copies span several contents (one content's transaction checks it by itself)."""
    if len({o.content_id for o in originals}) < 2:
        return
    purged = set()
    for content_id in {o.content_id for o in originals if o.has_files}:
        refs = runtime.store.get_refs(content_id)
        if refs is None or refs.purged_at is not None:
            purged.add(content_id)
    if purged:
        _conflict([o for o in originals if o.content_id in purged], runtime)


def _conflict(refused: list[QueueItemRecord], runtime: Runtime) -> None:
    names = [o.id for o in refused]
    if _expired(refused, runtime):
        raise Conflict(f"the content of {', '.join(names)} expired, so they cannot be resent; "
                       "queue a new message instead",
                       details={"ids": names, "reason": CONTENT_EXPIRED})  # fmt: skip
    raise Conflict(
        f"the attachment files of {', '.join(names)} were deleted by cleanup, so they cannot "
        "be resent; queue a new email with the attachments instead",
        details={"ids": names, "reason": ATTACHMENTS_PURGED},
    )


def _expired(refused: list[QueueItemRecord], runtime: Runtime) -> bool:
    """A content refused copies because it expired, not because its files were purged."""
    return runtime.store.get_content(refused[0].content_id) is None


AGAIN = "the store failed before the others: resend them again"


def _store_copies(originals: list[QueueItemRecord], copies: list[QueueItemRecord],
                  runtime: Runtime) -> tuple[list[QueueItemRecord], str]:  # fmt: skip
    """Store the copies content by content; the copies stored, and why the others were not.
    Raises when none was (a first content whose files were purged: 409)."""
    stored: list[QueueItemRecord] = []
    refused: list[str] = []  # originals of a content purged after ``_refuse_purged`` read it
    expired: list[str] = []  # originals of a content that expired
    by_content: dict[str, list[QueueItemRecord]] = {}
    for copy in copies:
        by_content.setdefault(copy.content_id, []).append(copy)
    for content_id, group in by_content.items():
        files = any(c.has_files for c in group)
        try:
            ok = runtime.store.store_copies(content_id, group, files=files)
        except Exception as exc:
            # A content of many copies stores them in several transactions: those stored
            # before one failed are counted and will be sent (WriteFailed names them).
            written = {r.pk for r in exc.written} if isinstance(exc, WriteFailed) else set()
            stored.extend(c for c in group if c.pk in written)
            if not stored:
                raise
            logger.exception("resend stopped after storing %d copies", len(stored))
            return stored, "; ".join(filter(None, [_purged_text(refused, expired), AGAIN]))
        if not ok:
            of_content = [o for o in originals if o.content_id == content_id]
            if not stored:
                _conflict(of_content, runtime)
            (expired if _expired(of_content, runtime) else refused).extend(
                o.id for o in of_content)
            continue
        stored.extend(group)
    return stored, _purged_text(refused, expired)


def _purged_text(refused: list[str], expired: list[str] | None = None) -> str:
    texts = []
    if refused:
        texts.append(f"the attachment files of {', '.join(refused)} were deleted by cleanup, "
                     "so they cannot be resent")  # fmt: skip
    if expired:
        texts.append(f"the content of {', '.join(expired)} expired, so they cannot be resent")
    return "; ".join(texts)


def _note_resends(pairs: list[tuple[QueueItemRecord, QueueItemRecord]], who: Caller,
                  now: Any, runtime: Runtime) -> None:  # fmt: skip
    if not pairs:
        return
    entries = []
    for o, c in pairs:
        entry = history_entry(o.id, now, actor=who.subject, source="operator", kind="action",
                              name="resend", from_state=o.state, to_state=o.state,
                              attempt=int(o.attempt), text=f"resent as {c.id}")  # fmt: skip
        entry.expiration = o.expiration  # the originals are done: the notes expire with them
        entries.append(entry)
    runtime.store.append_history(entries)
