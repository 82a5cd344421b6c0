"""Tracing: the X-Ray SDK is loaded only when asked for, so cold starts do not pay for it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vdq.observability import UntracedHandlers

HANDLERS = ["enqueue", "send", "webhook", "operator", "schedule"]


def _loads_xray(function: str, tracing: str) -> bool:
    code = (
        f"import functions.{function}.handler, sys; "
        "print(any(m.startswith('aws_xray_sdk') for m in sys.modules))"
    )
    env = {**os.environ, "VDQ_TRACING": tracing, "AWS_DEFAULT_REGION": "us-east-1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=os.getcwd())  # fmt: skip
    return out.stdout.strip().endswith("True")


@pytest.mark.parametrize("function", HANDLERS)
def test_handlers_do_not_load_the_xray_sdk_by_default(function):
    assert not _loads_xray(function, "lambda")


def test_the_sdk_tracer_is_built_when_asked_for():
    assert _loads_xray("enqueue", "sdk")


def test_untraced_decorators_pass_the_function_through():
    tracer = UntracedHandlers()

    def handler(event, context):
        return event

    assert tracer.capture_lambda_handler(handler) is handler
    assert tracer.capture_method(capture_response=False)(handler) is handler
