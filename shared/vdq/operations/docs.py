"""The prose and the declarations of the OpenAPI document around the operation table: where the
API is, how to get a token, which errors come back and why, and the idempotency rules.

Imported only by the generator (vdq.openapi). Every number and name is imported from the code
that enforces or defines it (settings defaults, vdq.api, vdq.resources, vdq.intake, the
workflow), so the document cannot drift from the server.
"""

from __future__ import annotations

from typing import Any

from vdq import api, resources
from vdq.errors import VdqError
from vdq.settings import DEFAULT_GROUP_PERMISSIONS, Settings
from vdq.workflow import TRANSITIONS

_DEFAULTS = Settings()
IDEMPOTENCY_HEADER = "Idempotency-Key"

CONTACT = {"name": "VDQ maintainers (see SECURITY.md to report a vulnerability privately)"}
# The project grants no license; say so rather than guess one.
LICENSE = {"name": "Proprietary: no license is granted", "identifier": "LicenseRef-Proprietary"}

TAGS = [
    {"name": "messages", "description": "Queue emails and SMS. One request becomes one queue "
     "item per receiver; each item is sent and tracked on its own."},
    {"name": "queue-items", "description": "The active queue: items not yet done (queued, "
     "sending, awaiting, delayed, errored), and the operator's retry and cancel."},
    {"name": "sent-items", "description": "Done items (succeeded, cancelled, unconfirmed), and "
     "sending them again as new items."},
    {"name": "attachments", "description": "The files of emails, downloaded through "
     "short-lived presigned URLs; large files are uploaded through them too."},
    {"name": "suppressions", "description": "The suppression list: receivers VDQ does not "
     "send to (hard bounces, complaints, SMS opt-outs, unsubscribes, operators' entries), one "
     "list per deployment, with each receiver's history."},
    {"name": "webhooks", "description": "Calls from providers (Twilio's status callback and "
     "inbound messages), authenticated by the provider's signature instead of a token."},
    {"name": "producers", "description": "What each producer enqueued against its quota "
     "(VDQ_PRODUCER_QUOTAS)."},
    {"name": "unsubscribe", "description": "One-click unsubscribe (RFC 8058): the signed "
     "links bulk emails carry, for their receivers; no token."},
    {"name": "service", "description": "Readiness and this document; no token needed."},
]  # fmt: skip

STATE_TEXT = (
    "Where an item is in the workflow: `queued` (waiting for a worker), `sending` (a worker "
    "is sending it), `awaiting` (the provider took it; waiting for the outcome), `delayed` "
    "(a transient failure; retried automatically after retry_delay), `errored` (failed; an "
    "operator may retry or cancel it); done: `succeeded`, `cancelled`, `unconfirmed` (an SMS "
    "whose outcome never came)."
)
SUCCESS = {
    "postEmails": "The items queued, one per distinct receiver.",
    "postSms": "The items queued, one per distinct receiver.",
    "listQueueItems": "One page of active items.",
    "getQueueItem": "The item with its content, attachments and history.",
    "getItemHistory": "One page of the item's history.",
    "runTransition": "The transition ran (or, with dry_run, would run).",
    "listSentItems": "One page of done items.",
    "getSentItem": "The done item with its content, attachments and history.",
    "resendSentItem": "The new item, queued.",
    "resendSentItems": "The new items, queued, in the order of the ids.",
    "getProducerUsage": "The producer's limits and its use of each current window.",
    "getAttachment": "Redirect to the file's presigned URL.",
    "postAttachmentUpload": "Where to PUT the file, and the upload_id an email names it by.",
    "twilioStatusCallback": "Taken: applied, recorded, or dropped as late, repeated or unknown.",
    "listSuppressions": "One page of the suppression list.",
    "addSuppression": "The receiver's suppression.",
    "removeSuppression": "The suppression removed.",
    "getSuppressionHistory": "The receiver's suppression and history.",
    "twilioInbound": "Taken: empty TwiML (Twilio sends its own confirmation).",
    "getUnsubscribe": "The confirmation page (HTML) with its button.",
    "postUnsubscribe": "Unsubscribed (an HTML page saying so).",
    "health": "Ready.",
    "openapi": "This document.",
}
BODIES = {
    "EmailRequest": "The email and its receivers.",
    "SmsRequest": "The SMS and its receivers.",
    "ResendRequest": "The done items to send again.",
    "UploadRequest": "The file to upload: name, MIME type and size.",
    "TwilioStatus": "Twilio's form, signed with X-Twilio-Signature.",
    "TwilioInbound": "Twilio's incoming-message form, signed with X-Twilio-Signature.",
    "SuppressionRequest": "The receiver to suppress, and why.",
}

_STATUS = {
    400: "Bad request (`bad_request`): the body is not JSON or not UTF-8, the Idempotency-Key "
         "is malformed, or a cursor is not one of this list (details.field says which).",
    404: "Not found (`not_found`): {what}.",
    409: "Not possible now: {what}.",
    410: "Gone (`purged`): cleanup deleted the file; its metadata stays.",
    422: "Invalid input (`invalid`): details.field names the field, e.g. `to[2].email`.",
}
_DISPATCH_400 = (
    "; or `priority` or `send_at` takes a value it may not (`invalid`, details.field names it: "
    "a priority other than high, normal and bulk; a send_at that is not RFC 3339 with an "
    "offset, or more than VDQ_MAX_SCHEDULE_DAYS ahead)"
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
    "stored), or over the stage's rate (`throttled`). Try again after Retry-After seconds."
)
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
    "getUnsubscribe": "the token is not a valid unsubscribe token of this deployment",
    "postUnsubscribe": "the token is not a valid unsubscribe token of this deployment",
    "getProducerUsage": "no quota applies to this producer",
}
_CONFLICT = {
    "postEmails": "a request with this Idempotency-Key is still in progress (`conflict`)",
    "postSms": "a request with this Idempotency-Key is still in progress (`conflict`)",
    "runTransition": "the item's state is no source of the transition "
                     "(`invalid_transition`; details.state)",
    "resendSentItem": "cleanup deleted the item's files (`conflict`, details.reason "
                      "`attachments_purged`), or a request with this Idempotency-Key is still "
                      "in progress",
    "resendSentItems": "cleanup deleted the files of some items (`conflict`, details.ids and "
                       "details.reason `attachments_purged`), or a request with this "
                       "Idempotency-Key is still in progress",
}  # fmt: skip
STATUS_TEXT: dict[int, dict[str, str]] = {
    503: {
        "health": "Not ready yet (the local stack while it starts).",
        "enqueue": "Partly queued (`partially_enqueued`): the store failed after some items "
                   "were stored. Those (details.accepted) will be sent; send the receivers in "
                   "details.rejected again, in a new request.",
        "other": "Try again (`contention`): others kept changing the item.",
    },
}  # fmt: skip


def status_text(status: int, op: Any) -> str:
    if status == 404:
        return _STATUS[404].format(what=_NOT_FOUND[op.id])
    if status == 409:
        return _STATUS[409].format(what=_CONFLICT[op.id])
    if status == 503:
        return STATUS_TEXT[503]["other"]
    if status == 403 and op.id in ("twilioStatusCallback", "twilioInbound"):
        return "Forbidden (`forbidden`): the Twilio signature is missing or does not match."
    if status == 400 and op.id in ("twilioStatusCallback", "twilioInbound"):
        return "Bad request (`bad_request`): the body is not a form."
    if status == 422 and op.id in ("resendSentItem", "resendSentItems") and op.body is None:
        return "Invalid (`invalid`): the Idempotency-Key was used with another request."
    if status == 400 and op.id == "postSms":
        return _SMS_400
    if status == 400 and op.id == "postEmails":
        return _EMAIL_400
    if status == 429 and op.id in ("postEmails", "postSms"):
        return QUOTA_429
    return _STATUS[status]


# ---- idempotency -----------------------------------------------------------------------------


def _idempotency_schema() -> dict[str, Any]:
    from vdq.intake import MAX_IDEMPOTENCY_KEY

    # Printable ASCII (what HTTP carries), not starting or ending with a space (HTTP drops it).
    return {"type": "string", "minLength": 1, "maxLength": MAX_IDEMPOTENCY_KEY,
            "pattern": "^[\\x21-\\x7e](?:[\\x20-\\x7e]*[\\x21-\\x7e])?$"}  # fmt: skip


IDEMPOTENCY_KEY_SCHEMA = _idempotency_schema()
_HOURS = _DEFAULTS.idempotency_seconds / 3600
IDEMPOTENCY_RULES = (
    f"Rules: 1 to {IDEMPOTENCY_KEY_SCHEMA['maxLength']} printable characters (a malformed key "
    "is a 400). A key belongs to the caller (the token's subject) and the operation: other "
    "callers may use the same key. Repeating a request with the same key and the same body "
    "within VDQ_IDEMPOTENCY_SECONDS of the first (default "
    f"{_DEFAULTS.idempotency_seconds:,} s, {_HOURS:g} h) returns the first request's answer "
    "and does nothing again; while the first is still running the repeat is a 409 `conflict`; "
    "the same key with another body is a 422 `invalid` naming `Idempotency-Key`. A request "
    "refused as invalid, or one that failed (5xx, including 503 `partially_enqueued`), does "
    "not keep the key: after a partial enqueue, send the rejected receivers with a new key."
)


# ---- permissions and security ----------------------------------------------------------------


def transition_permissions() -> dict[str, str]:
    return {n: t.permission for n, t in TRANSITIONS.items() if t.permission is not None}


def _groups_for(op: Any) -> list[str]:
    needed = set(op.permissions)
    extra = set(transition_permissions().values()) if op.id == "runTransition" else set()
    return [g for g, perms in DEFAULT_GROUP_PERMISSIONS.items()
            if needed <= set(perms) and (not extra or extra & set(perms))]  # fmt: skip


def _scope(group: str) -> str:
    return f"{resources.API_RESOURCE_SERVER}/{group}"


def security(op: Any) -> list[dict[str, list[str]]]:
    return [{"bearer": []}, {"oauth2": [_scope(g) for g in _groups_for(op)]}]


def permission_text(op: Any) -> str:
    if op.id in ("twilioStatusCallback", "twilioInbound"):
        return "Permission: none (public), but only requests Twilio signed are taken."
    if op.id in ("getUnsubscribe", "postUnsubscribe"):
        return "Permission: none (public): the signed token in the path is the authority."
    if not op.permissions:
        return "Permission: none (public, no token)."
    needed = ", ".join(f"`{p}`" for p in op.permissions)
    groups = ", ".join(f"`{g}`" for g in _groups_for(op))
    text = f"Permission: needs {needed}"
    if op.id == "runTransition":
        text += " and the transition's own (" + ", ".join(
            f"`{n}`: `{p}`" for n, p in transition_permissions().items()) + ")"
    return (f"{text} (x-vdq-permissions). With the default VDQ_GROUP_PERMISSIONS the groups "
            f"{groups} have it; a machine client needs one of their scopes.")  # fmt: skip


def security_schemes() -> dict[str, Any]:
    from vdq.settings import ALL_PERMISSIONS

    assert ALL_PERMISSIONS  # the scopes stand for groups, each a set of these
    scopes = {_scope(g): f"act as a member of {g}: {', '.join(p)}"
              for g, p in DEFAULT_GROUP_PERMISSIONS.items()}  # fmt: skip
    domain = f"https://{resources.API_DOMAIN_PREFIX}-{{accountId}}.auth.{{region}}.amazoncognito.com"
    return {
        "bearer": {
            "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
            "description": "A Cognito access token: a signed-in user's (its cognito:groups "
            "claim names the groups) or the machine client's (its scopes "
            f"`{resources.API_RESOURCE_SERVER}/<group>` stand for groups). Groups map to "
            "permissions through VDQ_GROUP_PERMISSIONS. On the local stack: a token from "
            "`vdq token --groups <group,...>`.",
        },
        "oauth2": {
            "type": "oauth2",
            "description": "Producing services: the client-credentials flow of the stack's "
            "machine client (outputs MachineClientId and TokenUrl; the client secret is read "
            "from Cognito). The token URL is the stack's Cognito domain, "
            f"`{domain}/oauth2/token`: put the account id and region in. The client may ask "
            "for the scopes of the groups in the deployment's vdq:machineScopes (default "
            "vdq-senders); send the access token as a bearer token.",
            "flows": {"clientCredentials": {"tokenUrl": f"{domain}/oauth2/token",
                                            "scopes": scopes}},
        },
    }  # fmt: skip


def servers() -> list[dict[str, Any]]:
    from vdq.local.stack import DEFAULT_PORT

    return [
        {"url": "https://{restApiId}.execute-api.{region}.amazonaws.com/{stage}",
         "description": "A deployment (the stack output ApiUrl).",
         "variables": {
             "restApiId": {"default": "abcdef1234", "description": "The REST API's id."},
             "region": {"default": "us-east-1", "description": "The AWS region deployed to."},
             "stage": {"default": resources.API_STAGE, "enum": [resources.API_STAGE],
                       "description": "The stage."}}},
        {"url": "http://127.0.0.1:{port}",
         "description": "The local stack (`make run`, or `vdq local --port N`).",
         "variables": {"port": {"default": str(DEFAULT_PORT),
                                "description": "The port `vdq local` serves on."}}},
    ]  # fmt: skip


# ---- errors ----------------------------------------------------------------------------------

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
    "not_found": "no such item, attachment, suppression, unsubscribe token or route",
    "conflict": "not possible now (a request in progress, files deleted)",
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
    import vdq.attachments
    import vdq.quotas
    import vdq.results
    import vdq.store  # noqa: F401  (their VdqError subclasses)

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


def overview() -> str:
    return (
        "VDQ queues outbound email (sent through Amazon SES) and SMS (through Twilio) for "
        "producing services, and lets operators follow, retry, cancel and resend each message."
        "\n\nOne request queues one item per receiver; each item moves through the workflow "
        "queued → sending → awaiting → succeeded (or delayed, errored, cancelled, "
        "unconfirmed) on its own. The lists page with opaque cursors.\n\n"
        "**Authentication**: a Cognito access token as `Authorization: Bearer <token>` on "
        "every operation but health, this document and the Twilio callback. Each operation "
        "names the permissions it needs (`x-vdq-permissions`); groups map to permissions "
        "through VDQ_GROUP_PERMISSIONS.\n\n"
        "**Errors** have one shape, from the functions and from API Gateway alike: "
        '`{"error": {"code", "message", "details"?}}`; `code` is one of the enum of '
        "ErrorDetail.code. 429 carries Retry-After.\n\n"
        f"**Idempotency**: POST /emails, POST /sms and the resends take an "
        f"`{IDEMPOTENCY_HEADER}` header. {IDEMPOTENCY_RULES}\n\n"
        "**Limits** are declared on each field (lengths, counts, patterns); the ones a "
        "deployment sets are given with their defaults: VDQ_MAX_RECEIVERS "
        f"({_DEFAULTS.max_receivers}), VDQ_MAX_ATTACHMENT_BYTES "
        f"({_DEFAULTS.max_attachment_bytes:,} bytes of files per email), "
        f"VDQ_SMS_MAX_SEGMENTS ({_DEFAULTS.sms_max_segments} segments per SMS body), and a "
        "request "
        f"of at most {api.LAMBDA_MAX_PAYLOAD_BYTES // 1024 // 1024} MiB as Lambda gets it "
        "(body and context; about 4.5 MB of inline files): larger files go through "
        "POST /attachments/uploads."
    )
