"""The edge of the REST API: API Gateway proxy events in, JSON responses out.

Shared by every function behind API Gateway: the caller's identity from the Cognito
authorizer's claims, JSON bodies, and the one error shape
``{"error": {"code": ..., "message": ...}}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from vdq.core.errors import (
    BadRequest,
    Forbidden,
    PayloadTooLarge,
    Unauthorized,
    ValidationError,
    VdqError,
)
from vdq.core.settings import Settings
from vdq.core.text import check_text

GATEWAY_MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit: 413 before a function
# A synchronous Lambda invocation takes at most 6 MiB of request, and the request is the whole
# proxy event (headers, request context and the body as a JSON string) as JSON: a body near 6 MiB
# never reaches the function, however much API Gateway accepts. A body is the event less its
# envelope (a few KB of context and headers), so no body over the payload limit can arrive.
LAMBDA_MAX_PAYLOAD_BYTES = 6 * 1024 * 1024
MAX_BODY_BYTES = LAMBDA_MAX_PAYLOAD_BYTES
THROTTLE_RETRY_AFTER_SECONDS = 1  # the Retry-After of a throttled request


class GatewayError(NamedTuple):
    """An answer API Gateway gives itself, before (or instead of) a function: the deployed API
    rewrites each to the error shape (infra/api.py) and the local front answers the same."""

    response_type: str  # API Gateway's gateway response type
    status: int | None  # the status sent; None keeps API Gateway's own (the DEFAULT_* types)
    code: str  # error.code of the answer
    meaning: str


GATEWAY_ERRORS: tuple[GatewayError, ...] = (
    GatewayError("UNAUTHORIZED", 401, "unauthorized",
                 "no bearer token, or one that is expired, malformed or of another user pool"),
    GatewayError("ACCESS_DENIED", 403, "forbidden", "the authorizer refused the token"),
    GatewayError("MISSING_AUTHENTICATION_TOKEN", 404, "not_found",
                 "no such route, or not with this method"),
    GatewayError("RESOURCE_NOT_FOUND", 404, "not_found", "no such route"),
    GatewayError("BAD_REQUEST_PARAMETERS", 400, "bad_request", "a required parameter is missing"),
    GatewayError("BAD_REQUEST_BODY", 400, "bad_request", "the body is malformed"),
    GatewayError("REQUEST_TOO_LARGE", 413, "too_large",
                 "the request is over API Gateway's 10 MB, or its event over Lambda's 6 MB"),
    GatewayError("UNSUPPORTED_MEDIA_TYPE", 415, "unsupported_media_type",
                 "the Content-Type is not one the operation takes"),
    GatewayError("THROTTLED", 429, "throttled",
                 "over the stage's request rate; try again after Retry-After seconds"),
    GatewayError("QUOTA_EXCEEDED", 429, "throttled", "over a usage plan's quota"),
    GatewayError("WAF_FILTERED", 403, "forbidden", "refused by a web application firewall"),
    GatewayError("INTEGRATION_FAILURE", 504, "integration_failure",
                 "the function could not be invoked"),
    GatewayError("INTEGRATION_TIMEOUT", 504, "timeout",
                 "the function did not answer in time; the request may still take effect"),
    GatewayError("DEFAULT_4XX", None, "client_error", "any other refusal by API Gateway"),
    GatewayError("DEFAULT_5XX", None, "gateway_error",
                 "any other failure in API Gateway, or a function that failed or answered "
                 "nothing API Gateway could read (502)"),
)  # fmt: skip
GATEWAY_BY_TYPE = {g.response_type: g for g in GATEWAY_ERRORS}


def gateway_template(code: str) -> str:
    """The body template of a gateway response: the error shape, with API Gateway's message
    (``messageString`` is already a quoted JSON string)."""
    return '{"error":{"code":' + json.dumps(code) + ',"message":$context.error.messageString}}'


class Caller(NamedTuple):  # immutable, and cheaper to define than a frozen dataclass
    subject: str
    groups: tuple[str, ...]
    permissions: frozenset[str]

    def require(self, *permissions: str) -> None:
        missing = [p for p in permissions if p not in self.permissions]
        if missing:
            raise Forbidden(f"this needs the permissions {missing}")


def parse_groups(value: Any) -> tuple[str, ...]:
    """``cognito:groups`` as API Gateway passes it: a list, "a,b", "[a b]" or a JSON list."""
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    text = str(value).strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
            if isinstance(parsed, list):
                return tuple(str(v) for v in parsed)
        except ValueError:
            pass
        text = text.strip("[]")
    parts = text.replace(",", " ").split()
    return tuple(p for p in parts if p)


def caller(event: Mapping[str, Any], settings: Settings) -> Caller:
    """The authenticated caller; Unauthorized when the authorizer passed no identity."""
    context = event.get("requestContext") or {}
    claims = (context.get("authorizer") or {}).get("claims") or {}
    subject = claims.get("sub") or claims.get("client_id") or claims.get("username")
    if not subject:
        raise Unauthorized("a valid bearer token is required")
    groups = parse_groups(claims.get("cognito:groups"))
    # Machine clients (client credentials) carry scopes instead of groups: "vdq/<group>".
    scopes = str(claims.get("scope") or "").split()
    groups += tuple(s.split("/", 1)[1] for s in scopes if s.startswith("vdq/"))
    return Caller(str(subject), groups, settings.permissions_for(groups))


def no_query(event: Mapping[str, Any]) -> None:
    """Refuse any query parameter (a 422 naming it) of an operation that takes none: ignored,
    a ``?send_at=`` or ``?priority=`` meant for the body would send the request now and in
    the normal lane, without a word."""
    given = {**(event.get("multiValueQueryStringParameters") or {}),
             **(event.get("queryStringParameters") or {})}  # fmt: skip
    if given:
        raise ValidationError(sorted(given)[0], "is not a known query parameter")


def no_body(event: Mapping[str, Any]) -> None:
    """Refuse a body given to an operation that takes none, as invalid input (422): naming
    its first field, or ``body`` for anything but an object. Ignored, a resend's ``send_at``
    would send the copy now. No body, an empty one (or only white space: a file's newline),
    ``{}`` and ``null`` are what clients send for none: taken."""
    raw = event.get("body")
    if raw is None or raw == "":
        return
    try:
        if event.get("isBase64Encoded"):
            import base64

            raw = base64.b64decode(raw).decode("utf-8")
        if not raw.strip(" \t\r\n"):  # JSON's white space: nothing there to ignore
            return
        data = json.loads(raw)
    except (ValueError, RecursionError):
        data = raw  # not JSON: a body all the same
    if isinstance(data, dict) and data:
        raise ValidationError(sorted(data)[0], "is not a known field: this operation takes "
                              "no body")  # fmt: skip
    if data is not None and data != {}:
        raise ValidationError("body", "this operation takes no body")


def json_body(event: Mapping[str, Any]) -> Any:
    """The request's JSON body; BadRequest (400) naming the problem for any malformed body,
    PayloadTooLarge (413) over API Gateway's limit, ValidationError (422) for a string that is
    not text. Never a Python error message: the client reads these."""
    raw = event.get("body")
    if raw is None or raw == "":
        raise BadRequest("the request needs a JSON body")
    if event.get("isBase64Encoded"):
        import base64

        try:
            raw = base64.b64decode(raw).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise BadRequest("the body is not UTF-8 text") from None
    if len(raw) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"the body is over the limit of {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(raw, parse_constant=_no_constant, object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        raise BadRequest(
            f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except _NotJson as exc:
        raise BadRequest(str(exc)) from None
    except RecursionError:
        raise BadRequest(f"the body nests more than {MAX_DEPTH} levels deep") from None
    except ValueError:  # the integer digit limit (sys.get_int_max_str_digits)
        raise BadRequest("the body holds a number too long to read") from None
    check_json(data)
    return data


MAX_DEPTH = 32  # a VDQ body nests 4 levels; a deeper one is refused before anything walks it


class _NotJson(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJson(f"the body is not valid JSON: {name} is not a JSON value")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are distinct: a key given twice has no one meaning (Python
    reads the last, other readers the first)."""
    data = dict(pairs)
    if len(data) == len(pairs):
        return data
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            name = key.encode("ascii", "backslashreplace").decode()
            raise _NotJson(f"the body names {name!r} twice in one object: give each key once")
        seen.add(key)
    return data


def check_json(data: Any) -> None:
    """Refuse nesting over MAX_DEPTH (400) and strings or keys holding a lone surrogate (422,
    naming the field): such a string cannot be encoded as UTF-8, so it could never be sent.

    One iterator per open container, and a value's path written only for an error: the walk
    takes memory of the body's depth, not of its width (a 6 MB body holds millions of values)."""
    if isinstance(data, str):
        check_text(data, "body", single_line=False)
    keys: list[Any] = []  # the key or index of each open container but the top one
    open_: list[Iterator[tuple[Any, Any]]] = [_entries(data)]
    while open_:
        for key, value in open_[-1]:
            if isinstance(key, str):
                check_text(key, _path([*keys, key]), single_line=False)
            if isinstance(value, str):
                check_text(value, _path([*keys, key]), single_line=False)
            elif isinstance(value, dict | list) and value:
                if len(open_) >= MAX_DEPTH:
                    raise BadRequest(f"the body nests more than {MAX_DEPTH} levels deep")
                keys.append(key)
                open_.append(_entries(value))
                break
        else:
            open_.pop()
            if keys:
                keys.pop()


def _entries(value: Any) -> Iterator[tuple[Any, Any]]:
    """A container's (key, value) pairs; none for any other value."""
    if isinstance(value, dict):
        return iter(value.items())
    return enumerate(value) if isinstance(value, list) else iter(())


def _path(keys: list[Any]) -> str:
    """Where a value is, as an error names it: ``to[1].email`` (keys as ASCII)."""
    out = ""
    for key in keys:
        if isinstance(key, int):
            out += f"[{key}]"
        else:
            name = key.encode("ascii", "backslashreplace").decode()
            out += f".{name}" if out else name
    return out or "body"


def header(event: Mapping[str, Any], name: str) -> str | None:
    headers = event.get("headers") or {}
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def json_text(body: Any) -> str:
    """An answer's JSON, compact and in UTF-8, not \\uXXXX: text outside ASCII (the names and
    origin of the most receivers, an item's content), taken within Lambda's 6 MiB, took up to six
    times its size escaped, over what Lambda returns (6 MB)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def response(status: int, body: Any = None, headers: Mapping[str, str] | None = None) -> dict:
    out: dict[str, Any] = {"statusCode": status, "headers": dict(headers or {})}
    if body is not None:
        out["headers"].setdefault("Content-Type", "application/json")
        out["body"] = json_text(body)
    else:
        out["body"] = ""
    return out


def error_body(code: str, message: str, details: Mapping[str, Any] | None = None) -> dict:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = dict(details)
    return {"error": error}


def error_response(exc: VdqError) -> dict:
    # An error may carry headers of its answer (a quota's 429 carries Retry-After).
    return response(exc.status, error_body(exc.code, exc.message, exc.details),
                    getattr(exc, "headers", None))
