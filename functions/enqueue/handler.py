"""POST /emails and POST /sms behind API Gateway: parse, enqueue, answer 201; and
POST /attachments/uploads: the presigned upload of a large attachment."""

from __future__ import annotations

from typing import Any

import boto3  # noqa: F401  (first, at a shallow depth: see functions/__init__.py)

from vdq import api
from vdq.core.errors import VdqError
from vdq.core.observability import logger, metrics, tracer
from vdq.intake import rest as intake
from vdq.intake import uploads
from vdq.runtime import Runtime

_METHODS = {"/emails": "email", "/sms": "sms"}
_UPLOADS = "/attachments/uploads"


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    runtime = Runtime.default()
    try:
        resource = event.get("resource") or event.get("path") or ""
        method = _METHODS.get(resource)
        if event.get("httpMethod") != "POST" or (method is None and resource != _UPLOADS):
            return api.response(404, api.error_body("not_found", "no such route"))
        who = api.caller(event, runtime.settings)
        api.no_query(event)  # a send_at or priority given there is not the body's
        body = api.json_body(event)
        key = api.header(event, "Idempotency-Key")
        if method is None:
            if key is not None:
                intake.check_key(key)
            return api.response(201, uploads.new_upload(body, who, runtime, key))
        if key is not None:  # only then: the idempotency utility loads on first use
            # A record this invocation leaves "in progress" expires at its deadline.
            config = intake.idempotency_config(runtime.settings.idempotency_seconds)
            config.register_lambda_context(context)
        result = intake.submit(method, body, who, runtime, idempotency_key=key)
        return api.response(201, result)
    except VdqError as exc:
        if exc.status >= 500:
            logger.error("enqueue failed: %s", exc.message)
        return api.error_response(exc)
    except Exception:
        # Never a bare 502 from Lambda: the client gets the Error shape and a status to act on.
        logger.exception("enqueue failed")
        return api.error_response(VdqError("an internal error stopped the request; sending it "
                                           "again with the same Idempotency-Key is safe"))
