"""The REST contract as data: every operation, its parameters, body and answers.

One table serves three readers: the operator handler validates query strings against it, the
OpenAPI generator (``vdq.openapi``, run at build time) writes the document from it, and a test
checks that the routes the handlers serve are exactly the operations listed here. Pure data:
importing it costs nothing at cold start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from vdq.errors import ValidationError
from vdq.workflow import DONE_STATES, State

ACTIVE_STATES = tuple(s.value for s in State if s not in DONE_STATES)
SENT_STATES = tuple(s.value for s in State if s in DONE_STATES)
METHODS = ("email", "sms")
MAX_LIMIT = 100
DEFAULT_LIMIT = 50
MAX_RESEND_IDS = 100


# NamedTuples, not frozen dataclasses: as immutable, and about a tenth of the import work.
class Param(NamedTuple):
    name: str
    where: str  # "path" | "query" | "header"
    type: str  # "string" | "integer" | "boolean"
    description: str
    enum: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    default: Any = None
    required: bool = False


class Operation(NamedTuple):
    id: str
    method: str
    path: str  # OpenAPI form, /queue-items/{id}
    function: str  # the Lambda function that serves it: enqueue | operator | webhook
    summary: str
    permission: str  # who may call it, as the document says
    params: tuple[Param, ...] = ()
    body: str | None = None  # schema name of the request body
    status: int = 200
    answer: str | None = None  # schema name of the success body
    errors: tuple[int, ...] = (401, 403)
    public: bool = False  # no bearer token

    @property
    def rule(self) -> str:
        """The path as the operator function's router spells it (vdq.operations.router)."""
        return self.path.replace("{", "<").replace("}", ">")


_ID = Param("id", "path", "string", "the queue item's id", required=True)
_LIMIT = Param("limit", "query", "integer", "items on one page", minimum=1, maximum=MAX_LIMIT,
               default=DEFAULT_LIMIT)  # fmt: skip
_CURSOR = Param("cursor", "query", "string", "the cursor of the previous page, as returned")
_METHOD = Param("method", "query", "string", "only items of this method", enum=METHODS)
_DRY_RUN = Param("dry_run", "query", "boolean",
                 "check permission and source, change nothing", default=False)  # fmt: skip
_READ = "vdq.read_queueitem"
_LIST = "vdq.list_queueitem"
_RESEND = "vdq.can_resend"

OPERATIONS: tuple[Operation, ...] = (
    Operation("postEmails", "POST", "/emails", "enqueue",
              "Queue an email: one item per receiver across to, cc and bcc", "vdq.add_queueitem",
              (Param("Idempotency-Key", "header", "string",
                     "repeat the request safely: same key and body, same items"),),
              body="EmailRequest", status=201, answer="Items", errors=(400, 401, 403, 409, 422)),
    Operation("postSms", "POST", "/sms", "enqueue", "Queue an SMS: one item per receiver",
              "vdq.add_queueitem",
              (Param("Idempotency-Key", "header", "string",
                     "repeat the request safely: same key and body, same items"),),
              body="SmsRequest", status=201, answer="Items", errors=(400, 401, 403, 409, 422)),
    Operation("listQueueItems", "GET", "/queue-items", "operator",
              "Active (not done) items, oldest first", _LIST,
              (_METHOD, Param("state", "query", "string", "only items in this state",
                              enum=ACTIVE_STATES), _LIMIT, _CURSOR),
              answer="ItemPage", errors=(400, 401, 403, 422)),
    Operation("getQueueItem", "GET", "/queue-items/{id}", "operator",
              "One item in any state, with content, attachments and history", _READ, (_ID,),
              answer="ItemDetail", errors=(401, 403, 404)),
    Operation("runTransition", "POST", "/queue-items/{id}/transitions/{name}", "operator",
              "Apply an operator transition (retry, cancel)",
              "vdq.list_queueitem, vdq.read_queueitem, vdq.read_workflow and the transition's "
              "own permission (vdq.can_retry, vdq.can_cancel); server transitions: nobody",
              (_ID, Param("name", "path", "string",
                          "retry or cancel; the six server transitions are refused (403)",
                          required=True), _DRY_RUN),
              answer="TransitionResult", errors=(401, 403, 404, 409, 422, 503)),
    Operation("listSentItems", "GET", "/sent-items", "operator",
              "Done items, newest first", _LIST,
              (_METHOD, Param("state", "query", "string", "only items in this done state",
                              enum=SENT_STATES), _LIMIT, _CURSOR),
              answer="ItemPage", errors=(400, 401, 403, 422)),
    Operation("getSentItem", "GET", "/sent-items/{id}", "operator",
              "One done item, with content, attachments and history (404 for an active one)",
              _READ, (_ID,), answer="ItemDetail", errors=(401, 403, 404)),
    Operation("resendSentItem", "POST", "/sent-items/{id}/resend", "operator",
              "Copy a done item into a new queued item and send it", _RESEND, (_ID,),
              status=201, answer="Items", errors=(401, 403, 404, 409)),
    Operation("resendSentItems", "POST", "/sent-items/resend", "operator",
              "Copy done items into new queued items; all or nothing", _RESEND,
              body="ResendRequest", status=201, answer="Items",
              errors=(400, 401, 403, 404, 409, 422)),
    Operation("getAttachment", "GET", "/attachments/{id}", "operator",
              "Redirect to a short-lived download URL of an attachment",
              "vdq.read_queueitem, on an attachment that belongs to a queue item",
              (Param("id", "path", "string", "the attachment's id", required=True),),
              status=302, errors=(401, 403, 404, 410)),
    Operation("twilioStatusCallback", "POST", "/twilio/status-callback", "webhook",
              "Twilio's status callback for one SMS (signed by Twilio)", "Twilio signature",
              (Param("queue_item", "query", "string", "the queue item the SMS was sent for"),
               Param("X-Twilio-Signature", "header", "string", "Twilio's request signature",
                     required=True)),
              body="TwilioStatus", status=204, errors=(403,), public=True),
    Operation("health", "GET", "/health", "operator", "Readiness", "none", status=200,
              answer="Health", errors=(), public=True),
    Operation("openapi", "GET", "/openapi.json", "operator", "This OpenAPI document", "none",
              status=200, answer="OpenApiDocument", errors=(), public=True),
)  # fmt: skip

BY_ID = {op.id: op for op in OPERATIONS}


def _value(param: Param, raw: str) -> Any:
    if param.type == "integer":
        try:
            value: Any = int(raw)
        except ValueError:
            raise ValidationError(param.name, "must be a whole number") from None
        if param.minimum is not None and value < param.minimum:
            raise ValidationError(param.name, f"must be at least {param.minimum}")
        if param.maximum is not None and value > param.maximum:
            raise ValidationError(param.name, f"must be at most {param.maximum}")
        return value
    if param.type == "boolean":
        lowered = raw.strip().lower()
        if lowered not in ("true", "false", "1", "0"):
            raise ValidationError(param.name, "must be true or false")
        return lowered in ("true", "1")
    if param.enum and raw not in param.enum:
        raise ValidationError(param.name, f"must be one of {', '.join(param.enum)}")
    if not raw or len(raw) > 2048:
        raise ValidationError(param.name, "must be 1 to 2048 characters")
    return raw


def query(operation_id: str, raw: Mapping[str, str] | None) -> dict[str, Any]:
    """The operation's query parameters, validated, with defaults; unknown ones are refused."""
    params = [p for p in BY_ID[operation_id].params if p.where == "query"]
    given = dict(raw or {})
    known = {p.name for p in params}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ValidationError(unknown[0], "is not a known query parameter")
    return {
        p.name: _value(p, given[p.name]) if given.get(p.name) is not None else p.default
        for p in params
    }
