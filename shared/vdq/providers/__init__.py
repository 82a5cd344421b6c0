"""Provider adapters: the only code that talks to SES and Twilio.

Every failure of a provider call is turned into one of the errors below at the adapter's edge,
so the worker decides on a class (retry, give up, warn about a possible double send) and never
matches error text.
"""

from __future__ import annotations

# The clients' timeouts (the adapters use them), and from them the longest one provider call
# can take: SES's connect plus read (one attempt, vdq.providers.ses); requests applies Twilio's
# timeout to the connect and to the read each. A send function claims nothing it could not
# send and record before its timeout (vdq.dispatch.pacing.TIMEOUT_MARGIN).
SES_CONNECT_TIMEOUT = 3.0
SES_READ_TIMEOUT = 20.0
TWILIO_REQUEST_TIMEOUT = 15.0
# A search's look-up of one message at Twilio (vdq.operations.search) runs inside the operator's
# request, which API Gateway ends at 29 s and which reads the postings after a failed look-up.
TWILIO_LOOKUP_TIMEOUT = 5.0
LONGEST_CALL_SECONDS = max(SES_CONNECT_TIMEOUT + SES_READ_TIMEOUT, 2 * TWILIO_REQUEST_TIMEOUT)


class ProviderError(Exception):
    """A provider call failed. ``code`` is the provider's error code, when it gave one."""

    kind = "failed"

    def __init__(self, provider: str, message: str, *, code: str | int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.message = message
        self.code = code

    def __str__(self) -> str:
        code = f" ({self.code})" if self.code is not None else ""
        return f"{self.provider}{code}: {self.message}"


class TransientProviderError(ProviderError):
    """The provider did not take the message and may take it later (throttling, 5xx, no
    connection). Nothing was sent, so a retry cannot send twice."""

    kind = "transient"


class ThrottledProviderError(TransientProviderError):
    """The provider refused the request for its rate (SES "Maximum sending rate exceeded",
    Twilio 429 / 20429, and 21611: the sender's queue is full): nothing was sent. The worker
    slows the fleet's pace and puts the item back on the queue; it never counts as a failure
    of the item. ``rate_exceeded`` is False for a quota that a slower pace does not help (SES
    "Daily message quota exceeded")."""

    kind = "throttled"

    def __init__(self, provider: str, message: str, *, code: str | int | None = None,
                 rate_exceeded: bool = True) -> None:  # fmt: skip
        super().__init__(provider, message, code=code)
        self.rate_exceeded = rate_exceeded


class PermanentProviderError(ProviderError):
    """The provider refused the message; sending it again as it is will fail again."""

    kind = "permanent"


class RejectedByProvider(PermanentProviderError):
    """The provider answered the request with a rejection of this message (Twilio's 4xx)."""

    kind = "rejected"


class AmbiguousProviderError(ProviderError):
    """The request reached the provider but no answer came back (read timeout, connection
    dropped): the provider may have accepted the message, so a retry may send it twice."""

    kind = "ambiguous"


__all__ = [
    "AmbiguousProviderError",
    "PermanentProviderError",
    "ProviderError",
    "RejectedByProvider",
    "ThrottledProviderError",
    "TransientProviderError",
]
