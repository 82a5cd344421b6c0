"""API Gateway's own answers (401, 403, 404, 413, 429, 5xx) come in the error shape of the
functions, so a client generated from the OpenAPI document parses every error alike."""

from __future__ import annotations

import json

import pytest

from vdq.api import GATEWAY_ERRORS, THROTTLE_RETRY_AFTER_SECONDS

pytestmark = pytest.mark.infra


def _responses(synth) -> dict[str, dict]:
    found = synth.resources("AWS::ApiGateway::GatewayResponse").values()
    return {r["Properties"]["ResponseType"]: r["Properties"] for r in found}


def test_every_gateway_response_api_gateway_can_give_is_rewritten(synth):
    responses = _responses(synth)
    assert set(responses) == {g.response_type for g in GATEWAY_ERRORS}
    # The two fallbacks cover every type not listed: no answer keeps {"message": ...}.
    assert {"DEFAULT_4XX", "DEFAULT_5XX", "UNAUTHORIZED", "ACCESS_DENIED", "THROTTLED",
            "REQUEST_TOO_LARGE"} <= set(responses)  # fmt: skip


@pytest.mark.parametrize("gateway", GATEWAY_ERRORS, ids=lambda g: g.response_type)
def test_each_gateway_response_renders_the_error_shape_with_api_gateways_message(synth, gateway):
    properties = _responses(synth)[gateway.response_type]
    template = properties["ResponseTemplates"]["application/json"]
    # What API Gateway substitutes: $context.error.messageString is a quoted JSON string.
    rendered = template.replace("$context.error.messageString", json.dumps('Say "hi"'))
    assert json.loads(rendered) == {"error": {"code": gateway.code, "message": 'Say "hi"'}}
    if gateway.status is None:  # a fallback keeps each type's own status
        assert "StatusCode" not in properties
    else:
        assert properties["StatusCode"] == str(gateway.status)


def test_throttled_answers_say_when_to_try_again(synth):
    responses = _responses(synth)
    for kind in ("THROTTLED", "QUOTA_EXCEEDED"):
        headers = responses[kind]["ResponseParameters"]
        assert headers == {
            "gatewayresponse.header.Retry-After": f"'{THROTTLE_RETRY_AFTER_SECONDS}'"
        }
    assert "ResponseParameters" not in responses["UNAUTHORIZED"]


def test_an_unknown_route_is_a_404_not_api_gateways_403(synth):
    assert _responses(synth)["MISSING_AUTHENTICATION_TOKEN"]["StatusCode"] == "404"
