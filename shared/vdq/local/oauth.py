"""The local stack's sign-in: the authorization-code flow with PKCE, as Cognito's hosted UI runs it.

``GET /_local/oauth2/authorize`` checks the request (client, redirect URI, S256 challenge) and
shows a sign-in form: a user name and the groups to hold, as a local stack has no user pool (the
groups VDQ_GROUP_PERMISSIONS defines, the operators' ticked: a first sign-in may list items).
Posting it answers 302 to the redirect URI with a one-time ``code`` and the ``state``.
``POST /_local/oauth2/token`` exchanges the code once, for the client and redirect URI it was
issued to, when ``BASE64URL(SHA256(code_verifier))`` is the challenge; the answer holds an access
token (the HS256 token ``vdq token`` makes) and the same as the ID token. The only client is the
console, and its only redirect URI is the stack's ``/console/``: the issuer redirects nowhere else.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from vdq.local.front import make_token
from vdq.local.serving import LOOPBACK_NAMES

PREFIX = "/_local/oauth2"
CLIENT_ID = "vdq-console"
CODE_SECONDS = 300.0  # Cognito's codes last five minutes
TOKEN_HOURS = 1.0
_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")  # BASE64URL of a SHA-256, unpadded
_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")  # RFC 7636 4.1
_USER = re.compile(r"[A-Za-z0-9._@+-]{1,64}")
PAGE_HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": "default-src 'none'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    # The form's POST carries the page's origin (under no-referrer it would be "null"); the
    # page's address holds the state and the challenge only, never a code.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class OAuthError(Exception):
    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description


@dataclass(frozen=True)
class Grant:
    redirect_uri: str
    challenge: str
    subject: str
    groups: tuple[str, ...]
    expires: float


OPERATORS = "vdq-operators"
_OPERATING = "vdq.can_retry"  # what an operators' group of a deployment's own holds


def operators_group(permissions: Mapping[str, tuple[str, ...]]) -> str | None:
    """The group the form starts ticked: ``vdq-operators`` when the deployment defines it, else
    the first group that may retry items (an operators' group by another name)."""
    if OPERATORS in permissions:
        return OPERATORS
    return next((g for g, held in permissions.items() if _OPERATING in held), None)


class Issuer:
    def __init__(self, secret: str, redirect_uri: str, groups: tuple[str, ...],
                 now: Callable[[], float] = time.monotonic,
                 ticked: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.secret = secret
        self.redirect_uri = redirect_uri
        self.groups = groups
        self.ticked = ticked
        self.now = now
        self._codes: dict[str, Grant] = {}
        self._lock = threading.Lock()

    # Authorize: the request, the form, the code.
    def serve(self, request: Any, path: str, body: bytes) -> None:
        """Answer a request under ``PREFIX`` (the front hands them over)."""
        serve(self, request, path, body)

    def check_request(self, query: dict[str, str]) -> None:
        """The authorize request's parameters, or OAuthError (shown as a page: no redirect)."""
        if query.get("client_id") != CLIENT_ID:
            raise OAuthError(400, "invalid_client", f"unknown client_id; the console's is "
                                                    f"{CLIENT_ID}")  # fmt: skip
        if query.get("redirect_uri") != self.redirect_uri:
            raise OAuthError(400, "invalid_request",
                             f"redirect_uri must be {self.redirect_uri}")  # fmt: skip
        if query.get("response_type") != "code":
            raise OAuthError(400, "unsupported_response_type", "response_type must be code")
        if query.get("code_challenge_method") != "S256":
            raise OAuthError(400, "invalid_request", "code_challenge_method must be S256")
        if not _CHALLENGE.fullmatch(query.get("code_challenge") or ""):
            raise OAuthError(400, "invalid_request",
                             "code_challenge must be the unpadded BASE64URL of a SHA-256")

    def sign_in_page(self, query: dict[str, str], message: str = "") -> str:
        keep = ("client_id", "redirect_uri", "response_type", "code_challenge",
                "code_challenge_method", "state", "scope")  # fmt: skip
        hidden = "".join(
            f'<input type="hidden" name="{k}" value="{html.escape(query[k])}">'
            for k in keep if k in query
        )
        boxes = "".join(
            f'<p><label><input type="checkbox" name="group" value="{html.escape(g)}"'
            f'{" checked" if g in self.ticked else ""}> {html.escape(g)}</label></p>'
            for g in self.groups
        )
        note = f'<p role="alert">{html.escape(message)}</p>' if message else ""
        return (
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<title>Sign in: VDQ local</title></head><body><main>"
            "<h1>Sign in to the local VDQ stack</h1>"
            "<p>A local stack has no user pool: choose a user name and the groups to hold.</p>"
            f'{note}<form method="post" action="{PREFIX}/authorize">{hidden}'
            '<p><label for="username">User name</label> '
            '<input id="username" name="username" required autocomplete="username" '
            'value="local-user"></p>'
            f"<fieldset><legend>Groups</legend>{boxes}</fieldset>"
            '<p><button type="submit" id="sign-in">Sign in</button></p></form>'
            "</main></body></html>"
        )

    def authorize(self, form: dict[str, str], groups: list[str]) -> str:
        """The redirect URI with a new code (and the state) for a signed-in form."""
        self.check_request(form)
        subject = form.get("username", "")
        if not _USER.fullmatch(subject):
            raise OAuthError(400, "invalid_request", "username must be 1 to 64 letters, digits "
                                                     "or . _ @ + -")  # fmt: skip
        unknown = sorted(set(groups) - set(self.groups))
        if unknown:
            raise OAuthError(400, "invalid_request", f"unknown groups: {', '.join(unknown)}")
        code = secrets.token_urlsafe(32)
        grant = Grant(form["redirect_uri"], form["code_challenge"], subject,
                      tuple(dict.fromkeys(groups)), self.now() + CODE_SECONDS)  # fmt: skip
        with self._lock:
            self._codes = {c: g for c, g in self._codes.items() if g.expires > self.now()}
            self._codes[code] = grant
        answer = {"code": code, **({"state": form["state"]} if form.get("state") else {})}
        return f"{form['redirect_uri']}?{urlencode(answer)}"

    # Token: the code for tokens, once.
    def exchange(self, form: dict[str, str]) -> dict[str, Any]:
        if form.get("grant_type") != "authorization_code":
            raise OAuthError(400, "unsupported_grant_type", "grant_type must be "
                                                            "authorization_code")  # fmt: skip
        if form.get("client_id") != CLIENT_ID:
            raise OAuthError(400, "invalid_client", "unknown client_id")
        with self._lock:  # taken whatever follows: a code is good for one attempt
            grant = self._codes.pop(form.get("code") or "", None)
        if grant is None or grant.expires <= self.now():
            raise OAuthError(400, "invalid_grant", "the code is unknown, used or expired")
        if form.get("redirect_uri") != grant.redirect_uri:
            raise OAuthError(400, "invalid_grant", "redirect_uri is not the one authorized")
        verifier = form.get("code_verifier") or ""
        if not _VERIFIER.fullmatch(verifier):
            raise OAuthError(400, "invalid_request", "code_verifier must be 43 to 128 "
                                                     "unreserved characters")  # fmt: skip
        if not hmac.compare_digest(challenge_of(verifier), grant.challenge):
            raise OAuthError(400, "invalid_grant", "code_verifier does not match the "
                                                   "code_challenge")  # fmt: skip
        token = make_token(self.secret, list(grant.groups), subject=grant.subject,
                           hours=TOKEN_HOURS)  # fmt: skip
        return {"access_token": token, "id_token": token, "token_type": "Bearer",
                "expires_in": int(TOKEN_HOURS * 3600)}  # fmt: skip


def challenge_of(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def form_fields(body: bytes) -> tuple[dict[str, str], list[str]]:
    """A form body's fields (the last of a repeated one) and its ``group`` values."""
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[-1] for k, v in parsed.items()}, parsed.get("group", [])


def serve(issuer: Issuer, request: Any, path: str, body: bytes) -> None:
    """Answer a request under ``PREFIX`` (the local front's hook).

    Only for a loopback Host, as the local AWS endpoint: a web page that rebinds its own name
    to 127.0.0.1 would otherwise be same-origin with the issuer and sign itself in."""
    query = {k: v[-1] for k, v in parse_qs(urlsplit(request.path).query).items()}
    port = getattr(request.server, "server_port", "")
    hosts = {n for name in LOOPBACK_NAMES for n in (name, f"{name}:{port}")}
    host = (request.headers.get("Host") or "").lower()
    if host not in hosts:
        request.answer(403, {"error": "access_denied", "error_description":
                             f"the local sign-in answers only at a loopback address, not Host "
                             f"{host!r}"}, {"Cache-Control": "no-store"})  # fmt: skip
        return
    try:
        if path == f"{PREFIX}/authorize" and request.command == "GET":
            issuer.check_request(query)
            request.answer(200, issuer.sign_in_page(query), PAGE_HEADERS)
        elif path == f"{PREFIX}/authorize" and request.command == "POST":
            # A page elsewhere can post the form (a navigation keeps the loopback Host): it
            # would mint a code for a user and groups of its choosing. Only the issuer's own
            # sign-in page may post it.
            if request.headers.get("Origin") != f"http://{host}":
                raise OAuthError(403, "access_denied", "the sign-in form is accepted only from "
                                                       "the sign-in page")  # fmt: skip
            form, groups = form_fields(body)
            where = issuer.authorize(form, groups)
            request.answer(302, b"", {"Location": where, "Cache-Control": "no-store",
                                      "Referrer-Policy": "no-referrer"})  # fmt: skip
        elif path == f"{PREFIX}/token" and request.command == "POST":
            tokens = issuer.exchange(form_fields(body)[0])
            request.answer(200, tokens, {"Cache-Control": "no-store"})
        else:
            raise OAuthError(404, "not_found", f"no {request.command} {path}: the local issuer has "
                             f"GET and POST {PREFIX}/authorize and POST {PREFIX}/token")
    except OAuthError as exc:
        if path.endswith("/token") or request.command not in ("GET", "POST"):
            request.answer(exc.status, {"error": exc.error, "error_description": exc.description},
                           {"Cache-Control": "no-store"})  # fmt: skip
        else:
            page = ('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign-in '
                    f'error</title></head><body><main><h1>Sign-in error</h1><p role="alert">'
                    f"{html.escape(exc.error)}: {html.escape(exc.description)}</p></main>"
                    "</body></html>")
            request.answer(exc.status, page, PAGE_HEADERS)
