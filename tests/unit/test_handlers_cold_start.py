"""What the handlers do instead of Powertools' batch utility and REST resolver, and what they
import at cold start."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from functions.send import handler as send_handler

import vdq.runtime as runtime_module
from tests.support.lambda_context import LambdaContext
from vdq.core.errors import NotFound, VdqError
from vdq.dispatch import sendbatch
from vdq.operations.router import Response, Router

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = ["enqueue", "send", "webhook", "operator", "schedule"]


# ---- the send handler's partial batch -------------------------------------------------------


def _records(*bodies: str) -> dict:
    return {"Records": [{"messageId": f"m-{i}", "body": b} for i, b in enumerate(bodies)]}


@pytest.fixture
def fake_send(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    upcoming: list[int] = []

    def prepare(record: dict, left: int, runtime: object, deadline: float | None = None) -> str:
        seen.append(record["body"])
        upcoming.append(left)
        if record["body"] == "fail":
            raise RuntimeError("the store failed")
        return "accepted"

    monkeypatch.setattr(sendbatch, "prepare", prepare)
    # The handler's runtime, made without reading the table (Runtime.default reads the index
    # shards' count there first: vdq.store.shards); prepare, faked, reads nothing either.
    monkeypatch.setattr(runtime_module, "_DEFAULT", runtime_module.Runtime())
    fake_send_upcoming.clear()
    fake_send_upcoming.extend([upcoming])
    return seen


fake_send_upcoming: list[list[int]] = []


def test_send_reports_only_the_records_that_raised(fake_send):
    answer = send_handler.handler(_records("ok", "fail", "ok"), LambdaContext())
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert fake_send == ["ok", "fail", "ok"]  # one failure does not stop the batch
    # Each record is told how many of the batch are left (the pacer reserves for them).
    assert fake_send_upcoming[0] == [3, 2, 1]


def test_send_reports_nothing_when_every_record_went_through(fake_send):
    assert send_handler.handler(_records("ok"), LambdaContext()) == {"batchItemFailures": []}


def test_send_fails_the_invocation_when_every_record_failed(fake_send):
    with pytest.raises(send_handler.BatchFailed) as err:
        send_handler.handler(_records("fail", "fail"), LambdaContext())
    assert isinstance(err.value.__cause__, RuntimeError)


@pytest.mark.parametrize("event", [{}, {"Records": []}, {"Records": "x"}])
def test_send_refuses_an_event_that_is_not_an_sqs_batch(fake_send, event):
    with pytest.raises(ValueError):
        send_handler.handler(event, LambdaContext())


# ---- the operator router --------------------------------------------------------------------


def _router() -> Router:
    app = Router()

    @app.operation("getQueueItem")
    def get_item(event, id):
        if id == "gone":
            raise NotFound("no such item")
        if id == "boom":
            raise KeyError(id)
        return Response(200, "application/json", json.dumps({"id": id}))

    @app.operation("listQueueItems")
    def list_items(event):
        return Response(200, "application/json", "[]")

    @app.operation("getAttachment")
    def attachment(event, id):
        return Response(302, None, "", {"Location": f"https://files/{id}"})

    @app.error(VdqError)
    def domain(exc):
        return Response(exc.status, "application/json", json.dumps({"code": exc.code}))

    @app.error(Exception)
    def other(exc):
        return Response(500, "application/json", '{"code":"internal_error"}')

    @app.not_found
    def missing():
        return Response(404, "application/json", '{"code":"not_found"}')

    return app


def _get(app: Router, path: str, method: str = "GET") -> dict:
    return app.resolve({"httpMethod": method, "path": path})


def test_routes_come_from_the_operation_table_static_first():
    app = _router()
    assert [(r.method, r.path) for r in app.routes] == [
        ("GET", "/queue-items"), ("GET", "/queue-items/<id>"), ("GET", "/attachments/<id>")
    ]  # fmt: skip


def test_a_path_parameter_is_one_segment_passed_by_name():
    app = _router()
    answer = _get(app, "/queue-items/01JDQ5V7X3K9")
    assert answer == {"statusCode": 200, "body": '{"id": "01JDQ5V7X3K9"}',
                      "isBase64Encoded": False,
                      "multiValueHeaders": {"Content-Type": ["application/json"]}}  # fmt: skip
    assert json.loads(_get(app, "/queue-items/a%20b:c@d")["body"]) == {"id": "a%20b:c@d"}
    for path in ("/queue-items/a/b", "/queue-items//", "/queue-items/a#b", "/queue-items/a?b"):
        assert _get(app, path)["statusCode"] == 404, path
    # A trailing slash is not an empty parameter: API Gateway routes /x/ to the resource /x.
    assert _get(app, "/queue-items/") == _get(app, "/queue-items")
    assert _get(app, "/queue-items/01JDQ5V7X3K9/") == answer


def test_another_method_or_an_unknown_path_is_not_found():
    app = _router()
    assert _get(app, "/queue-items", "POST")["body"] == '{"code":"not_found"}'
    assert _get(app, "/nowhere")["statusCode"] == 404
    assert app.resolve({})["statusCode"] == 404
    assert _get(app, "/queue-items", "get")["statusCode"] == 200  # methods in any case


def test_errors_are_answered_by_the_most_specific_handler():
    app = _router()
    answer = _get(app, "/queue-items/gone")
    assert answer["statusCode"] == 404
    assert json.loads(answer["body"]) == {"code": NotFound("x").code}
    assert _get(app, "/queue-items/boom")["statusCode"] == 500


def test_a_response_without_content_type_has_only_its_headers():
    answer = _get(_router(), "/attachments/f-1")
    assert answer["statusCode"] == 302 and answer["body"] == ""
    assert answer["multiValueHeaders"] == {"Location": ["https://files/f-1"]}


# ---- what the handlers import ---------------------------------------------------------------


@pytest.mark.parametrize("function", HANDLERS)
def test_each_handler_imports_boto3_before_vdq(function):
    # Imported nested deep under vdq, boto3's regex compiles thrash CPython 3.11's frame-stack
    # chunks (thousands of mmap/munmap calls); from the handler itself they do not.
    tree = ast.parse((ROOT / "functions" / function / "handler.py").read_text())
    imports = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    names = [n.names[0].name if isinstance(n, ast.Import) else n.module for n in imports]
    first_vdq = next(i for i, name in enumerate(names) if name and name.startswith("vdq"))
    assert "boto3" in names[:first_vdq]


@pytest.mark.parametrize("function", HANDLERS)
def test_handlers_load_neither_the_powertools_batch_utility_nor_its_event_handler(function):
    code = (f"import functions.{function}.handler, sys; "
            "print(sorted(m for m in ('asyncio', 'aws_lambda_powertools.utilities.batch', "
            "'aws_lambda_powertools.event_handler', "
            "'aws_lambda_powertools.utilities.data_classes') if m in sys.modules))")  # fmt: skip
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=ROOT)  # fmt: skip
    assert out.stdout.strip() == "[]"
