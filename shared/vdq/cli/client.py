"""The CLI's side of the REST API: one client, the errors it raises, the exit codes they give."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1  # anything unexpected
EXIT_USAGE = 2  # bad command line, or no API URL / token to use
EXIT_UNREACHABLE = 3  # the API could not be reached (or the local stack could not start)
EXIT_AUTH = 4  # 401/403: no token, a bad or expired token, or a missing permission
EXIT_NOT_FOUND = 5  # 404: no such item
EXIT_CONFLICT = 6  # 409: not possible in the item's state
EXIT_INVALID = 7  # 400/413/422: the API refused the input
EXIT_SERVER = 8  # 5xx: the API failed
EXIT_PARTIAL = 9  # a bulk command (resend) failed for some of its items

NEW_TOKEN_HELP = ("get a new one with vdq token for the local stack, or sign in to the "
                  "deployment's Cognito user pool again")  # fmt: skip
# The issuer of the local stack's tokens (vdq.local.front signs them), read here without PyJWT.
LOCAL_ISSUER = "vdq-local"
# A local token refused before it expires: a later start of the stack signs with a new secret,
# and vdq token would sign with the shell's old one again.
STALE_LOCAL_TOKEN_HELP = (
    "this token is a local stack's, and vdq local signs with a new secret at each start unless "
    "VDQ_LOCAL_JWT_SECRET is set when it starts: paste the export line of its banner again (it "
    "sets VDQ_TOKEN and VDQ_LOCAL_JWT_SECRET)")


class UsageError(Exception):
    """The command line cannot work as given (exit 2); the message says what to change."""


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str,
                 details: dict[str, Any] | None = None) -> None:  # fmt: skip
        super().__init__(message if status == 0 else f"{message} (HTTP {status}, {code})")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}

    @property
    def exit_code(self) -> int:
        if self.status == 0:
            return EXIT_UNREACHABLE
        if self.status in (401, 403):
            return EXIT_AUTH
        if self.status == 404:
            return EXIT_NOT_FOUND
        if self.status == 409:
            return EXIT_CONFLICT
        if self.status in (400, 413, 422):
            return EXIT_INVALID
        if self.status >= 500:
            return EXIT_SERVER
        return EXIT_FAILED

    def json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"status": self.status, "code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"error": error}


def token_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT, read without verifying it (only to explain a 401); {} if none."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def token_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT, read without verifying it (only to explain a 401)."""
    exp = token_claims(token).get("exp")
    return float(exp) if isinstance(exp, int | float) else None


def _reason(exc: Exception) -> str:
    """A short, human reason for a connection failure (no library internals)."""
    import requests

    text = str(exc).lower()
    if isinstance(exc, requests.Timeout):
        return "no answer in time"
    if "refused" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text or (
        "failed to resolve" in text or "name resolution" in text
    ):
        return "unknown host name"
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS failed"
    if isinstance(exc, requests.exceptions.InvalidURL | requests.exceptions.MissingSchema |
                  requests.exceptions.InvalidSchema):  # fmt: skip
        return "not a valid http(s) URL"
    return "the connection failed"


class Client:
    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        import requests

        self.url = url.rstrip("/")
        self.token = token
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None, params: dict | None = None,
             headers: dict | None = None) -> Any:  # fmt: skip
        import requests

        try:
            answer = self.session.request(method, self.url + path, json=body, params=params,
                                          headers=headers, timeout=self.timeout)  # fmt: skip
        except requests.RequestException as exc:
            raise ApiError(0, "unreachable",
                           f"cannot reach the API at {self.url} ({_reason(exc)})") from None
        if answer.status_code >= 400:
            raise self._error(answer)
        if not answer.content:
            return None
        try:
            return answer.json()
        except ValueError:
            return answer.text

    def put_upload(self, upload: dict[str, Any], data: bytes) -> None:
        """PUT a file to the presigned URL of ``upload`` (an answer of POST
        /attachments/uploads): with the headers it lists, never the API's bearer token."""
        import requests

        try:
            answer = requests.put(upload["url"], data=data, headers=upload["headers"],
                                  timeout=max(self.timeout, 300))  # fmt: skip
        except requests.RequestException as exc:
            raise ApiError(0, "unreachable", f"cannot reach the upload URL ({_reason(exc)})") \
                from None  # fmt: skip
        if answer.status_code >= 300:
            raise ApiError(answer.status_code, "upload_failed",
                           f"S3 refused the upload ({answer.status_code}): {answer.text[:200]}")

    def _error(self, answer: Any) -> ApiError:
        try:
            data = answer.json()
        except ValueError:
            data = {}
        error = data.get("error") if isinstance(data, dict) else None
        if not isinstance(error, dict):  # API Gateway's own answers: {"message": ...}
            error = {"message": data.get("message")} if isinstance(data, dict) else {}
        message = str(error.get("message") or answer.reason or "the request failed")
        details = error.get("details") if isinstance(error.get("details"), dict) else None
        if answer.status_code == 401:
            expiry = token_expiry(self.token)
            if expiry is not None and expiry <= time.time():
                when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(expiry))
                message = f"your token expired at {when}; {NEW_TOKEN_HELP}"
            elif token_claims(self.token).get("iss") == LOCAL_ISSUER:
                message = f"{message}; {STALE_LOCAL_TOKEN_HELP}"
            else:
                message = f"{message}; check VDQ_TOKEN or --token ({NEW_TOKEN_HELP})"
        return ApiError(answer.status_code, str(error.get("code") or "http_error"), message,
                        details)  # fmt: skip
