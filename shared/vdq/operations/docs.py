"""The prose and the declarations of the OpenAPI document around the operation table: where the
API is, how to get a token, what each success and body is, and the idempotency rules (the
errors are vdq.operations.error_docs', re-exported here).

Imported only by the generator (vdq.openapi). Every number and name is imported from the code
that enforces or defines it (settings defaults, vdq.api, vdq.core.resources, vdq.intake.rest, the
workflow), so the document cannot drift from the server.
"""

from __future__ import annotations

from typing import Any

from vdq import api
from vdq.core import resources
from vdq.core.settings import DEFAULT_GROUP_PERMISSIONS, Settings
from vdq.operations.error_docs import (  # noqa: F401  (re-exported for vdq.openapi)
    INTERNAL_CODES,
    STATUS_TEXT,
    error_code_text,
    error_codes,
    gateway_responses,
    gateway_statuses,
    status_text,
)
from vdq.workflow.table import TRANSITIONS

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
    {"name": "search", "description": "Any item, active or done, by receiver, origin, "
     "provider ID, sender, id or time, newest first: from an index or the stream's postings, "
     "never a scan of the table."},
    {"name": "stats", "description": "How many items entered each state per hour or per day, "
     "and each producer's and sender identity's sending reputation, counted from the table's "
     "stream."},
    {"name": "attachments", "description": "The files of emails, downloaded through "
     "short-lived presigned URLs; large files are uploaded through them too."},
    {"name": "suppressions", "description": "The suppression list: receivers VDQ does not "
     "send to (hard bounces, complaints, SMS opt-outs, unsubscribes, operators' entries), one "
     "list per deployment, with each receiver's history."},
    {"name": "webhooks", "description": "Calls from providers (Twilio's status callback and "
     "inbound messages), authenticated by the provider's signature instead of a token."},
    {"name": "producers", "description": "What each producer enqueued against its quota "
     "(VDQ_PRODUCER_QUOTAS), and the reputation guard: each producer's bounce and complaint "
     "rates, the holds they caused, and their release."},
    {"name": "unsubscribe", "description": "One-click unsubscribe (RFC 8058): the signed "
     "links bulk emails carry, for their receivers; no token."},
    {"name": "service", "description": "Readiness and this document; no token needed."},
]  # fmt: skip

STATE_TEXT = (
    "Where an item is in the workflow: `queued` (waiting for a worker), `sending` (a worker "
    "is sending it), `awaiting` (the provider took it; waiting for the outcome), `delayed` "
    "(a transient failure; retried automatically after retry_delay), `errored` (failed; an "
    "operator may retry or cancel it); done: `succeeded`, `cancelled`, `unconfirmed` (no final "
    "outcome came from the provider within the SMS or email timeout)."
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
    "listProducers": "Each producer's rates, thresholds and level; the account's; SES's.",
    "listHeldItems": "One page of the producer's parked items.",
    "releaseHold": "The hold is released; what was sent again.",
    "cancelHeldItems": "What was cancelled.",
    "getAttachment": "Redirect to the file's presigned URL.",
    "postAttachmentUpload": "Where to PUT the file, and the upload_id an email names it by.",
    "twilioStatusCallback": "Taken: applied, recorded, or dropped as late, repeated or unknown.",
    "searchItems": "One page of the items found, newest first.",
    "getStats": "The counts of each bucket, oldest first, and their totals.",
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
    "OneClickUnsubscribe": "`List-Unsubscribe=One-Click` (RFC 8058), as "
                           "application/x-www-form-urlencoded or multipart/form-data: what a "
                           "mail client and the page's button send.",
    "SuppressionRequest": "The receiver to suppress, and why.",
}

# ---- idempotency -----------------------------------------------------------------------------


def _idempotency_schema() -> dict[str, Any]:
    from vdq.intake.rest import IDEMPOTENCY_KEY_PATTERN, MAX_IDEMPOTENCY_KEY

    # Printable ASCII (what HTTP carries), not starting or ending with a space (HTTP drops it).
    return {"type": "string", "minLength": 1, "maxLength": MAX_IDEMPOTENCY_KEY,
            "pattern": IDEMPOTENCY_KEY_PATTERN}  # fmt: skip


IDEMPOTENCY_KEY_SCHEMA = _idempotency_schema()
_HOURS = _DEFAULTS.idempotency_seconds / 3600
IDEMPOTENCY_RULES = (
    f"Rules: 1 to {IDEMPOTENCY_KEY_SCHEMA['maxLength']} printable characters (a malformed key "
    "is a 400). A key belongs to the caller (the token's subject) and the operation: other "
    "callers may use the same key. Repeating a request with the same key and the same body "
    "within VDQ_IDEMPOTENCY_SECONDS of the first (default "
    f"{_DEFAULTS.idempotency_seconds:,} s, {_HOURS:g} h) returns the first request's answer "
    "and does nothing again; while the first is still running the repeat is a 409 `conflict` "
    "with Retry-After, after which a repeat gets the first answer; "
    "the same key with another body is a 422 `invalid` naming `Idempotency-Key`. A request "
    "refused (4xx), or one that failed with nothing stored (5xx), does not keep the key. A 503 "
    "`partially_enqueued` keeps the key: a repeat answers the same 503 and stores nothing, so "
    "send the rejected receivers in a new request with a new key."
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


_EXAMPLE_ACCOUNT = "123456789012"
_EXAMPLE_REGION = "us-east-1"


def security_schemes() -> dict[str, Any]:
    from vdq.core.settings import ALL_PERMISSIONS

    assert ALL_PERMISSIONS  # the scopes stand for groups, each a set of these
    scopes = {_scope(g): f"act as a member of {g}: {', '.join(p)}"
              for g, p in DEFAULT_GROUP_PERMISSIONS.items()}  # fmt: skip
    # The form of a deployment's Cognito domain (infra/api.py): the operator function serves
    # the document with its own (VDQ_CONSOLE_AUTH_URL) in place of this one.
    domain = (f"https://{resources.API_DOMAIN_PREFIX}-{_EXAMPLE_ACCOUNT}.auth.{_EXAMPLE_REGION}"
              ".amazoncognito.com")  # fmt: skip
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
            "from Cognito). The token URL is the stack's Cognito domain's `/oauth2/token`. "
            "The client may ask for the scopes of the groups in the deployment's "
            "vdq:machineScopes (default vdq-senders); send the access token as a bearer token. "
            "The committed document (shared/vdq/openapi.json) shows the URL of account "
            f"{_EXAMPLE_ACCOUNT} in {_EXAMPLE_REGION}; a deployment serves its own at "
            "GET /openapi.json.",
            "flows": {"clientCredentials": {"tokenUrl": f"{domain}/oauth2/token",
                                            "scopes": scopes}},
        },
    }  # fmt: skip


def servers() -> list[dict[str, Any]]:
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
         "variables": {"port": {"default": str(resources.LOCAL_PORT),
                                "description": "The port `vdq local` serves on."}}},
    ]  # fmt: skip


def overview() -> str:
    return (
        "VDQ queues outbound email (sent through Amazon SES) and SMS (through Twilio) for "
        "producing services, and lets operators follow, retry, cancel and resend each message."
        "\n\nOne request queues one item per receiver; each item moves through the workflow "
        "queued → sending → awaiting → succeeded (or delayed, errored, cancelled, "
        "unconfirmed) on its own. The lists page with opaque cursors.\n\n"
        "**Authentication**: a Cognito access token as `Authorization: Bearer <token>` on "
        "every operation but these, which take none: GET /health, this document (GET "
        "/openapi.json), the Twilio webhooks (POST /twilio/status-callback and POST "
        "/twilio/inbound, checked by Twilio's signature) and the one-click unsubscribe links "
        "(GET and POST /unsubscribe/{token}). Each operation "
        "names the permissions it needs (`x-vdq-permissions`); groups map to permissions "
        "through VDQ_GROUP_PERMISSIONS.\n\n"
        "**Errors** have one shape, from the functions and from API Gateway alike: "
        '`{"error": {"code", "message", "details"?}}`; `code` is one of the enum of '
        "ErrorDetail.code. 429 carries Retry-After, as does the 409 of a request repeated "
        "under its Idempotency-Key while the first still runs.\n\n"
        f"**Idempotency**: POST /emails, POST /sms and the resends take an "
        f"`{IDEMPOTENCY_HEADER}` header. {IDEMPOTENCY_RULES} POST /attachments/uploads "
        "takes one too, with rules of its own (its description).\n\n"
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
