"""Operators and the suppression list: list (page by page, by receiver), look one up with its
history, add and remove, each under its own permission and recorded with who and when. An entry
with a ``list`` is a receiver's unsubscribe from that list only (one-click unsubscribe)."""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any

from vdq.core.errors import NotFound, ValidationError
from vdq.core.text import check_text
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
    Field("receiver", "receiver", f"{spec.RECEIVER_TEXT} Taken as an operator types it, as "
          "the lookups take it: a number as printed (`+1 (415) 555-0100`), an address with "
          "surrounding spaces, a display name (`Ada <ada@example.org>`) or an "
          "internationalised domain (stored in its ASCII form).", required=True, min_length=1,
          max_length=messages.MAX_EMAIL),
    Field("text", "line", "Why, for the history (one line).", min_length=1, max_length=MAX_TEXT,
          message="must be a string of {min_length} to {max_length} characters"),
    Field("list", "list_name", "Only the list mail of this list (an email address's "
          "unsubscribe from it, as its one-click link makes; SMS has no lists, so a number's "
          "entry of a list stops nothing); leave it out for every email or SMS.",
          max_length=64, example="newsletter"),
))
_INDEX = "suppressions"  # what a cursor of this list names


def receiver(value: Any, field: str = "receiver", *, stored: bool = False) -> str:
    """A receiver as the list keys it: a valid email address (lower case) or E.164 number
    (``stored``: of any E.164 form, as one stored before the North American rule may be)."""
    if isinstance(value, str) and "@" in value:
        return suppression.normalize(validation.email_address(value, field))
    return validation.cell(value, field, stored=stored)


_NUMBER = re.compile(r"\+?[0-9(][0-9 ().-]*", re.ASCII)  # a number as people print it
_SEPARATORS = re.compile(r"[ ().-]")
# The trunk prefix a national number is dialled with, printed after the country code in
# brackets: +44 (0)7700 900123 is +447700900123.
_TRUNK_ZERO = re.compile(r"^(\+[0-9 ]+?) ?\( ?0 ?\)", re.ASCII)
# The international prefix most countries dial abroad with, printed in place of the +:
# 0044 7700 900123 is +447700900123 (no number begins with 00 after its country code).
_INTERNATIONAL = re.compile(r"^00(?=[ ().-]*[1-9])", re.ASCII)
# Spaces a number copied from a page or a document may hold (no-break, figure, narrow).
_SPACES = str.maketrans({"\u00a0": " ", "\u2007": " ", "\u202f": " "})
# An address as a mail client's To: line shows it: ``Ada Lovelace <ada@example.org>``.
_NAMED = re.compile(r"[^<>]*<([^<>]*)>")


def typed_receiver(value: str, field: str, *, query: bool = False, lookup: bool = True) -> str:
    """A receiver as an operator types it in a query or a path: an address (compared in lower
    case; surrounding spaces, a display name and its brackets, a fully qualified domain's
    trailing dot left out, an internationalised domain in its ASCII form), or a number however
    it is printed (``+1 (415) 555-0100``, ``+44 (0)7700 900123``, ``0044 7700 900123``: its
    spaces, dots, dashes, brackets and bracketed trunk 0 left out, a leading 00 read as the +);
    a 422 naming ``field`` otherwise.
    ``query``: from a query string, which decodes a + as a space (``?receiver=+1415...``): such
    a number, or address, is told to write it as %2B.
    ``lookup``: a +1 number outside the North American plan, which items and entries stored
    before that rule may hold, is found too (an addition refuses it, as enqueue does)."""
    if "@" not in value and _NUMBER.fullmatch(value.translate(_SPACES).strip()):
        value = value.translate(_SPACES)
        if (query and value.startswith(" ") and not value.strip().startswith("+")
                and len(value) <= validation.MAX_CELL):  # fmt: skip
            raise ValidationError(field, f"{value.strip()!r} lost its +: a query string "
                                  "decodes + as a space, so write it as %2B")  # fmt: skip
        value = _INTERNATIONAL.sub("+", value.strip())
        value = _SEPARATORS.sub("", _TRUNK_ZERO.sub(r"\1", value))
    elif "@" in value:
        value = _address(value, field, query=query)
    return receiver(value, field, stored=lookup)


def _address(value: str, field: str, *, query: bool) -> str:
    text = value.strip()
    named = _NAMED.fullmatch(text)
    if named:
        text = named.group(1).strip()
    local, at, domain = text.rpartition("@")
    if at and domain.endswith(".") and not domain.endswith(".."):
        domain = domain[:-1]  # fully qualified (the DNS root): the same domain
        text = f"{local}@{domain}"
    if query and at and " " in local.strip():
        raise ValidationError(field, f"{text!r} is not a valid email address (a query string "
                              "decodes + as a space: write a + as %2B)")  # fmt: skip
    if at and not domain.isascii():
        import idna  # only here: the cold start of every other request does without it

        with contextlib.suppress(idna.IDNAError):  # not a domain: the address check says so
            text = f"{local}@{idna.encode(domain, uts46=True).decode()}"
    return text


def list_suppressions(runtime: Runtime, *, limit: int, cursor: str | None = None,
                      channel: str | None = None,
                      receiver: str | None = None) -> dict[str, Any]:  # fmt: skip
    """``{"suppressions": [...], "cursor": str | None}``, by receiver (its entry for every
    email or SMS first, then its lists'); ``receiver`` looks up one's entries (one page)."""
    if receiver is not None:
        found = runtime.store.receiver_suppressions(_receiver_param(receiver, query=True))
        return {"suppressions": [suppression.suppression_json(r) for r in found
                                 if channel is None or r.channel == channel],
                "cursor": None}  # fmt: skip
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


def _receiver_param(value: str, *, query: bool = False) -> str:
    return typed_receiver(value, "receiver", query=query)


def add(body: Any, actor: str, runtime: Runtime) -> dict[str, Any]:
    """Suppress the body's receiver (reason ``operator``); ``added`` is false when it was
    suppressed already (its first reason and ``since`` stay)."""
    given = validation.check(SUPPRESSION, _typed(body))
    who, text, name = receiver(given["receiver"]), given["text"], given["list"]
    record, added = suppression.suppress(who, "operator", actor=actor, text=text, runtime=runtime,
                                         list_name=name)  # fmt: skip
    return {"suppression": suppression.suppression_json(record), "added": added}


def _typed(body: Any) -> Any:
    """The body with its receiver read as an operator types it: the console's and the CLI's
    additions take what their lookups and removals take, under the key every send compares."""
    given = body.get("receiver") if isinstance(body, dict) else None
    if not isinstance(given, str) or len(given) > messages.MAX_EMAIL:
        return body  # the body's own check says what is wrong
    return {**body, "receiver": typed_receiver(given, "receiver", lookup=False)}


def remove(value: str, actor: str, runtime: Runtime, list_name: str | None = None,
           text: str | None = None) -> dict[str, Any]:  # fmt: skip
    """Remove the suppression of ``value`` (its unsubscribe from ``list_name``, when given;
    ``text``: why, for its history); 404 when it has none."""
    who = _receiver_param(value)
    name = validation.list_name(list_name)
    if text is not None:
        check_text(text, "text", single_line=True)  # as the body's `text` of an addition
    removed = suppression.unsuppress(who, actor=actor, text=text, runtime=runtime,
                                     list_name=name)  # fmt: skip
    if removed is None:
        where = f"unsubscribed from the list {name}" if name else "on the suppression list"
        lists = [r.list_name for r in runtime.store.receiver_suppressions(who)
                 if r.list_name is not None and r.list_name != name]  # fmt: skip
        more = (f"; it is unsubscribed from the lists {', '.join(lists)}: name one (?list= "
                "in the API, --list in vdq)" if lists and name is None else "")  # fmt: skip
        raise NotFound(f"{who} is not {where}{more}", details={"receiver": who})
    return {"suppression": suppression.suppression_json(removed)}


def history(value: str, runtime: Runtime) -> dict[str, Any]:
    """The receiver's suppression (or null), its lists' unsubscribes and its history, oldest
    first; 404 when it was never on the list."""
    who = _receiver_param(value)
    entries = runtime.store.suppression_history(who)
    held = runtime.store.receiver_suppressions(who)
    current = next((r for r in held if r.list_name is None), None)
    if not held and not entries:
        raise NotFound(f"{who} has never been on the suppression list",
                       details={"receiver": who})  # fmt: skip
    return {"receiver": who,
            "suppression": suppression.suppression_json(current) if current else None,
            "lists": [suppression.suppression_json(r) for r in held if r.list_name is not None],
            "history": [suppression.event_json(e) for e in entries]}  # fmt: skip
