"""How a setting's text is read: the parser of each kind of value (a bad one raises, and
vdq.core.settings names the variable), and the default groups with their permissions."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, NamedTuple

DEFAULT_GROUP_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "vdq-senders": ("vdq.add_queueitem",),
    "vdq-viewers": ("vdq.list_queueitem", "vdq.read_queueitem", "vdq.read_workflow"),
    "vdq-operators": (
        "vdq.list_queueitem",
        "vdq.read_queueitem",
        "vdq.read_workflow",
        "vdq.can_retry",
        "vdq.can_cancel",
        "vdq.can_resend",
    ),
    # The suppression list holds people's addresses and numbers, and removing one sends to
    # someone who bounced or opted out: its own permissions, its own group.
    "vdq-suppressions": ("vdq.list_suppression", "vdq.change_suppression"),
    "vdq-admins": (
        "vdq.add_queueitem",
        "vdq.list_queueitem",
        "vdq.read_queueitem",
        "vdq.read_workflow",
        "vdq.can_retry",
        "vdq.can_cancel",
        "vdq.can_resend",
        "vdq.list_suppression",
        "vdq.change_suppression",
        "vdq.release_hold",
    ),
}

ALL_PERMISSIONS = frozenset(p for perms in DEFAULT_GROUP_PERMISSIONS.values() for p in perms)

def text(value: str) -> str:
    return value.strip()


def optional_text(value: str) -> str | None:
    return value.strip() or None


def identities(value: str) -> tuple[str, ...]:
    """Comma-separated SES identities: addresses or domains, compared in lower case."""
    out = tuple(dict.fromkeys(v.strip().lower() for v in value.split(",") if v.strip()))
    for identity in out:
        if "*" in identity or " " in identity or identity.startswith("@"):
            raise ValueError(f"{identity!r} is not an address or a domain (no wildcards)")
    return out


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError("must be a whole number of at least 1")
    return number


def at_most(limit: int, why: str = "") -> Callable[[str], int]:
    """A reader of a whole number from 1 to ``limit``; ``why`` follows the error's bound."""

    def read(value: str) -> int:
        number = positive_int(value)
        if number > limit:
            raise ValueError(f"must be at most {limit}{why}")
        return number

    return read


MAX_SEND_PARALLELISM = 10
send_parallelism = at_most(MAX_SEND_PARALLELISM, " (an SQS batch holds 10 messages)")
# A charge spread over a producer's quota shards reads them in one BatchGetItem and writes them
# in one transaction (at most 100 keys and 100 actions); 16 shards carry 4,800 requests a second.
MAX_QUOTA_SHARDS = 16
quota_shards = at_most(MAX_QUOTA_SHARDS)
# The 201 of 1,000 receivers, each with the longest address and name and the longest origin,
# is 5 MB of the 6 MB a Lambda function returns, and kept under its Idempotency-Key in 358 KB
# of a 400 KB DynamoDB item: the answer of more might not fit, once its items are stored.
MAX_RECEIVERS = 1000
receivers = at_most(MAX_RECEIVERS, " (the answer of that many must fit Lambda's 6 MB and, "
                    "under its Idempotency-Key, a 400 KB DynamoDB item)")  # fmt: skip
# A send_at is at most ten years ahead: the date arithmetic of a far larger bound overflows.
schedule_days = at_most(3650, " (ten years)")
MAX_DELAY_SECONDS = 900  # SQS's longest DelaySeconds
delay_seconds = at_most(MAX_DELAY_SECONDS, " (SQS's longest delay)")
PRESIGNED_MAX_SECONDS = 604_800  # S3 refuses a SigV4 presigned URL valid longer (7 days)
url_seconds = at_most(PRESIGNED_MAX_SECONDS,
                      " (7 days: S3 refuses a presigned URL valid longer)")  # fmt: skip
# SES v2 takes a message of at most 40 MB after base64 (the SES Developer Guide's quotas), and
# base64 with its line ends makes a file 1.37 times larger: 20 MB of files leave room for the
# text and HTML bodies (a million characters each, base64 too when not ASCII) and the headers.
MAX_ATTACHMENT_BYTES = 20_000_000
attachment_bytes = at_most(MAX_ATTACHMENT_BYTES, ": SES refuses a message over 40 MB after "
                           "base64, which makes files 1.37 times larger")  # fmt: skip


def non_negative_int(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError("must be a whole number of at least 0")
    return number


# A hundred years: every expiration then stays below NEVER (vdq.store.models, the ``cx`` of a
# content that never expires) and every list's oldest day a date. 0 keeps done items forever.
MAX_RETENTION_DAYS = 36_500


def retention_days(value: str) -> int:
    number = non_negative_int(value)
    if number > MAX_RETENTION_DAYS:
        raise ValueError(f"must be at most {MAX_RETENTION_DAYS} (100 years); 0 keeps done "
                         "items forever")  # fmt: skip
    return number


MAX_FILES_AGE_SECONDS = MAX_RETENTION_DAYS * 86_400


def files_age_seconds(value: str) -> int | None:
    number = optional_non_negative_int(value)
    if number is not None and number > MAX_FILES_AGE_SECONDS:
        raise ValueError(f"must be at most {MAX_FILES_AGE_SECONDS} (100 years); unset, files "
                         "go 2 days before their records expire")  # fmt: skip
    return number


def optional_non_negative_int(value: str) -> int | None:
    return non_negative_int(value) if value.strip() else None


def positive_float(value: str) -> float:
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError("must be a number greater than 0")
    return number


def optional_positive_float(value: str) -> float | None:
    return positive_float(value) if value.strip() else None


class Thresholds(NamedTuple):
    """Rates (percent of emails sent) at which the reputation guard warns and holds, and the
    emails sent in the window before a rate counts; None: the deployment's default."""

    bounce_warn: float | None = None
    bounce_hold: float | None = None
    complaint_warn: float | None = None
    complaint_hold: float | None = None
    min_sent: int | None = None


def percent(value: str) -> float:
    number = float(value)
    if not math.isfinite(number) or number <= 0 or number > 100:
        raise ValueError("must be a percentage greater than 0 and at most 100")
    return number


def _thresholds(name: str, data: Any) -> Thresholds:
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{name!r} must map to an object of " + ", ".join(Thresholds._fields))
    unknown = sorted(set(data) - set(Thresholds._fields))
    if unknown:
        raise ValueError(f"{name!r} names unknown thresholds {unknown}")
    for key, n in data.items():
        if isinstance(n, bool) or not isinstance(n, int | float):
            raise ValueError(f"{name!r}: {key} must be a number")
        if key == "min_sent" and (not isinstance(n, int) or n < 1):
            raise ValueError(f"{name!r}: min_sent must be a whole number of at least 1")
        if key != "min_sent" and not 0 < n <= 100:
            raise ValueError(f"{name!r}: {key} must be a percentage greater than 0 and at "
                             "most 100")  # fmt: skip
    return Thresholds(**data)


def producer_thresholds(value: str) -> dict[str, Thresholds]:
    data = json.loads(value) if value.strip() else {}
    if not isinstance(data, dict):
        raise ValueError('must be a JSON object: {"<producer>": {"bounce_hold": 6, ...}}')
    out: dict[str, Thresholds] = {}
    for name, limits in data.items():
        if not name.strip():
            raise ValueError("a producer name is empty")
        out[name] = _thresholds(name, limits)
    return out


def account_thresholds(value: str) -> Thresholds:
    data = json.loads(value) if value.strip() else {}
    return _thresholds("account", data) if data else Thresholds()


def window_hours(value: str) -> int:
    number = positive_int(value)
    if number > 720:
        raise ValueError("must be at most 720 (30 days: the hourly counters are kept 40)")
    return number


GUARD_MODES = ("hold", "warn", "off")


def guard_mode(value: str) -> str:
    choice = value.strip().lower()
    if choice not in GUARD_MODES:
        raise ValueError("must be one of: " + ", ".join(GUARD_MODES))
    return choice


def flag(value: str) -> bool:
    choice = value.strip().lower()
    if choice in ("1", "true", "yes", "on"):
        return True
    if choice in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


class QuotaLimits(NamedTuple):
    """A producer's limits: queue items per second, per minute and per (UTC) day."""

    per_second: int | None = None
    per_minute: int | None = None
    per_day: int | None = None


def producer_quotas(value: str) -> dict[str, QuotaLimits]:
    data = json.loads(value) if value.strip() else {}
    if not isinstance(data, dict):
        raise ValueError('must be a JSON object: {"<client id or group>": {"per_minute": N, '
                         '"per_day": M}, "*": {...}}')  # fmt: skip
    out: dict[str, QuotaLimits] = {}
    for name, limits in data.items():
        if not name.strip():
            raise ValueError("a producer name is empty")
        if not isinstance(limits, dict) or not limits:
            raise ValueError(f"{name!r} must map to an object of per_second, per_minute, per_day")
        unknown = sorted(set(limits) - set(QuotaLimits._fields))
        if unknown:
            raise ValueError(f"{name!r} names unknown limits {unknown}")
        for key, n in limits.items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"{name!r}: {key} must be a whole number of at least 1")
        out[name] = QuotaLimits(**limits)
    return out


STATE_EVENT_MODES = ("errored", "outcomes", "all", "none")


def state_events(value: str) -> str:
    choice = value.strip().lower()
    if choice == "default":
        return "errored"
    if choice not in STATE_EVENT_MODES:
        raise ValueError("must be one of: " + ", ".join(STATE_EVENT_MODES))
    return choice


def archive(value: str) -> str:
    value = value.strip().lower()
    if value not in ("", "s3"):
        raise ValueError("must be s3 or empty")
    return value


def tracing(value: str) -> str:
    choice = value.strip().lower()
    if choice not in ("lambda", "sdk"):
        raise ValueError("must be one of: lambda, sdk")
    return choice


def group_permissions(value: str) -> dict[str, tuple[str, ...]]:
    data = json.loads(value)
    if not isinstance(data, dict):
        raise ValueError("must be a JSON object of group -> list of permissions")
    parsed: dict[str, tuple[str, ...]] = {}
    for group, perms in data.items():
        if not isinstance(perms, list) or not all(isinstance(p, str) for p in perms):
            raise ValueError(f"group {group!r} must map to a list of permission names")
        unknown = sorted(set(perms) - ALL_PERMISSIONS)
        if unknown:
            raise ValueError(f"group {group!r} names unknown permissions {unknown}")
        parsed[group] = tuple(perms)
    return parsed
