"""The operator API behind API Gateway: queue and sent items, transitions, resend, attachments.

Routing by Powertools' REST resolver; query strings are validated against the operation table
(vdq.operations.spec) and the OpenAPI document served is the one generated from it at build time
(vdq.openapi), so this function never imports pydantic.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response

from vdq import api, attachments, openapi
from vdq.errors import ValidationError, VdqError
from vdq.observability import logger, tracer
from vdq.operations import actions, detail, listing, spec
from vdq.runtime import Runtime
from vdq.views import item_json

app = APIGatewayRestResolver()


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(status, "application/json", json.dumps(body, separators=(",", ":")),
                    headers)  # fmt: skip


def _route(operation_id: str) -> Any:
    op = spec.BY_ID[operation_id]
    register = app.get if op.method == "GET" else app.post
    return register(op.rule, operation_id=op.id)


def _caller() -> api.Caller:
    return api.caller(app.current_event.raw_event, Runtime.default().settings)


def _query(operation_id: str) -> dict[str, Any]:
    return spec.query(operation_id, app.current_event.query_string_parameters)


@_route("health")
def health() -> Response:
    return _json(200, {"status": "ok"})


@_route("openapi")
def openapi_document() -> Response:
    return Response(200, "application/json", openapi.document_text())


@_route("listQueueItems")
def list_queue_items() -> Response:
    _caller().require(listing.LIST_PERMISSION)
    q = _query("listQueueItems")
    return _json(200, listing.list_items(listing.ACTIVE, Runtime.default(), **q))


@_route("getQueueItem")
def get_queue_item(id: str) -> Response:
    _caller().require(detail.READ_PERMISSION)
    return _json(200, detail.item_detail(id, Runtime.default()))


@_route("runTransition")
def run_transition(id: str, name: str) -> Response:
    who = _caller()
    q = _query("runTransition")
    return _json(200, actions.run_transition(id, name, who, Runtime.default(), **q))


@_route("listSentItems")
def list_sent_items() -> Response:
    _caller().require(listing.LIST_PERMISSION)
    q = _query("listSentItems")
    return _json(200, listing.list_items(listing.SENT, Runtime.default(), **q))


@_route("getSentItem")
def get_sent_item(id: str) -> Response:
    _caller().require(detail.READ_PERMISSION)
    return _json(200, detail.item_detail(id, Runtime.default(), sent_only=True))


@_route("resendSentItem")
def resend_sent_item(id: str) -> Response:
    copies = actions.resend([id], _caller(), Runtime.default())
    return _json(201, {"items": [item_json(c) for c in copies]})


@_route("resendSentItems")
def resend_sent_items() -> Response:
    who = _caller()
    item_ids = _resend_ids(api.json_body(app.current_event.raw_event))
    copies = actions.resend(item_ids, who, Runtime.default())
    return _json(201, {"items": [item_json(c) for c in copies]})


@_route("getAttachment")
def get_attachment(id: str) -> Response:
    url = attachments.download_url(id, _caller(), Runtime.default())
    return Response(302, None, "", {"Location": url, "Cache-Control": "no-store"})


def _resend_ids(body: Any) -> list[str]:
    if not isinstance(body, dict):
        raise ValidationError("body", "must be an object")
    unknown = sorted(set(body) - {"ids"})
    if unknown:
        raise ValidationError(unknown[0], "is not a known field")
    ids = body.get("ids")
    if not isinstance(ids, list) or not 0 < len(ids) <= spec.MAX_RESEND_IDS:
        raise ValidationError("ids", f"must be a list of 1 to {spec.MAX_RESEND_IDS} item ids")
    for i, value in enumerate(ids):
        if not isinstance(value, str) or not 0 < len(value) <= 64:
            raise ValidationError(f"ids[{i}]", "must be an item id")
    return ids


@app.exception_handler(VdqError)
def domain_error(exc: VdqError) -> Response:
    if exc.status >= 500:
        logger.error("operator request failed: %s", exc.message)
    return _json(exc.status, api.error_body(exc.code, exc.message, exc.details))


@app.exception_handler(Exception)
def unexpected_error(exc: Exception) -> Response:
    logger.exception("operator request failed")
    return _json(500, api.error_body("internal_error", "the request failed; try again"))


@app.not_found
def no_route(_: Exception) -> Response:
    return _json(404, api.error_body("not_found", "no such route"))


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
