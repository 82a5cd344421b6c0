"""Deployment choices, read once from CDK context (cdk.json or ``-c key=value``).

Infrastructure knobs are ``vdq:*`` keys, each described once in ``infra.choices.CHOICES`` (the
documentation's settings page is generated from it); every product setting
(``vdq.core.settings.Settings``) is a context key of its own name, e.g. ``-c VDQ_MAX_RETRIES=5``,
passed to the functions as their environment. A product setting left out keeps the product's
default.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from vdq.core import resources
from vdq.core.setting_values import DEFAULT_GROUP_PERMISSIONS
from vdq.core.settings import Settings, index_shards_for

if TYPE_CHECKING:  # the defaults are read without the CDK (the Lambda runtime's tests, bench)
    from constructs import Node

FUNCTIONS = ("enqueue", "send", "webhook", "operator", "schedule")
# Settings the stack itself sets from the resources it creates (and the sender identities from
# vdq:sesIdentities): a context value of one would be overridden, so it is refused instead.
STACK_SETTINGS = frozenset(
    {
        "VDQ_TABLE_NAME",
        "VDQ_ATTACHMENTS_BUCKET",
        "VDQ_SEND_QUEUE_URL",
        "VDQ_HIGH_SEND_QUEUE_URL",
        "VDQ_BULK_SEND_QUEUE_URL",
        "VDQ_RESULTS_QUEUE_URL",
        "VDQ_SEND_DEAD_LETTER_QUEUE_URL",
        "VDQ_HIGH_SEND_DEAD_LETTER_QUEUE_URL",
        "VDQ_BULK_SEND_DEAD_LETTER_QUEUE_URL",
        "VDQ_RESULTS_DEAD_LETTER_QUEUE_URL",
        "VDQ_SEND_TIMEOUT_SECONDS",  # from vdq:timeoutSeconds (the send function's)
        "VDQ_EVENT_BUS_NAME",
        "VDQ_SES_CONFIGURATION_SET",
        "VDQ_TWILIO_SECRET_NAME",
        "VDQ_SENDER_IDENTITIES",
        "VDQ_UNSUBSCRIBE_SECRET_NAME",
        "VDQ_UNSUBSCRIBE_URL",
        "VDQ_CONSOLE_AUTH_URL",
        "VDQ_CONSOLE_CLIENT_ID",
    }
)
# Secrets never enter a template: each comes from Secrets Manager at run time. The secret that
# holds each instead.
REFUSED_SETTINGS = {
    "TWILIO_AUTH_TOKEN": "the Twilio secret",
    "TWILIO_WEBHOOK_SHARED_KEY": "the Twilio secret's webhook_shared_key",
    "VDQ_UNSUBSCRIBE_KEY": "the stack's generated UnsubscribeKey secret",
    "VDQ_UNSUBSCRIBE_PREVIOUS_KEY": "the UnsubscribeKey secret's AWSPREVIOUS version",
}
# Settings of the local stack (vdq local) only; a deployment has no use for them.
LOCAL_SETTINGS = frozenset({"VDQ_SCHEDULE_SECONDS", "VDQ_TWILIO_API_URL"})
SETTING_NAMES = tuple(f.metadata["env"] for f in fields(Settings))

DEFAULT_MEMORY_MB = {"enqueue": 512, "send": 512, "webhook": 512, "operator": 512, "schedule": 512}
DEFAULT_TIMEOUT_SECONDS = {
    "enqueue": resources.API_FUNCTION_TIMEOUT_SECONDS,
    "operator": resources.API_FUNCTION_TIMEOUT_SECONDS,
    "send": resources.SEND_FUNCTION_TIMEOUT_SECONDS,
    "webhook": resources.RESULTS_FUNCTION_TIMEOUT_SECONDS,
    "schedule": resources.SCHEDULE_FUNCTION_TIMEOUT_SECONDS,
}


class ConfigError(ValueError):
    pass


# An SES identity: a domain (example.com) or an address (shop@example.com); no wildcards.
_IDENTITY = re.compile(r"[A-Za-z0-9._%+-]+(@[A-Za-z0-9.-]+)?")


def _identities(value: Any) -> tuple[str, ...]:
    """``vdq:sesIdentities``: a JSON list, a list, or a comma-separated string (unset: none;
    the app refuses to build the stack without them, ``require_ses_identities``)."""
    if value is None:
        return ()
    if isinstance(value, str):
        text = value.strip()
        items = json.loads(text) if text.startswith("[") else text.split(",")
    else:
        items = list(value)
    found = tuple(str(i).strip() for i in items if str(i).strip())
    bad = [i for i in found if not _IDENTITY.fullmatch(i) or "." not in i]
    if not found or bad:
        raise ConfigError(
            "vdq:sesIdentities must list SES identities (domains or addresses), got "
            f"{bad or value!r}"
        )
    return found


def _get(node: Node, key: str, default: Any) -> Any:
    value = node.try_get_context(key)
    return default if value is None else value


PRODUCER_CLIENT = re.compile(r"[a-z][a-z0-9-]{0,39}")


def _scopes(key: str, value: Any) -> tuple[str, ...]:
    """The groups a list (or its JSON, or comma-separated text, as a -c passes it) names, each
    one of VDQ's."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = json.loads(text) if text.startswith("[") else [
                v.strip() for v in text.split(",") if v.strip()]
        except ValueError:
            value = None  # not JSON: said below
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of group names (JSON, or separated by "
                          "commas)")  # fmt: skip
    groups = tuple(value)
    unknown = sorted(set(groups) - set(DEFAULT_GROUP_PERMISSIONS))
    if unknown:
        raise ConfigError(f"{key} names unknown groups {unknown} (it takes "
                          f"{', '.join(DEFAULT_GROUP_PERMISSIONS)})")
    return groups


def _producer_clients(value: Any) -> tuple[str, ...]:
    """``vdq:producerClients``: a JSON list (or comma-separated text) of distinct names, each
    lower-case letters, digits and dashes, starting with a letter, up to 40 characters."""
    if isinstance(value, str):
        text = value.strip()
        value = json.loads(text) if text.startswith("[") else [
            v.strip() for v in text.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError("vdq:producerClients must be a list of names")
    bad = [v for v in value if not PRODUCER_CLIENT.fullmatch(v)]
    if bad:
        raise ConfigError(f"vdq:producerClients: {bad} are not names of lower-case letters, "
                          "digits and dashes starting with a letter (at most 40)")
    twice = sorted({v for v in value if [camel(w) for w in value].count(camel(v)) > 1})
    if twice:
        raise ConfigError(f"vdq:producerClients: {twice} name one producer more than once "
                          "(their outputs would be one: ProducerClient<Name>)")
    return tuple(value)


def camel(name: str) -> str:
    """A producer client's name (``shop-orders``) as a part of an id or output (``ShopOrders``)."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("-"))


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigError(f"not a boolean: {value!r}")


# An SQS event source's MaximumConcurrency: Lambda accepts 2 to 1000.
MIN_CONCURRENCY, MAX_CONCURRENCY = 2, 1000


def _concurrency(node: Node, key: str, default: int = MIN_CONCURRENCY) -> int:
    value = int(_get(node, key, default))
    if not MIN_CONCURRENCY <= value <= MAX_CONCURRENCY:
        raise ConfigError(f"{key} must be {MIN_CONCURRENCY} to {MAX_CONCURRENCY}, not {value}")
    return value


# What one worker keeps up with, a second: a send function sends about 26 emails a second on
# its threads at the bench's request latencies (bench.lanesim at 1,000/s: 16 bulk workers
# used 42% of the rate, 32 all of it), taken lower for headroom; a results consumer about 50
# SES events (a read and a write each, ten a batch).
SENDS_PER_WORKER = 20
EVENTS_PER_WORKER = 50


def workers_for(rate: float | None, per_worker: int, default: int) -> int:
    """The most workers of a lane or consumer at once for the peak rate ``rate`` (None: the
    default, sized for a new account's 14 a second)."""
    if rate is None:
        return default
    return min(MAX_CONCURRENCY, max(default, math.ceil(rate / per_worker)))


def _peak_send_rate(node: Node) -> float | None:
    value = _get(node, "vdq:peakSendRate", None)
    if value is None or value == "":
        return None
    if isinstance(value, bool):  # float(True) would be a rate of one email a second
        raise ConfigError(f"vdq:peakSendRate must be emails a second, not {value!r}")
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"vdq:peakSendRate must be emails a second, not {value!r}") from None
    if not 0 < rate <= MAX_CONCURRENCY * SENDS_PER_WORKER:
        raise ConfigError(f"vdq:peakSendRate must be more than 0 and at most "
                          f"{MAX_CONCURRENCY * SENDS_PER_WORKER}, not {value!r}")
    return rate


def _shards_for_peak(settings: dict[str, str], rate: float | None,
                     pinned: float | None) -> None:  # fmt: skip
    """The sparse indexes' shards the peak rate needs (VDQ_INDEX_SHARDS), unless set; a value
    set below them fails the synth. A pinned SES rate (VDQ_SES_MAX_SEND_RATE, ``pinned``) is
    the rate the send functions pace at whatever the peak says: the shards hold the larger."""
    rates = {name: value for name, value in (("vdq:peakSendRate", rate),
                                             ("VDQ_SES_MAX_SEND_RATE", pinned))
             if value is not None}  # fmt: skip
    if not rates:
        return
    name, fastest = max(rates.items(), key=lambda named: named[1])
    needed = index_shards_for(fastest)
    given = settings.setdefault("VDQ_INDEX_SHARDS", str(needed))
    if int(given) < needed:
        raise ConfigError(f"VDQ_INDEX_SHARDS is {given}: {name} {fastest:g} needs at "
                          f"least {needed}")


@dataclass(frozen=True)
class Capacity:
    """Provisioned capacity of the table and each index, auto scaled between the bounds to
    ``target`` percent utilization. A steady load pays about 59% less than on-demand per unit
    at 70% utilization (bench.bill); a burst beyond what auto scaling has reached (it takes
    minutes) is throttled, which every writer retries (the SDK, then SQS) without losing
    anything."""

    min_write: int = 5
    max_write: int = 1000
    min_read: int = 5
    max_read: int = 1000
    target: int = 70


def _bounds(node: Node, key: str, default: tuple[int, int]) -> tuple[int, int]:
    """``vdq:writeCapacity`` / ``vdq:readCapacity``: "<min>-<max>" capacity units."""
    value = _get(node, key, None)
    if value is None:
        return default
    match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", str(value))
    low, high = (int(match[1]), int(match[2])) if match else (0, 0)
    if not match or not 1 <= low <= high <= 40_000:
        raise ConfigError(f"{key} must be <min>-<max> capacity units, 1 <= min <= max <= 40000; "
                          f"got {value!r}")  # fmt: skip
    return low, high


def _capacity(node: Node) -> Capacity | None:
    """``vdq:capacity``: ``on-demand`` (the default: None) or ``provisioned``."""
    mode = str(_get(node, "vdq:capacity", "on-demand")).strip().lower()
    if mode == "on-demand":
        for key in ("vdq:writeCapacity", "vdq:readCapacity", "vdq:capacityTarget"):
            if node.try_get_context(key) is not None:
                raise ConfigError(f"{key} applies to vdq:capacity=provisioned only")
        return None
    if mode != "provisioned":
        raise ConfigError(f"vdq:capacity must be on-demand or provisioned, not {mode!r}")
    write = _bounds(node, "vdq:writeCapacity", (Capacity.min_write, Capacity.max_write))
    read = _bounds(node, "vdq:readCapacity", (Capacity.min_read, Capacity.max_read))
    target = int(_get(node, "vdq:capacityTarget", Capacity.target))
    if not 20 <= target <= 90:  # Application Auto Scaling's target tracking range for DynamoDB
        raise ConfigError(f"vdq:capacityTarget must be 20 to 90 (percent), not {target}")
    return Capacity(write[0], write[1], read[0], read[1], target)


SYSTEM_LOG_LEVELS = ("DEBUG", "INFO", "WARN")
# Lambda's own start and report lines (about 700 bytes an invocation, a third of the log bytes
# of an email): left out unless vdq:systemLogLevel asks for them. Errors and timeouts stay.
DEFAULT_SYSTEM_LOG_LEVEL = "WARN"


def _system_log_level(node: Node) -> str:
    """``vdq:systemLogLevel``: the level of Lambda's own log lines the functions keep."""
    level = str(_get(node, "vdq:systemLogLevel", DEFAULT_SYSTEM_LOG_LEVEL)).strip().upper()
    if level not in SYSTEM_LOG_LEVELS:
        raise ConfigError(f"vdq:systemLogLevel must be one of {', '.join(SYSTEM_LOG_LEVELS)}, "
                          f"not {level!r}")  # fmt: skip
    return level


# X-Ray: "passthrough" traces only a request that arrives sampled (no function starts a
# trace, the API stage traces nothing); "active" samples every function's invocations and
# the API stage's requests (1 a second and 5% of the rest each: US$0.9 to 2.2 per million
# emails at 1M a day, bench.bill).
TRACING_MODES = ("passthrough", "active")


def _tracing(node: Node) -> str:
    """``vdq:tracing``: ``passthrough`` (the default) or ``active``."""
    mode = str(_get(node, "vdq:tracing", TRACING_MODES[0])).strip().lower()
    if mode not in TRACING_MODES:
        raise ConfigError(f"vdq:tracing must be one of {', '.join(TRACING_MODES)}, not {mode!r}")
    return mode


def _check_send_timeout(seconds: int) -> None:
    """A send function claims nothing in the last ``TIMEOUT_MARGIN`` seconds of its time (the
    longest provider call and its record): a timeout no longer than that would publish every
    batch again unclaimed, for ever, and send nothing."""
    from vdq.dispatch.pacing import TIMEOUT_MARGIN

    if seconds <= TIMEOUT_MARGIN:
        raise ConfigError(f"vdq:timeoutSeconds of send must be more than {TIMEOUT_MARGIN:g} s "
                          f"(the longest provider call and its record), not {seconds}")


def _as_map(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str) else dict(value)


@dataclass(frozen=True)
class DeployConfig:
    deletion_protection: bool = True
    log_retention_days: int = 30
    memory_mb: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_MEMORY_MB))
    timeout_seconds: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_TIMEOUT_SECONDS))
    send_max_concurrency: int = 2  # the normal lane's consumer
    # The high lane's consumer gets headroom of its own: a code or a password reset never waits
    # for a worker that normal or bulk sends hold. Bulk stays at the minimum.
    high_send_max_concurrency: int = 4
    bulk_send_max_concurrency: int = 2
    # The results consumer (SES events, deferred Twilio lookups): a burst of SES events must
    # not take a new account's whole concurrency (often 10) and throttle the API.
    results_max_concurrency: int = 2
    api_throttle_rate: float = 50.0
    api_throttle_burst: int = 100
    twilio_secret_name: str = "vdq/twilio"
    twilio_webhook_url: str | None = None  # None: derived from the API URL; "": polling
    alarm_email: str | None = None
    machine_scopes: tuple[str, ...] = ("vdq-senders",)
    producer_scopes: tuple[str, ...] = ("vdq-senders",)
    # A machine client of its own for each producing service: VDQ tells producers apart by a
    # token's subject (a client's id), for quotas, holds and counts.
    producer_clients: tuple[str, ...] = ()
    ses_identities: tuple[str, ...] = ()  # the send function's only From identities
    files_noncurrent_days: int = 1
    # SES open and click events: SES rewrites every link and adds a pixel to every HTML email,
    # and each open or click costs an SNS publish, an SQS message, a share of a Lambda
    # invocation and a DynamoDB write. Off unless the deployer wants them.
    open_click_tracking: bool = False
    # API Gateway's CloudWatch role is one setting per account and region: a stack that sets it
    # overrides any other and leaves the account pointing at a deleted role when deleted.
    cloud_watch_role: bool = False
    # Stage execution (ERROR) and access logs: they need that account setting (set once, by
    # the deployer or by cloud_watch_role), or the deploy fails. Default: cloud_watch_role.
    api_logs: bool = False
    capacity: Capacity | None = None  # None: on-demand
    # Lambda's own log lines (platform.start and platform.report): WARN leaves them out.
    system_log_level: str = DEFAULT_SYSTEM_LOG_LEVEL
    tracing: str = TRACING_MODES[0]  # X-Ray: vdq:tracing
    settings: dict[str, str] = field(default_factory=dict)
    # The most emails a second the deployment sends at (vdq:peakSendRate): the send lanes'
    # and the results consumer's concurrency and VDQ_INDEX_SHARDS follow it. None: the
    # defaults, sized for a new account's 14 a second.
    peak_send_rate: float | None = None

    def require_ses_identities(self) -> None:
        if not self.ses_identities:
            raise ConfigError(
                "vdq:sesIdentities is required: the SES identities (domains or addresses) VDQ "
                "sends from, e.g. -c vdq:sesIdentities=example.com or in cdk.json (the send "
                "function may send from no other)"
            )

    @classmethod
    def from_context(cls, node: Node) -> DeployConfig:
        memory = {**DEFAULT_MEMORY_MB, **_as_map(_get(node, "vdq:memoryMb", {}))}
        timeouts = {**DEFAULT_TIMEOUT_SECONDS, **_as_map(_get(node, "vdq:timeoutSeconds", {}))}
        unknown = sorted((set(memory) | set(timeouts)) - set(FUNCTIONS))
        if unknown:
            raise ConfigError(f"vdq:memoryMb / vdq:timeoutSeconds name unknown functions {unknown}")
        _check_send_timeout(int(timeouts["send"]))
        settings = {}
        for name in SETTING_NAMES:
            value = node.try_get_context(name)
            if value is None:
                continue
            if name in REFUSED_SETTINGS:
                raise ConfigError(f"{name} must not be a template value: it is a secret, and "
                                  f"{REFUSED_SETTINGS[name]} holds it")
            if name in LOCAL_SETTINGS or name.startswith("VDQ_LOCAL_"):
                raise ConfigError(f"{name} is a setting of the local stack only")
            if name in STACK_SETTINGS:
                raise ConfigError(f"{name} is set by the stack from the resources it creates")
            settings[name] = value if isinstance(value, str) else json.dumps(value)
        webhook_url = settings.pop("TWILIO_WEBHOOK_URL", None)
        if webhook_url is not None:
            webhook_url = webhook_url.strip()
        peak = _peak_send_rate(node)
        product = Settings.from_env(settings)  # a bad value fails the synth, naming the setting
        _shards_for_peak(settings, peak, product.ses_max_send_rate)
        sends = workers_for(peak, SENDS_PER_WORKER, MIN_CONCURRENCY)
        scopes = _get(node, "vdq:machineScopes", ["vdq-senders"])
        producer_scopes = _get(node, "vdq:producerScopes", ["vdq-senders"])
        producers = _producer_clients(_get(node, "vdq:producerClients", []))
        cloud_watch_role = _as_bool(_get(node, "vdq:cloudWatchRole", False))
        return cls(
            deletion_protection=_as_bool(_get(node, "vdq:deletionProtection", True)),
            log_retention_days=int(_get(node, "vdq:logRetentionDays", 30)),
            memory_mb={k: int(v) for k, v in memory.items()},
            timeout_seconds={k: int(v) for k, v in timeouts.items()},
            send_max_concurrency=_concurrency(node, "vdq:sendMaxConcurrency", sends),
            high_send_max_concurrency=_concurrency(node, "vdq:highSendMaxConcurrency", 4),
            bulk_send_max_concurrency=_concurrency(node, "vdq:bulkSendMaxConcurrency", sends),
            results_max_concurrency=_concurrency(
                node, "vdq:resultsMaxConcurrency",
                workers_for(peak, EVENTS_PER_WORKER, MIN_CONCURRENCY)),
            api_throttle_rate=float(_get(node, "vdq:apiThrottleRate", 50)),
            api_throttle_burst=int(_get(node, "vdq:apiThrottleBurst", 100)),
            twilio_secret_name=str(_get(node, "vdq:twilioSecretName", "vdq/twilio")),
            twilio_webhook_url=webhook_url,
            alarm_email=_get(node, "vdq:alarmEmail", None) or None,
            machine_scopes=_scopes("vdq:machineScopes", scopes),
            producer_scopes=_scopes("vdq:producerScopes", producer_scopes),
            producer_clients=producers,
            ses_identities=_identities(node.try_get_context("vdq:sesIdentities")),
            files_noncurrent_days=int(_get(node, "vdq:filesNoncurrentDays", 1)),
            open_click_tracking=_as_bool(_get(node, "vdq:openClickTracking", False)),
            cloud_watch_role=cloud_watch_role,
            api_logs=_as_bool(_get(node, "vdq:apiLogs", cloud_watch_role)),
            capacity=_capacity(node),
            system_log_level=_system_log_level(node),
            tracing=_tracing(node),
            settings=settings,
            peak_send_rate=peak,
        )
