"""One-click unsubscribe (RFC 8058): the opaque token, the email headers, and the public page.

List mail (``wants_unsubscribe``) carries ``List-Unsubscribe: <https://…/unsubscribe/<token>>``
and ``List-Unsubscribe-Post: List-Unsubscribe=One-Click``. The token names the receiver and the
list the email belongs to (vdq.messages: ``list``, ``general`` when it names none), encrypted
and authenticated under the deployment's key: link scanners and proxies that log URLs learn
nothing from it, only this deployment can make one, and an edited token or one of another
deployment fails. A random id stored per token would cost a write for every email sent; this
costs none, and a token never expires (old emails keep working).

The construction is SIV (RFC 5297's deterministic authenticated encryption) built from
HMAC-SHA256, the one primitive the standard library has: the IV is an HMAC of the deployment
and the plaintext (128 bits), the plaintext is XORed with an HMAC-SHA256 keystream of that IV,
and reading a token recomputes the IV from what it decrypts to. Two keys derived from the
secret serve the two steps. The same receiver and list always get the same token, so a link is
stable and replaying it changes nothing; the plaintext is padded to 16 bytes so the token's
length says little about the address's.

Tokens sent before lists (the address in base64 and its HMAC, ``legacy``) are still honoured:
they are authentic, and they unsubscribe from the default list, the scope their emails (bulk,
or ``list_unsubscribe``) now have.

The key is ``VDQ_UNSUBSCRIBE_KEY`` or the Secrets Manager secret ``VDQ_UNSUBSCRIBE_SECRET_NAME``
(a deployment generates one); without either, or without ``VDQ_UNSUBSCRIBE_URL``, no email
carries the headers; a secret that cannot be read delays a bulk email like an SES throttle
(retried, never sent without them).

The key can be rotated without breaking the links already sent: a token the current key does
not open is tried with the previous one (``previous_key``), the secret's version that Secrets
Manager labels ``AWSPREVIOUS`` once a new value is put (``VDQ_UNSUBSCRIBE_PREVIOUS_KEY`` beside
``VDQ_UNSUBSCRIBE_KEY``). New tokens always use the current key, and the rotation after next
retires the old one. A function caches the key it read for ``SECRET_MAX_AGE``: a token that
opens with neither key makes it read the current one again (at most every
``REFRESH_SECONDS``), so a link sealed by a sender that already read the new key opens on a
webhook that has not.

A POST to the URL whose body is ``List-Unsubscribe=One-Click`` (what a mail client sends, or
the page's button; RFC 8058) unsubscribes the address from the list and answers 200; any other
POST changes nothing (400, the page with the button), and a GET only shows that page, since
mail scanners fetch links. Either page shows the address masked (``masked``): whoever holds
the URL (a link scanner, a proxy's log) reads the page too, and the token is opaque to keep
the address from them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
from collections.abc import Mapping
from typing import Any, NamedTuple

from vdq.core.observability import logger
from vdq.core.settings import Settings
from vdq.results.suppression import DEFAULT_LIST as DEFAULT_LIST  # re-exported

SECRET_MAX_AGE = 300
_SIG_BYTES = 16
_IV_BYTES = 16
_VERSION = b"\x02"
_PAD = 16
MAX_TOKEN = 600


class Unsubscribe(NamedTuple):
    """What a token stands for: a receiver (normalised) and the list it leaves."""

    receiver: str
    list_name: str


def wants_unsubscribe(item: Any, content: Mapping[str, Any]) -> bool:
    """Whether an email carries the unsubscribe headers: the one place that decides it. List
    mail does: it names a list, the request asked (``list_unsubscribe``), or it was sent in the
    bulk lane."""
    if item.method != "email":
        return False
    bulk = getattr(item, "priority", None) == "bulk"  # its lane (vdq.workflow.lanes)
    return (getattr(item, "list_name", None) is not None or bool(content.get("list"))
            or bool(content.get("list_unsubscribe")) or bulk)  # fmt: skip


def list_of(item: Any, content: Mapping[str, Any]) -> str:
    """The list an email's unsubscribe link leaves (an item stored before lists: the default)."""
    return str(getattr(item, "list_name", None) or content.get("list") or DEFAULT_LIST)


def list_mail(item: Any, content: Mapping[str, Any]) -> str | None:
    """The list whose unsubscribes stop an item, as the link its email carries says; None: not
    list mail. An item stored before lists names none: only its content says it is list mail,
    and its link leaves the default list."""
    return list_of(item, content) if wants_unsubscribe(item, content) else None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def derive(raw: str) -> bytes:
    """The key a secret's text stands for."""
    return hashlib.sha256(b"vdq-unsubscribe\0" + raw.encode()).digest()


def key(settings: Settings, *, refresh: bool = False) -> bytes | None:
    """The current key, which seals every new token, or None when unsubscribe is not
    configured. ``refresh``: read the secret again, whatever the cache holds."""
    raw = settings.unsubscribe_key
    if raw is None and settings.unsubscribe_secret_name:
        from aws_lambda_powertools.utilities import parameters

        raw = str(parameters.get_secret(settings.unsubscribe_secret_name, force_fetch=refresh,
                                        max_age=SECRET_MAX_AGE))  # fmt: skip
    return derive(raw) if raw else None


# The version of a secret that Secrets Manager labels as the one before AWSCURRENT.
PREVIOUS_STAGE = "AWSPREVIOUS"
REFRESH_SECONDS = 60
_previous_reader: Any = None
_no_previous_until: dict[str, float] = {}
_refreshed_at: dict[str, float] = {}


def previous_key(settings: Settings) -> bytes | None:
    """The key before the current one, whose tokens are still read during a rotation; None
    when there is none (a secret never rotated, or whose AWSPREVIOUS label an operator took
    off)."""
    raw = settings.unsubscribe_previous_key
    if raw is None and settings.unsubscribe_key is None and settings.unsubscribe_secret_name:
        raw = _previous_secret(settings.unsubscribe_secret_name)
    return derive(raw) if raw else None


def _previous_secret(name: str) -> str | None:
    """The secret's AWSPREVIOUS version, cached as the current one is. Powertools caches a
    secret by name alone, so this version has a reader (and a cache) of its own; its absence
    is remembered as long, so that links that are not tokens (scanners, typing) cost no
    Secrets Manager call each."""
    global _previous_reader
    import time

    from aws_lambda_powertools.utilities.parameters import SecretsProvider
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    now = time.monotonic()
    if _no_previous_until.get(name, 0.0) > now:
        return None
    if _previous_reader is None:
        _previous_reader = SecretsProvider()
    try:
        return str(_previous_reader.get(name, max_age=SECRET_MAX_AGE,
                                        VersionStage=PREVIOUS_STAGE))  # fmt: skip
    except GetParameterError as exc:
        # Powertools raises it while handling botocore's error, which it does not chain.
        cause = exc.__cause__ or exc.__context__
        code = getattr(cause, "response", {}).get("Error", {}).get("Code")
        if code != "ResourceNotFoundException":  # no version holds the label
            raise
        _no_previous_until[name] = now + SECRET_MAX_AGE
        return None


def _may_refresh(settings: Settings) -> bool:
    """Whether the current key may be read again now: it comes from Secrets Manager, and was
    not read again in the last ``REFRESH_SECONDS``."""
    import time

    name = settings.unsubscribe_secret_name
    if settings.unsubscribe_key is not None or not name:
        return False
    now = time.monotonic()
    if now - _refreshed_at.get(name, -REFRESH_SECONDS) < REFRESH_SECONDS:
        return False
    _refreshed_at[name] = now
    return True


def open_token(token: str, settings: Settings) -> Unsubscribe | None:
    """What a link's token stands for: sealed with the current key or, during a rotation,
    the previous one; None when it is no token of this deployment (or unsubscribe is not
    configured). Raises GetParameterError when a key cannot be read."""
    deployment = settings.table_name
    secret = key(settings)
    if secret is None:
        return None
    found = read_token(token, secret, deployment)
    if found is None and (previous := previous_key(settings)) is not None:
        found = read_token(token, previous, deployment)
    if found is None and _may_refresh(settings):
        fresh = key(settings, refresh=True)  # put since this function cached it?
        if fresh is not None and fresh != secret:
            found = read_token(token, fresh, deployment)
    return found


def _subkey(secret: bytes, purpose: bytes) -> bytes:
    return hmac.new(secret, b"vdq-unsubscribe-v2\0" + purpose, hashlib.sha256).digest()


def _iv(secret: bytes, deployment: str, plain: bytes) -> bytes:
    named = deployment.encode()
    message = len(named).to_bytes(2, "big") + named + plain
    return hmac.new(_subkey(secret, b"siv"), message, hashlib.sha256).digest()[:_IV_BYTES]


def _keystream(secret: bytes, iv: bytes, size: int) -> bytes:
    enc = _subkey(secret, b"enc")
    blocks = (hmac.new(enc, iv + n.to_bytes(4, "big"), hashlib.sha256).digest()
              for n in range((size + 31) // 32))  # fmt: skip
    return b"".join(blocks)[:size]


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def make_token(receiver: str, list_name: str, secret: bytes, deployment: str) -> str:
    """The opaque token of ``receiver``'s unsubscribe from ``list_name`` in ``deployment``."""
    plain = receiver.encode() + b"\0" + list_name.encode()
    plain += b"\0" * (-len(plain) % _PAD)
    iv = _iv(secret, deployment, plain)
    return _b64(_VERSION + iv + _xor(plain, _keystream(secret, iv, len(plain))))


def read_token(token: str, secret: bytes, deployment: str) -> Unsubscribe | None:
    """What a token of this deployment stands for, or None when it is not one (a token sent
    before lists names the default list)."""
    if len(token) > MAX_TOKEN:
        return None
    if token.count(".") == 1:
        receiver = _legacy_receiver(token, secret, deployment)
        return Unsubscribe(receiver, DEFAULT_LIST) if receiver is not None else None
    try:
        raw = _unb64(token)
    except (ValueError, UnicodeError):
        return None
    # Decoding skips characters outside the alphabet and takes padding and spare bits: only
    # the text make_token writes is a token.
    if _b64(raw) != token or not raw.startswith(_VERSION):
        return None
    iv, sealed = raw[1 : 1 + _IV_BYTES], raw[1 + _IV_BYTES :]
    if len(iv) != _IV_BYTES or not sealed or len(sealed) % _PAD:
        return None
    plain = _xor(sealed, _keystream(secret, iv, len(sealed)))
    if not hmac.compare_digest(iv, _iv(secret, deployment, plain)):
        return None
    address, _, rest = plain.partition(b"\0")
    try:
        found = Unsubscribe(address.decode("utf-8"), rest.rstrip(b"\0").decode("utf-8"))
    except UnicodeError:
        return None
    return found if found.receiver and found.list_name else None


# ---- tokens sent before lists ----------------------------------------------------------------


def _signature(secret: bytes, receiver: str, deployment: str) -> bytes:
    message = b"\0".join((b"v1", deployment.encode(), receiver.encode()))
    return hmac.new(secret, message, hashlib.sha256).digest()[:_SIG_BYTES]


def legacy_token(receiver: str, secret: bytes, deployment: str) -> str:
    """A token as emails carried them before lists: the receiver in base64 and its HMAC. Never
    made for a new email (it shows the address); kept to read the ones sent."""
    return f"{_b64(receiver.encode())}.{_b64(_signature(secret, receiver, deployment))}"


def _legacy_receiver(token: str, secret: bytes, deployment: str) -> str | None:
    encoded, signature = token.split(".")
    try:
        raw, given = _unb64(encoded), _unb64(signature)
        receiver = raw.decode("utf-8")
    except (ValueError, UnicodeError):
        return None
    if _b64(raw) != encoded or _b64(given) != signature:
        return None
    if not receiver or not hmac.compare_digest(given, _signature(secret, receiver, deployment)):
        return None
    return receiver


def headers(item: Any, content: Mapping[str, Any], settings: Settings) -> dict[str, str]:
    """The headers an email item carries for one-click unsubscribe (none when it does not
    want them, or unsubscribe is not configured)."""
    list_name = list_mail(item, content)
    if list_name is None or not settings.unsubscribe_url:
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

    token = make_token(normalize(item.receiver), list_name, secret, settings.table_name)
    url = settings.unsubscribe_url.rstrip("/") + "/" + token
    return {"List-Unsubscribe": f"<{url}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}  # fmt: skip


# ---- the public endpoint ---------------------------------------------------------------------

# Digits of a number the page shows, at its end (as a bank shows a card's).
SHOWN_DIGITS = 4


def masked(receiver: str) -> str:
    """``receiver`` as the page shows it: enough for its reader to recognise, not the address.
    An address keeps the first character of its local part and its domain
    (``a***@example.org``), a number its last digits (``+***0177``); the stars never say how
    much is hidden."""
    local, at, domain = receiver.partition("@")
    if at:
        return f"{local[:1]}***@{domain}"
    digits = receiver.lstrip("+")
    shown = digits[-SHOWN_DIGITS:] if digits.isdigit() and len(digits) > 2 * SHOWN_DIGITS else ""
    return ("+" if receiver.startswith("+") else "") + "***" + shown

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


# No page may frame this one (a click-jacked button would unsubscribe its reader), and it loads
# nothing: its only action is its own form.
PAGE_HEADERS = {
    "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store",
    "X-Robots-Tag": "noindex", "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; form-action 'self'; frame-ancestors 'none'; "
                               "base-uri 'none'",
}  # fmt: skip


def _html(status: int, body: str) -> dict[str, Any]:
    return {"statusCode": status, "body": body, "headers": dict(PAGE_HEADERS)}


# How long a client is asked to wait before it tries again after a 503: DynamoDB's throttling
# passes in seconds, and mail clients retry a one-click POST that failed.
RETRY_AFTER_SECONDS = 60


def _unavailable() -> dict[str, Any]:
    answer = _html(503, page("Please try again", "The unsubscribe could not be recorded just "
                             "now, and nothing changed. Please try again in a minute."))
    answer["headers"]["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return answer


def _transient() -> tuple[type[BaseException], ...]:
    """The failures a retry can fix: the store's (DynamoDB throttling, or unavailable, after
    botocore's and the store's own retries) and the key's (Secrets Manager)."""
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
    from botocore.exceptions import BotoCoreError, ClientError
    from pynamodb.exceptions import PynamoDBException

    from vdq.store import StoreBusy, WriteFailed

    return (StoreBusy, WriteFailed, PynamoDBException, BotoCoreError, ClientError,
            GetParameterError)  # fmt: skip


def handle(event: Mapping[str, Any], runtime: Any) -> dict[str, Any]:
    """GET shows the page, POST unsubscribes from the token's list; a token that is not valid
    is a 404 page. A failure a retry can fix is a 503 with ``Retry-After`` and a short page, never
    a 500: a mail client tries a one-click POST again, and the reader is told to."""
    try:
        return _handle(event, runtime)
    except _transient():
        logger.exception("unsubscribe not answered: the store or the key failed; 503")
        return _unavailable()


def _handle(event: Mapping[str, Any], runtime: Any) -> dict[str, Any]:
    from vdq.results import suppression

    token = str((event.get("pathParameters") or {}).get("token") or "")
    found = open_token(token, runtime.settings)
    if found is None:
        # A page, as every answer of the link: its reader opened it in a browser (a mail
        # client that wrapped the long line, or a copy of part of it).
        return _html(404, page("Link not valid", "This unsubscribe link is not valid: it may "
                               "have been cut short. Open it again from the email, whole, or "
                               "use the unsubscribe link of a newer email."))  # fmt: skip
    receiver, name = found
    shown = masked(receiver)
    action = token  # relative: the page posts to its own URL, whatever the host and stage
    confirm = page("Unsubscribe", f"Stop sending email of the list \u201c{name}\u201d to "
                   f"{shown}? Press the button to confirm.", action)  # fmt: skip
    if event.get("httpMethod") == "POST":
        if not one_click(event):
            # RFC 8058: only a POST with this body is the one-click unsubscribe (a link
            # checker's bare POST is not). Nothing changes; a reader gets the button, which
            # sends the body.
            return _html(400, confirm)
        suppression.suppress(receiver, "unsubscribe", actor="receiver", list_name=name,
                             text="one-click unsubscribe", runtime=runtime)  # fmt: skip
        return _html(200, page("Unsubscribed", f"{shown} will get no more email of the list "
                               f"\u201c{name}\u201d from any of its senders. Other email, such as "
                               "password resets and receipts, still comes."))  # fmt: skip
    return _html(200, confirm)


# RFC 8058's one body: the key/value pair of List-Unsubscribe-Post, as a form.
ONE_CLICK_FIELD, ONE_CLICK_VALUE = "List-Unsubscribe", "One-Click"


def one_click(event: Mapping[str, Any]) -> bool:
    """Whether a POST's body is RFC 8058's ``List-Unsubscribe=One-Click``: a form, as
    ``application/x-www-form-urlencoded`` (also with no Content-Type, or labelled
    ``text/plain``) or ``multipart/form-data``, whose one ``List-Unsubscribe`` field says
    ``One-Click``."""
    raw = event.get("body") or ""
    try:
        data = base64.b64decode(raw, validate=True) if event.get("isBase64Encoded") \
            else str(raw).encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        return False
    kind = _header(event, "Content-Type")
    media = kind.partition(";")[0].strip().lower()
    # text/plain: what fetch() labels a string body with, as a client in a web page (a
    # webmail, a mail client's add-on) posts the pair; the pair itself is the signal.
    if media in ("", "application/x-www-form-urlencoded", "text/plain"):
        from urllib.parse import parse_qsl

        try:
            fields = parse_qsl(data.decode("utf-8"), keep_blank_values=True)
        except (UnicodeDecodeError, ValueError):
            return False
    elif media == "multipart/form-data":
        fields = _multipart(kind, data)
    else:
        return False
    values = [value.strip() for name, value in fields if name == ONE_CLICK_FIELD]
    return values == [ONE_CLICK_VALUE]


def _header(event: Mapping[str, Any], name: str) -> str:
    """A request header's value, its name in any case ("" when absent)."""
    for key, value in (event.get("headers") or {}).items():
        if str(key).lower() == name.lower():
            return str(value or "")
    return ""


def _multipart(content_type: str, data: bytes) -> list[tuple[str, str]]:
    """The text fields of a ``multipart/form-data`` body (none when it is not one)."""
    from email import policy
    from email.parser import BytesParser

    try:
        head = f"Content-Type: {content_type}\r\n\r\n".encode("ascii")
        message = BytesParser(policy=policy.HTTP).parsebytes(head + data)
        if not message.is_multipart():
            return []
        fields = []
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if part.get_content_disposition() != "form-data" or not isinstance(name, str):
                continue
            payload = part.get_payload(decode=True)
            text = payload.decode("utf-8") if isinstance(payload, bytes) else ""
            fields.append((name, text))
        return fields
    except (UnicodeError, ValueError, TypeError, LookupError):
        return []
