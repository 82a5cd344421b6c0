"""SMS through the ``twilio`` client: send a message, fetch one message's status.

Imported only on SMS paths (the email-only functions never pay for the twilio import). The
credentials come from settings or from a Secrets Manager secret read through Powertools
parameters (cached, so a rotated token is picked up within ``SECRET_MAX_AGE`` seconds).
``settings.twilio_api_url`` points the client at another base URL (the local sandbox).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from twilio.base.exceptions import TwilioException, TwilioRestException
from twilio.http.http_client import TwilioHttpClient
from twilio.rest import Client
from urllib3.exceptions import NewConnectionError

import requests
from vdq.core.errors import SettingsError
from vdq.core.settings import Settings
from vdq.core.text import MESSAGING_SERVICE_SID
from vdq.providers import (
    TWILIO_LOOKUP_TIMEOUT,
    TWILIO_REQUEST_TIMEOUT,
    AmbiguousProviderError,
    ProviderError,
    RejectedByProvider,
    ThrottledProviderError,
    TransientProviderError,
)

PROVIDER = "Twilio"
MAX_VALIDITY_SECONDS = 36_000  # Twilio's longest (and default) wait in its outgoing queue
TOO_MANY_REQUESTS = 20429  # Twilio's error code of a 429 (its concurrency or rate limits)
# A 400: the sender's outgoing queue holds ten hours of messages at its rate. Nothing was
# queued, and Twilio's remedy is to send more slowly: a throttle, not a fault of the message.
QUEUE_FULL = 21611
SECRET_MAX_AGE = 300
_API_HOST = re.compile(r"^https://api(\.[A-Za-z0-9-]+)*\.twilio\.com")
MESSAGING_SERVICE = re.compile(MESSAGING_SERVICE_SID)

Credentials = tuple[str, str]  # (account SID, auth token)


@dataclass(frozen=True)
class TwilioStatus:
    """One message's status as Twilio reports it (``queued``, ``sent``, ``delivered``, ...),
    with its receiver and the time Twilio created it (a search by SID narrows by them:
    vdq.operations.search)."""

    status: str
    error_code: int | None = None
    error_message: str | None = None
    to: str | None = None
    created: datetime | None = None


class BaseUrlHttpClient(TwilioHttpClient):
    """The standard client, with Twilio's API host replaced by another base URL."""

    def __init__(self, base_url: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url = base_url.rstrip("/") if base_url else None

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if self.base_url:
            url = _API_HOST.sub(self.base_url, url, count=1)
        return super().request(method, url, *args, **kwargs)


def validity_seconds(timeout_hours: float, elapsed: float = 0.0) -> int:
    """How long a message may wait in Twilio's outgoing queue (its ``ValidityPeriod``): Twilio
    drops it after that (error 30036) rather than send it late. Well before VDQ's last look at
    the SMS (``VDQ_TWILIO_SMS_TIMEOUT_HOURS`` after the claim; ``elapsed``: the seconds since
    the claim, spent waiting for the pace), so that an item found still queued there and timed
    out is never sent after: half of what is left of the timeout, or all but its last 30
    minutes (time for the carrier's receipt), within Twilio's 1 to 36,000 seconds."""
    left = timeout_hours * 3600 - max(0.0, elapsed)
    return max(1, min(MAX_VALIDITY_SECONDS, int(max(left / 2, left - 1800))))


def classify(exc: Exception) -> ProviderError:
    """The provider error for an exception raised by a Twilio API call."""
    if isinstance(exc, TwilioRestException):
        message = exc.msg or str(exc)
        if exc.status == 429 or exc.code in (TOO_MANY_REQUESTS, QUEUE_FULL):
            return ThrottledProviderError(PROVIDER, message, code=exc.code or exc.status)
        if exc.status == 503:  # the service refused the request unread: nothing was created
            return TransientProviderError(PROVIDER, message, code=exc.code or exc.status)
        if exc.status >= 500:
            # Twilio's own word on a 500 of a message's create: a retry may send it twice, as
            # it may have been created. So may a gateway's 502 or 504 in front of it.
            return AmbiguousProviderError(PROVIDER, message, code=exc.code or exc.status)
        return RejectedByProvider(PROVIDER, message, code=exc.code or exc.status)
    if isinstance(exc, requests.ConnectTimeout):
        return TransientProviderError(PROVIDER, f"no connection to Twilio: {exc}")
    if isinstance(exc, requests.ConnectionError):
        reason = getattr(exc.args[0], "reason", None) if exc.args else None
        if isinstance(reason, NewConnectionError):  # refused or unresolved: never sent
            return TransientProviderError(PROVIDER, f"no connection to Twilio: {exc}")
        return AmbiguousProviderError(PROVIDER, f"connection to Twilio dropped: {exc}")
    if isinstance(exc, requests.Timeout):
        return AmbiguousProviderError(PROVIDER, f"no answer from Twilio: {exc}")
    if isinstance(exc, requests.RequestException):
        return AmbiguousProviderError(PROVIDER, str(exc))
    return AmbiguousProviderError(PROVIDER, f"unreadable answer from Twilio: {exc}")


def settings_credentials(settings: Settings) -> Callable[[], Credentials]:
    """Where the credentials come from: the settings, else the Secrets Manager secret."""
    sid, token, secret = (settings.twilio_account_sid, settings.twilio_auth_token,
                          settings.twilio_secret_name)  # fmt: skip
    if sid and token:
        return lambda: (sid, token)
    if not secret:
        raise SettingsError(
            "Twilio needs TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN, or VDQ_TWILIO_SECRET_NAME"
        )

    return lambda: secret_credentials(secret, sid)


def secret_credentials(secret: str, sid: str | None, *, fresh: bool = False) -> Credentials:
    """The credentials the Secrets Manager secret holds (cached ``SECRET_MAX_AGE`` seconds;
    ``fresh``: read again now, and cached from there)."""
    from aws_lambda_powertools.utilities import parameters

    data = parameters.get_secret(secret, transform="json", max_age=SECRET_MAX_AGE,
                                 force_fetch=fresh)  # fmt: skip
    if not isinstance(data, dict) or not data.get("auth_token"):
        raise SettingsError(f"secret {secret} must be JSON with account_sid and auth_token")
    account = data.get("account_sid") or sid
    if not account:
        raise SettingsError(f"secret {secret} names no account_sid and none is set")
    return str(account), str(data["auth_token"])


def secret_shared_key(secret: str, *, fresh: bool = False) -> str | None:
    """The Webhooks shared key's secret the Secrets Manager secret holds
    (``webhook_shared_key``), read and cached as the credentials are; None without one."""
    from aws_lambda_powertools.utilities import parameters

    data = parameters.get_secret(secret, transform="json", max_age=SECRET_MAX_AGE,
                                 force_fetch=fresh)  # fmt: skip
    key = data.get("webhook_shared_key") if isinstance(data, dict) else None
    return str(key) if key else None


# A request refused for its credentials (a signature the cached token does not match, a 401
# from Twilio) reads the secret again at most this often (a function instance's): Twilio uses
# the new token as soon as it is promoted, while the cache holds the old one for up to
# SECRET_MAX_AGE seconds; forged requests or a wrong secret cost one read a period at most.
FRESH_EVERY_SECONDS = 30.0
_last_fresh_read = [float("-inf")]
_fresh_lock = threading.Lock()


def fresh_credentials(settings: Settings) -> Credentials | None:
    """The secret's credentials read again now (the cache takes them), when they come from the
    secret and no other request read it in the last FRESH_EVERY_SECONDS; else None."""
    secret = settings.twilio_secret_name
    if not secret or (settings.twilio_account_sid and settings.twilio_auth_token):
        return None
    if not may_read_fresh():
        return None
    return secret_credentials(secret, settings.twilio_account_sid, fresh=True)


def may_read_fresh() -> bool:
    """Whether a request refused for its credentials may read the secret again now (no other
    did in the last FRESH_EVERY_SECONDS); it then counts as the read."""
    import time

    with _fresh_lock:
        now = time.monotonic()
        if now - _last_fresh_read[0] < FRESH_EVERY_SECONDS:
            return False
        _last_fresh_read[0] = now
    return True


class TwilioProvider:
    """Twilio's Messages API, safe to call from several threads at once.

    twilio's HTTP client keeps the answer it read on itself and returns it from there, so one
    client used by two threads at a time can hand each the other's message SID. A request
    borrows an idle client (with its own HTTP connection pool, kept warm between requests) or
    makes one, and gives it back after; a client made for other credentials (a rotated token)
    is dropped. An ``http_client`` given (a test's fake) is shared by every client."""

    def __init__(
        self,
        credentials: Callable[[], Credentials],
        *,
        api_url: str | None = None,
        http_client: Any = None,
        timeout: float = TWILIO_REQUEST_TIMEOUT,
        refresh: Callable[[], Credentials | None] | None = None,
    ) -> None:
        self._credentials = credentials
        self._refresh = refresh  # credentials read afresh (fresh_credentials), or None
        self._api_url = api_url
        self._http = http_client
        self._timeout = timeout
        self._idle: list[tuple[Credentials, Client]] = []
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, *, http_client: Any = None,
                      timeout: float = TWILIO_REQUEST_TIMEOUT) -> TwilioProvider:  # fmt: skip
        return cls(settings_credentials(settings), api_url=settings.twilio_api_url,
                   http_client=http_client, timeout=timeout,
                   refresh=lambda: fresh_credentials(settings))  # fmt: skip

    @contextmanager
    def client(self) -> Iterator[Client]:
        """A client for this request alone."""
        credentials = self._credentials()
        with self._lock:
            while self._idle:
                made_for, client = self._idle.pop()
                if made_for == credentials:
                    break
            else:
                client = None
        if client is None:
            sid, token = credentials
            http = self._http or BaseUrlHttpClient(self._api_url, timeout=self._timeout)
            client = Client(sid, token, http_client=http, environment={})
        try:
            yield client
        finally:
            with self._lock:
                self._idle.append((credentials, client))

    def _call(self, do: Callable[[Client], Any]) -> Any:
        """``do`` with a client; once more with credentials read afresh when Twilio refused
        these (401: a rotated token the cache still holds; nothing was created)."""
        used = self._credentials()
        try:
            with self.client() as client:
                return do(client)
        except TwilioRestException as exc:
            if exc.status != 401 or self._refresh is None:
                raise
            fresh = self._refresh()
            if fresh is None or fresh == used:
                raise
        with self.client() as client:
            return do(client)

    def send(
        self,
        from_: str,
        to: str,
        body: str | None,
        media_urls: Sequence[str] = (),
        status_callback: str | None = None,
        validity: int | None = None,
    ) -> str:
        """Create the message; Twilio's message SID. ``from_``: a number, or a Messaging
        Service SID (its pool picks the number). ``validity``: its ``ValidityPeriod``
        (``validity_seconds``). An MMS without text has no ``body``: Twilio takes MediaUrl
        alone, so no Body parameter is sent."""
        sender = ("messaging_service_sid" if MESSAGING_SERVICE.match(from_) else "from_")
        params: dict[str, Any] = {sender: from_, "to": to}
        if body:
            params["body"] = body
        if media_urls:
            params["media_url"] = list(media_urls)
        if status_callback:
            params["status_callback"] = status_callback
        if validity is not None:
            params["validity_period"] = validity
        try:
            message = self._call(lambda client: client.messages.create(**params))
        except (TwilioException, requests.RequestException, ValueError) as exc:
            raise classify(exc) from exc
        if not message.sid:
            raise AmbiguousProviderError(PROVIDER, "Twilio answered without a message SID")
        return message.sid

    def fetch(self, sid: str) -> TwilioStatus:
        """The message's current status (polling mode)."""
        try:
            message = self._call(lambda client: client.messages(sid).fetch())
        # An answer not shaped as a Message resource (not an object, a date not text) fails
        # inside twilio's parsing as a TypeError or AttributeError: unreadable, as bad JSON is.
        except (TwilioException, requests.RequestException, ValueError, TypeError,
                AttributeError) as exc:  # fmt: skip
            raise classify(exc) from exc
        # twilio parses ``date_created`` (RFC 2822), and hands on the text it could not parse.
        created = message.date_created if isinstance(message.date_created, datetime) else None
        return TwilioStatus(
            status=str(message.status or ""),
            error_code=message.error_code,
            error_message=message.error_message,
            to=str(message.to) if message.to else None,
            created=created,
        )


def get_twilio(runtime: Any, *, lookup: bool = False) -> Any:
    """``runtime.overrides["twilio"]`` when set (a fake), else the runtime's real provider;
    with ``lookup``, one whose requests give up after ``TWILIO_LOOKUP_TIMEOUT`` (a search's
    look-up, kept apart so a send in the same process keeps its own timeout)."""
    provider = runtime.overrides.get("twilio")
    if provider is None and lookup:
        provider = runtime.overrides.get("twilio_lookup")
        if provider is None:
            provider = TwilioProvider.from_settings(runtime.settings, timeout=TWILIO_LOOKUP_TIMEOUT)
            runtime.overrides["twilio_lookup"] = provider
    if provider is None:
        provider = TwilioProvider.from_settings(runtime.settings)
        runtime.overrides["twilio"] = provider
    return provider
