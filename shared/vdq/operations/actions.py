"""Operator actions: transitions through the one workflow, and resends of sent items."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from vdq import attachments, ids, retention, workflow
from vdq.api import Caller
from vdq.clock import iso, parse_iso
from vdq.enqueue import new_item, store_and_publish
from vdq.errors import Conflict, InvalidTransition, NotFound, PartiallyEnqueued
from vdq.lanes import priority_of
from vdq.operations.detail import find_item
from vdq.runtime import Runtime
from vdq.store import QueueItemRecord, WriteFailed
from vdq.transitions import Step, apply, history_entry
from vdq.views import item_json
from vdq.workflow import State

RESEND_PERMISSION = "vdq.can_resend"
READ_PERMISSION = "vdq.read_queueitem"


def awaiting_hint(item: QueueItemRecord, runtime: Runtime) -> str:
    """What resolves an ``awaiting`` item that an operator cannot cancel: its timeout."""
    s = runtime.settings
    if item.method == "sms":
        start, hours = item.done_since, s.twilio_sms_timeout_hours
    else:
        start, hours = (item.timer_sk or item.updated_at).split("#")[0], s.email_timeout_hours
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
    step = Step(name, actor=who.subject, source="operator", dry_run=dry_run)
    try:
        outcome = apply(item, step, runtime)
    except InvalidTransition as exc:
        if exc.state == State.AWAITING.value:
            raise InvalidTransition(exc.item_id, name, exc.state,
                                    hint=awaiting_hint(item, runtime)) from None
        raise
    assert outcome.decision is not None
    return {
        "transition": name,
        "dry_run": dry_run,
        "from_state": outcome.before.value,
        "to_state": outcome.decision.target.value,
        "item": item_json(outcome.item),
    }


def resend(item_ids: list[str], who: Caller, runtime: Runtime) -> list[QueueItemRecord]:
    """Copy each sent item into a new queued item (in its lane, sent now) and publish it; all
    or nothing.

    Every id is checked first (unknown or not done: 404 naming them); then the copies of
    emails with files are counted on their content, which fails when cleanup deleted the files
    (409, and the counts taken are given back). Copies share the content and its files.
    """
    who.require(RESEND_PERMISSION)
    # A resend answers with the copies' sender and receiver: the caller must be allowed to
    # read the items it copies (the read gates of the item views).
    who.require(READ_PERMISSION)
    wanted = list(dict.fromkeys(item_ids))
    found = runtime.store.get_items(i for i in wanted if ids.is_id(i))
    missing = [i for i in wanted if i not in found or not workflow.is_done(found[i].state)]
    if missing:
        raise NotFound(f"not sent items (unknown or not done): {', '.join(missing)}",
                       details={"ids": missing})  # fmt: skip
    originals = [found[i] for i in wanted]
    # Every copy is counted on its content (shared now), which keeps it from expiring.
    _reserve(Counter(o.content_id for o in originals), originals, runtime)
    now = runtime.clock.now()
    copies = [
        new_item(method=o.method, sender=o.sender, sender_name=o.sender_name,
                 receiver=o.receiver, receiver_name=o.receiver_name, content_id=o.content_id,
                 has_files=bool(o.has_files), origin=None, created_by=who.subject, now=now,
                 runtime=runtime, resent_from=o.id, encoding=o.encoding,
                 segments=None if o.segments is None else int(o.segments), counted=True,
                 priority=priority_of(o))
        for o in originals
    ]  # fmt: skip
    try:
        store_and_publish([], copies, runtime, inline_content=None)
    except PartiallyEnqueued as exc:
        # The stored copies are sent and keep their counts (store_and_publish gave back the
        # unstored copies' counts); only the originals' history is left to write.
        accepted = set(exc.details.get("accepted", []))
        _note_resends([(o, c) for o, c in zip(originals, copies, strict=True) if c.id in accepted],
                      who, now, runtime)  # fmt: skip
        raise
    except WriteFailed:
        # Nothing was stored: give back every count taken. (Any other failure leaves the
        # counts: a stored copy must keep its files; at worst they are kept too long.)
        _give_back(Counter(c.content_id for c in copies), originals, runtime)
        raise
    _note_resends(list(zip(originals, copies, strict=True)), who, now, runtime)
    return copies


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


def _reserve(counts: Counter[str], originals: list[QueueItemRecord], runtime: Runtime) -> None:
    reserved: Counter[str] = Counter()
    purged = []
    files = {o.content_id for o in originals if o.has_files}
    for content_id, n in counts.items():
        if runtime.store.reserve_content(content_id, n, files=content_id in files):
            reserved[content_id] = n
        else:
            purged.append(content_id)
    if purged:
        _give_back(reserved, originals, runtime)
        refused = [o.id for o in originals if o.content_id in purged]
        raise Conflict(
            f"the attachment files of {', '.join(refused)} were deleted by cleanup, so they "
            "cannot be resent; queue a new email with the attachments instead",
            details={"ids": refused, "reason": "attachments_purged"},
        )


def _give_back(counts: Counter[str], originals: list[QueueItemRecord], runtime: Runtime) -> None:
    """Count off reservations of copies never stored; a content idle again gets back the
    expiration of its latest original (the reservation took it off)."""
    for content_id, n in counts.items():
        if not n:
            continue
        of_content = [o for o in originals if o.content_id == content_id]
        files = any(o.has_files for o in of_content)
        attachments.release(content_id, n, runtime, files=files)
        expirations = [int(o.expiration) for o in of_content if o.expiration is not None]
        if expirations:
            retention.stamp_content(content_id, max(expirations), runtime, counted=True,
                                    files=files)  # fmt: skip
