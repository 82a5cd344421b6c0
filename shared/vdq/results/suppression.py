"""The suppression list: receivers VDQ no longer hands to a provider, how they get there, and
what a send to one does.

Scope: one list per deployment, as SES's account-level list is per account. A hard bounce or a
complaint is about the address, and STOP is about the number, whichever producer queued the
message: the deployment's sending reputation (one SES account, one set of Twilio numbers) is
what suffers, so every producer honours every entry. A one-click unsubscribe is narrower (RFC
8058, and as SES's list management and Postmark's message streams scope it): an entry of one
list (``list_name``) that stops only the list mail of that list to the address, never a
password reset or a receipt (mail of no list). The release before lists stored an unsubscribe
as an entry of all mail: such an entry (no list, reason ``unsubscribe``) is read as an
unsubscribe from the default list (``scope``), the list its link leaves now, and an entry of all
mail that arrives later takes its place and keeps it as one of that list.

A receiver is compared normalised: an email address in lower case (each ``+label`` variant is
an address of its own), an SMS number as E.164. Feeds: SES permanent bounces and complaints
(also SES's own account-level list, whose entries SES reports as permanent bounces), Twilio
error 21610 on a send or a status callback, inbound STOP/START/HELP, one-click unsubscribe, and
operators. The worker reads one record before claiming an item (``refuse``); enqueue reads the
request's receivers in one batch and flags them (``flags``).

A provider event suppresses once (``suppress_once``): its mark is written with the entry (or
alone, when the receiver is suppressed already), and a redelivery (SQS's at-least-once, a
dead-letter queue's redrive) finds it and changes nothing, so it cannot undo an operator's
removal or an inbound START that came in between (an inbound START is applied once per
message in the same way, so it cannot undo a STOP either). This is checked before the event
is applied to its item, in the suppression's own write: the item's event mark is written
later, in another partition, and a failure between the two must leave the event to be applied
again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from vdq.core import clock, resources
from vdq.core.errors import InvalidTransition, NotFound
from vdq.core.observability import logger, metrics
from vdq.store import (
    Duplicate,
    SuppressionEventRecord,
    SuppressionMarkRecord,
    SuppressionRecord,
    suppression_history_pk,
    suppression_mark_sk,
    suppression_pk,
    suppression_sk,
)

if TYPE_CHECKING:
    from vdq.runtime import Runtime

# List mail that names no list (asked with list_unsubscribe, or in the bulk lane) is this list
# (vdq.results.unsubscribe).
DEFAULT_LIST = "general"
# Why a receiver is suppressed: code -> what the result and the list say.
REASONS = {
    "bounce": "a permanent bounce",
    "complaint": "a complaint",
    "ses_suppression_list": "SES's suppression list",
    "sms_opt_out": "the number opted out of SMS (STOP)",
    "unsubscribe": "one-click unsubscribe",
    "operator": "an operator",
}
REASON_CODES = ("bounce", "complaint", "ses_suppression_list", "sms_opt_out", "unsubscribe",
                "operator")  # fmt: skip
assert tuple(REASONS) == REASON_CODES
METRIC_SUPPRESSED = resources.METRIC_SENDS_SUPPRESSED
TWILIO_OPTED_OUT = "21610"  # Twilio: "Attempt to send to unsubscribed recipient"
SES_LIST_SUBTYPES = frozenset({"OnAccountSuppressionList", "Suppressed"})
# Twilio's default keywords (single word, any case); HELP changes nothing but is recorded.
STOP_WORDS = frozenset({"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "REVOKE",
                        "OPTOUT"})  # fmt: skip
START_WORDS = frozenset({"START", "UNSTOP", "YES"})
HELP_WORDS = frozenset({"HELP", "INFO"})
# How long a provider event's mark stays: longer than an event can be delivered again (the
# results queue keeps a message 4 days, its dead-letter queue 14, and a redrive moves it back).
MARK_DAYS = 30


def normalize(receiver: str) -> str:
    """The form a receiver is compared in: an address in lower case, a number as given."""
    text = receiver.strip()
    return text.lower() if "@" in text else text


def channel_of(receiver: str) -> str:
    return "email" if "@" in receiver else "sms"


def suppression_json(record: SuppressionRecord) -> dict[str, Any]:
    return {"receiver": record.receiver, "channel": record.channel, "list": record.list_name,
            "reason": record.reason, "text": record.text, "since": record.since,
            "actor": record.actor}  # fmt: skip


def event_json(entry: SuppressionEventRecord) -> dict[str, Any]:
    return {"at": entry.at, "actor": entry.actor, "action": entry.action,
            "list": entry.list_name, "reason": entry.reason, "text": entry.text}  # fmt: skip


def scope(record: SuppressionRecord) -> str | None:
    """The list whose mail ``record`` stops; None: all mail. An entry of all mail that a
    one-click unsubscribe made before lists (reason ``unsubscribe``, no list) stops the default
    list's only: its link came with list mail that named no list, which is that list now, and
    password resets and receipts must reach its receiver."""
    if record.list_name is not None:
        return str(record.list_name)
    return DEFAULT_LIST if record.reason == "unsubscribe" else None


def stopping(records: Iterable[SuppressionRecord],
             list_name: str | None) -> SuppressionRecord | None:  # fmt: skip
    """The first of ``records`` that stops a send of ``list_name``'s mail (None: mail of no
    list), or None."""
    for record in records:
        limit = scope(record)
        if limit is None or limit == list_name:
            return record
    return None


def describe(record: SuppressionRecord) -> str:
    """The result of an item not sent because of ``record``."""
    why = REASONS.get(record.reason, record.reason)
    # A one-click unsubscribe's text is its reason's words: said once.
    detail = f": {record.text}" if record.text and record.text != why else ""
    if (name := scope(record)) is not None:
        return (f"not sent: {record.receiver} unsubscribed from the list \"{name}\" "
                f"since {record.since} ({why}{detail}); mail of other lists and of no list "
                "still goes out")  # fmt: skip
    return (f"not sent: {record.receiver} is on the suppression list since {record.since} "
            f"({why}{detail})")  # fmt: skip


# ---- adding and removing ---------------------------------------------------------------------


def _entry(receiver: str, action: str, actor: str, reason: str | None, text: str | None,
           runtime: Runtime, list_name: str | None = None) -> SuppressionEventRecord:  # fmt: skip
    import os

    at = clock.iso(runtime.clock.now())
    return SuppressionEventRecord(suppression_history_pk(receiver), f"H#{at}#{os.urandom(3).hex()}",
                                  at=at, actor=actor, action=action, reason=reason,
                                  text=text[:1000] if text else None,
                                  list_name=list_name)  # fmt: skip


def suppress(receiver: str, reason: str, *, actor: str, text: str | None, runtime: Runtime,
             list_name: str | None = None, mark: SuppressionMarkRecord | None = None,
             ) -> tuple[SuppressionRecord, bool]:  # fmt: skip
    """Suppress ``receiver`` (with ``list_name``: only the list mail of that list); the
    suppression that holds, and whether this call added it (a receiver suppressed already
    keeps its first reason and ``since``). ``mark``: that of the provider event that asks it
    (``suppress_once``), written with it; ``Duplicate`` when the event was applied before."""
    assert reason in REASONS, reason
    key = normalize(receiver)
    now = clock.iso(runtime.clock.now())
    record = SuppressionRecord(suppression_pk(key), suppression_sk(key, list_name), receiver=key,
                               channel=channel_of(key), reason=reason, since=now, actor=actor,
                               text=text[:500] if text else None,
                               list_name=list_name)  # fmt: skip
    entry = _entry(key, "added", actor, reason, text, runtime, list_name)
    held, added = runtime.store.add_suppression(record, entry, mark)
    if not added and list_name is None and (kept := scope(held)) is not None:
        # An unsubscribe stored before lists holds the key of the entry of all mail: this
        # entry takes it, and the unsubscribe stays, as one from its list.
        moved = SuppressionRecord(suppression_pk(key), suppression_sk(key, kept),
                                  **{n: getattr(held, n) for n in _KEPT},
                                  list_name=kept)  # fmt: skip
        if not runtime.store.take_over_suppression(held, record, entry, moved, mark):
            return suppress(receiver, reason, actor=actor, text=text, runtime=runtime,
                            mark=mark)  # fmt: skip
        held, added = record, True
    elif not added and mark is not None:
        runtime.store.add_suppression_mark(mark)  # applied, to a receiver suppressed already
    if added:
        where = f" from the list {list_name}" if list_name is not None else ""
        logger.info("%s suppressed%s (%s) by %s", key, where, reason, actor)
        metrics.add_metric(name=resources.METRIC_SUPPRESSIONS_ADDED, unit="Count", value=1)
    return held, added


def suppress_once(receiver: str, reason: str, *, event_id: str, actor: str, text: str | None,
                  runtime: Runtime) -> bool:  # fmt: skip
    """Suppress ``receiver`` for the provider event ``event_id`` (deterministic: a redelivery
    has the same) unless that event was applied before; True when this call added the entry.
    An event applied to a receiver suppressed already is spent all the same."""
    key = normalize(receiver)
    try:
        _, added = suppress(key, reason, actor=actor, text=text, runtime=runtime,
                            mark=_mark(key, event_id, runtime))  # fmt: skip
    except Duplicate:
        logger.info("%s not suppressed again: event %s was applied before", key, event_id)
        return False
    return added


def _mark(key: str, event_id: str, runtime: Runtime) -> SuppressionMarkRecord:
    """The mark that a provider event was applied to the receiver ``key`` (kept MARK_DAYS)."""
    expires = int(runtime.clock.now().timestamp()) + MARK_DAYS * 86_400
    return SuppressionMarkRecord(suppression_history_pk(key), suppression_mark_sk(event_id),
                                 expiration=expires)  # fmt: skip


# What an unsubscribe stored before lists keeps when it moves to its list's key.
_KEPT = ("receiver", "channel", "reason", "text", "since", "actor")


def unsuppress(receiver: str, *, actor: str, text: str | None, runtime: Runtime,
               reason: str | None = None, list_name: str | None = None,
               event_id: str | None = None) -> SuppressionRecord | None:  # fmt: skip
    """Remove the suppression of ``receiver`` (its unsubscribe from ``list_name``, when given;
    only one for ``reason``, when given); the one removed, or None when there was none.
    ``event_id``: the provider event that asks it, applied once (``Duplicate`` when it was
    applied before, whether or not it removed anything then)."""
    key = normalize(receiver)
    removed = runtime.store.remove_suppression(
        key, _entry(key, "removed", actor, None, text, runtime, list_name), reason=reason,
        list_name=list_name,
        mark=_mark(key, event_id, runtime) if event_id is not None else None)  # fmt: skip
    if removed is not None:
        where = f" from the list {list_name}" if list_name is not None else ""
        logger.info("%s no longer suppressed%s (by %s)", key, where, actor)
    return removed


def note(receiver: str, *, actor: str, text: str, runtime: Runtime) -> None:
    key = normalize(receiver)
    runtime.store.note_suppression_event(_entry(key, "noted", actor, None, text, runtime))


# ---- the worker and enqueue ------------------------------------------------------------------


def refuse(item_id: str, attempt: int, receiver: str | None, runtime: Runtime,
           list_name: str | None = None) -> bool:  # fmt: skip
    """Before the claim: when the item's receiver is suppressed (or, for list mail, unsubscribed
    from ``list_name``), cancel the item (result: why and since when) and return True; the
    worker then drops the message without calling any provider. One read when the message
    names its receiver and list (a message of a scheduled send's release names neither: the
    item is read first, for both)."""
    from vdq.workflow import transitions
    from vdq.workflow.table import State

    if receiver is None:
        item = runtime.store.get_item(item_id)
        if item is None:
            return False
        receiver, list_name = item.receiver, list_name or item.list_name
    record = stopping(runtime.store.suppressions_of(normalize(receiver), list_name), list_name)
    if record is None:
        return False
    step = transitions.Step("cancel", actor="worker", result=describe(record), attempt=attempt,
                            expect=frozenset({State.QUEUED.value,
                                              State.DELAYED.value}))  # fmt: skip
    try:
        outcome = transitions.apply(item_id, step, runtime)
    except (InvalidTransition, NotFound):
        return False  # claimed, cancelled or gone: the claim drops the message and says why
    if outcome.kind != "moved":
        return False
    metrics.add_metric(name=METRIC_SUPPRESSED, unit="Count", value=1)
    logger.info("%s not sent: %s is suppressed (%s%s)", item_id, record.receiver, record.reason,
                f", list {scope(record)}" if scope(record) else "")  # fmt: skip
    return True


class SuppressedMeanwhile(Exception):
    """The receiver was suppressed while the worker waited for its turn at the provider (or
    before, for a list the check before the claim could not know)."""


def check_list(item: Any, list_name: str | None, checked: str | None, runtime: Runtime) -> None:
    """After the claim, for an item whose list only its content names (stored before lists:
    its message named none, so the check before the claim read the entry for all mail only):
    SuppressedMeanwhile when the receiver unsubscribed from ``list_name``, the list its email's
    link leaves. No read when the check before the claim read that list already (its
    message's, or the item's own when the message named none). The entry for all mail is
    read with it (one BatchGetItem): an unsubscribe stored before lists is one, and stops the
    default list's mail only."""
    if list_name is None or list_name in (checked, getattr(item, "list_name", None)):
        return
    found = runtime.store.suppressions_of(normalize(item.receiver), list_name)
    record = stopping(found, list_name)
    if record is not None:
        raise SuppressedMeanwhile(f"{describe(record)}; the list read from the content of an "
                                  "item stored before lists, so it was not sent")  # fmt: skip


# A send that waited longer than this for its turn reads the receiver's suppression again
# before the provider call: the read costs a few milliseconds, the wait up to seconds.
RECHECK_AFTER_WAIT_SECONDS = 0.25


def check_again(item: Any, waited: float, runtime: Runtime, list_name: str | None) -> None:
    """After a paced wait of ``waited`` seconds: SuppressedMeanwhile when the receiver was
    suppressed (or, for list mail, unsubscribed from ``list_name``) since the check before the
    claim (one GetItem; none after a short wait). A read that fails lets the send go on: the
    receiver passed the check before the claim, and an item errored for a failed second look
    would wait for an operator."""
    if waited <= RECHECK_AFTER_WAIT_SECONDS:
        return
    try:
        found = runtime.store.suppressions_of(normalize(item.receiver), list_name)
        record = stopping(found, list_name)
    except Exception:
        logger.exception("suppression of %s not read again after the wait; sent", item.id)
        return
    if record is not None:
        raise SuppressedMeanwhile(f"{describe(record)}; suppressed while the send waited for its "
                                  "turn at the provider's rate, so it was not sent")  # fmt: skip


def flags(receivers: Iterable[str], runtime: Runtime,
          list_name: str | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """The suppressed among an enqueue's receivers (for list mail, also those unsubscribed
    from its list), in request order (one BatchGetItem per hundred keys): they are queued all
    the same, and end cancelled when the worker reaches them."""
    wanted = [normalize(r) for r in receivers]
    found: dict[str, list[SuppressionRecord]] = {}
    for record in sorted(runtime.store.get_suppressions(wanted, list_name),
                         key=lambda r: r.list_name is not None):  # that of all mail first
        found.setdefault(record.receiver, []).append(record)
    out = []
    for key in dict.fromkeys(wanted):
        held = stopping(found.get(key, ()), list_name)
        if held is not None:
            out.append({"receiver": key, "reason": held.reason, "since": held.since,
                        "list": scope(held)})  # fmt: skip
    return out


# ---- provider feeds --------------------------------------------------------------------------


def learn_from_ses_event(event: Mapping[str, Any], runtime: Runtime, *,
                         event_id: str) -> list[str]:  # fmt: skip
    """Suppress the receivers of an SES permanent bounce or complaint (``event_id``: the
    event's, as vdq.results.events makes it; once per event); returns them."""
    kind = event.get("eventType") or event.get("notificationType")
    added: list[str] = []
    if kind == "Bounce":
        detail = event.get("bounce") or {}
        if not isinstance(detail, Mapping) or detail.get("bounceType") != "Permanent":
            return added
        sub = str(detail.get("bounceSubType") or "")
        reason = "ses_suppression_list" if sub in SES_LIST_SUBTYPES else "bounce"
        for recipient in detail.get("bouncedRecipients") or []:
            address = _address(recipient)
            if address:
                code = recipient.get("diagnosticCode") or recipient.get("status") or ""
                text = f"SES bounce (Permanent/{sub}){': ' + str(code) if code else ''}"
                suppress_once(address, reason, event_id=event_id, actor="ses", text=text,
                              runtime=runtime)  # fmt: skip
                added.append(address)
    elif kind == "Complaint":
        detail = event.get("complaint") or {}
        if not isinstance(detail, Mapping):
            return added
        feedback = str(detail.get("complaintFeedbackType") or "unspecified")
        if feedback == "not-spam":  # the receiver says it is not spam: no complaint
            return added
        # SES did not send: the address is on the account's list (an earlier complaint).
        listed = str(detail.get("complaintSubType") or "") in SES_LIST_SUBTYPES
        reason = "ses_suppression_list" if listed else "complaint"
        text = ("SES complaint (OnAccountSuppressionList)" if listed
                else f"SES complaint ({feedback})")  # fmt: skip
        for recipient in detail.get("complainedRecipients") or []:
            address = _address(recipient)
            if address:
                suppress_once(address, reason, event_id=event_id, actor="ses", text=text,
                              runtime=runtime)  # fmt: skip
                added.append(address)
    return added


def _address(recipient: Any) -> str | None:
    if not isinstance(recipient, Mapping):
        return None
    address = recipient.get("emailAddress")
    if not isinstance(address, str) or "@" not in address or len(address) > 254:
        return None
    from email.utils import parseaddr

    return parseaddr(address)[1] or None  # SES may write "Name <address>"


def learn_from_twilio_error(number: str | None, code: Any, runtime: Runtime, *, where: str,
                            event_id: str | None = None) -> bool:  # fmt: skip
    """Twilio error 21610 (the number sent STOP): suppress it; True when it was that error.
    ``event_id``: the status callback's (once per event), None for a send's own error."""
    if str(code) != TWILIO_OPTED_OUT or not number:
        return False
    text = f"Twilio error 21610 ({where}): the number replied STOP"
    if event_id is None:
        suppress(number, "sms_opt_out", actor="twilio", text=text, runtime=runtime)
    else:
        suppress_once(number, "sms_opt_out", event_id=event_id, actor="twilio", text=text,
                      runtime=runtime)  # fmt: skip
    return True


def learn_from_send_error(item: Any, error: Exception, runtime: Runtime) -> str:
    """After a provider refused a send: the text to add to the item's result ("" or why the
    receiver is suppressed from now on)."""
    if item.method != "sms":
        return ""
    try:
        learnt = learn_from_twilio_error(item.receiver, getattr(error, "code", None), runtime,
                                         where="on send")  # fmt: skip
    except Exception:
        # The item's error must be recorded whatever: a later 21610 or STOP suppresses it.
        logger.exception("suppressing %s after Twilio 21610 failed", item.receiver)
        return ""
    return f"; {item.receiver} is on the suppression list from now on" if learnt else ""


def inbound_word(params: Mapping[str, str]) -> str:
    """What an inbound SMS says, as the opt-out words are compared: Twilio's ``OptOutType``
    (Advanced Opt-Out) over the body."""
    return (params.get("OptOutType") or params.get("Body") or "").strip().upper()


def handle_inbound_sms(params: Mapping[str, str], runtime: Runtime) -> str:
    """An authentic inbound SMS (Twilio's incoming-message webhook): STOP and its synonyms
    suppress the sender's number, START and its synonyms remove an opt-out, HELP is recorded.
    Twilio's ``OptOutType`` (Advanced Opt-Out) wins over the body. Returns what it did."""
    import re

    from vdq.core.text import E164

    number = (params.get("From") or "").strip()
    if not re.match(E164, number):
        return "ignored"
    word = inbound_word(params)
    to = params.get("To") or "?"
    sid = str(params.get("MessageSid") or params.get("SmsSid") or "").strip()
    if word in STOP_WORDS:
        text = f"{word} sent to {to}"
        if not sid:
            _, added = suppress(number, "sms_opt_out", actor="twilio", text=text,
                                runtime=runtime)  # fmt: skip
        else:  # Twilio may post the same message again: a START or a removal since holds
            added = suppress_once(number, "sms_opt_out", event_id=f"twilio:inbound:{sid}",
                                  actor="twilio", text=text, runtime=runtime)  # fmt: skip
        return "suppressed" if added else "already suppressed"
    if word in START_WORDS:
        # Only an opt-out, checked in the delete: a suppression of another reason that took
        # its place in between stays. Once per message, as a STOP: a START posted again after
        # the number texted STOP lifts nothing.
        try:
            if unsuppress(number, actor="twilio", text=f"{word} sent to {to}", runtime=runtime,
                          reason="sms_opt_out",
                          event_id=f"twilio:inbound:{sid}" if sid else None) is not None:
                return "removed"
        except Duplicate:
            logger.info("%s: START %s was applied before", number, sid)
            return "applied before"
        current = runtime.store.get_suppression(number)
        if current is None:
            return "not suppressed"
        note(number, actor="twilio", runtime=runtime,
             text=f"{word} sent to {to}; the suppression by {REASONS[current.reason]} stays")
        return "kept"
    if word in HELP_WORDS:
        note(number, actor="twilio", text=f"{word} sent to {to}", runtime=runtime)
        return "noted"
    return "ignored"
