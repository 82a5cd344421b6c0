"""The operator API behind API Gateway: queue and sent items, transitions, resend, attachments.

Routing by the operation table (vdq.operations.router over vdq.operations.spec), which also
validates query strings; the OpenAPI document served is the one generated from it at build
time (vdq.openapi, which is not in the asset), so this function never imports pydantic.

It also serves the operator console's static files and settings (vdq.console) on the two
console routes, which API Gateway passes without an authorizer.

The reads (lists, details) are what most requests are; the modules only a change (transitions
and resend: vdq.operations.actions, with enqueue and the transitions), an attachment download
or the document need are imported by their routes, so a read's cold start does not pay for them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import boto3  # noqa: F401  (first, at a shallow depth: see functions/__init__.py)

import vdq
from vdq import api, console
from vdq.core.errors import VdqError
from vdq.core.observability import logger, metrics, tracer
from vdq.core.settings import get_settings
from vdq.operations import detail, listing, params, spec
from vdq.operations.router import Event, Response, Router
from vdq.runtime import Runtime
from vdq.workflow.views import item_json

app = Router()


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(status, "application/json", api.json_text(body), headers)


def _caller(event: Event) -> api.Caller:
    return api.caller(event, Runtime.default().settings)


def _query(operation_id: str, event: Event) -> dict[str, Any]:
    return params.query(operation_id, event.get("queryStringParameters"),
                        event.get("multiValueQueryStringParameters"))  # fmt: skip


@app.operation("health")
def health(event: Event) -> Response:
    return _json(200, {"status": "ok"})


@app.operation("openapi")
def openapi_document(event: Event) -> Response:
    return Response(200, "application/json",
                    _openapi_text(Runtime.default().settings.console_auth_url))


@lru_cache(maxsize=2)
def _openapi_text(auth_url: str | None) -> str:
    """The committed document beside the package (its generator, vdq.openapi, is tooling and
    not in the function's asset), with the deployment's own token URL: the Cognito domain's
    (VDQ_CONSOLE_AUTH_URL) where the committed one shows the form of one."""
    text = Path(vdq.__file__).with_name("openapi.json").read_text()
    if not auth_url:
        return text
    document = json.loads(text)
    oauth2 = document["components"]["securitySchemes"]["oauth2"]
    oauth2["flows"]["clientCredentials"]["tokenUrl"] = auth_url.rstrip("/") + "/oauth2/token"
    oauth2["description"] = oauth2["description"].split(" The committed document")[0]
    return json.dumps(document, indent=2) + "\n"


@app.operation("listQueueItems")
def list_queue_items(event: Event) -> Response:
    _caller(event).require(listing.LIST_PERMISSION)
    q = _query("listQueueItems", event)
    return _json(200, listing.list_items(listing.ACTIVE, Runtime.default(), **q))


@app.operation("getQueueItem")
def get_queue_item(event: Event, id: str) -> Response:
    _caller(event).require(detail.READ_PERMISSION)
    _query("getQueueItem", event)  # it takes none: a ?limit= is refused, not ignored
    return _json(200, detail.item_detail(id, Runtime.default()))


@app.operation("getItemHistory")
def get_item_history(event: Event, id: str) -> Response:
    _caller(event).require(detail.READ_PERMISSION)
    q = _query("getItemHistory", event)
    return _json(200, detail.item_history(id, Runtime.default(), **q))


@app.operation("runTransition")
def run_transition(event: Event, id: str, name: str) -> Response:
    from vdq.operations import actions

    who = _caller(event)
    q = _query("runTransition", event)
    api.no_body(event)
    return _json(200, actions.run_transition(id, name, who, Runtime.default(), **q))


@app.operation("listSentItems")
def list_sent_items(event: Event) -> Response:
    _caller(event).require(listing.LIST_PERMISSION)
    q = _query("listSentItems", event)
    return _json(200, listing.list_items(listing.SENT, Runtime.default(), **q))


@app.operation("getSentItem")
def get_sent_item(event: Event, id: str) -> Response:
    _caller(event).require(detail.READ_PERMISSION)
    _query("getSentItem", event)
    return _json(200, detail.item_detail(id, Runtime.default(), sent_only=True))


@app.operation("getProducerUsage")
def get_producer_usage(event: Event, producer: str) -> Response:
    from vdq.intake import quotas

    _caller(event).require("vdq.list_queueitem")
    _query("getProducerUsage", event)
    return _json(200, quotas.usage(_unquote(producer), Runtime.default()))


@app.operation("listProducers")
def list_producers(event: Event) -> Response:
    from vdq.operations import producers

    _caller(event).require(producers.LIST_PERMISSION)
    _query("listProducers", event)
    return _json(200, producers.producers(Runtime.default()))


@app.operation("listHeldItems")
def list_held_items(event: Event, producer: str) -> Response:
    from vdq.operations import producers

    _caller(event).require(producers.LIST_PERMISSION)
    q = _query("listHeldItems", event)
    return _json(200, producers.held_items(Runtime.default(), _unquote(producer),
                                           limit=q["limit"], after=q["after"]))  # fmt: skip


@app.operation("releaseHold")
def release_hold(event: Event, producer: str) -> Response:
    from vdq.operations import producers

    who = _caller(event)
    who.require(producers.RELEASE_PERMISSION)
    _query("releaseHold", event)  # it takes none: a ?dry_run=true is refused, not released
    api.no_body(event)
    return _json(200, producers.release(Runtime.default(), _unquote(producer), who.subject))


@app.operation("cancelHeldItems")
def cancel_held_items(event: Event, producer: str) -> Response:
    from vdq.operations import producers

    who = _caller(event)
    who.require(producers.RELEASE_PERMISSION, producers.CANCEL_PERMISSION)
    _query("cancelHeldItems", event)
    api.no_body(event)
    return _json(200, producers.cancel(Runtime.default(), _unquote(producer), who.subject))


@app.operation("resendSentItem")
def resend_sent_item(event: Event, id: str) -> Response:
    who = _caller(event)
    _query("resendSentItem", event)
    api.no_body(event)  # a send_at there would be ignored: the copy is sent now
    return _resend("resendSentItem", event, who, [id])


@app.operation("resendSentItems")
def resend_sent_items(event: Event) -> Response:
    who = _caller(event)
    _query("resendSentItems", event)
    return _resend("resendSentItems", event, who, _resend_ids(api.json_body(event)))


def _resend(operation: str, event: Event, who: api.Caller, item_ids: list[str]) -> Response:
    """Copies of sent items; with an Idempotency-Key, once per key (vdq.intake.rest.once)."""
    from vdq.operations import actions

    runtime = Runtime.default()

    def work() -> dict[str, Any]:
        done = actions.resend_flagged(item_ids, who, runtime)
        return {"items": [item_json(c) for c in done.copies], "suppressed": done.suppressed}

    key = api.header(event, "Idempotency-Key")
    if key is None:
        return _json(201, work())
    from vdq.intake import rest as intake

    who.require(actions.RESEND_PERMISSION, actions.READ_PERMISSION)  # before the key is taken
    return _json(201, intake.once(operation, who, key, {"ids": item_ids}, runtime, work))


@app.operation("searchItems")
def search_items(event: Event) -> Response:
    from vdq.operations import search

    _caller(event).require(search.LIST_PERMISSION)
    q = _query("searchItems", event)
    return _json(200, search.search(Runtime.default(), q))


@app.operation("getStats")
def get_stats(event: Event) -> Response:
    from vdq.core.errors import ValidationError
    from vdq.operations import stats

    _caller(event).require(stats.LIST_PERMISSION)
    q = _query("getStats", event)
    if q["breakdown"] is not None and q["period"] != "hours":
        raise ValidationError("breakdown", "is for period=hours (the last 24 hours)")
    return _json(200, stats.stats(Runtime.default(), **q))


@app.operation("listSuppressions")
def list_suppressions(event: Event) -> Response:
    from vdq.operations import suppressions

    _caller(event).require(suppressions.LIST_PERMISSION)
    q = _query("listSuppressions", event)
    return _json(200, suppressions.list_suppressions(Runtime.default(), **q))


@app.operation("addSuppression")
def add_suppression(event: Event) -> Response:
    from vdq.operations import suppressions

    who = _caller(event)
    who.require(suppressions.CHANGE_PERMISSION)
    _query("addSuppression", event)
    return _json(200, suppressions.add(api.json_body(event), who.subject, Runtime.default()))


@app.operation("removeSuppression")
def remove_suppression(event: Event, receiver: str) -> Response:
    from vdq.operations import suppressions

    who = _caller(event)
    who.require(suppressions.CHANGE_PERMISSION)
    q = _query("removeSuppression", event)
    api.no_body(event)
    return _json(200, suppressions.remove(_unquote(receiver), who.subject, Runtime.default(),
                                          q["list"], q["text"]))  # fmt: skip


@app.operation("getSuppressionHistory")
def get_suppression_history(event: Event, receiver: str) -> Response:
    from vdq.operations import suppressions

    _caller(event).require(suppressions.LIST_PERMISSION)
    _query("getSuppressionHistory", event)
    return _json(200, suppressions.history(_unquote(receiver), Runtime.default()))


def _unquote(segment: str) -> str:
    """A path segment as sent (API Gateway passes the path undecoded: %40 for @, %2B for +)."""
    from urllib.parse import unquote

    return unquote(segment)


@app.operation("getAttachment")
def get_attachment(event: Event, id: str) -> Response:
    from vdq.operations import downloads

    who = _caller(event)
    q = _query("getAttachment", event)
    url = downloads.download_url(id, who, Runtime.default())
    if not q["redirect"]:  # a page cannot read a redirect's Location (the console)
        return _json(200, {"url": url}, {"Cache-Control": "no-store"})
    return Response(302, None, "", {"Location": url, "Cache-Control": "no-store"})


def _resend_ids(body: Any) -> list[str]:
    from vdq.intake.validation import check

    item_ids: list[str] = check(spec.RESEND, body)["ids"]
    return item_ids


@app.error(VdqError)
def domain_error(exc: VdqError) -> Response:
    if exc.status >= 500:
        logger.error("operator request failed: %s", exc.message)
    # An error may carry headers of its answer (a resend's quota 429 carries Retry-After).
    return _json(exc.status, api.error_body(exc.code, exc.message, exc.details),
                 getattr(exc, "headers", None))


@app.error(Exception)
def unexpected_error(exc: Exception) -> Response:
    logger.exception("operator request failed")
    return _json(500, api.error_body("internal_error", "the request failed; try again"))


@app.not_found
def no_route() -> Response:
    return _json(404, api.error_body("not_found", "no such route"))


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics  # resends (ItemsEnqueued) and errors it causes reach the dashboard and alarms
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if api.header(event, "Idempotency-Key") is not None:  # a resend: load idempotency then only
        from vdq.intake import rest as intake

        # A record this invocation leaves "in progress" expires at its deadline.
        settings = Runtime.default().settings
        intake.idempotency_config(settings.idempotency_seconds).register_lambda_context(context)
    if event.get("resource") in console.RESOURCES:  # the console's files (no authorizer)
        return console.answer(event, get_settings())
    return app.resolve(event)
