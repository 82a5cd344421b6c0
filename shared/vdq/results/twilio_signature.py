"""The Twilio status callback's signature, checked against the public URL Twilio posted to.

Twilio signs the URL it was given (``TWILIO_WEBHOOK_URL`` with ``queue_item`` added) plus the
sorted form parameters. Behind API Gateway the function sees neither that host nor the raw
query string, so the URL is rebuilt from the setting and the query parameters received, in the
order received: any change to ``queue_item`` changes the URL and fails the check.

The key is the account's auth token (HMAC-SHA1), or, for a request a Webhook Rule of Twilio's
signed (its header ``X-Twilio-Webhooks-Signature-Settings`` names the key and algorithm), the
rule's shared key (``TWILIO_WEBHOOK_SHARED_KEY`` or the Twilio secret's ``webhook_shared_key``).
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from vdq import api
from vdq.core.settings import Settings


def public_url(webhook_url: str, event: dict[str, Any]) -> str:
    """The URL Twilio signed: the webhook URL and the query parameters it was given."""
    parts = urlsplit(webhook_url)
    own = parse_qsl(parts.query, keep_blank_values=True)
    received = event.get("multiValueQueryStringParameters") or {
        k: [v] for k, v in (event.get("queryStringParameters") or {}).items()
    }
    added = [(k, v) for k, values in received.items() for v in values if (k, v) not in own]
    if not added:
        return webhook_url
    # API Gateway does not keep the order of query parameters: put the worker's own first, in
    # the order it writes them.
    rank = {"queue_item": 0, "attempt": 1}
    added.sort(key=lambda kv: rank.get(kv[0], 2))
    # As the send worker builds it (vdq.dispatch.outbound.status_callback_url): the webhook URL's
    # own parameters, less any it replaced, then the added ones, encoded by urlencode.
    replaced = {k for k, _ in added}
    query = [(k, v) for k, v in own if k not in replaced] + added
    return urlunsplit(parts._replace(query=urlencode(query)))


class Form(dict[str, str]):
    """The posted form: a name's last value, as read; and ``getall``, every value of a name, as
    Twilio signs them (a repeated name's values sorted) and its validator reads them."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        super().__init__(pairs)
        self._values: dict[str, list[str]] = {}
        for name, value in pairs:
            self._values.setdefault(name, []).append(value)

    def getall(self, name: str) -> list[str]:
        return list(self._values.get(name) or [self[name]])


def form_params(event: dict[str, Any]) -> Form:
    raw = event.get("body") or ""
    if event.get("isBase64Encoded"):
        raw = base64.b64decode(raw).decode("utf-8")
    return Form(parse_qsl(raw, keep_blank_values=True))


def auth_token(settings: Settings) -> str:
    """The auth token, from the same source as the provider's (settings or the secret)."""
    from vdq.providers.twilio import settings_credentials

    return settings_credentials(settings)()[1]


def fresh_auth_token(settings: Settings) -> str | None:
    """The secret's auth token read again now, as the provider does after a 401
    (vdq.providers.twilio.fresh_credentials: at most every 30 s); None when not read."""
    from vdq.providers.twilio import fresh_credentials

    fresh = fresh_credentials(settings)
    return fresh[1] if fresh is not None else None


# Twilio's header on a webhook a Webhook Rule signs with a shared key of its own (its
# Webhooks configuration API) instead of the auth token: ``key=<KS...>,algorithm=<...>``.
SHARED_KEY_HEADER = "X-Twilio-Webhooks-Signature-Settings"
MAX_SHOWN_HEADER = 200


def why_refused(event: dict[str, Any], settings: Settings) -> str:
    """Why a request whose signature did not check was refused, for the log: a shared key's
    header is an operator's setting at Twilio (every callback fails alike), so it says what to
    set."""
    shared = api.header(event, SHARED_KEY_HEADER)
    if not shared:
        return "a missing or bad signature"
    shown = "".join(c for c in shared[:MAX_SHOWN_HEADER] if c.isprintable())
    if shared_key(settings) is None:
        return (f"Twilio signed it with a Webhooks shared key ({shown}), and none is set: put "
                "the key's secret in TWILIO_WEBHOOK_SHARED_KEY or in the Twilio secret's "
                "webhook_shared_key, or remove the Webhook Rule that matches this URL")
    return f"a missing or bad signature of the Webhooks shared key ({shown})"


def shared_key(settings: Settings, *, fresh: bool = False) -> str | None:
    """The Webhooks shared key's secret: the setting, else the Twilio secret's (``fresh``: read
    again now, as after a rotation)."""
    if settings.twilio_webhook_shared_key:
        return settings.twilio_webhook_shared_key
    if not settings.twilio_secret_name:
        return None
    from vdq.providers.twilio import secret_shared_key

    return secret_shared_key(settings.twilio_secret_name, fresh=fresh)


def is_authentic(event: dict[str, Any], params: dict[str, str], settings: Settings, *,
                 inbound: bool = False) -> bool:  # fmt: skip
    """Twilio signed this request: a status callback (``TWILIO_WEBHOOK_URL``) or, ``inbound``,
    an incoming message (``settings.inbound_url``). With the token of the secret: a signature
    the cached token refuses is checked again with the secret as it is now (a rotation)."""
    signature = api.header(event, "X-Twilio-Signature")
    signed = settings.inbound_url if inbound else settings.twilio_webhook_url
    if not signature or not signed:
        return False
    from twilio.request_validator import RequestValidator

    url = public_url(signed, event)
    shared = api.header(event, SHARED_KEY_HEADER)
    if shared:
        return _shared_key_signed(url, params, signature, shared, settings)
    token = auth_token(settings)
    if RequestValidator(token).validate(url, params, signature):
        return True
    fresh = fresh_auth_token(settings)
    return bool(fresh and fresh != token
                and RequestValidator(fresh).validate(url, params, signature))  # fmt: skip


def _shared_key_signed(url: str, params: dict[str, str], signature: str, header: str,
                       settings: Settings) -> bool:  # fmt: skip
    """A Webhook Rule signed the request with its shared key, in the algorithm its header
    names: checked with the key's secret; once more with the secret read afresh (a rotated
    key), at most as often as a rotated token is."""
    from twilio.request_validator import RequestValidator, get_signature_algorithm

    from vdq.providers.twilio import may_read_fresh

    algorithm = get_signature_algorithm(header)
    key = shared_key(settings)
    if key is None:
        return False
    if RequestValidator(key).validate(url, params, signature, algorithm):
        return True
    if settings.twilio_webhook_shared_key or not may_read_fresh():
        return False
    fresh = shared_key(settings, fresh=True)
    return bool(fresh and fresh != key
                and RequestValidator(fresh).validate(url, params, signature, algorithm))
