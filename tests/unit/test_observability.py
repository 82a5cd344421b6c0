"""Tracing: the X-Ray SDK is loaded only when asked for, so cold starts do not pay for it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vdq.core.observability import UntracedHandlers

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


def test_log_lines_keep_what_varies_and_drop_what_the_log_group_already_says(capsys):
    import io
    import json

    from tests.support.lambda_context import LambdaContext
    from vdq.core.observability import CONSTANT_KEYS, bind_item, logger

    buffer = io.StringIO()
    handler = logger.registered_handler
    stream = handler.stream
    handler.setStream(buffer)
    try:

        @logger.inject_lambda_context(log_event=False)
        def lambda_handler(event, context):
            bind_item("01ITEM")
            logger.info("moved")
            logger.warning("odd", extra={"detail": 1})

        lambda_handler({}, LambdaContext("vdq-send"))
    finally:
        handler.setStream(stream)
    lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
    assert [line["message"] for line in lines] == ["moved", "odd"]
    for line in lines:
        assert not CONSTANT_KEYS & set(line), line
        assert line["correlation_id"] == "01ITEM"
        assert {"level", "location", "timestamp", "function_request_id", "cold_start"} <= set(line)
    assert lines[1]["detail"] == 1


def test_metrics_added_from_threads_at_once_are_added_one_at_a_time(monkeypatch):
    """The send function's sending threads count their sends into one metric set: Powertools'
    add_metric reads, changes and writes it back, so two at once would lose a count."""
    import threading
    import time

    from vdq.core.observability import metrics

    provider = metrics.provider
    original = provider.add_metric
    inside, most, lock = [0], [0], threading.Lock()

    def slow_add(*args, **kwargs):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.002)  # another thread would enter here if it could
        try:
            return original(*args, **kwargs)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(provider, "add_metric", slow_add)
    metrics.clear_metrics()
    try:
        threads = [threading.Thread(target=lambda: [metrics.add_metric(
            name="EmailsSent", unit="Count", value=1) for _ in range(5)]) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert most[0] == 1
        assert sum(metrics.metric_set["EmailsSent"]["Value"]) == 40
    finally:
        metrics.clear_metrics()
