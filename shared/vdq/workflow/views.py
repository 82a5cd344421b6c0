"""JSON shapes of queue items and their history, as the REST API returns them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from vdq.store import HistoryRecord, QueueItemRecord
from vdq.store.history import entry_data, recent_of
from vdq.workflow.lanes import priority_of

# What a history entry's ``source`` and ``kind`` may be (the OpenAPI document's enums; a test
# checks every writer of history uses only these).
HISTORY_SOURCES = ("server", "provider", "operator", "schedule")
HISTORY_KINDS = ("transition", "ignored", "late", "event", "action")


# What a list marks beside an item's state, so that a delivered email a receiver complained
# about does not read as a plain success: a permanent bounce, a complaint, a rejection by the
# provider, an SMS opt-out (STOP: Twilio's 21610), and a send the suppression list stopped.
SIGNALS = ("bounce", "complaint", "reject", "stop", "suppressed")
# Twilio's opt-out error (21610) as the results stage words it: a status callback's or a fetch's
# ("Twilio reported failed, error 21610 ...") and a send's refusal ("Twilio (21610): ..."). Only
# there: the digits alone also occur in an SMTP answer's time stamp, an address or a message ID.
_OPT_OUT = re.compile(r"Twilio (?:\(21610\)|reported \w+, error 21610\b)")


def entry_signals(name: str | None, text: str | None) -> set[str]:
    """The signals one history entry carries (as the results stage words its entries: the
    tests of vdq.schedules.postings tie these words to the events that make them)."""
    text = text or ""
    found = set()
    # SES refused the send: the address is on the account's own suppression list. Nothing left,
    # and SES counts it toward no bounce rate: not a bounce or complaint but a suppression. (SES
    # reports it as a Complaint, whose entry is the ``error`` transition it runs: the text
    # alone says it.)
    if text.startswith(("SES bounce (Permanent/OnAccountSuppressionList",
                        "SES did not send the message")):
        return {"suppressed"}
    if text.startswith("SES bounce (Permanent"):
        found.add("bounce")
    if name == "Complaint" and "(not-spam)" not in text:
        found.add("complaint")
    if text.startswith("SES rejected the message"):
        found.add("reject")
    if _OPT_OUT.match(text) or text.startswith(("STOP sent", "STOPALL sent")):
        found.add("stop")
    return found


def signals_of(texts: Iterable[str], result: str | None, base: str | None = None) -> list[str]:
    """The signals of an item from its entries on the state item (JSON texts) and its result:
    those an entry spilled to a record of its own are not seen (a list reads no record).
    ``base``: the item's ``queued_at``, which a coded entry's time counts from."""
    found: set[str] = set()
    for text in texts:
        try:
            data = entry_data(text, base)
        except ValueError:
            continue
        found |= entry_signals(data.get("name"), data.get("text"))
    found |= entry_signals(None, result)
    if result and result.startswith("not sent") and (
            "on the suppression list" in result or "unsubscribed from the list" in result):
        found.add("suppressed")  # (vdq.results.suppression.describe's words)
    return [s for s in SIGNALS if s in found]


def item_json(item: QueueItemRecord) -> dict[str, Any]:
    origin = (
        {"type": item.origin_type, "id": item.origin_id} if item.origin_type is not None else None
    )
    sender: dict[str, Any]
    receiver: dict[str, Any]
    if item.method == "email":
        sender = {"email": item.sender, "name": item.sender_name}
        receiver = {"email": item.receiver, "name": item.receiver_name}
    else:
        # A Messaging Service's SID, or a number (vdq.intake.messages.SMS_SENDER).
        sender = ({"messaging_service_sid": item.sender} if item.sender[:2] == "MG"
                  else {"cell": item.sender})  # fmt: skip
        receiver = {"cell": item.receiver, "name": item.receiver_name}
    return {
        "id": item.id,
        "method": item.method,
        "state": item.state,
        "sender": sender,
        "receiver": receiver,
        "result": item.result,
        "attempt": int(item.attempt),
        "retry_delay": int(item.retry_delay) if item.retry_delay is not None else None,
        "queued_at": item.queued_at,
        "updated_at": item.updated_at,
        "done_since": item.done_since or item.queued_at,  # stored by items written before
        "done_at": item.done_at,
        "origin": origin,
        "provider_id": item.provider_id,
        "resent_from": item.resent_from,
        "encoding": item.encoding,
        "segments": int(item.segments) if item.segments is not None else None,
        "priority": priority_of(item),
        "send_at": item.send_at,
        "excerpt": item.sj,
        "signals": signals_of(recent_of(item), item.result, item.queued_at),
        # Parked by a hold while queued or delayed; a mark left by a later move says nothing.
        "held": getattr(item, "held", None) if item.state in ("queued", "delayed") else None,
    }


def history_json(entry: HistoryRecord) -> dict[str, Any]:
    return {
        "at": entry.at,
        "actor": entry.actor,
        "source": entry.source,
        "kind": entry.kind,
        "name": entry.name,
        "from_state": entry.from_state,
        "to_state": entry.to_state,
        "attempt": int(entry.attempt) if entry.attempt is not None else None,
        "text": entry.text,
    }
