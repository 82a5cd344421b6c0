"""Operators and the suppression list: list (page by page, by receiver), look one up with its
history, add and remove, each under its own permission and recorded with who and when."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vdq.core.errors import NotFound
from vdq.intake import messages, validation
from vdq.intake.fields import Body, Field
from vdq.operations import cursor as cursors
from vdq.operations import spec
from vdq.results import suppression
from vdq.store import SuppressionRecord
from vdq.store.models import SUPPRESSION_SHARDS

if TYPE_CHECKING:
    from vdq.runtime import Runtime

LIST_PERMISSION = "vdq.list_suppression"
CHANGE_PERMISSION = "vdq.change_suppression"
MAX_TEXT = 500
SUPPRESSION = Body("SuppressionRequest", "A receiver to put on the suppression list.", (
    Field("receiver", "receiver", spec.RECEIVER_TEXT, required=True, min_length=1,
          max_length=messages.MAX_EMAIL),
    Field("text", "line", "Why, for the history (one line).", min_length=1, max_length=MAX_TEXT,
          message="must be a string of {min_length} to {max_length} characters"),
))
_INDEX = "suppressions"  # what a cursor of this list names


def receiver(value: Any, field: str = "receiver") -> str:
    """A receiver as the list keys it: a valid email address (lower case) or E.164 number."""
    if isinstance(value, str) and "@" in value:
        return suppression.normalize(validation.email_address(value, field))
    return validation.cell(value, field)


def list_suppressions(runtime: Runtime, *, limit: int, cursor: str | None = None,
                      channel: str | None = None,
                      receiver: str | None = None) -> dict[str, Any]:  # fmt: skip
    """``{"suppressions": [...], "cursor": str | None}``, by receiver; ``receiver`` looks up
    one (a page of one or none)."""
    if receiver is not None:
        found = runtime.store.get_suppression(_receiver_param(receiver))
        wanted = found is not None and (channel is None or found.channel == channel)
        return {"suppressions": [suppression.suppression_json(found)] if wanted and found
                else [], "cursor": None}  # fmt: skip
    table = runtime.settings.table_name
    key = cursors.ListKey(_INDEX, (channel,), SUPPRESSION_SHARDS)
    positions: list[str | None] = (
        cursors.decode(cursor, key, table) if cursor else [None] * SUPPRESSION_SHARDS
    )
    candidates: list[tuple[str, int, SuppressionRecord]] = []
    full = False
    for shard, position in enumerate(positions):
        rows = runtime.store.query_suppressions(shard, start_after=position, limit=limit)
        full = full or len(rows) >= limit
        candidates.extend((row.sk, shard, row) for row in rows)
    candidates.sort(key=lambda c: c[0])
    page = []
    for sk, shard, row in candidates[:limit]:
        positions[shard] = sk
        if channel is None or row.channel == channel:
            page.append(suppression.suppression_json(row))
    more = len(candidates) > limit or full
    return {"suppressions": page,
            "cursor": cursors.encode(positions, key, table) if more else None}  # fmt: skip


def _receiver_param(value: str) -> str:
    return receiver(value, "receiver")


def add(body: Any, actor: str, runtime: Runtime) -> dict[str, Any]:
    """Suppress the body's receiver (reason ``operator``); ``added`` is false when it was
    suppressed already (its first reason and ``since`` stay)."""
    given = validation.check(SUPPRESSION, body)
    who, text = receiver(given["receiver"]), given["text"]
    record, added = suppression.suppress(who, "operator", actor=actor, text=text, runtime=runtime)
    return {"suppression": suppression.suppression_json(record), "added": added}


def remove(value: str, actor: str, runtime: Runtime) -> dict[str, Any]:
    """Remove the suppression of ``value``; 404 when it has none."""
    who = _receiver_param(value)
    removed = suppression.unsuppress(who, actor=actor, text=None, runtime=runtime)
    if removed is None:
        raise NotFound(f"{who} is not on the suppression list", details={"receiver": who})
    return {"suppression": suppression.suppression_json(removed)}


def history(value: str, runtime: Runtime) -> dict[str, Any]:
    """The receiver's suppression (or null) and its history, oldest first; 404 when it was
    never on the list."""
    who = _receiver_param(value)
    entries = runtime.store.suppression_history(who)
    current = runtime.store.get_suppression(who)
    if current is None and not entries:
        raise NotFound(f"{who} has never been on the suppression list",
                       details={"receiver": who})  # fmt: skip
    return {"receiver": who,
            "suppression": suppression.suppression_json(current) if current else None,
            "history": [suppression.event_json(e) for e in entries]}  # fmt: skip
