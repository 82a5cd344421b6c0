"""One-click unsubscribe (RFC 8058): the signed token, the email headers, and the public page.

An email that ``wants_unsubscribe`` carries ``List-Unsubscribe: <https://…/unsubscribe/<token>>``
and ``List-Unsubscribe-Post: List-Unsubscribe=One-Click``. The token is the receiver (base64url)
and an HMAC-SHA256 of it and the deployment (the table name), 128 bits, under a secret key:
only this deployment can make one, an edited or another receiver's token fails, and there is
nothing to enumerate. It never expires (old emails keep working) and replaying it only
suppresses the same address again, which changes nothing. The key is ``VDQ_UNSUBSCRIBE_KEY``
or the Secrets Manager secret ``VDQ_UNSUBSCRIBE_SECRET_NAME`` (a deployment generates one);
without either, or without ``VDQ_UNSUBSCRIBE_URL``, no email carries the headers; a secret that
cannot be read delays a bulk email like an SES throttle (retried, never sent without them).

A POST to the URL (what a mail client sends, or the page's button) suppresses the address and
answers 200; a GET only shows the page with that button, since mail scanners fetch links.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
from collections.abc import Mapping
from typing import Any

from vdq.core.settings import Settings

SECRET_MAX_AGE = 300
_SIG_BYTES = 16
MAX_TOKEN = 600


def wants_unsubscribe(item: Any, content: Mapping[str, Any]) -> bool:
    """Whether an email carries the unsubscribe headers: the one place that decides it. Bulk
    mail does: the request asked (``list_unsubscribe``), or it was sent in the bulk lane."""
    from vdq.workflow.lanes import priority_of

    if item.method != "email":
        return False
    return bool(content.get("list_unsubscribe")) or priority_of(item) == "bulk"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key(settings: Settings) -> bytes | None:
    """The signing key, or None when unsubscribe is not configured."""
    raw = settings.unsubscribe_key
    if raw is None and settings.unsubscribe_secret_name:
        from aws_lambda_powertools.utilities import parameters

        raw = str(parameters.get_secret(settings.unsubscribe_secret_name,
                                        max_age=SECRET_MAX_AGE))  # fmt: skip
    if not raw:
        return None
    return hashlib.sha256(b"vdq-unsubscribe\0" + raw.encode()).digest()


def _signature(secret: bytes, receiver: str, deployment: str) -> bytes:
    message = b"\0".join((b"v1", deployment.encode(), receiver.encode()))
    return hmac.new(secret, message, hashlib.sha256).digest()[:_SIG_BYTES]


def make_token(receiver: str, secret: bytes, deployment: str) -> str:
    return f"{_b64(receiver.encode())}.{_b64(_signature(secret, receiver, deployment))}"


def receiver_of(token: str, secret: bytes, deployment: str) -> str | None:
    """The receiver a token was made for, or None when it is not a token of this deployment."""
    if len(token) > MAX_TOKEN or token.count(".") != 1:
        return None
    encoded, signature = token.split(".")
    try:
        raw, given = _unb64(encoded), _unb64(signature)
        receiver = raw.decode("utf-8")
    except (ValueError, UnicodeError):
        return None
    # Decoding skips characters outside the alphabet and takes padding and spare bits: only
    # the text make_token writes is a token.
    if _b64(raw) != encoded or _b64(given) != signature:
        return None
    if not receiver or not hmac.compare_digest(given, _signature(secret, receiver, deployment)):
        return None
    return receiver


def headers(item: Any, content: Mapping[str, Any], settings: Settings) -> dict[str, str]:
    """The headers an email item carries for one-click unsubscribe (none when it does not
    want them, or unsubscribe is not configured)."""
    if not wants_unsubscribe(item, content) or not settings.unsubscribe_url:
        return {}
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    from vdq.providers import TransientProviderError
    from vdq.results.suppression import normalize

    try:
        secret = key(settings)
    except GetParameterError as exc:
        # Nothing was sent: the email is retried as after an SES throttle, not errored for
        # good, and never goes out without the headers it must carry.
        raise TransientProviderError("Secrets Manager", "the unsubscribe key could not be "
                                     f"read: {exc}") from exc  # fmt: skip
    if secret is None:
        return {}

    token = make_token(normalize(item.receiver), secret, settings.table_name)
    url = settings.unsubscribe_url.rstrip("/") + "/" + token
    return {"List-Unsubscribe": f"<{url}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}  # fmt: skip


# ---- the public endpoint ---------------------------------------------------------------------

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>{title}</title></head>
<body><main><h1>{title}</h1><p>{text}</p>{form}</main></body></html>
"""


def page(title: str, text: str, action: str | None = None) -> str:
    form = ""
    if action is not None:
        form = (f'<form method="post" action="{html.escape(action, quote=True)}">'
                '<input type="hidden" name="List-Unsubscribe" value="One-Click">'
                '<button type="submit">Unsubscribe</button></form>')  # fmt: skip
    return _PAGE.format(title=html.escape(title), text=html.escape(text), form=form)


def _html(status: int, body: str) -> dict[str, Any]:
    return {"statusCode": status, "body": body,
            "headers": {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store",
                        "X-Robots-Tag": "noindex", "Referrer-Policy": "no-referrer",
                        "Content-Security-Policy": "default-src 'none'; form-action 'self'"}}


def handle(event: Mapping[str, Any], runtime: Any) -> dict[str, Any]:
    """GET shows the page, POST suppresses; a token that is not valid is a 404."""
    from vdq import api
    from vdq.results import suppression

    token = str((event.get("pathParameters") or {}).get("token") or "")
    secret = key(runtime.settings)
    receiver = receiver_of(token, secret, runtime.settings.table_name) if secret else None
    if receiver is None:
        return api.response(404, api.error_body("not_found", "this unsubscribe link is not "
                                                "valid (it may have been cut short)"))  # fmt: skip
    if event.get("httpMethod") == "POST":
        suppression.suppress(receiver, "unsubscribe", actor="receiver",
                             text="one-click unsubscribe", runtime=runtime)  # fmt: skip
        return _html(200, page("Unsubscribed",
                               f"{receiver} will get no more email from this sender."))
    action = token  # relative: the page posts to its own URL, whatever the host and stage
    return _html(200, page("Unsubscribe",
                           f"Stop sending email to {receiver}? Press the button to confirm.",
                           action))
