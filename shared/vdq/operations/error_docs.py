"""The errors of the OpenAPI document: each operation's error statuses in words, every error
code a caller can get with its meaning, and API Gateway's own responses.

Generator-only, like vdq.operations.docs (which re-exports it). The codes are collected from the
VdqError classes and the handlers' direct answers, so a new code cannot go undocumented.
"""

from __future__ import annotations

from typing import Any

from vdq import api
from vdq.core.errors import VdqError

_STATUS = {
    400: "Bad request (`bad_request`): the body is not JSON or not UTF-8, the Idempotency-Key "
         "is malformed, or a cursor is not one of this list (details.field says which).",
    404: "Not found (`not_found`): {what}.",
    409: "Not possible now: {what}.",
    410: "Gone (`purged`): cleanup deleted the file; its metadata stays.",
    422: "Invalid input (`invalid`): details.field names the field, e.g. `to[2].email`.",
}
_ENQUEUE_422 = (
    "Invalid input (`invalid`): details.field names the field, e.g. `to[2].email`; also a "
    "`send_at` more than VDQ_MAX_SCHEDULE_DAYS ahead, the limit its description states; or "
    "more receivers than one of the producer's quota limits takes at all (details.field "
    "`to`, with details.producer, details.limit, details.quota and details.requested): no "
    "wait makes it fit, split the request."
)
_DISPATCH_400 = (
    "; or `priority` or `send_at` takes a value it may not (`invalid`, details.field names it: "
    "a priority other than high, normal and bulk; a send_at that is not RFC 3339 with an "
    "offset)"
)
_SMS_400 = (
    "Bad request: the body is not JSON or not UTF-8, or the Idempotency-Key is malformed "
    "(`bad_request`); or the SMS body takes more segments than VDQ_SMS_MAX_SEGMENTS allows "
    "(`too_many_segments`: details.field `body`, details.segments, details.limit and "
    f"details.encoding){_DISPATCH_400}."
)
_EMAIL_400 = (
    "Bad request: the body is not JSON or not UTF-8, or the Idempotency-Key is malformed "
    f"(`bad_request`){_DISPATCH_400}."
)
QUOTA_429 = (
    "Too many requests: over the producer's quota (`quota_exceeded`: details.limit names the "
    "limit, `per_second`, `per_minute` or `per_day`, with details.quota, details.used and "
    "details.requested; a request counts one item per receiver and is refused whole, nothing "
    "stored; one larger than a limit is a 422), or over the stage's rate (`throttled`). Try "
    "again after Retry-After seconds."
)
_QUOTA_OTHER = (
    "Too many requests: over the caller's own quota (`quota_exceeded`: details.producer, "
    "details.limit, details.quota, details.used and details.requested; {what}, refused "
    "whole, nothing stored), or over the stage's rate (`throttled`). Try again after "
    "Retry-After seconds."
)
QUOTA_429_OTHER = {
    "postAttachmentUpload": _QUOTA_OTHER.format(what="an upload counts one queue item"),
    "resendSentItem": _QUOTA_OTHER.format(what="a copy counts one queue item"),
    "resendSentItems": _QUOTA_OTHER.format(what="each copy counts one queue item"),
}
_NOT_FOUND = {
    "getQueueItem": "no item has this id",
    "getItemHistory": "no item has this id",
    "getSentItem": "no item has this id, or it is not done (details.state)",
    "runTransition": "no item has this id",
    "resendSentItem": "no item has this id, or it is not done",
    "resendSentItems": "some ids are unknown or not done; details.ids lists them",
    "getAttachment": "no attachment has this id",
    "removeSuppression": "the receiver is not on the suppression list",
    "getSuppressionHistory": "the receiver has never been on the suppression list",
    "getUnsubscribe": "the token is not a valid unsubscribe token of this deployment (cut "
                      "short, edited, or sealed with a retired key)",
    "postUnsubscribe": "the token is not a valid unsubscribe token of this deployment (cut "
                       "short, edited, or sealed with a retired key); nothing changed",
    "getProducerUsage": "no quota applies to this producer",
    "releaseHold": "the producer is not held, was never released and has nothing parked",
}
_CONFLICT = {
    "postEmails": "a request with this Idempotency-Key is still in progress (`conflict`): "
                  "repeat it after Retry-After seconds to get its answer",
    "postSms": "a request with this Idempotency-Key is still in progress (`conflict`): "
               "repeat it after Retry-After seconds to get its answer",
    "runTransition": "the item's state is no source of the transition "
                     "(`invalid_transition`; details.state), or a retry's item has no content "
                     "left to send (`conflict`, details.reason `content_expired`)",
    "resendSentItem": "cleanup deleted the item's files (`conflict`, details.reason "
                      "`attachments_purged`) or its content expired (`content_expired`), or "
                      "a request with this Idempotency-Key is still in progress (repeat it "
                      "after Retry-After seconds)",
    "resendSentItems": "cleanup deleted the files of some items (`conflict`, details.ids and "
                       "details.reason `attachments_purged`) or their content expired "
                       "(`content_expired`), or a request with this Idempotency-Key is still "
                       "in progress (repeat it after Retry-After seconds)",
    "releaseHold": "the producer's hold changed while it was read (`conflict`): read it and "
                   "try again",
}  # fmt: skip
_NOTHING_STORED = (
    "Or nothing was stored: try again (`contention`: DynamoDB kept refusing the charge of the "
    "producer's quota counters, as more requests of one producer than their records' partitions "
    "take make it (VDQ_QUOTA_SHARDS); `store_unavailable`: the store refused the items)."
)
_COUNTERS_BUSY = "Try again (`contention`): {what}."
STATUS_TEXT: dict[int, dict[str, str]] = {
    503: {
        "health": "Not ready yet (the local stack while it starts).",
        "enqueue": "Partly queued (`partially_enqueued`): the store failed after some items "
                   "were stored. Those (details.accepted) will be sent; send the receivers in "
                   f"details.rejected again, in a new request. {_NOTHING_STORED}",
        "other": "Try again (`contention`): others kept changing the item.",
        "postAttachmentUpload": _COUNTERS_BUSY.format(
            what="DynamoDB kept refusing the charge of the quota counters, as more requests of "
                 "one producer than their records' partitions take make it (VDQ_QUOTA_SHARDS); "
                 "nothing counted, no URL"),
        "getProducerUsage": _COUNTERS_BUSY.format(
            what="DynamoDB kept refusing the read of the quota counters (throttling)"),
        "getStats": _COUNTERS_BUSY.format(
            what="DynamoDB kept leaving the hourly counters unread (throttling)"),
        "listProducers": _COUNTERS_BUSY.format(
            what="DynamoDB kept leaving the hourly counters unread (throttling)"),
        "releaseHold": _COUNTERS_BUSY.format(
            what="DynamoDB kept refusing a write (a send of the same item meanwhile, or "
                 "throttling) or leaving the hour's counters unread; the items sent so far "
                 "stay sent, call it again for the rest"),
        "cancelHeldItems": _COUNTERS_BUSY.format(
            what="DynamoDB kept refusing a write (a send of the same item meanwhile, or "
                 "throttling); the items cancelled so far stay cancelled, call it again for "
                 "the rest"),
        "getUnsubscribe": "Try again after Retry-After seconds (a short HTML page): the "
                          "unsubscribe key could not be read.",
        "postUnsubscribe": "Try again after Retry-After seconds (a short HTML page): the store "
                           "failed (DynamoDB throttling or unavailable) or the unsubscribe key "
                           "could not be read, and nothing changed. Mail clients retry a "
                           "one-click POST answered so.",
    },
}  # fmt: skip


def status_text(status: int, op: Any) -> str:
    if status == 404 and op.media == "text/html":  # the unsubscribe link: its reader's page
        return f"Not a valid link (a short HTML page saying so): {_NOT_FOUND[op.id]}."
    if status == 404:
        return _STATUS[404].format(what=_NOT_FOUND[op.id])
    if status == 409:
        return _STATUS[409].format(what=_CONFLICT[op.id])
    if status == 503:
        return STATUS_TEXT[503].get(op.id, STATUS_TEXT[503]["other"])
    if status == 403 and op.id in ("twilioStatusCallback", "twilioInbound"):
        return "Forbidden (`forbidden`): the Twilio signature is missing or does not match."
    if status == 400 and op.id == "postUnsubscribe":
        return ("Not a one-click POST: the body is not `List-Unsubscribe=One-Click` as a form "
                "(RFC 8058). Nothing changed; the answer is the confirmation page, whose "
                "button sends that body.")
    if status == 400 and op.id in ("twilioStatusCallback", "twilioInbound"):
        return "Bad request (`bad_request`): the body is not a form."
    if status == 422 and op.id in ("resendSentItem", "resendSentItems") and op.body is None:
        return "Invalid (`invalid`): the Idempotency-Key was used with another request."
    if status == 400 and op.id == "postSms":
        return _SMS_400
    if status == 400 and op.id == "postEmails":
        return _EMAIL_400
    if status == 422 and op.id in ("postEmails", "postSms"):
        return _ENQUEUE_422
    if status == 422 and op.id == "resendSentItems":
        return ("Invalid input (`invalid`): details.field names the field; the "
                "Idempotency-Key was used with another request; or more ids than one of the "
                "caller's quota limits takes at all (details.field `ids`, with "
                "details.producer, details.limit, details.quota and details.requested): no "
                "wait makes it fit, split the request.")
    if status == 422 and op.id == "getAttachment":
        return ("Invalid input (`invalid`): a query parameter that is not one of the "
                "operation's or is given more than once, or `redirect` other than true or "
                "false (details.field names it).")
    if status == 422 and op.method == "GET" and not any(p.where == "query" for p in op.params):
        receiver = any(p.name == "receiver" for p in op.params)
        return ("Invalid input (`invalid`): a query parameter, which this operation takes none "
                "of" + (", or a receiver that is neither an email address nor an E.164 number"
                        if receiver else "") + " (details.field names it).")
    if status == 422 and op.body is None and any(p.where == "query" for p in op.params):
        return ("Invalid input (`invalid`): a query parameter that is not one of the "
                "operation's, is given more than once, or has a value it may not take "
                "(details.field names it).")
    if status == 429 and op.id in ("postEmails", "postSms"):
        return QUOTA_429
    if status == 429 and op.id in QUOTA_429_OTHER:
        return QUOTA_429_OTHER[op.id]
    return _STATUS[status]


# ---- error codes and the gateway's responses ---------------------------------------------

# Codes of VdqError subclasses that never reach a caller: each is handled where it is raised.
INTERNAL_CODES = {
    "bad_event": "a malformed provider event, dropped with a log line",
    "provider_id_taken": "a provider ID already mapped, resolved inside the store",
    "duplicate_event": "a provider event seen before, a no-op",
}
# Codes the handlers and the local front write directly (not through a VdqError).
_DIRECT_CODES = {
    "method_not_allowed": "the path exists, but not with this method",
    "function_missing": "(local stack) the function's module is missing",
    "function_error": "(local stack) the function raised",
    "bad_function_response": "(local stack) the function answered no status",
}
_CODE_TEXT = {
    "quota_exceeded": "the request would pass its producer's quota (details.limit); nothing "
                      "was stored: try again after Retry-After seconds",
    "internal_error": "the function failed unexpectedly; try again",
    "bad_setting": "the deployment's settings are invalid",
    "invalid": "invalid input; details.field names the field",
    "bad_request": "the body, a header or a cursor cannot be read",
    "unauthorized": "no valid bearer token",
    "forbidden": "a permission is missing, or the transition is the server's own",
    "not_found": "no such item, attachment, suppression or route",
    "conflict": "not possible now (a request in progress, files deleted, content expired)",
    "invalid_transition": "the item's state is no source of the transition",
    "contention": "others kept changing the item; try again",
    "partially_enqueued": "some items were stored, some not (details.accepted, rejected)",
    "purged": "the attachment's file was deleted by cleanup",
    "store_unavailable": "the store refused the write and nothing was stored; send it again",
    "too_large": "the body, or the content it would store, is over a limit the message names",
    "too_many_segments": "the SMS body takes more segments than VDQ_SMS_MAX_SEGMENTS allows "
                         "(details.segments, details.limit)",
}


def _api_error_codes() -> set[str]:
    # The modules that define a VdqError subclass a caller can get (the codes are found by
    # walking the subclasses, so a module not imported here would drop its code from the enum,
    # and which one depended on what the process happened to import first).
    import vdq.intake.quotas
    import vdq.operations.downloads
    import vdq.store  # noqa: F401

    seen: set[str] = set()
    todo: list[type[VdqError]] = [VdqError]
    while todo:
        kind = todo.pop()
        seen.add(kind.code)
        todo.extend(kind.__subclasses__())
    return seen - set(INTERNAL_CODES)


def error_codes() -> dict[str, str]:
    """Every error.code a caller can get, with its meaning."""
    codes = {c: _CODE_TEXT[c] for c in _api_error_codes()}
    codes.update(_DIRECT_CODES)
    for g in api.GATEWAY_ERRORS:
        codes.setdefault(g.code, f"(API Gateway) {g.meaning}")
    return codes


def error_code_text() -> str:
    lines = [f"- `{c}`: {t}" for c, t in sorted(error_codes().items())]
    return "What kind of error:\n" + "\n".join(lines)


_GATEWAY_RESPONSES = {
    "Unauthorized": (401, "UNAUTHORIZED", "No valid bearer token (`unauthorized`), from API "
                     "Gateway's authorizer or the function."),
    "Forbidden": (403, "ACCESS_DENIED", "Not allowed (`forbidden`): a permission the operation "
                  "needs is missing (the message names it)."),
    "TooLarge": (413, "REQUEST_TOO_LARGE", "The request is too large (`too_large`): API Gateway "
                 f"takes at most {api.GATEWAY_MAX_BODY_BYTES // 1024 // 1024} MB, and Lambda "
                 f"an event of {api.LAMBDA_MAX_PAYLOAD_BYTES // 1024 // 1024} MiB (the body "
                 "and the request's context): upload large files through "
                 "postAttachmentUpload."),
    "Throttled": (429, "THROTTLED", "Too many requests (`throttled`): over the stage's rate; "
                  "try again after Retry-After seconds."),
    "ServerError": (500, "DEFAULT_5XX", "The function failed (`internal_error`); try again."),
    "BadGateway": (502, "DEFAULT_5XX", "The function failed or answered nothing API Gateway "
                   "could read (`gateway_error`; on the local stack `function_error`)."),
    "GatewayTimeout": (504, "INTEGRATION_TIMEOUT", "The function did not answer in time "
                       "(`timeout`); the request may still take effect: repeat it with the "
                       "same Idempotency-Key where the operation takes one."),
}  # fmt: skip


def gateway_responses() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (_, response_type, text) in _GATEWAY_RESPONSES.items():
        assert response_type in api.GATEWAY_BY_TYPE
        out[name] = {"description": text,
                     "content": {"application/json": {"schema":
                                                      {"$ref": "#/components/schemas/Error"}}}}
    out["Throttled"]["headers"] = {"Retry-After": {
        "description": "Seconds to wait before trying again.",
        "schema": {"type": "integer", "minimum": 0},
        "example": api.THROTTLE_RETRY_AFTER_SECONDS}}
    return out  # fmt: skip


def gateway_statuses(op: Any) -> dict[int, str]:
    """The statuses API Gateway (or a failing function) can answer for ``op``."""
    names = ["Throttled", "ServerError", "BadGateway", "GatewayTimeout"]
    if not op.public:
        names += ["Unauthorized", "Forbidden"]
    if op.body:
        names.append("TooLarge")
    return {_GATEWAY_RESPONSES[n][0]: n for n in names}
