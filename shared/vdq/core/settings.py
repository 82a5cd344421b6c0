"""Every setting of VDQ, read once from the environment into one typed, frozen object.

A bad value fails at start with a message that names the variable; nothing else in the code
reads ``os.environ``. The documentation's settings page is generated from ``documented``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from vdq.core import setting_values as read
from vdq.core.errors import SettingsError
from vdq.core.setting_values import (  # noqa: F401  (re-exported)
    ALL_PERMISSIONS,
    DEFAULT_GROUP_PERMISSIONS,
    PRESIGNED_MAX_SECONDS,
    QuotaLimits,
    Thresholds,
)

# Emails a second one shard of a sparse index takes at 30% of a partition's 1,000 write units:
# each email writes about two units in each index (its entry in, then out).
INDEX_SHARD_RATE = 150


def index_shards_for(rate: float) -> int:
    """The sparse indexes' write shards SES's ``rate`` (emails a second) needs: a power of two,
    at least the default 4 (so 8 above 600 a second, up to 1,200)."""
    shards = 4
    while shards * INDEX_SHARD_RATE < rate:
        shards *= 2
    return shards


# Requests a second of one producer that one quota counters record takes at 30% of a partition's
# 1,000 write units: each writes one unit.
QUOTA_SHARD_RATE = 300


def quota_shards_for(rate: float) -> int:
    """The quota shards one producer's ``rate`` (requests a second) needs."""
    return max(1, -(-int(rate) // QUOTA_SHARD_RATE))


def _setting(env: str, default: Any, parse: Callable[[str], Any] = read.text, doc: str = "") -> Any:
    metadata = {"env": env, "parse": parse, "doc": doc, "default": default}
    if isinstance(default, Mapping):
        return field(default_factory=lambda: default, metadata=metadata)
    return field(default=default, metadata=metadata)


# The lease past the send function's timeout and the check's delay (``lease_seconds``): the
# check's second delivery (the results queue gives a failed one again after its visibility,
# 190 s) or a results backlog of as long, and a minute for clocks and the check's write.
LEASE_MARGIN_SECONDS = 300


@dataclass(frozen=True)
class Settings:
    # Resources (the CDK app and the local stack set these).
    table_name: str = _setting("VDQ_TABLE_NAME", "vdq", doc="DynamoDB table of queue items")
    attachments_bucket: str = _setting(
        "VDQ_ATTACHMENTS_BUCKET", "vdq-attachments", doc="S3 bucket of attachment files"
    )
    send_queue_url: str = _setting(
        "VDQ_SEND_QUEUE_URL", "", doc="SQS queue of send messages of the normal priority lane"
    )
    high_send_queue_url: str = _setting(
        "VDQ_HIGH_SEND_QUEUE_URL", "",
        doc="SQS queue of the high priority lane (empty: the normal lane's queue)",
    )  # fmt: skip
    bulk_send_queue_url: str = _setting(
        "VDQ_BULK_SEND_QUEUE_URL", "",
        doc="SQS queue of the bulk priority lane (empty: the normal lane's queue)",
    )  # fmt: skip
    results_queue_url: str = _setting(
        "VDQ_RESULTS_QUEUE_URL", "",
        doc="SQS queue of SES events, deferred lookups, the send function's checks and inbound "
            "STOPs kept when the table refused them",
    )  # fmt: skip
    send_dead_letter_queue_url: str = _setting(
        "VDQ_SEND_DEAD_LETTER_QUEUE_URL", "",
        doc="the normal lane's dead-letter queue, which the schedule sweeps (empty: none)",
    )  # fmt: skip
    high_send_dead_letter_queue_url: str = _setting(
        "VDQ_HIGH_SEND_DEAD_LETTER_QUEUE_URL", "",
        doc="the high lane's dead-letter queue (empty: the normal lane's)",
    )  # fmt: skip
    bulk_send_dead_letter_queue_url: str = _setting(
        "VDQ_BULK_SEND_DEAD_LETTER_QUEUE_URL", "",
        doc="the bulk lane's dead-letter queue (empty: the normal lane's)",
    )  # fmt: skip
    results_dead_letter_queue_url: str = _setting(
        "VDQ_RESULTS_DEAD_LETTER_QUEUE_URL", "",
        doc="the results queue's dead-letter queue, whose checks the schedule applies (empty: "
        "none)",
    )  # fmt: skip
    event_bus_name: str = _setting(
        "VDQ_EVENT_BUS_NAME", "", doc="EventBridge bus for state-change events (empty: off)"
    )
    state_events: str = _setting(
        "VDQ_STATE_EVENTS",
        "errored",
        read.state_events,
        "errored (transitions into errored), outcomes (also into the done states: one event "
        "per message, US$1.00 per million), all (every transition), or none",
    )
    # Email.
    ses_configuration_set: str | None = _setting(
        "VDQ_SES_CONFIGURATION_SET", None, read.optional_text, "SES configuration set for events"
    )
    email_tracking_strategy: str = _setting(
        "VDQ_EMAIL_TRACKING_STRATEGY",
        "vdq.results.tracking.TagEmailTrackingStrategy",
        doc="dotted path of the email tracking strategy class",
    )
    max_attachment_bytes: int = _setting(
        "VDQ_MAX_ATTACHMENT_BYTES",
        7_000_000,
        read.attachment_bytes,
        "total decoded size of an email's attachments, inline and uploaded (an inline one "
        "travels in the request, which Lambda limits to 6 MiB: about 4.5 MB decoded); at most "
        "20000000, as SES takes a message of at most 40 MB after base64",
    )
    max_files_age_seconds: int | None = _setting(
        "VDQ_MAX_FILES_AGE_IN_SECONDS",
        None,
        read.files_age_seconds,
        "0: delete files when all their items are done; N: daily purge after N s (at most the "
        "retention less 2 days, and 3153600000); unset: the daily purge deletes them 2 days "
        "before their records expire, or keeps them when retention is 0",
    )
    retention_days: int = _setting(
        "VDQ_RETENTION_DAYS",
        30,
        read.retention_days,
        "days a done item (its history, content, files) is kept after it reached a done state, "
        "then DynamoDB's TTL deletes it for free; each day kept holds about 3.0 KB per email "
        "(at US$0.25 per GB-month: about US$0.76 a month per million emails a day); at most "
        "36500; 0: keep forever (the table grows by about 85 GB a month per million emails a "
        "day)",
    )
    archive: str = _setting(
        "VDQ_ARCHIVE",
        "",
        read.archive,
        "s3: the records of items DynamoDB's TTL deletes are archived from the stream to the "
        "attachments bucket (archive/dt=<day>/, gzip JSON lines; Data and concurrency, The "
        "archive, has the Athena table); empty: off",
    )
    # SMS.
    twilio_account_sid: str | None = _setting(
        "TWILIO_ACCOUNT_SID", None, read.optional_text, "Twilio account (or the secret below)"
    )
    twilio_auth_token: str | None = _setting(
        "TWILIO_AUTH_TOKEN", None, read.optional_text, "Twilio auth token (or the secret below)"
    )
    twilio_secret_name: str | None = _setting(
        "VDQ_TWILIO_SECRET_NAME",
        None,
        read.optional_text,
        "Secrets Manager secret with account_sid and auth_token (a deploy sets it)",
    )
    twilio_webhook_shared_key: str | None = _setting(
        "TWILIO_WEBHOOK_SHARED_KEY",
        None,
        read.optional_text,
        "secret of the Twilio Webhooks shared key a Webhook Rule signs the callbacks with (or "
        "webhook_shared_key in the secret); unset: only the auth token's signatures",
    )
    twilio_webhook_url: str | None = _setting(
        "TWILIO_WEBHOOK_URL", None, read.optional_text, "status callback URL; empty selects polling"
    )
    twilio_inbound_url: str | None = _setting(
        "TWILIO_INBOUND_URL",
        None,
        read.optional_text,
        "incoming-message webhook URL set on the Twilio number (its signature covers it); "
        "unset: TWILIO_WEBHOOK_URL with status-callback replaced by inbound",
    )
    twilio_api_url: str | None = _setting(
        "VDQ_TWILIO_API_URL", None, read.optional_text, "Twilio API base URL (the local sandbox)"
    )
    twilio_sms_timeout_hours: float = _setting(
        "VDQ_TWILIO_SMS_TIMEOUT_HOURS", 2.0, read.positive_float,
        "awaiting SMS -> unconfirmed this long after the claim that sent it with no final "
        "status; Twilio keeps it queued at most half of that, or all but its last 30 minutes",
    )
    email_timeout_hours: float = _setting(
        "VDQ_EMAIL_TIMEOUT_HOURS",
        72.0,
        read.positive_float,
        "awaiting email -> unconfirmed this long after the claim that sent it (SES accepted "
        "it within the send's timeout) with no final event",
    )
    unsubscribe_url: str | None = _setting(
        "VDQ_UNSUBSCRIBE_URL",
        None,
        read.optional_text,
        "base URL of one-click unsubscribe links (the API's /unsubscribe/; a deploy sets it); "
        "empty: emails carry no List-Unsubscribe",
    )
    unsubscribe_key: str | None = _setting(
        "VDQ_UNSUBSCRIBE_KEY",
        None,
        read.optional_text,
        "secret that seals unsubscribe tokens (the local stack; a deploy uses the secret below)",
    )
    unsubscribe_previous_key: str | None = _setting(
        "VDQ_UNSUBSCRIBE_PREVIOUS_KEY",
        None,
        read.optional_text,
        "during a rotation of VDQ_UNSUBSCRIBE_KEY, the key before it: links it sealed still "
        "unsubscribe, new links use the current key (a deploy's secret keeps its previous "
        "value itself, as AWSPREVIOUS)",
    )
    unsubscribe_secret_name: str | None = _setting(
        "VDQ_UNSUBSCRIBE_SECRET_NAME",
        None,
        read.optional_text,
        "Secrets Manager secret (name or ARN) whose value seals unsubscribe tokens (a deploy "
        "generates it)",
    )
    sender_identities: tuple[str, ...] = _setting(
        "VDQ_SENDER_IDENTITIES",
        (),
        read.identities,
        "the SES identities (addresses or domains, comma-separated) email may be sent from: "
        "another sender is a 422 naming sender.email at enqueue; empty: any (a deploy sets it "
        "from vdq:sesIdentities; the local stack leaves it empty)",
    )
    sms_max_segments: int = _setting(
        "VDQ_SMS_MAX_SEGMENTS",
        10,
        read.positive_int,
        "most segments an SMS body may take (153 GSM-7 septets or 67 UCS-2 code units each); "
        "a longer body is a 400",
    )
    sms_poll_batch: int = _setting(
        "VDQ_SMS_POLL_BATCH",
        100,
        read.positive_int,
        "awaiting SMS fetched per polling run; more are fetched in turn, each about once "
        "every (awaiting / this) runs",
    )
    ses_max_send_rate: float | None = _setting(
        "VDQ_SES_MAX_SEND_RATE",
        None,
        read.optional_positive_float,
        "emails per second all send functions together stay under; unset: the account's "
        "maximum sending rate (SES GetAccount, read every 5 minutes)",
    )
    twilio_sender_rate: float = _setting(
        "VDQ_TWILIO_SENDER_RATE",
        1.0,
        read.positive_float,
        "SMS segments per second each Twilio sender number is paced to (a US long code: 1)",
    )
    pacing_max_wait_seconds: float = _setting(
        "VDQ_PACING_MAX_WAIT_SECONDS",
        5.0,
        read.positive_float,
        "longest a send function waits for its turn at the provider's rate, to the end of its "
        "slot (1/rate a message or segment later than its start); an item whose turn ends "
        "further off goes back on the queue until about then",
    )
    send_parallelism: int = _setting(
        "VDQ_SEND_PARALLELISM",
        4,
        read.send_parallelism,
        "provider calls a send function has in flight at once: it claims and paces a batch's "
        "sends one by one and hands each, at its slot, to a thread that calls the provider and "
        "records the outcome (1: one send at a time; at most 10)",
    )
    # Workflow timing.
    max_retries: int = _setting(
        "VDQ_MAX_RETRIES", 12, read.non_negative_int, "automatic retries of a transient email error"
    )
    retry_backoff_seconds: int = _setting(
        "VDQ_RETRY_BACKOFF_SECONDS", 16, read.positive_int, "first retry delay (doubles each time)"
    )
    retry_backoff_max_seconds: int = _setting(
        "VDQ_RETRY_BACKOFF_MAX_SECONDS", 600, read.positive_int, "longest retry delay"
    )
    send_timeout_seconds: int = _setting(
        "VDQ_SEND_TIMEOUT_SECONDS", 60, read.positive_int,
        "the send function's timeout (set by the stack from vdq:timeoutSeconds): a claimed "
        "item's send message, delivered again, waits this long after the claim, plus the "
        "check's delay (VDQ_CHECK_SECONDS) and five minutes (the lease), before it takes the "
        "attempt for lost and errors the item \"outcome unknown\"",
    )  # fmt: skip
    check_seconds: int = _setting(
        "VDQ_CHECK_SECONDS", 300, read.delay_seconds,
        "how long after the provider accepted a message its check looks at it (at most 900, "
        "SQS's longest delay): one still sending then (no event came) is recorded awaiting, "
        "and an email awaiting then gets the timer of its timeout",
    )  # fmt: skip
    publish_grace_seconds: int = _setting(
        "VDQ_PUBLISH_GRACE_SECONDS",
        900,
        read.positive_int,
        "a queued item not claimed this long after its publish is published again (an item "
        "enqueued for now has no timer: one still queued this long after, without one, gets "
        "it then)",
    )
    max_schedule_days: int = _setting(
        "VDQ_MAX_SCHEDULE_DAYS", 30, read.schedule_days,
        "how far ahead a send_at may be, in days (later: a 422 naming send_at)",
    )  # fmt: skip
    schedule_batch: int = _setting(
        "VDQ_SCHEDULE_BATCH", 2000, read.positive_int,
        "scheduled items the sweep hands to the send queues per run (each enters SQS up to "
        "14 minutes before its send_at, with the rest of the wait as its delay)",
    )  # fmt: skip
    index_shards: int = _setting(
        "VDQ_INDEX_SHARDS", 4, read.positive_int,
        "write shards of each sparse index (open items, timers): raise it with SES's "
        "rate, to 8 at 1,000 emails a second (index_shards_for; the send function warns when "
        "it is below); a lower value than the table's indexes have used is raised to that "
        "count, so no entry is left in a shard nothing reads (vdq.store.shards)",
    )  # fmt: skip
    max_receivers: int = _setting(
        "VDQ_MAX_RECEIVERS", 1000, read.receivers,
        "distinct receivers per enqueue request; at most 1000 (the answer of that many, with "
        "the longest values, must fit what Lambda returns and, under its Idempotency-Key, a "
        "DynamoDB item)",
    )  # fmt: skip
    tracing: str = _setting(
        "VDQ_TRACING",
        "lambda",
        read.tracing,
        "lambda: X-Ray segments of Lambda itself; sdk: also Powertools Tracer subsegments "
        "of every AWS call (about 150 ms more cold start); either only for the invocations "
        "Lambda traces (vdq:tracing)",
    )
    producer_quotas: Mapping[str, QuotaLimits] = _setting(
        "VDQ_PRODUCER_QUOTAS",
        MappingProxyType({}),
        read.producer_quotas,
        'JSON: producer (client id or group, "*" for any other) -> {"per_second", '
        '"per_minute", "per_day"} queue items; over one, POST /emails and /sms answer 429; '
        "empty: no quotas",
    )
    quota_shards: int = _setting(
        "VDQ_QUOTA_SHARDS", 1, read.quota_shards,
        "records each producer's quota counters are split over (1 to 16): a request writes one "
        "(one write unit), so raise it to take one producer's requests past 300 a second, 4 at "
        "1,000 (quota_shards_for); set it once, before traffic: raised or lowered, a producer "
        "may pass its limits, in the windows current then, by what it counted in them",
    )  # fmt: skip
    # The reputation guard (vdq.results.reputation): rates per producer over a rolling window.
    reputation_guard: str = _setting(
        "VDQ_REPUTATION_GUARD", "hold", read.guard_mode,
        "hold (a producer over a hold threshold has its email held until an operator releases "
        "it), warn (signals only: the alarm and the event), or off",
    )  # fmt: skip
    reputation_window_hours: int = _setting(
        "VDQ_REPUTATION_WINDOW_HOURS", 24, read.window_hours,
        "hours of the rolling window the bounce and complaint rates are taken over (at most "
        "720: the hourly counters are kept 40 days)",
    )  # fmt: skip
    reputation_min_sent: int = _setting(
        "VDQ_REPUTATION_MIN_SENT", 200, read.positive_int,
        "emails a producer (or the account) must have sent in the window before its rates "
        "warn or hold",
    )  # fmt: skip
    bounce_warn_percent: float = _setting(
        "VDQ_BOUNCE_WARN_PERCENT", 2.5, read.percent,
        "permanent bounces per email sent at which the guard warns (SES reviews an account "
        "at 5%)",
    )  # fmt: skip
    bounce_hold_percent: float = _setting(
        "VDQ_BOUNCE_HOLD_PERCENT", 4.0, read.percent,
        "permanent bounces per email sent at which the guard holds a producer's email (SES "
        "may pause an account at 10%)",
    )  # fmt: skip
    complaint_warn_percent: float = _setting(
        "VDQ_COMPLAINT_WARN_PERCENT", 0.05, read.percent,
        "complaints per email sent at which the guard warns (SES reviews an account at 0.1%)",
    )  # fmt: skip
    complaint_hold_percent: float = _setting(
        "VDQ_COMPLAINT_HOLD_PERCENT", 0.08, read.percent,
        "complaints per email sent at which the guard holds a producer's email (SES may "
        "pause an account at 0.5%)",
    )  # fmt: skip
    producer_thresholds: Mapping[str, Thresholds] = _setting(
        "VDQ_PRODUCER_THRESHOLDS",
        MappingProxyType({}),
        read.producer_thresholds,
        'JSON: producer -> {"bounce_warn", "bounce_hold", "complaint_warn", "complaint_hold" '
        '(percent), "min_sent"}, each overriding the default above; empty: the defaults',
    )
    account_thresholds: Thresholds = _setting(  # noqa: RUF009  (a NamedTuple: immutable)
        "VDQ_ACCOUNT_THRESHOLDS", Thresholds(), read.account_thresholds,
        "JSON of the same shape: the thresholds of the whole account's rates (they warn and "
        "alarm, and hold no producer); empty: the defaults above",
    )  # fmt: skip
    hold_exempt_high: bool = _setting(
        "VDQ_HOLD_EXEMPT_HIGH", False, read.flag,
        "true: a held producer's high-priority email is still sent (password resets, codes)",
    )  # fmt: skip
    hold_cache_seconds: int = _setting(
        "VDQ_HOLD_CACHE_SECONDS", 30, read.positive_int,
        "how long a function keeps the list of held producers before reading it again (one "
        "small Query); a hold or a release reaches the send path within it",
    )  # fmt: skip
    # Operator API.
    group_permissions: Mapping[str, tuple[str, ...]] = _setting(
        "VDQ_GROUP_PERMISSIONS",
        MappingProxyType(DEFAULT_GROUP_PERMISSIONS),
        read.group_permissions,
        "JSON: group -> permissions",
    )
    attachment_url_seconds: int = _setting(
        "VDQ_ATTACHMENT_URL_SECONDS", 300, read.url_seconds,
        "lifetime of a presigned download URL (at most 604800, S3's 7 days; signed with the "
        "function's temporary credentials, a URL also ends when they do)",
    )  # fmt: skip
    upload_url_seconds: int = _setting(
        "VDQ_UPLOAD_URL_SECONDS",
        900,
        read.url_seconds,
        "lifetime of a presigned attachment upload URL (POST /attachments/uploads; at most "
        "604800, as for downloads); the upload itself is deleted a day after it was made "
        "unless an email took it",
    )
    idempotency_seconds: int = _setting(
        "VDQ_IDEMPOTENCY_SECONDS", 86_400, read.positive_int, "how long an Idempotency-Key holds"
    )
    # Operator console (vdq.console): where it signs users in (set by the stack, not by hand).
    console_auth_url: str | None = _setting(
        "VDQ_CONSOLE_AUTH_URL",
        None,
        read.optional_text,
        "base URL of the console's sign-in service: the Cognito domain (its /oauth2/authorize "
        "and /oauth2/token), or the local stack's /_local; set by the stack",
    )
    console_client_id: str | None = _setting(
        "VDQ_CONSOLE_CLIENT_ID", None, read.optional_text,
        "the console's OAuth client id; set by the stack",
    )
    # Local stack only (vdq local); a deployment ignores these.
    local_jwt_secret: str | None = _setting(
        "VDQ_LOCAL_JWT_SECRET",
        None,
        read.optional_text,
        "HS256 secret the local front verifies tokens with (random and printed when unset)",
    )
    schedule_seconds: float = _setting(
        "VDQ_SCHEDULE_SECONDS", 10.0, read.positive_float, "how often the local schedules run"
    )
    local_stream_seconds: float = _setting(
        "VDQ_LOCAL_STREAM_SECONDS", 10.0, read.positive_float,
        "tumbling window of the local stack's stream poller (a deployment's is 60 s): the "
        "counts and the searches by time, sender and provider ID follow a change by up to it",
    )  # fmt: skip
    local_ses_rate: float | None = _setting(
        "VDQ_LOCAL_SES_RATE",
        None,
        read.optional_positive_float,
        "emails per second the SES sandbox takes (its account's MaxSendRate); faster sends "
        "are refused as SES refuses them; unset: no limit",
    )
    local_twilio_rate: float | None = _setting(
        "VDQ_LOCAL_TWILIO_RATE",
        None,
        read.optional_positive_float,
        "messages per second the Twilio sandbox takes from each sender; faster ones get 429 "
        "(20429); unset: no limit",
    )
    local_faults: str = _setting(
        "VDQ_LOCAL_FAULTS",
        "",
        doc="sandbox faults, comma-separated: duplicate, late, reordered, missing, throttle, "
        "5xx, slow",
    )
    local_fault_rate: float = _setting(
        "VDQ_LOCAL_FAULT_RATE", 0.3, read.positive_float, "share of sandbox answers a fault hits"
    )
    local_fault_delay_seconds: float = _setting(
        "VDQ_LOCAL_FAULT_DELAY_SECONDS", 2.0, read.positive_float, "delay of late and slow faults"
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            name = f.metadata["env"]
            raw = env.get(name)
            if raw is None:
                continue
            try:
                values[f.name] = f.metadata["parse"](raw)
            except (ValueError, TypeError) as exc:
                raise SettingsError(f"setting {name}={raw!r} is invalid: {exc}") from exc
        return cls(**values)

    @classmethod
    def documented(cls) -> list[tuple[str, str, str]]:
        """(variable, default, meaning) for each setting, as the documentation lists them."""
        rows = []
        for f in fields(cls):
            default = f.metadata["default"] if f.metadata["default"] is not None else ""
            if isinstance(default, Mapping):
                default = "the five default groups" if default else ""
            elif isinstance(default, Thresholds):
                default = ""
            rows.append((f.metadata["env"], str(default), f.metadata["doc"]))
        return rows

    @property
    def lease_seconds(self) -> int:
        """How long after its claim an item may stay ``sending`` before a delivery of its send
        message takes the attempt for lost: the send function's timeout (no holder of the
        claim is alive after it, and its batch's check is published before it ends), the
        check's delay (an accepted message stays ``sending`` until its first provider event
        or its check: vdq.results.checks) and LEASE_MARGIN_SECONDS, so that a check given
        again after a failed delivery, or held in a results backlog, still records it."""
        return self.send_timeout_seconds + self.check_seconds + LEASE_MARGIN_SECONDS

    @property
    def sms_checks_enabled(self) -> bool:
        """A Twilio account is configured: its SID as a setting, or the secret that names it.

        A deploy configures Twilio through the secret only (its ``account_sid`` is read with
        the token, when an awaiting SMS is first checked), so the checks run there by default.
        """
        return self.twilio_account_sid is not None or self.twilio_secret_name is not None

    @property
    def inbound_url(self) -> str | None:
        """Where Twilio posts inbound SMS (STOP, START, HELP), as it signs them."""
        if self.twilio_inbound_url:
            return self.twilio_inbound_url
        if self.twilio_webhook_url and "status-callback" in self.twilio_webhook_url:
            base = self.twilio_webhook_url.split("?", 1)[0]
            return base.rsplit("status-callback", 1)[0] + "inbound"
        return None

    @property
    def twilio_polling(self) -> bool:
        return self.twilio_webhook_url is None

    def permissions_for(self, groups: list[str] | tuple[str, ...]) -> frozenset[str]:
        return frozenset(p for g in groups for p in self.group_permissions.get(g, ()))


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read on first use (a Lambda reads them once per container)."""
    return Settings.from_env()


