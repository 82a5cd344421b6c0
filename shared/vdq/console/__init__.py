"""The operator console: a static app (one page, six script modules, one style sheet) and its
configuration, served by the operator function on two routes API Gateway passes without an
authorizer, as the local front does.

The files hold no secret and no data: everything the console shows comes from the REST API with
the user's own bearer token, which the API checks as for any client. Serving the files from the
function (not from a bucket behind the API) needs no bucket, no API Gateway role to read it and
no upload step: one route more on a function that is there anyway.

``config.json`` tells the page where to sign in (the Cognito domain or the local issuer), its
client id, the group -> permission map (``VDQ_GROUP_PERMISSIONS``, so the page offers only what
the user's groups allow), the states each operator transition takes an item from (so an item's
page offers only what its state allows) and the states the list filters take. Every answer
carries a strict Content-Security-Policy: scripts and styles from the stack only, none inline,
no framing, and requests to the API (same origin) and the token endpoint only.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from vdq.core.settings import Settings

# API Gateway resources (GET, no authorizer), as infra/api.py and the local front declare them.
RESOURCES = ("/console", "/console/{file}")
STATIC = Path(__file__).with_name("static")
TYPES = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "dom.js": "text/javascript; charset=utf-8",
    "session.js": "text/javascript; charset=utf-8",
    "item.js": "text/javascript; charset=utf-8",
    "lists.js": "text/javascript; charset=utf-8",
    "suppressions.js": "text/javascript; charset=utf-8",
    "producers.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
CONFIG = "config.json"
SCOPES = "openid aws.cognito.signin.user.admin"  # a user's access token: groups in its claims


def security_headers(settings: Settings) -> dict[str, str]:
    token_origin = _origin(settings.console_auth_url)
    connect = " ".join(["'self'", *([token_origin] if token_origin else [])])
    policy = "; ".join([
        "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self'",
        f"connect-src {connect}", "base-uri 'none'", "form-action 'none'",
        "frame-ancestors 'none'",
    ])  # fmt: skip
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Cache-Control": "no-cache",
    }


def answer(event: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The Lambda proxy answer to a GET of ``/console``, ``/console/`` or ``/console/{file}``.

    ``/console`` (no slash) redirects to ``console/`` so the page's relative URLs (its files,
    and ``../`` for the API) resolve under it, with or without a stage in front."""
    status, headers, body = _answer(str(event.get("path") or ""),
                                    (event.get("pathParameters") or {}).get("file"), settings)
    return {"statusCode": status, "body": body, "isBase64Encoded": False,
            "multiValueHeaders": {k: [v] for k, v in headers.items()}}  # fmt: skip


def _answer(path: str, file: str | None, settings: Settings) -> tuple[int, dict[str, str], str]:
    headers = security_headers(settings)
    if file is None and not path.endswith("/"):
        return 302, {**headers, "Location": "console/"}, ""
    name = file or "index.html"
    if name == CONFIG:
        body = json.dumps(config(settings), separators=(",", ":"))
        return 200, {**headers, "Content-Type": "application/json",
                     "Cache-Control": "no-store"}, body  # fmt: skip
    if name not in TYPES:
        return 404, {**headers, "Content-Type": "application/json"}, json.dumps(
            {"error": {"code": "not_found", "message": f"the console has no file {name}"}})
    return 200, {**headers, "Content-Type": TYPES[name]}, _read(name)


def config(settings: Settings) -> dict[str, Any]:
    from vdq.operations import actions, listing, producers, spec, suppressions
    from vdq.workflow import table as workflow

    base = (settings.console_auth_url or "").rstrip("/")
    return {
        "authorize_url": f"{base}/oauth2/authorize" if base else None,
        "token_url": f"{base}/oauth2/token" if base else None,
        # Cognito's hosted UI keeps a session of its own: signing out ends it there too.
        "logout_url": f"{base}/logout" if base and not base.endswith("/_local") else None,
        "client_id": settings.console_client_id,
        "scope": SCOPES,
        "permissions": {g: list(p) for g, p in settings.group_permissions.items()},
        # What each action needs, all of it (the server checks the same).
        "needs": {
            "list": [listing.LIST_PERMISSION],
            "read": [actions.READ_PERMISSION],
            "suppressions": [suppressions.LIST_PERMISSION],
            "change_suppressions": [suppressions.CHANGE_PERMISSION],
            "release_hold": [producers.RELEASE_PERMISSION],
            "cancel_held": [producers.RELEASE_PERMISSION, producers.CANCEL_PERMISSION],
            "resend": [actions.RESEND_PERMISSION, actions.READ_PERMISSION],
            **{name: [*workflow.TRANSITION_GATES, workflow.TRANSITIONS[name].permission]
               for name in spec.OPERATOR_TRANSITIONS},
        },
        # The states each operator transition takes an item from: the page offers it there
        # only (elsewhere the API answers 409).
        "transitions": {name: [s for s in spec.ALL_STATES if workflow.allows(name, s)]
                        for name in spec.OPERATOR_TRANSITIONS},
        "states": {"queue": list(spec.ACTIVE_STATES), "sent": list(spec.SENT_STATES),
                   "all": list(spec.ALL_STATES)},
        "methods": list(spec.METHODS),
        "priorities": list(spec.PRIORITIES),
        "max_resend": spec.MAX_RESEND_IDS,
    }


@cache
def _read(name: str) -> str:
    return (STATIC / name).read_text()


def _origin(url: str | None) -> str | None:
    if not url:
        return None
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None
