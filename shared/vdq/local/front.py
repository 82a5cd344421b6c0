"""The local API Gateway: HTTP requests in, REST proxy events to the same handlers the Lambdas run.

Each request becomes the event API Gateway's REST API passes to a Lambda proxy integration
(resource, path, pathParameters, query strings, headers, body, requestContext). Protected routes
need ``Authorization: Bearer <JWT>``, an HS256 token verified with ``VDQ_LOCAL_JWT_SECRET``; its
``sub`` and ``cognito:groups`` become ``requestContext.authorizer.claims`` as the Cognito
authorizer passes them. ``GET /_local/status`` reports the parts of the stack; under
``/_local/oauth2/`` the console signs in (vdq.local.oauth, the local stand-in for Cognito's
hosted UI).

What happens before a function runs follows API Gateway's REST API: a trailing slash reaches the
same resource (the event's ``path`` keeps it); a body over 10 MB is 413, and so is a request
whose proxy event is over Lambda's 6 MiB synchronous payload (Lambda refuses to invoke with it:
about 6 MB of body, so 4.5 MB of base64 attachments, is the most a function gets); a chunked body is
read whole (the function gets the body, and no Transfer-Encoding header, as API Gateway drops
it); a Content-Length that is not a number is 400. Where API Gateway answers a method no
resource has with 403 "Missing Authentication Token", the local front answers what that means:
405 with ``Allow`` (HEAD and TRACE included: a REST API serves HEAD only where it is defined).
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import jwt

from vdq import console
from vdq.api import GATEWAY_BY_TYPE, LAMBDA_MAX_PAYLOAD_BYTES, error_body
from vdq.api import GATEWAY_MAX_BODY_BYTES as MAX_BODY_BYTES
from vdq.cli.client import LOCAL_ISSUER
from vdq.local.functions import Functions
from vdq.local.serving import QuietHandler, Server, log
from vdq.operations import spec

ISSUER = LOCAL_ISSUER
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


# The routes of the operation table (vdq.operations.spec), as the deployed API has them, and
# the console's files (vdq.console), which the operator function serves without an authorizer.
ROUTES = tuple(Route(op.method, op.path, op.function, public=not op.permissions)
               for op in spec.OPERATIONS) + tuple(
    Route("GET", resource, "operator", public=True) for resource in console.RESOURCES)  # fmt: skip


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


def _find(method: str, path: str) -> tuple[Route, dict[str, str]] | list[str] | None:
    """(route, path parameters); the methods the path's resource has when ``method`` is not one.

    The path is the resource with the fewest parameters that fits it, as API Gateway picks:
    ``/sent-items/resend`` is that resource, never ``/sent-items/{id}``.
    """
    fits = [(r, params) for r in ROUTES if (params := r.match(path)) is not None]
    if not fits:
        return None
    resource = min((r.resource for r, _ in fits), key=lambda res: res.count("{"))
    fits = [(r, params) for r, params in fits if r.resource == resource]
    for route, params in fits:
        if route.method == method:
            return route, params
    return sorted({r.method for r, _ in fits})


class BadBody(Exception):
    def __init__(self, status: int, message: str, read: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.read = read  # the whole body was read: the connection can serve another request


def read_body(request: QuietHandler) -> bytes:
    """The request body as API Gateway hands it on: whole (chunked or not), at most 10 MB."""
    if "chunked" in (request.headers.get("Transfer-Encoding") or "").lower():
        return _read_chunked(request)
    text = (request.headers.get("Content-Length") or "0").strip()
    # ASCII digits only: http.server reads headers as Latin-1, and "\u00b2" passes isdigit.
    if not (text.isascii() and text.isdigit()):
        raise BadBody(400, "the Content-Length header is not a number of bytes")
    length = int(text) if len(text) <= 18 else MAX_BODY_BYTES + 1  # int() refuses 4,301 digits
    if length > MAX_BODY_BYTES:  # answered before it is read (see Front.handle)
        raise BadBody(413, f"the body is over the limit of {MAX_BODY_BYTES} bytes")
    return request.rfile.read(length) if length else b""


def _drain(request: QuietHandler) -> None:
    """After answering 413 (and Connection: close): read away what the client still sends, for
    a while and up to twice the limit, so a client that is still writing its body gets to read
    the answer instead of a reset connection."""
    left = 2 * MAX_BODY_BYTES
    try:
        request.connection.settimeout(2.0)
        while left > 0:
            got = request.rfile.read1(min(left, 1 << 20))
            if not got:
                return
            left -= len(got)
    except OSError:
        return


_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")


def _read_chunked(request: QuietHandler) -> bytes:
    body = bytearray()
    while True:
        size_line = request.rfile.readline(1024).split(b";", 1)[0].strip()
        if not _CHUNK_SIZE.fullmatch(size_line):  # int() would take "0x2", "+2" and "2_0"
            raise BadBody(400, "the chunked body is malformed")
        size = int(size_line, 16)
        if size == 0:
            while request.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                pass  # trailer fields
            return bytes(body)
        if len(body) + size > MAX_BODY_BYTES:
            raise BadBody(413, f"the body is over the limit of {MAX_BODY_BYTES} bytes")
        body += request.rfile.read(size)
        request.rfile.readline(1024)  # the CRLF after the chunk


def build_event(request: QuietHandler, route: Route, params: dict[str, str], body: bytes,
                claims: dict[str, str] | None) -> dict[str, Any]:  # fmt: skip
    url = urlsplit(request.path)
    query = parse_qs(url.query, keep_blank_values=True)
    headers: dict[str, list[str]] = {}
    for name, value in request.headers.items():
        if name.lower() != "transfer-encoding":  # API Gateway drops it: the body comes whole
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


def payload_size(event: dict[str, Any]) -> int:
    """Bytes of the invocation request Lambda gets for ``event``: the event as JSON."""
    return len(json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode())


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
        self.issuer: Any = None  # vdq.local.oauth.Issuer: the console's sign-in, when set
        front = self

        class Handler(QuietHandler):
            timeout = 60  # a client that stops sending mid-body frees its thread

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
        try:
            body = read_body(request)
        except BadBody as exc:
            # What is left of an unread body cannot be skipped: close the connection after.
            headers = None if exc.read else {"Connection": "close"}
            if exc.status == 413:
                _gateway_error(request, "REQUEST_TOO_LARGE", headers, message=exc.message)
                _drain(request)
            else:
                request.answer(exc.status, error_body("bad_request", exc.message), headers)
            return
        path = urlsplit(request.path).path.rstrip("/") or "/"
        if path == "/_local/status" and request.command == "GET":
            request.answer(200, {"ready": self.ready, **self.status()})
            return
        if self.issuer is not None and path.startswith("/_local/oauth2/"):
            self.issuer.serve(request, path, body)
            return
        found = _find(request.command, path)
        if not isinstance(found, tuple):
            if found is None:
                _gateway_error(request, "RESOURCE_NOT_FOUND",
                               message=f"no route {request.command} {path}")  # fmt: skip
            else:
                request.answer(405, error_body("method_not_allowed",
                                               f"{path} takes {', '.join(found)}, "
                                               f"not {request.command}"),
                               {"Allow": ", ".join(found)})  # fmt: skip
            return
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
        size = payload_size(event)
        if size > LAMBDA_MAX_PAYLOAD_BYTES:
            _gateway_error(request, "REQUEST_TOO_LARGE", message=(
                f"the request's event takes {size} bytes, over Lambda's limit of "
                f"{LAMBDA_MAX_PAYLOAD_BYTES} for a synchronous invocation; send large "
                "attachments through POST /attachments/uploads"))  # fmt: skip
            return
        try:
            result = self.functions.invoke(route.function, event, lane="api")
        except LookupError as exc:
            request.answer(502, {"error": {"code": "function_missing", "message": str(exc)}})
            return
        except Exception:  # as API Gateway: the caller learns that, not the function's error
            log.exception("functions/%s raised", route.function)
            request.answer(502, {"error": {"code": "function_error",
                                           "message": "the function failed; see the log"}})
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
