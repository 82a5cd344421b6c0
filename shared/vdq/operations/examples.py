"""One request and one answer per operation, as the OpenAPI document shows them.

Generator-only data (vdq.openapi). A test validates each example against its schema, so an
example that stops matching the contract fails the build instead of misleading a reader. The
examples are usable as they stand on the local stack (the document's second server): the
request bodies can be sent as they are, and the cursors are signed for its table (a cursor is
signed per table, so no example can be one of every deployment).
"""

from __future__ import annotations

from typing import Any

from vdq.core import resources
from vdq.core.settings import Settings
from vdq.operations import cursor as _cursors
from vdq.operations.done_list import LIST_NAME
from vdq.store.models import SUPPRESSION_SHARDS
from vdq.store.models import shard as _shard

_ITEM_ID = "01JD3Q5W0K8Y2C6N4F7R9T1VXB"
_OTHER_ID = "01JD3Q5W0K8Y2C6N4F7R9T1VXC"
_SMS_ID = "01JD3Q6A2B3C4D5E6F7G8H9J0K"
_NEW_ID = "01JD4A0B1C2D3E4F5G6H7J8K9M"
_FILE_ID = "01JD3Q5W0M1N2P3Q4R5S6T7V8W"
_UPLOAD_ID = "01JD3Q4P8S2V6X0Z4C8G2K6N0R"
_T0 = "2026-12-03T08:00:00.000000Z"
_T1 = "2026-12-03T08:00:01.250000Z"
_T2 = "2026-12-03T08:00:02.500000Z"
LOCAL_TABLE = f"{resources.LOCAL_PREFIX}-items"  # the local stack's table (vdq.local.resources)
_SHARDS = Settings().index_shards


def _cursor(index: str, filters: tuple[Any, ...], shards: int, item_id: str, key: str) -> str:
    """The cursor of a page that ended at ``key`` in ``item_id``'s shard (the other shards not
    read yet), as the server writes one for the local stack."""
    positions: list[str | None] = [None] * shards
    positions[_shard(item_id, shards) if shards > 1 else 0] = key
    return _cursors.encode(positions, _cursors.ListKey(index, filters, shards), LOCAL_TABLE)


# Each list's cursor names the list and its filters, as the examples beside it give them.
_ACTIVE_CURSOR = _cursor(resources.ACTIVE_INDEX.name, ("email", "errored", "bulk", "False"),
                         _SHARDS, _ITEM_ID, f"{_T1}#{_ITEM_ID}")  # fmt: skip
_SENT_CURSOR = _cursor(LIST_NAME, ("sms", "succeeded", "high", None), 1, _SMS_ID,
                       f"{_T2[:23]}#{_SMS_ID}")  # fmt: skip
_SUPPRESSIONS_CURSOR = _cursor("suppressions", ("email",), SUPPRESSION_SHARDS,
                               "ada@example.org", "R#ada@example.org")  # fmt: skip
_HISTORY_CURSOR = _cursor("history", (_ITEM_ID,), 1, _ITEM_ID, "H#")
# A receiver search's position is the last item id it examined.
_SEARCH_CURSOR = _cursors.encode(
    [_ITEM_ID], _cursors.ListKey("search", ("receiver", "ada@example.org",
                                            "2026-12-01T00:00:00+00:00",
                                            "2026-12-03T23:59:59+00:00", "email", "succeeded",
                                            "normal"), 1), LOCAL_TABLE)  # fmt: skip
_T_SEND = "2026-12-03T17:00:00.000000Z"  # 18:00 at +01:00, as the example request asks


def _email_item(item_id: str = _ITEM_ID, **changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": item_id, "method": "email", "state": "queued",
        "sender": {"email": "shop@example.com", "name": "Example Shop"},
        "receiver": {"email": "ada@example.org", "name": "Ada Lovelace"},
        "result": None, "attempt": 1, "retry_delay": None, "queued_at": _T0,
        "updated_at": _T0, "done_since": _T0, "done_at": None,
        "origin": {"type": "shop.order", "id": "1042"}, "provider_id": None,
        "resent_from": None, "encoding": None, "segments": None, "priority": "normal",
        "send_at": None, "excerpt": "Your order 1042", "signals": [], "held": None,
    }  # fmt: skip
    item.update(changes)
    return item


_SENT = dict(state="succeeded", updated_at=_T2, done_at=_T2,
             result="delivered", provider_id="0100018c-6f0e-4c1a-9d7e-000000000000-000000")
_SMS_ITEM = {
    "id": _SMS_ID, "method": "sms", "state": "awaiting", "sender": {"cell": "+15005550006"},
    "receiver": {"cell": "+14155550100", "name": "Grace"}, "result": "queued", "attempt": 1,
    "retry_delay": None, "queued_at": _T0, "updated_at": _T1, "done_since": _T0,
    "done_at": None, "origin": None, "provider_id": "SM0123456789abcdef0123456789abcdef",
    "resent_from": None, "encoding": "GSM-7", "segments": 1, "priority": "high",
    "send_at": None, "excerpt": "Your code is 123456", "signals": [], "held": None,
}  # fmt: skip
_HISTORY = [
    {"at": _T0, "actor": "producer-service", "source": "server", "kind": "transition",
     "name": "queued", "from_state": None, "to_state": "queued", "attempt": 1, "text": None},
    {"at": _T1, "actor": "vdq", "source": "server", "kind": "transition", "name": "send",
     "from_state": "queued", "to_state": "sending", "attempt": 1, "text": None},
    {"at": _T2, "actor": "ses", "source": "provider", "kind": "transition", "name": "succeed",
     "from_state": "sending", "to_state": "succeeded", "attempt": 1, "text": "delivered"},
]  # fmt: skip
_DETAIL = {
    **_email_item(**_SENT),
    "content": {"subject": "Your order 1042", "text": "Thank you for your order.",
                "html": "<p>Thank you for your order.</p>",
                "to": [{"email": "ada@example.org", "name": "Ada Lovelace"}], "cc": [],
                "reply_to": [{"email": "help@example.com"}]},
    "attachments": [{"id": _FILE_ID, "filename": "invoice-1042.pdf",
                     "content_type": "application/pdf", "size": 48213, "inline": False,
                     "content_id": None, "download_path": f"/attachments/{_FILE_ID}",
                     "purged": False}],
    "history": _HISTORY,
    "history_cursor": None,
}  # fmt: skip

# ada@example.org leaving the list "newsletter" (opaque: vdq.unsubscribe)
_UNSUBSCRIBE_TOKEN = "AuPAXd9s9-aKU16ELW5ZebLhD447FpG2HPNftBeeSKMVn-5Z-dActhpiU9t-m-k3pw"
_SUPPRESSION = {"receiver": "ada@example.org", "channel": "email", "list": None,
                "reason": "bounce",
                "text": "SES bounce (Permanent/General): smtp; 550 5.1.1 user unknown",
                "since": _T0, "actor": "ses"}

REQUESTS: dict[str, Any] = {
    "postEmails": {
        "sender": {"email": "shop@example.com", "name": "Example Shop"},
        "to": [{"email": "ada@example.org", "name": "Ada Lovelace"}],
        "bcc": [{"email": "archive@example.com"}],
        "reply_to": [{"email": "help@example.com"}],
        "subject": "Your order 1042", "text": "Thank you for your order.",
        "html": "<p>Thank you for your order.</p>",
        # A file of POST /attachments/uploads goes here as {"upload_id": ..., "filename": ...}
        # (see that operation): an example cannot name one that exists.
        "attachments": [{"filename": "invoice-1042.pdf", "content_type": "application/pdf",
                         "content_base64": "JVBERi0xLjQK"}],
        "origin": {"type": "shop.order", "id": 1042},
        "priority": "normal", "send_at": "2026-12-03T18:00:00+01:00",
    },
    "postSms": {
        "sender": {"cell": "+15005550006"},
        "to": [{"cell": "+14155550100", "name": "Grace"}],
        "body": "Your code is 123456", "origin": {"type": "auth.login", "id": "8731"},
        "priority": "high",
    },
    "resendSentItems": {"ids": [_ITEM_ID, _OTHER_ID]},
    "postAttachmentUpload": {"filename": "catalogue-2027.pdf", "content_type": "application/pdf",
                             "size": 6815744,
                             "sha256": "LCa0a2j/xo/5m0U8HTBBNBNCLXBkg7+g+YpeiGJm564="},
    "addSuppression": {"receiver": "ada@example.org", "text": "asked by phone, ticket 77"},
    "postUnsubscribe": {"List-Unsubscribe": "One-Click"},
    "twilioInbound": {"MessageSid": "SM89abcdef0123456789abcdef01234567",
                      "From": "+14155550100", "To": "+15005550006", "Body": "STOP"},
    "twilioStatusCallback": {"MessageSid": "SM0123456789abcdef0123456789abcdef",
                             "MessageStatus": "delivered", "AccountSid": "AC0123456789abcdef"},
}  # fmt: skip

PARAMETERS: dict[str, dict[str, Any]] = {
    "postEmails": {"Idempotency-Key": "order-1042-confirmation"},
    "postSms": {"Idempotency-Key": "login-8731-code"},
    "postAttachmentUpload": {"Idempotency-Key": "order-1042-confirmation/file-0-9f86d081884c"},
    "listQueueItems": {"method": "email", "state": "errored", "priority": "bulk",
                       "scheduled": False, "limit": 20, "cursor": _ACTIVE_CURSOR},
    "getQueueItem": {"id": _ITEM_ID},
    "getItemHistory": {"id": _ITEM_ID, "limit": 100, "cursor": _HISTORY_CURSOR},
    "runTransition": {"id": _ITEM_ID, "name": "retry", "dry_run": False},
    "listSentItems": {"method": "sms", "state": "succeeded", "priority": "high", "limit": 20,
                      "cursor": _SENT_CURSOR},
    "getSentItem": {"id": _ITEM_ID},
    "resendSentItem": {"id": _ITEM_ID, "Idempotency-Key": "resend-1042-ops-ticket-77"},
    "resendSentItems": {"Idempotency-Key": "resend-batch-2026-12-03"},
    "getAttachment": {"id": _FILE_ID, "redirect": True},
    "getProducerUsage": {"producer": "4d2kq8v1r7m3n5b0c9x6z2l4ht"},
    "twilioStatusCallback": {"queue_item": _SMS_ID, "attempt": "1",
                             "X-Twilio-Signature": "0/KCTR6DLpKmkAf8muzZqo1nDgQ="},
    "searchItems": {"receiver": "ada@example.org", "origin_type": "shop.order",
                    "origin_id": "1042", "provider_id": "SM0123456789abcdef0123456789abcdef",
                    "sender": "shop@example.com", "id": _ITEM_ID, "since": "2026-12-01",
                    "until": "2026-12-03T23:59:59Z", "method": "email", "state": "succeeded",
                    "priority": "normal", "limit": 20, "cursor": _SEARCH_CURSOR},
    "getStats": {"period": "hours", "method": "email", "breakdown": "producer"},
    "listHeldItems": {"producer": "newsletter-svc", "after": _ITEM_ID, "limit": 20},
    "releaseHold": {"producer": "newsletter-svc"},
    "cancelHeldItems": {"producer": "newsletter-svc"},
    "listSuppressions": {"receiver": "ada@example.org", "channel": "email", "limit": 20,
                         "cursor": _SUPPRESSIONS_CURSOR},
    "removeSuppression": {"receiver": "ada@example.org", "list": "newsletter",
                          "text": "the receiver asked again"},
    "getSuppressionHistory": {"receiver": "ada@example.org"},
    "twilioInbound": {"X-Twilio-Signature": "Qo1nDgQ0/KCTR6DLpKmkAf8muzZ="},
    "getUnsubscribe": {"token": _UNSUBSCRIBE_TOKEN},
    "postUnsubscribe": {"token": _UNSUBSCRIBE_TOKEN},
}  # fmt: skip

_HELD_WHY = ("held since 2026-12-03T07:12:09.000000Z: bounce rate 6.20% (threshold 4%) over "
             "the last 500 emails sent in the window")
_HOLD_LEVEL = {"level": "hold", "reason": _HELD_WHY.split(": ", 1)[1],
               "hold_id": "2026-12-03T07:12:09.000000Z",
               "updated_at": "2026-12-03T07:12:09.000000Z", "released_by": None,
               "released_at": None, "since": None}  # fmt: skip
_RATES = {"producer": "newsletter-svc", "sent": 500, "delivered": 466, "bounced": 31,
          "complained": 0, "rejected": 0, "bounce_rate": 6.2, "complaint_rate": 0.0,
          "rates_count": True, "judged": "hold", "reason": _HOLD_LEVEL["reason"],
          "watched": False,
          "thresholds": {"bounce_warn": 2.5, "bounce_hold": 4.0, "complaint_warn": 0.05,
                         "complaint_hold": 0.08, "min_sent": 200},
          "level": _HOLD_LEVEL, "parked": True}  # fmt: skip

RESPONSES: dict[str, Any] = {
    "postEmails": {"items": [_email_item(send_at=_T_SEND), _email_item(
        _OTHER_ID, receiver={"email": "archive@example.com", "name": None}, send_at=_T_SEND)],
        "suppressed": [{"receiver": "archive@example.com", "reason": "bounce", "since": _T0,
                        "list": None}]},
    "postSms": {"items": [{**_SMS_ITEM, "state": "queued", "result": None, "updated_at": _T0,
                           "provider_id": None}]},
    # The page the example parameters ask for: its cursor goes on with the same filters.
    "listQueueItems": {"items": [_email_item(state="errored", result="the address bounced",
                                             priority="bulk", updated_at=_T1)],
                       "cursor": _ACTIVE_CURSOR},
    "getQueueItem": _DETAIL,
    "getItemHistory": {"entries": _HISTORY[1:], "cursor": None},
    "runTransition": {"transition": "retry", "dry_run": False, "from_state": "errored",
                      "to_state": "queued",
                      "item": _email_item(attempt=2, updated_at=_T2), "suppressed": None},
    "listSentItems": {"items": [_email_item(**_SENT)], "cursor": None},
    "getSentItem": _DETAIL,
    "resendSentItem": {"items": [_email_item(_NEW_ID, origin=None, resent_from=_ITEM_ID,
                                             queued_at=_T2, updated_at=_T2, done_since=_T2)]},
    "resendSentItems": {"items": [
        _email_item(_NEW_ID, origin=None, resent_from=_ITEM_ID, queued_at=_T2,
                    updated_at=_T2, done_since=_T2)]},
    "getAttachment": "https://vdq-attachments.s3.amazonaws.com/files/01JD3Q5W/01JD3Q5W0M?"
                     "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=300",
    "postAttachmentUpload": {
        "upload_id": _UPLOAD_ID,
        "url": f"https://vdq-attachments.s3.eu-west-1.amazonaws.com/uploads/3f9a1c0d/{_UPLOAD_ID}"
               "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=900&X-Amz-SignedHeaders="
               "content-length%3Bcontent-type%3Bhost%3Bx-amz-checksum-sha256%3B"
               "x-amz-meta-filename%3Bx-amz-meta-size",
        "method": "PUT",
        "headers": {"Content-Type": "application/pdf", "Content-Length": "6815744",
                    "x-amz-meta-filename": "catalogue-2027.pdf", "x-amz-meta-size": "6815744",
                    "x-amz-checksum-sha256": "LCa0a2j/xo/5m0U8HTBBNBNCLXBkg7+g+YpeiGJm564="},
        "expires_at": "2026-12-03T08:15:00.000000Z",
    },
    "searchItems": {"items": [_email_item(**_SENT, signals=["complaint"])], "cursor": None},
    "getStats": {
        "period": "hours", "as_of": "2026-12-03T08:00:30Z", "lag_seconds": 70,
        "buckets": [{"start": "2026-12-03T08:00:00.000000Z", "email": {
            "queued": 412, "sent": 409, "delivered": 401, "bounced": 3, "complained": 1,
            "rejected": 0, "errored": 3, "unconfirmed": 0, "cancelled": 2}}],
        "totals": {"email": {"queued": 9120, "sent": 9101, "delivered": 8990, "bounced": 41,
                             "complained": 4, "rejected": 0, "errored": 44, "unconfirmed": 2,
                             "cancelled": 17}},
        "breakdown": [{"name": "4d2kq8v1r7m3n5b0c9x6z2l4ht", "sent": 9101, "delivered": 8990,
                       "bounced": 41, "complained": 4, "rejected": 0}],
    },
    "listProducers": {
        "as_of": "2026-12-03T08:00:30Z", "window_hours": 24, "guard": "hold",
        "account": {**_RATES, "producer": "account", "sent": 9101, "delivered": 8990,
                    "bounced": 41, "complained": 4, "bounce_rate": 0.4505,
                    "complaint_rate": 0.044, "reason": "bounce rate 0.45%, complaint rate "
                    "0.044%", "level": None, "parked": False},
        "producers": [_RATES],
        "ses": {"available": True, "why": None, "bounce_rate": 0.61, "complaint_rate": 0.03},
    },
    "listHeldItems": {"items": [_email_item(held=_HELD_WHY)], "after": None},
    "releaseHold": {"producer": "newsletter-svc", "done": 312, "skipped": 2, "more": False,
                    "level": {**_HOLD_LEVEL, "level": "released",
                              "reason": "released by ops-kim", "updated_at": _T2,
                              "released_by": "ops-kim", "released_at": _T2,
                              "since": "2026-12-03T08"}},
    "cancelHeldItems": {"producer": "newsletter-svc", "done": 312, "skipped": 2, "more": False,
                        "level": _HOLD_LEVEL},
    "listSuppressions": {"suppressions": [_SUPPRESSION], "cursor": None},
    "addSuppression": {"suppression": {**_SUPPRESSION, "reason": "operator",
                                       "text": "asked by phone, ticket 77", "actor": "ops-kim"},
                       "added": True},
    "removeSuppression": {"suppression": _SUPPRESSION},
    "getSuppressionHistory": {"receiver": "ada@example.org", "suppression": _SUPPRESSION,
                              "lists": [{**_SUPPRESSION, "list": "newsletter",
                                         "reason": "unsubscribe", "actor": "receiver",
                                         "text": "one-click unsubscribe", "since": _T1}],
                              "history": [{"at": _T0, "actor": "ses", "action": "added",
                                           "list": None, "reason": "bounce",
                                           "text": _SUPPRESSION["text"]},
                                          {"at": _T1, "actor": "receiver", "action": "added",
                                           "list": "newsletter", "reason": "unsubscribe",
                                           "text": "one-click unsubscribe"}]},
    "twilioInbound": '<?xml version="1.0" encoding="UTF-8"?><Response></Response>',
    "getUnsubscribe": "<!doctype html><html lang=\"en\">... <form method=\"post\" ...>"
                      "<button type=\"submit\">Unsubscribe</button></form> ...</html>",
    "postUnsubscribe": "<!doctype html><html lang=\"en\">... <h1>Unsubscribed</h1> ...</html>",
    "getProducerUsage": {
        "producer": "4d2kq8v1r7m3n5b0c9x6z2l4ht", "counters": "group:vdq-senders",
        "at": "2026-12-03T08:00:30Z",
        "limits": [
            {"limit": "per_minute", "quota": 600, "used": 412, "remaining": 188,
             "resets_at": "2026-12-03T08:01:00Z"},
            {"limit": "per_day", "quota": 100000, "used": 61520, "remaining": 38480,
             "resets_at": "2026-12-04T00:00:00Z"},
        ],
    },
    "health": {"status": "ok"},
    "openapi": {"openapi": "3.1.0", "info": {"title": "VDQ", "version": "1.0.0"}},
}  # fmt: skip
