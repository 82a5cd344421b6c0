"""A timed-out enqueue frees its Idempotency-Key at the invocation's deadline, not after 24 h.

Lambda stops a timed-out invocation without running any cleanup, so Powertools' idempotency
record stays "in progress". With the invocation's Lambda context registered, the record carries
``in_progress_expiration`` (the deadline) and a retry after it runs; without it, every retry
gets 409 until the record's VDQ_IDEMPOTENCY_SECONDS (24 h) pass.

Powertools reads the wall clock (``datetime.now``); the tests replace it in Powertools' modules
with a fake one, so no test waits.
"""

from __future__ import annotations

import datetime as real_dt
import json
import types
from dataclasses import dataclass

import boto3
import pytest
from functions.enqueue import handler as enqueue_handler

from tests.support.aws import drain
from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from vdq.intake import rest as intake

KEY = "order-1042-shipped"
REMAINING_MS = 29_000  # what the context reports when the work starts
START = real_dt.datetime(2031, 5, 6, 7, 0, 0)  # far from the real clock: a leak would show


@dataclass
class DeadlineContext(LambdaContext):
    remaining_ms: int = REMAINING_MS

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


class LambdaTimeout(BaseException):
    """What the runtime does to a timed-out invocation: it stops, no except clause runs."""


@pytest.fixture
def wall_clock(monkeypatch):
    """A settable ``datetime.now`` inside Powertools' idempotency modules."""
    from aws_lambda_powertools.utilities.idempotency import base
    from aws_lambda_powertools.utilities.idempotency.persistence import (
        base as persistence_base,
    )
    from aws_lambda_powertools.utilities.idempotency.persistence import datarecord, dynamodb

    state = {"now": START}

    class FakeDatetime(real_dt.datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[override]
            return state["now"]

    fake_module = types.SimpleNamespace(datetime=FakeDatetime, timedelta=real_dt.timedelta)
    for module in (base, persistence_base, datarecord, dynamodb):
        monkeypatch.setattr(module, "dt", fake_module)
    return state


def _post(context):
    event = api_event("apigw_post_emails", groups=["vdq-senders"],
                      headers={"Idempotency-Key": KEY})  # fmt: skip
    response = enqueue_handler.handler(event, context)
    return response["statusCode"], json.loads(response["body"])


def _time_out_the_first_invocation(monkeypatch):
    def stopped(*args, **kwargs):
        raise LambdaTimeout

    with monkeypatch.context() as patch, pytest.raises(LambdaTimeout):
        patch.setattr(intake, "_enqueue", stopped)
        _post(DeadlineContext())


def _record(aws):
    items = boto3.client("dynamodb").scan(TableName=aws["table"])["Items"]
    return [i for i in items if i["pk"]["S"].startswith("idempotency#")]


def test_a_timed_out_invocation_keeps_its_key_only_until_its_deadline(aws, runtime, wall_clock,
                                                                      monkeypatch):  # fmt: skip
    intake.idempotency_config.cache_clear()
    intake._idempotent.cache_clear()
    _time_out_the_first_invocation(monkeypatch)

    [record] = _record(aws)
    assert record["status"]["S"] == "INPROGRESS"
    deadline_ms = int(START.timestamp() * 1000) + REMAINING_MS
    assert int(record["in_progress_expiration"]["N"]) == deadline_ms

    wall_clock["now"] = START + real_dt.timedelta(milliseconds=REMAINING_MS - 1)
    status, body = _post(DeadlineContext())
    assert status == 409, body  # the first invocation might still be running

    wall_clock["now"] = START + real_dt.timedelta(milliseconds=REMAINING_MS + 1)
    status, body = _post(DeadlineContext())
    assert status == 201, body  # past its deadline it cannot be: the retry runs
    assert len(drain(aws)) == len(body["items"])
    [record] = _record(aws)
    assert record["status"]["S"] == "COMPLETED"
    intake.idempotency_config.cache_clear()
    intake._idempotent.cache_clear()
