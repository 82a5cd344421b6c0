"""Email through Amazon SES v2: SendEmail with raw MIME content.

The client makes no retries of its own: botocore's standard mode retries read timeouts, and a
SendEmail retried after SES accepted the first request sends the email twice. Throttling and
5xx answers come back to the worker as TransientProviderError, which retries on its own
schedule (delay, new publish), without that risk.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    CredentialRetrievalError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    ParamValidationError,
    ProxyConnectionError,
)

from vdq.providers import (
    SES_CONNECT_TIMEOUT,
    SES_READ_TIMEOUT,
    AmbiguousProviderError,
    PermanentProviderError,
    ProviderError,
    ThrottledProviderError,
    TransientProviderError,
)

PROVIDER = "SES"
# total_max_attempts counts the first request; botocore's max_attempts counts only retries,
# so max_attempts=1 would retry a read timeout once.
_CLIENT_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 1},
                        connect_timeout=SES_CONNECT_TIMEOUT,
                        read_timeout=SES_READ_TIMEOUT)  # fmt: skip
_CLIENT_LOCK = threading.Lock()  # boto3's default session makes clients one at a time

# SES's answers over the account's sending rate or daily quota (v2 names them
# TooManyRequestsException, the query API Throttling; the message says which limit).
THROTTLING_CODES = frozenset({"TooManyRequestsException", "Throttling", "ThrottlingException"})
DAILY_QUOTA_TEXT = "daily message quota exceeded"
# SES v2 SendEmail errors that say "not now": the same request can succeed later.
TRANSIENT_CODES = frozenset({
    "LimitExceededException", "ServiceUnavailable", "ServiceUnavailableException",
    "InternalFailure", "InternalError", "InternalServiceError", "RequestTimeout",
    "RequestTimeoutException",
})  # fmt: skip
# HTTP statuses the seed treats as transient besides 5xx.
TRANSIENT_STATUSES = frozenset({408, 423, 429})
# Connection failures raised before the request was sent: SES cannot have seen it.
NOT_SENT_ERRORS = (ConnectTimeoutError, EndpointConnectionError, ProxyConnectionError)


def classify(exc: ClientError | BotoCoreError) -> ProviderError:
    """The provider error for an exception raised by a SendEmail call."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code") or "Unknown"
        message = error.get("Message") or str(exc)
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        if code in THROTTLING_CODES or status == 429:
            daily = DAILY_QUOTA_TEXT in message.lower()
            return ThrottledProviderError(PROVIDER, message, code=code, rate_exceeded=not daily)
        if code in TRANSIENT_CODES or status >= 500 or status in TRANSIENT_STATUSES:
            return TransientProviderError(PROVIDER, message, code=code)
        # MessageRejected, MailFromDomainNotVerifiedException, AccountSuspendedException,
        # SendingPausedException, NotFoundException, BadRequestException, ...
        return PermanentProviderError(PROVIDER, message, code=code)
    if isinstance(exc, NOT_SENT_ERRORS):
        return TransientProviderError(PROVIDER, f"no connection to SES: {exc}")
    if isinstance(exc, HTTPClientError):  # ReadTimeoutError, ConnectionClosedError, ...
        return AmbiguousProviderError(PROVIDER, f"no answer from SES: {exc}")
    if isinstance(exc, ParamValidationError):  # raised while building the request
        return PermanentProviderError(PROVIDER, str(exc))
    if isinstance(exc, NoCredentialsError | CredentialRetrievalError):  # before sending
        return TransientProviderError(PROVIDER, str(exc))
    # Any other failure may have happened after SES received the request.
    return AmbiguousProviderError(PROVIDER, str(exc))


class SesProvider:
    def __init__(self, client: Any, configuration_set: str | None = None) -> None:
        self.client = client
        self.configuration_set = configuration_set

    @classmethod
    def from_settings(cls, configuration_set: str | None) -> SesProvider:
        with _CLIENT_LOCK:  # boto3's default session does not make clients thread-safely
            return cls(boto3.client("sesv2", config=_CLIENT_CONFIG), configuration_set)

    def send_raw(
        self, *, sender: str, receiver: str, raw: bytes, tags: Sequence[dict[str, str]] = ()
    ) -> str:
        """Send ``raw`` to ``receiver`` only (the headers may name others); the message ID."""
        request: dict[str, Any] = {
            "FromEmailAddress": sender,
            "Destination": {"ToAddresses": [receiver]},
            "Content": {"Raw": {"Data": raw}},
        }
        if tags:
            request["EmailTags"] = [{"Name": t["Name"], "Value": t["Value"]} for t in tags]
        if self.configuration_set:
            request["ConfigurationSetName"] = self.configuration_set
        try:
            response = self.client.send_email(**request)
        except (ClientError, BotoCoreError) as exc:
            raise classify(exc) from exc
        message_id = response.get("MessageId")
        if not message_id:
            raise AmbiguousProviderError(PROVIDER, "SES answered without a message ID")
        return message_id


    def max_send_rate(self) -> float:
        """The account's maximum sending rate (emails per second), as GetAccount reports it."""
        try:
            answer = self.client.get_account()
        except (ClientError, BotoCoreError) as exc:
            raise classify(exc) from exc
        return float(answer["SendQuota"]["MaxSendRate"])


def get_ses(runtime: Any) -> SesProvider:
    """The runtime's SES provider (``runtime.overrides["ses_provider"]`` when a test sets one)."""
    provider = runtime.overrides.get("ses_provider")
    if provider is None:
        provider = SesProvider.from_settings(runtime.settings.ses_configuration_set)
        runtime.overrides["ses_provider"] = provider
    return provider
