"""Routing API Gateway REST proxy events to the operator function's operations.

The routes are the operation table's (vdq.operations.spec): a handler registers under an
operation id and gets that operation's method and path. Matching is what Powertools'
APIGatewayRestResolver did for this function, which this replaces because importing it loads
every Powertools event class and asyncio (a third of the function's cold start): static routes
first, then dynamic ones, in the order registered; a path parameter is one segment of the
characters API Gateway passes; a trailing slash is ignored (API Gateway routes ``/x/`` to
``/x``); an unknown path or a known path with another method is not found. Answers keep the
resolver's shape: ``multiValueHeaders`` and ``isBase64Encoded``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from vdq.operations import spec

# What a path parameter may hold: one segment of unreserved and sub-delim characters (RFC 3986),
# word characters, and those API Gateway passes decoded (the resolver's class).
_VALUE = re.compile(r"[-._~()'!*:@,;=+&$%<> \[\]{}|^\w]+")

Event = Mapping[str, Any]


class Response:
    """A status, a body (text) and headers; ``content_type`` sets Content-Type when given."""

    def __init__(self, status: int, content_type: str | None = None, body: str = "",
                 headers: Mapping[str, str] | None = None) -> None:  # fmt: skip
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        if content_type:
            self.headers.setdefault("Content-Type", content_type)

    def proxy(self) -> dict[str, Any]:
        """The Lambda proxy answer of a REST API."""
        return {
            "statusCode": self.status,
            "body": self.body,
            "isBase64Encoded": False,
            "multiValueHeaders": {name: [value] for name, value in self.headers.items()},
        }


class Route:
    __slots__ = ("func", "method", "path", "segments")

    def __init__(self, method: str, path: str, func: Callable[..., Response]) -> None:
        self.method = method
        self.path = path  # with parameters as <name>, e.g. /queue-items/<id>
        self.func = func
        self.segments = path.split("/")

    def match(self, segments: list[str]) -> dict[str, str] | None:
        """The path parameters when the path's segments fit this route's."""
        if len(segments) != len(self.segments):
            return None
        params = {}
        for want, got in zip(self.segments, segments, strict=True):
            if want.startswith("<"):
                if not _VALUE.fullmatch(got):
                    return None
                params[want[1:-1]] = got
            elif want != got:
                return None
        return params


class Router:
    def __init__(self) -> None:
        self._static_routes: list[Route] = []
        self._dynamic_routes: list[Route] = []
        self._errors: list[tuple[type[Exception], Callable[[Exception], Response]]] = []
        self._not_found: Callable[[], Response] = lambda: Response(404)

    @property
    def routes(self) -> list[Route]:
        """Every route, in the order they are tried."""
        return self._static_routes + self._dynamic_routes

    def operation(self, operation_id: str) -> Callable[[Callable[..., Response]], Any]:
        """Serve the operation: the handler gets the event, then the path parameters by name."""
        op = spec.BY_ID[operation_id]

        def register(func: Callable[..., Response]) -> Callable[..., Response]:
            route = Route(op.method, op.rule, func)
            (self._dynamic_routes if "<" in op.rule else self._static_routes).append(route)
            return func

        return register

    def error(self, kind: type[Exception]) -> Callable[[Callable[[Any], Response]], Any]:
        """Answer an exception of ``kind`` (the most specific registered class wins)."""

        def register(func: Callable[[Any], Response]) -> Callable[[Any], Response]:
            self._errors.append((kind, func))
            return func

        return register

    def not_found(self, func: Callable[[], Response]) -> Callable[[], Response]:
        self._not_found = func
        return func

    def resolve(self, event: Event) -> dict[str, Any]:
        method = str(event.get("httpMethod") or "").upper()
        path = str(event.get("path") or "")
        # API Gateway routes /x/ to the resource /x and passes the path as sent: match it as /x.
        segments = (path[:-1] if path.endswith("/") and path != "/" else path).split("/")
        try:
            for route in self.routes:
                if route.method != method:
                    continue
                params = route.match(segments)
                if params is not None:
                    return route.func(event, **params).proxy()
            return self._not_found().proxy()
        except Exception as exc:
            return self._answer_error(exc).proxy()

    def _answer_error(self, exc: Exception) -> Response:
        for kind in type(exc).__mro__:
            for registered, func in self._errors:
                if registered is kind:
                    return func(exc)
        raise exc
