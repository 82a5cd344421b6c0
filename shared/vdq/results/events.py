"""Provider results as ``ProviderUpdate``: SES events and Twilio statuses, parsed (pure)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from vdq.core.clock import parse_iso
from vdq.core.errors import VdqError
from vdq.results.suppression import REASONS, SES_LIST_SUBTYPES, TWILIO_OPTED_OUT

SES = "ses"
TWILIO = "twilio"



@dataclass(frozen=True)
class ProviderUpdate:
    provider: str  # ses | twilio
    provider_id: str  # SES message ID or Twilio message SID
    status: str  # normalised: delivered, bounced, deferred, sent, complained, ...
    name: str  # the provider's own word (SES eventType, Twilio MessageStatus)
    text: str  # what happened, for history (and result where the status writes it)
    event_id: str  # deterministic: the same event delivered twice has the same id
    at: str | None = None  # when the provider says it happened
    item_hint: str | None = None  # the queue item key the provider returned
    attempt_hint: int | None = None
    # The suppression (a reason of vdq.results.suppression) the result asks for the receiver of the
    # item it matches: an SES permanent bounce or complaint (also SES not sending to an address
    # on the account's list), Twilio's opt-out error. Cleared when the payload named its
    # receivers and they were suppressed already.
    suppresses: str | None = None
    # When the provider accepted the message (SES's ``mail.timestamp``): the time of the
    # acceptance entry an update writes when it is the first to store the ID.
    accepted_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProviderUpdate:
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})  # type: ignore[arg-type]

    @property
    def writes_result(self) -> bool:
        return self.status != "queued" and self.status != "sending" and self.status != "sent"


# ---- parsing ---------------------------------------------------------------------------------

_SES_STATUS = {
    "Send": "sent",
    "Delivery": "delivered",
    "Bounce": "bounced",
    "Reject": "rejected",
    "Rendering Failure": "failed",
    "DeliveryDelay": "deferred",
    "Complaint": "complained",
}
# Where each SES event type keeps its details (and its own timestamp).
_SES_DETAIL = {
    "Send": "send",
    "Delivery": "delivery",
    "Bounce": "bounce",
    "Reject": "reject",
    "Rendering Failure": "failure",
    "DeliveryDelay": "deliveryDelay",
    "Complaint": "complaint",
    "Open": "open",
    "Click": "click",
    "Subscription": "subscription",
}


class BadEvent(VdqError):
    """A provider payload that is not a well-formed event; dropped with a log line."""

    status = 400
    code = "bad_event"


MAX_PROVIDER_ID = 256  # SES message IDs are about 60 characters, Twilio SIDs 34
MAX_LOOKUP_TRIES = 1000  # far above any SMS timeout window's count (15 in 2 hours)
MAX_EVENT_TYPE = 64  # SES's event types are single words ("Rendering Failure" the longest)


def ses_event_type(event: dict[str, Any]) -> str:
    kind = event.get("eventType") or event.get("notificationType") or ""
    return kind if isinstance(kind, str) and len(kind) <= MAX_EVENT_TYPE else ""


def parse_ses_event(event: dict[str, Any]) -> ProviderUpdate:
    """The update an SES event (configuration-set event publishing) reports."""
    kind = ses_event_type(event)
    mail = event.get("mail")
    if not kind or not isinstance(mail, dict) or not mail.get("messageId"):
        raise BadEvent("an SES event needs eventType and mail.messageId")
    if kind not in _SES_DETAIL:
        # Not one of SES's event types: nothing VDQ can apply, and kept as an orphan it would
        # wait for an item for a week.
        raise BadEvent(f"{kind!r} is not an SES event type VDQ knows "
                       f"({', '.join(sorted(_SES_DETAIL))})")
    message_id = mail["messageId"]
    if not isinstance(message_id, str) or len(message_id) > MAX_PROVIDER_ID:
        raise BadEvent(f"mail.messageId of an SES {kind} event is not an SES message ID")
    detail = event.get(_SES_DETAIL.get(kind, ""), {}) or {}
    if not isinstance(detail, dict):
        raise BadEvent(f"the {_SES_DETAIL.get(kind)} of an SES {kind} event is not an object")
    at = detail.get("timestamp") or mail.get("timestamp")
    at = at if isinstance(at, str) else None
    try:
        text = _ses_text(kind, detail)
    except (AttributeError, TypeError, ValueError) as exc:  # a field of an unexpected type
        raise BadEvent(f"a malformed SES {kind} event: {type(exc).__name__}: {exc}") from None
    status, suppresses = _SES_STATUS.get(kind, "other"), _ses_suppresses(kind, detail)
    if kind == "Complaint" and detail.get("complaintSubType") in SES_LIST_SUBTYPES:
        # SES accepted the email but did not attempt delivery (the address is on the account's
        # suppression list), as for the Bounce of that subtype: not sent.
        status = "rejected"
    sent_at = mail.get("timestamp")
    return ProviderUpdate(SES, message_id, status, kind, text, f"ses:{kind}:{message_id}:{at}",
                          at=at, suppresses=suppresses,
                          accepted_at=sent_at if isinstance(sent_at, str) else None)  # fmt: skip


def _ses_suppresses(kind: str, detail: dict[str, Any]) -> str | None:
    """The suppression an SES event asks for the receiver of its item: a permanent bounce's or
    a complaint's (not a "not-spam" report), as vdq.results.suppression.learn_from_ses_event
    reads them. That suppresses the receivers the event names before matching (and the
    update's ask is then cleared); this is for an event that names none it can read."""
    if kind == "Bounce" and detail.get("bounceType") == "Permanent":
        listed = str(detail.get("bounceSubType") or "") in SES_LIST_SUBTYPES
        return "ses_suppression_list" if listed else "bounce"
    if kind == "Complaint" and detail.get("complaintSubType") in SES_LIST_SUBTYPES:
        return "ses_suppression_list"
    if kind == "Complaint" and detail.get("complaintFeedbackType") != "not-spam":
        return "complaint"
    return None


def _recipients(detail: dict[str, Any], key: str) -> str:
    parts = []
    for r in detail.get(key) or []:
        if not isinstance(r, dict):
            continue
        code = r.get("diagnosticCode") or r.get("status") or ""
        parts.append(f"{r.get('emailAddress', '?')}: {code}".rstrip(": "))
    return "; ".join(parts)


def _ses_text(kind: str, d: dict[str, Any]) -> str:
    if kind == "Delivery":
        return f"SES delivered the message: {d.get('smtpResponse') or 'no SMTP response'}"
    if kind == "Bounce":
        who = _recipients(d, "bouncedRecipients")
        return f"SES bounce ({d.get('bounceType')}/{d.get('bounceSubType')}): {who}".rstrip(": ")
    if kind == "Reject":
        return f"SES rejected the message: {d.get('reason') or 'no reason given'}"
    if kind == "Rendering Failure":
        return f"SES could not render the template: {d.get('errorMessage') or 'no message'}"
    if kind == "DeliveryDelay":
        who = _recipients(d, "delayedRecipients")
        return f"SES delivery delayed ({d.get('delayType')}): {who}".rstrip(": ")
    if kind == "Complaint" and d.get("complaintSubType") in SES_LIST_SUBTYPES:
        who = _recipients(d, "complainedRecipients") or "the receiver"
        return (f"SES did not send the message: {who} is on the account's suppression list "
                f"(complaint {d.get('complaintSubType')})")  # fmt: skip
    if kind == "Complaint":
        feedback = d.get("complaintFeedbackType") or "unspecified"
        who = _recipients(d, "complainedRecipients") or "an unnamed recipient"
        return f"SES complaint ({feedback}) from {who}"
    if kind == "Send":
        return "SES accepted the message"
    return f"SES {kind} event"


# Twilio's MessageStatus values (the Message resource's status enum), normalised. ``accepted``
# and ``scheduled`` come before ``queued`` (a Messaging Service picking a sender, a scheduled
# send); ``read`` is a read receipt (WhatsApp, RCS), after delivery; ``canceled`` is a scheduled
# message cancelled at Twilio before it went out; ``partially_delivered`` means only part of the
# message reached the handset, which VDQ counts as not delivered (an operator decides whether to
# resend). ``receiving``/``received`` belong to inbound messages: "other", an event in history.
_TWILIO_STATUS = {
    "delivered": "delivered",
    "read": "delivered",
    "undelivered": "undelivered",
    "partially_delivered": "undelivered",
    "failed": "failed",
    "canceled": "failed",
    "accepted": "queued",
    "scheduled": "queued",
    "queued": "queued",
    "sending": "sending",
    "sent": "sent",
}


# What Twilio's delivery error codes mean (its error dictionary), for a status that carries the
# code alone: a status callback never has ErrorMessage, and a fetched message often none.
TWILIO_ERRORS = {
    "30001": "queue overflow",
    "30002": "account suspended",
    "30003": "unreachable destination handset",
    "30004": "message blocked",
    "30005": "unknown destination handset",
    "30006": "landline or unreachable carrier",
    "30007": "filtered by the carrier",
    "30008": "unknown error",
    "30009": "missing segment",
    "30010": "message price exceeds max price",
    "30011": "MMS not supported by the receiving number in this region",
    "30022": "US A2P 10DLC rate limit exceeded",
    "30023": "US A2P 10DLC daily message cap reached",
    "30032": "toll-free number not verified",
    "30034": "US A2P 10DLC: message from an unregistered number",
    "30036": "validity period expired",
    "30500": "Twilio internal error",
    TWILIO_OPTED_OUT: "the receiver replied STOP",
    "21612": "the To number is not reachable via SMS",
    "21614": "To is not a mobile number",
}


def twilio_update(sid: str, status: str, error_code: Any = None, error_message: str | None = None,
                  item_hint: str | None = None) -> ProviderUpdate:  # fmt: skip
    """The update of one Twilio message status (from a callback or a fetch)."""
    text = f"Twilio reported {status}"
    if error_code not in (None, ""):
        text += f", error {error_code}"
        meaning = TWILIO_ERRORS.get(str(error_code))
        if error_message:
            text += f": {error_message}"
        elif meaning:
            text += f" ({meaning})"
    normalised = _TWILIO_STATUS.get(status, "other")
    # The number replied STOP: a callback, a poll and the timeout's last fetch alike.
    suppresses = "sms_opt_out" if str(error_code) == TWILIO_OPTED_OUT else None
    return ProviderUpdate(TWILIO, sid, normalised, status, text, f"twilio:{sid}:{status}",
                          item_hint=item_hint, suppresses=suppresses)  # fmt: skip


def parse_twilio_callback(params: dict[str, str], item_key: str | None) -> ProviderUpdate:
    sid = params.get("MessageSid") or params.get("SmsSid")
    status = params.get("MessageStatus") or params.get("SmsStatus")
    if not sid or not status:
        raise BadEvent("a Twilio status callback needs MessageSid and MessageStatus")
    return twilio_update(sid, status, params.get("ErrorCode"), params.get("ErrorMessage"),
                         item_key or None)  # fmt: skip


def parse_lookup(message: dict[str, Any]) -> tuple[ProviderUpdate, int, str]:
    """The update, tries and first sighting (ISO time) of a deferred Twilio lookup; BadEvent
    for a malformed one, which no retry can fix."""
    data, first_seen = message.get("update"), message.get("first_seen")
    tries = message.get("tries") or 0  # absent in a first lookup
    if (not isinstance(data, dict) or not isinstance(tries, int) or isinstance(tries, bool)
            or not 0 <= tries <= MAX_LOOKUP_TRIES or not isinstance(first_seen, str)):  # fmt: skip
        raise BadEvent("a deferred lookup needs an update, tries (0 to "
                       f"{MAX_LOOKUP_TRIES}) and first_seen")
    fields = ("provider", "provider_id", "status", "name", "text", "event_id")
    if not all(isinstance(data.get(f), str) and data[f] for f in fields) or not (
        isinstance(data.get("item_hint"), str | None) and isinstance(data.get("at"), str | None)
        and isinstance(data.get("attempt_hint"), int | None)
        and data.get("suppresses") in (None, *REASONS)
    ):  # fmt: skip
        raise BadEvent(f"the update of a deferred lookup needs the texts {', '.join(fields)}, "
                       "and item_hint, at (texts), attempt_hint (a number) and suppresses (a "
                       "suppression reason) or none")
    try:
        parse_iso(first_seen)
    except ValueError:
        raise BadEvent("the first_seen of a deferred lookup is not a time") from None
    return ProviderUpdate.from_json(data), tries, first_seen
