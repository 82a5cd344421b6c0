"""The local API Gateway: HTTP requests in, REST proxy events to the same handlers the Lambdas run.

Each request becomes the event API Gateway's REST API passes to a Lambda proxy integration
(resource, path, pathParameters, query strings, headers, body, requestContext). Protected routes
need ``Authorization: Bearer <JWT>``, an HS256 token verified with ``VDQ_LOCAL_JWT_SECRET``; its
``sub`` and ``cognito:groups`` become ``requestContext.authorizer.claims`` as the Cognito
authorizer passes them. ``GET /_local/status`` reports the parts of the stack.
"""

from __future__ import annotations

import base64
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import jwt

from vdq.api import GATEWAY_BY_TYPE, MAX_BODY_BYTES, error_body
from vdq.local.functions import Functions
from vdq.local.serving import QuietHandler, Server, log

ISSUER = "vdq-local"
STAGE = "local"
TEXT_TYPES = ("application/json", "text/", "application/x-www-form-urlencoded",
              "application/xml", "application/yaml")  # fmt: skip


@dataclass(frozen=True)
class Route:
    method: str
    resource: str  # API Gateway resource template, e.g. /queue-items/{id}
    function: str
    public: bool = False

    def match(self, path: str) -> dict[str, str] | None:
        pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.resource))
        found = re.fullmatch(pattern, path)
        return {k: unquote(v) for k, v in found.groupdict().items()} if found else None


ROUTES = (
    Route("POST", "/emails", "enqueue"),
    Route("POST", "/sms", "enqueue"),
    Route("GET", "/queue-items", "operator"),
    Route("GET", "/queue-items/{id}", "operator"),
    Route("POST", "/queue-items/{id}/transitions/{name}", "operator"),
    Route("GET", "/sent-items", "operator"),
    Route("POST", "/sent-items/resend", "operator"),
    Route("GET", "/sent-items/{id}", "operator"),
    Route("POST", "/sent-items/{id}/resend", "operator"),
    Route("GET", "/attachments/{id}", "operator"),
    Route("POST", "/twilio/status-callback", "webhook", public=True),
    Route("GET", "/health", "operator", public=True),
    Route("GET", "/openapi.json", "operator", public=True),
)


def make_token(secret: str, groups: list[str], subject: str = "local-user",
               hours: float = 12.0) -> str:  # fmt: skip
    now = int(time.time())
    claims = {"sub": subject, "cognito:groups": groups, "iss": ISSUER, "token_use": "id",
              "cognito:username": subject, "iat": now, "exp": now + int(hours * 3600)}  # fmt: skip
    return jwt.encode(claims, secret, algorithm="HS256")


def verify_token(secret: str, header: str | None) -> dict[str, str] | None:
    """The authorizer claims of a valid bearer token (strings, as API Gateway passes them)."""
    if not header or not header.lower().startswith("bearer "):
        return None
    try:
        claims = jwt.decode(header[7:].strip(), secret, algorithms=["HS256"], issuer=ISSUER,
                            options={"require": ["sub", "exp"]})  # fmt: skip
    except jwt.PyJWTError:
        return None
    out = {}
    for key, value in claims.items():
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        out[key] = str(value)
    return out


def _find(method: str, path: str) -> tuple[Route, dict[str, str]] | str | None:
    """(route, path parameters); "method" when the path exists with another method."""
    other = False
    for route in ROUTES:
        params = route.match(path)
        if params is None:
            continue
        if route.method == method:
            return route, params
        other = True
    return "method" if other else None


def build_event(request: QuietHandler, route: Route, params: dict[str, str], body: bytes,
                claims: dict[str, str] | None) -> dict[str, Any]:  # fmt: skip
    url = urlsplit(request.path)
    query = parse_qs(url.query, keep_blank_values=True)
    headers: dict[str, list[str]] = {}
    for name, value in request.headers.items():
        headers.setdefault(name, []).append(value)
    headers.setdefault("X-Forwarded-Proto", ["http"])
    headers.setdefault("X-Forwarded-Port", [str(getattr(request.server, "server_port", ""))])
    content_type = request.headers.get("Content-Type") or ""
    text = not body or any(content_type.startswith(t) for t in TEXT_TYPES)
    now = datetime.now(UTC)
    context: dict[str, Any] = {
        "resourceId": "local", "resourcePath": route.resource, "httpMethod": route.method,
        "extendedRequestId": uuid.uuid4().hex, "requestTime": now.strftime("%d/%b/%Y:%H:%M:%S %z"),
        "path": url.path, "accountId": "123456789012", "protocol": "HTTP/1.1", "stage": STAGE,
        "domainPrefix": "127", "requestTimeEpoch": int(now.timestamp() * 1000),
        "requestId": str(uuid.uuid4()), "domainName": request.headers.get("Host", "127.0.0.1"),
        "apiId": "local",
        "identity": {"sourceIp": request.client_address[0],
                     "userAgent": request.headers.get("User-Agent")},
    }  # fmt: skip
    if claims is not None:
        context["authorizer"] = {"claims": claims}
    return {
        "resource": route.resource,
        "path": url.path,
        "httpMethod": route.method,
        "headers": {k: v[-1] for k, v in headers.items()},
        "multiValueHeaders": headers,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": params or None,
        "stageVariables": None,
        "requestContext": context,
        "body": (body.decode("utf-8", "replace") if text else base64.b64encode(body).decode())
        if body else None,
        "isBase64Encoded": bool(body) and not text,
    }


def _gateway_error(request: QuietHandler, response_type: str,
                   headers: dict[str, str] | None = None, message: str | None = None) -> None:
    """Answer as API Gateway's gateway response of ``response_type`` does once the deployed
    API rewrites it (infra/api.py): its status, the error shape, its code."""
    gateway = GATEWAY_BY_TYPE[response_type]
    assert gateway.status is not None
    request.answer(gateway.status, error_body(gateway.code, message or gateway.meaning), headers)


class Front:
    def __init__(self, functions: Functions, secret: str, port: int,
                 status: Callable[[], dict[str, Any]]) -> None:  # fmt: skip
        self.functions = functions
        self.secret = secret
        self.status = status
        self.ready = False
        front = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                front.handle(self)

            def __getattr__(self, name: str) -> Any:
                # Every method reaches the router, which answers 405 for one a route lacks (as
                # API Gateway does), instead of http.server's 501 for a method it has no do_ for.
                if name.startswith("do_"):
                    return self.do_GET
                raise AttributeError(name)

        self.server = Server("front", Handler, port)
        self.url = self.server.url

    def start(self) -> Front:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    def handle(self, request: QuietHandler) -> None:
        path = urlsplit(request.path).path.rstrip("/") or "/"
        if int(request.headers.get("Content-Length") or 0) > MAX_BODY_BYTES:
            request.close_connection = True  # the body is not read: the connection cannot go on
            _gateway_error(request, "REQUEST_TOO_LARGE", {"Connection": "close"})
            return
        body = request.read_body()
        if path == "/_local/status":
            request.answer(200, {"ready": self.ready, **self.status()})
            return
        found = _find(request.command, path)
        if found is None:
            _gateway_error(request, "RESOURCE_NOT_FOUND", message=f"no route {path}")
            return
        if found == "method":
            request.answer(405, error_body("method_not_allowed",
                                           f"no route {request.command} {path}"))
            return
        assert not isinstance(found, str)
        route, params = found
        if route.resource == "/health" and (not self.ready or
                                            not self.functions.available("operator")):
            self._health(request)
            return
        claims = None
        if not route.public:
            claims = verify_token(self.secret, request.headers.get("Authorization"))
            if claims is None:  # the Cognito authorizer answers before any function runs
                _gateway_error(request, "UNAUTHORIZED")
                return
        event = build_event(request, route, params, body, claims)
        try:
            result = self.functions.invoke(route.function, event)
        except LookupError as exc:
            request.answer(502, {"error": {"code": "function_missing", "message": str(exc)}})
            return
        except Exception as exc:
            log.exception("functions/%s raised", route.function)
            request.answer(502, {"error": {"code": "function_error", "message": str(exc)}})
            return
        self._respond(request, result)

    def _health(self, request: QuietHandler) -> None:
        status = 200 if self.ready else 503
        request.answer(status, {"status": "ok" if self.ready else "starting", **self.status()})

    @staticmethod
    def _respond(request: QuietHandler, result: Any) -> None:
        if not isinstance(result, dict) or "statusCode" not in result:
            request.answer(502, {"error": {"code": "bad_function_response",
                                           "message": "the function returned no statusCode"}})
            return
        headers = {k: str(v) for k, v in (result.get("headers") or {}).items()}
        for name, values in (result.get("multiValueHeaders") or {}).items():
            headers[name] = ", ".join(str(v) for v in values)
        raw = result.get("body") or ""
        data = base64.b64decode(raw) if result.get("isBase64Encoded") else raw.encode()
        headers.pop("Content-Length", None)
        request.answer(int(result["statusCode"]), data, headers)
