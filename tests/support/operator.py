"""Driving the operator function with its sample API Gateway events, and test set-ups."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from functions.operator import handler as operator_handler

import vdq
from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from vdq.core.settings import ALL_PERMISSIONS, DEFAULT_GROUP_PERMISSIONS
from vdq.runtime import Runtime
from vdq.workflow.transitions import Step, apply


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def code(self) -> str | None:
        return self.body["error"]["code"] if isinstance(self.body, dict) and "error" in self.body \
            else None  # fmt: skip


PUBLIC = ("openapi", "health")  # samples of paths without a token


def call(
    name: str,
    *,
    params: Mapping[str, str] | None = None,
    query: Mapping[str, str | list[str]] | None = None,
    body: Any = None,
    groups: list[str] | tuple[str, ...] | None = ("vdq-operators",),
    anonymous: bool = False,
    headers: Mapping[str, str] | None = None,
) -> Answer:
    """Invoke the operator handler with ``events/apigw_operator_<name>.json``, adapted. A
    ``query`` value that is a list is a parameter given that many times: API Gateway passes
    all in ``multiValueQueryStringParameters`` and the last in ``queryStringParameters``."""
    public = name in PUBLIC
    claims_groups = None if groups is None or anonymous or public else list(groups)
    event = api_event(f"apigw_operator_{name}", body=body, groups=claims_groups)
    if params is not None:
        event["pathParameters"] = dict(params)
        path = event["resource"]
        for key, value in params.items():
            path = path.replace("{" + key + "}", value)
        event["path"] = path
        event["requestContext"]["path"] = "/prod" + path
    if query is not None:
        multi = {k: list(v) if isinstance(v, list) else [v] for k, v in query.items()}
        event["queryStringParameters"] = {k: v[-1] for k, v in multi.items()} or None
        event["multiValueQueryStringParameters"] = multi or None
    if anonymous:
        event["requestContext"]["authorizer"] = None
    if headers:
        event["headers"] = {**(event.get("headers") or {}), **headers}
    response = operator_handler.handler(event, LambdaContext())
    headers = dict(response.get("headers") or {})
    headers.update({k: v[-1] for k, v in (response.get("multiValueHeaders") or {}).items()})
    text = response.get("body") or ""
    parsed = json.loads(text) if text and "json" in headers.get("Content-Type", "") else text
    return Answer(response["statusCode"], parsed, headers)


# ---- permissions: one group per permission, so a test grants any subset ---------------------


def allow_any_permission_set(runtime: Runtime) -> None:
    groups = {**DEFAULT_GROUP_PERMISSIONS, **{f"only:{p}": (p,) for p in ALL_PERMISSIONS}}
    runtime.settings = replace(runtime.settings, group_permissions=groups)


def groups_for(permissions: set[str] | frozenset[str] | tuple[str, ...]) -> list[str]:
    return [f"only:{p}" for p in sorted(permissions)]


# ---- items in given states -------------------------------------------------------------------


def sms(runtime: Runtime, *cells: str) -> list[Any]:
    return vdq.add_sms("+15005550006", list(cells or ["+14155550100"]), "hi", runtime=runtime)


def email(runtime: Runtime, *receivers: str, attachments: list[dict] | None = None) -> list[Any]:
    return vdq.add_email({"email": "shop@example.com", "name": "Shop"},
                         list(receivers or ["ada@example.org"]), "Hello", "Text",
                         cc=["cc@example.org"] if not receivers else None,
                         reply_to=["help@example.com"], attachments=attachments,
                         origin=("shop.order", "7"), runtime=runtime)  # fmt: skip


def move(runtime: Runtime, item_id: str, *steps: str, **step_args: Any) -> Any:
    """Apply server transitions in order (send, await, succeed, error, delay, timeout)."""
    outcome = None
    for name in steps:
        args = dict(step_args)
        if name == "delay":
            args.setdefault("retry_delay", 30)
        if name == "error":
            args.setdefault("result", "the provider refused it")
        outcome = apply(item_id, Step(name, actor="vdq", **args), runtime)
        runtime.clock.advance(0.001)  # type: ignore[attr-defined]  # history in order
    return outcome


def succeed(runtime: Runtime, item_id: str) -> Any:
    return move(runtime, item_id, "send", "succeed")


# ---- DynamoDB request counts -----------------------------------------------------------------


@contextmanager
def dynamodb_requests(monkeypatch: Any) -> Iterator[Counter[str]]:
    """Count the DynamoDB API calls made inside the block, by operation name."""
    from pynamodb.connection.base import Connection

    counts: Counter[str] = Counter()
    original = Connection._make_api_call

    def counting(self: Any, operation_name: str, operation_kwargs: dict) -> dict:
        counts[operation_name] += 1
        return original(self, operation_name, operation_kwargs)

    monkeypatch.setattr(Connection, "_make_api_call", counting)
    try:
        yield counts
    finally:
        monkeypatch.setattr(Connection, "_make_api_call", original)


def pages(name: str, query: dict[str, str], page_size: int,
          max_pages: int = 200) -> tuple[list[dict[str, Any]], int]:  # fmt: skip
    """Every item of a list (``list_queue_items``, ``list_sent_items``), following its cursor
    page by page: (the items, the pages read)."""
    seen: list[dict[str, Any]] = []
    cursor, count = None, 0
    while True:
        q = {**query, "limit": str(page_size), **({"cursor": cursor} if cursor else {})}
        answer = call(name, query=q)
        assert answer.status == 200, answer.body
        seen += answer.body["items"]
        count += 1
        cursor = answer.body["cursor"]
        if cursor is None:
            return seen, count
        assert count < max_pages, "the cursor never ends"
