"""Provider results: the Twilio status callback (API Gateway) and the results queue (SQS:
SES events from the configuration set via SNS, deferred Twilio lookups and kept inbound SMS);
and the other public routes: inbound SMS (STOP, START, HELP) and one-click unsubscribe.

A well-formed, authentic event is always answered 2xx, also when it is late or a duplicate;
a malformed one is logged and dropped (retrying cannot fix it). Only a failure that a retry can
fix (contention, an AWS error) fails the SQS record, so SQS delivers it again.
"""

from __future__ import annotations

from typing import Any

import boto3  # noqa: F401  (first, at a shallow depth: see functions/__init__.py)

from vdq.core.errors import VdqError
from vdq.core.observability import logger, metrics, tracer
from vdq.results import matching as results
from vdq.runtime import Runtime


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    runtime = Runtime.default()
    if "httpMethod" not in event:
        return results_batch(event.get("Records") or [], runtime)
    resource = str(event.get("resource") or "")
    if resource.startswith("/unsubscribe/"):
        from vdq.results import unsubscribe

        return unsubscribe.handle(event, runtime)
    if resource == "/twilio/inbound":
        return twilio_inbound(event, runtime)
    return twilio_callback(event, runtime)


def twilio_inbound(event: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    """An incoming SMS: STOP, START and HELP change the suppression list
    (vdq.results.suppression)."""
    from vdq.results import suppression

    params, refused = _signed_form(event, runtime, what="inbound SMS", inbound=True)
    if refused is not None:
        return refused
    try:
        outcome = suppression.handle_inbound_sms(params, runtime)
    except Exception:
        # Twilio does not post an incoming message again after an error answer: a STOP the
        # table refused would be lost. It is kept on the results queue and applied from there
        # (SQS retries it); only when the queue refuses it too is the answer an error. A START
        # is not: applied late, after a STOP the number sent since, it would lift that STOP.
        if suppression.inbound_word(params) not in suppression.STOP_WORDS:
            raise
        logger.exception("inbound SMS %s not applied: kept on the results queue",
                         params.get("MessageSid"))  # fmt: skip
        results.defer_inbound(params, runtime)
        outcome = "kept"
    logger.info("inbound SMS %s: %s", params.get("MessageSid"), outcome)
    return {"statusCode": 200, "headers": {"Content-Type": "text/xml"},
            "body": '<?xml version="1.0" encoding="UTF-8"?><Response></Response>'}


def twilio_callback(event: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    from vdq import api

    params, refused = _signed_form(event, runtime, what="Twilio callback")
    if refused is not None:
        return refused
    query = event.get("queryStringParameters") or {}
    try:
        outcome = results.handle_twilio_callback(params, query.get("queue_item"), runtime,
                                                 attempt=query.get("attempt"))  # fmt: skip
    except results.BadEvent as exc:
        logger.warning("Twilio callback dropped: %s", exc.message)
        return api.response(204)
    except VdqError as exc:
        # Contention. Twilio documents retries of a Messaging callback only for a connection
        # that failed, not for an error answer: the status is recovered by the SMS timeout's
        # last fetch of the message (vdq.schedules.sms), not by a callback sent again.
        logger.error("Twilio callback not applied: %s", exc.message)
        return api.error_response(exc)
    logger.debug("Twilio callback %s: %s", params.get("MessageSid"), outcome)  # as results_batch
    return api.response(204)


def results_batch(records: list[dict[str, Any]], runtime: Runtime) -> dict[str, Any]:
    failures = []
    for record in records:
        try:
            outcome = results.handle_results_message(record.get("body") or "", runtime)
            # Each outcome is in the item's history; a line for every provider event is DEBUG
            # (vdq.results.updates logs it with the item).
            logger.debug("results message %s: %s", record.get("messageId"), outcome)
        except results.BadEvent as exc:
            logger.error("results message %s dropped: %s", record.get("messageId"), exc.message)
        except Exception:
            logger.exception("results message %s failed; SQS will retry it",
                             record.get("messageId"))  # fmt: skip
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}


Form = dict[str, str]


def _signed_form(event: dict[str, Any], runtime: Runtime, *, what: str,
                 inbound: bool = False) -> tuple[Form, dict[str, Any] | None]:  # fmt: skip
    """(the form Twilio posted, None) once its signature checks; else ({}, the answer to give:
    405, 400 or 403)."""
    # SMS only: the SES events, most of what this function gets, need neither module.
    from vdq import api
    from vdq.results import twilio_signature

    if event.get("httpMethod") != "POST":
        return {}, api.response(405, api.error_body("method_not_allowed", "use POST"))
    try:
        params = twilio_signature.form_params(event)
    except (ValueError, UnicodeDecodeError):
        return {}, api.response(400, api.error_body("bad_request", "the body is not a form"))
    if not twilio_signature.is_authentic(event, params, runtime.settings, inbound=inbound):
        logger.warning("%s refused: %s", what,
                       twilio_signature.why_refused(event, runtime.settings))
        return {}, api.response(403, api.error_body("forbidden",
                                                    "the Twilio signature is not valid"))
    return params, None
