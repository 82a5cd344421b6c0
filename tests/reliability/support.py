"""What the reliability suite shares: one moto AWS per module, fake providers that count every
call per (item, attempt), a send queue that keeps every published message for redelivery, the
reference workflow written independently of ``vdq.workflow.table``, and the figures it prints."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from moto import mock_aws

from vdq.core import resources
from vdq.core.clock import FakeClock, parse_iso
from vdq.core.settings import Settings
from vdq.local import motolean
from vdq.local import resources as local_resources
from vdq.local.resources import LocalResources
from vdq.providers import (
    AmbiguousProviderError,
    PermanentProviderError,
    TransientProviderError,
)
from vdq.runtime import Runtime
from vdq.store import Store

TABLE = "vdq-reliability"  # also the prefix of the bucket's and queues' names
SENDER = "shop@example.com"

# Figures the session prints at the end (see conftest.py).
FIGURES: Counter[str] = Counter()

# ---- the reference model: the seed's workflow table, written out again ----------------------

# (from state, transition) -> to state
ALLOWED: dict[tuple[str, str], str] = {
    ("queued", "send"): "sending",
    ("delayed", "send"): "sending",
    ("sending", "await"): "awaiting",
    ("sending", "delay"): "delayed",
    ("awaiting", "delay"): "delayed",
    ("queued", "error"): "errored",
    ("sending", "error"): "errored",
    ("awaiting", "error"): "errored",
    ("delayed", "error"): "errored",
    ("sending", "succeed"): "succeeded",
    ("awaiting", "succeed"): "succeeded",
    ("awaiting", "timeout"): "unconfirmed",
    ("delayed", "retry"): "queued",
    ("errored", "retry"): "queued",
    ("queued", "cancel"): "cancelled",
    ("delayed", "cancel"): "cancelled",
    ("errored", "cancel"): "cancelled",
}
# The seed's ignored transitions: a late result on a cancelled item keeps it cancelled.
IGNORED = {("cancelled", "error"), ("cancelled", "succeed")}
DONE = {"cancelled", "succeeded", "unconfirmed"}
NEW_ATTEMPT = {"retry", "cancel", "delay"}


GIVE_BACKS = ("paced", "throttled", "suppressed")  # vdq.dispatch.pacing's names of an undone claim


def check_history(item: Any, history: list[Any], *, claim_pending_ok: bool = True) -> list[str]:
    """Violations of the reference model in one item's stored history (empty when none)."""
    problems: list[str] = []
    keys = [h.sk for h in history]
    if keys != sorted(keys):
        problems.append("history not in key order")
    ats = [h.at for h in history]
    if ats != sorted(ats):
        problems.append(f"history times out of order: {ats}")
    state, attempt, claimed_from = "queued", 1, None
    for h in history:
        if h.kind == "event" and h.name in GIVE_BACKS and h.from_state != h.to_state:
            # vdq.dispatch.pacing undoes a claim: back to the state the send took the item from, at
            # the same attempt (throttled by the provider, or its turn at the rate is far).
            if (h.from_state, state, h.to_state) != ("sending", "sending", claimed_from):
                problems.append(f"{h.name} {h.from_state}->{h.to_state}: the item was {state}, "
                                f"claimed from {claimed_from}")  # fmt: skip
            state = h.to_state
            continue
        if h.kind == "transition" and h.name == "send":
            claimed_from = h.from_state
        if h.kind == "transition":
            if h.from_state != state:
                problems.append(f"{h.name}: from {h.from_state}, but the item was {state}")
            target = ALLOWED.get((h.from_state, h.name))
            if target is None or target != h.to_state:
                problems.append(f"{h.name} {h.from_state}->{h.to_state} is not in the workflow")
            state = h.to_state
            if h.name in NEW_ATTEMPT:
                attempt += 1
        elif h.kind == "ignored":
            if (h.from_state, h.name) not in IGNORED or h.from_state != h.to_state:
                problems.append(f"ignored {h.name} {h.from_state}->{h.to_state}")
            if h.from_state != state:
                problems.append(f"ignored {h.name} from {h.from_state}, the item was {state}")
        elif h.from_state is not None and h.from_state != h.to_state:
            problems.append(f"{h.kind} {h.name} changed state {h.from_state}->{h.to_state}")
    pending_claim = (
        claim_pending_ok
        and item.state == "sending"
        and state in ("queued", "delayed")
        and item.claimed_at is not None
    )
    if item.state != state and not pending_claim:
        problems.append(f"item is {item.state}, its history ends in {state}")
    if int(item.attempt) != attempt:
        problems.append(f"item at attempt {item.attempt}, history implies {attempt}")
    return problems


# ---- AWS and the runtime ---------------------------------------------------------------------


def make_settings(created: LocalResources, **changes: Any) -> Settings:
    return replace(
        Settings(),
        table_name=created.table,
        attachments_bucket=created.bucket,
        send_queue_url=created.queues[resources.SEND_QUEUE],
        results_queue_url=created.queues[resources.RESULTS_QUEUE],
        event_bus_name="",
        **changes,
    )


def empty_table() -> None:
    """Forget every item of the test table, in moto's own backend.

    An example's items are of no use to the next, and moto answers each index query by sorting
    every item of the table: a table that keeps growing makes a long run quadratic.
    """
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    forget_items(dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[TABLE])


def forget_items(table: Any) -> None:
    """Empty a moto table: its items, and what moto keeps besides (``forget_garbage``)."""
    table.items.clear()
    forget_garbage(table)


def forget_garbage(table: Any) -> None:
    """Drop what moto keeps that no request reads: its stream's records (every record of the
    table's stream, with both images: a long run would otherwise fill the machine) and the
    copies its transactions made."""
    shard = getattr(table, "stream_shard", None)
    if shard is not None:
        shard.items.clear()
    # moto also keeps every model object it ever made, and TransactWriteItems deep-copies
    # every table, stream records included, for its rollback: a soak of 10,000 schedules grew
    # to 12 GB and was killed.
    motolean.forget_tracked()


@contextmanager
def moto_aws() -> Iterator[LocalResources]:
    with mock_aws():
        yield local_resources.create(boto3, prefix=TABLE, table=TABLE, dead_letters_and_topic=False)


class TickingClock(FakeClock):
    """A fake clock that moves on a microsecond each time it is read, as real time does between
    two steps; tests move it further by hand."""

    def now(self) -> datetime:
        self._now += timedelta(microseconds=1)
        return self._now


_EPOCHS = itertools.count()


# Where the first example's clock starts: far enough ahead that the soak's 20,000 examples (and
# the extra runs Hypothesis makes while it shrinks) stay after 1970. Before it an item's id (a
# ULID of its enqueue time) has no valid time part, which the stream's postings cannot encode.
FIRST_EPOCH = datetime(2700, 1, 1, tzinfo=UTC)
EARLIEST = datetime(1971, 1, 1, tzinfo=UTC)


def fresh_clock() -> TickingClock:
    """A clock for one example, ten days before the previous example's: the timers of every
    earlier example's items lie in this one's future, so its sweeps see only its own items."""
    start = FIRST_EPOCH - timedelta(days=10 * next(_EPOCHS))
    assert start > EARLIEST, "more examples than the model's clocks can keep apart"
    return TickingClock(start)


# ---- fakes -----------------------------------------------------------------------------------


class Crash(BaseException):
    """The worker process died here (a Lambda timeout, an out-of-memory kill): no handler runs."""


class FakeSes:
    """Stands in for ``SesProvider``; counts calls per (item, attempt) from the tracking tags.

    ``plan`` says what the next call does: ok, transient, permanent, ambiguous (SES took the
    message, the answer was lost), crash (SES took it, then the worker died).
    """

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, int]] = Counter()
        self.accepted: dict[str, tuple[str, int]] = {}  # message ID -> (item, attempt)
        self.plan = "ok"
        self._ids = (f"0100019a-{n:08d}-rel" for n in itertools.count(1))

    def send_raw(self, *, sender: str, receiver: str, raw: bytes, tags: Any = ()) -> str:
        named = {t["Name"]: t["Value"] for t in tags}
        key = (named["vdq_item"], int(named["vdq_attempt"]))
        self.calls[key] += 1
        FIGURES["provider calls"] += 1
        if self.plan == "transient":
            raise TransientProviderError("SES", "Maximum sending rate exceeded",
                                         code="TooManyRequestsException")  # fmt: skip
        if self.plan == "permanent":
            raise PermanentProviderError("SES", "Email address is not verified",
                                         code="MessageRejected")  # fmt: skip
        message_id = next(self._ids)
        self.accepted[message_id] = key
        if self.plan == "ambiguous":
            raise AmbiguousProviderError("SES", "Read timeout on endpoint URL")
        if self.plan == "crash":
            raise Crash()
        return message_id

    def double_calls(self) -> dict[tuple[str, int], int]:
        return {k: n for k, n in self.calls.items() if n > 1}


class RecordingQueue:
    """The send queue: every published body is kept, so a test can deliver it again."""

    def __init__(self) -> None:
        self.bodies: list[str] = []
        self.fail = False

    def publish(self, messages: Any) -> dict[str, str]:
        if self.fail:
            return {m.item_id: "publishing the send failed: ServiceUnavailable" for m in messages}
        self.bodies.extend(m.body() for m in messages)
        return {}

    def backlog(self, priority: str = "normal") -> int:
        return 0  # the model delivers any body at any time: none is waiting in a queue


def runtime_for(settings: Settings, clock: FakeClock | None = None, **overrides: Any) -> Runtime:
    rt = Runtime(settings=settings, clock=clock or fresh_clock())
    rt.overrides.update(overrides)
    return rt


def lease_passed(item: Any, settings: Settings, at: datetime) -> bool:
    return item.claimed_at is not None and (
        parse_iso(item.claimed_at) + timedelta(seconds=settings.lease_seconds) < at
    )


def message_item(body: str) -> tuple[str, int]:
    data = json.loads(body)
    return data["id"], data["attempt"]


__all__ = ["ALLOWED", "FIGURES", "Crash", "FakeSes", "RecordingQueue", "Store"]
