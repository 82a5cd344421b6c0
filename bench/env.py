"""The in-process AWS every benchmark runs against: moto, with VDQ's resources and a Runtime.

Set up like the test fixtures (``tests/support/aws.py``): dummy credentials, one region, the
table built from ``vdq.core.resources``. A figure whose code has not landed reports itself as not
measured instead of guessing (``missing``).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from vdq.local.pollers import sqs_event  # noqa: F401 (the event the local pollers build)

ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_NAMESPACE": "VDQ",
    "POWERTOOLS_DEV": "false",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    # No EMF lines in the output: a measurement prints and counts them (bench.requests.measure).
    "POWERTOOLS_METRICS_DISABLED": "true",
}
TABLE = "vdq-bench"  # also the prefix of the bucket's, queues' and bus's names
WEBHOOK_URL = "https://abc123.execute-api.us-east-1.amazonaws.com/prod/twilio/status-callback"
TWILIO_SID = "AC" + "0" * 32
TWILIO_TOKEN = "bench-auth-token"
SENDER = "shop@example.com"


def prepare_process() -> None:
    """Dummy credentials and a region, before anything makes a client."""
    import warnings

    os.environ.update(ENV)
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)


class Missing(Exception):
    """A module a figure needs has not been written yet."""

    def __init__(self, module: str) -> None:
        super().__init__(f"{module} missing")
        self.module = module


def need(module: str, attribute: str | None = None) -> Any:
    """Import ``module`` (and get ``attribute``), or raise Missing naming it."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        raise Missing(module)
    loaded = importlib.import_module(module)
    if attribute is None:
        return loaded
    if not hasattr(loaded, attribute):
        raise Missing(f"{module}.{attribute}")
    return getattr(loaded, attribute)


def lean_moto_transactions() -> Any:
    """moto's TransactWriteItems without its copy of the whole table per transaction (a run of
    thousands is otherwise quadratic: vdq.local.motolean, which the local stack uses too).
    Returns the original, which ``stack`` puts back, so tests in the same process keep plain
    moto."""
    from vdq.local import motolean

    return motolean.install()


@dataclass
class Stack:
    runtime: Any
    clock: Any
    queues: dict[str, str]
    sqs: Any  # a client for the harness's own work (the Lambda event source mapping)


@contextmanager
def stack(**settings_changes: Any) -> Iterator[Stack]:
    """moto with VDQ's table, queues, bucket and a verified SES sender; a Runtime on them."""
    prepare_process()
    import boto3
    from moto import mock_aws

    from vdq import runtime as runtime_module
    from vdq.core import resources
    from vdq.core.clock import FakeClock
    from vdq.core.settings import Settings
    from vdq.local import motolean
    from vdq.local import resources as local_resources
    from vdq.runtime import Runtime

    plain = lean_moto_transactions()
    with mock_aws():
        created = local_resources.create(
            boto3, prefix=TABLE, table=TABLE, dead_letters_and_topic=False
        )
        boto3.client("sesv2").create_email_identity(EmailIdentity=SENDER)
        boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
        settings = replace(
            Settings(),
            table_name=created.table,
            attachments_bucket=created.bucket,
            send_queue_url=created.queues[resources.SEND_QUEUE],
            results_queue_url=created.queues[resources.RESULTS_QUEUE],
            event_bus_name=created.bus,
            twilio_account_sid=TWILIO_SID,
            twilio_auth_token=TWILIO_TOKEN,
            twilio_webhook_url=WEBHOOK_URL,
            # SES's production default; moto's SES v2 has no GetAccount to read it from.
            ses_max_send_rate=14.0,
        )
        if settings_changes:
            settings = replace(settings, **settings_changes)
        clock = FakeClock()
        rt = Runtime(settings=settings, clock=clock)
        rt.overrides["twilio"] = FakeTwilio()
        # A deployment running for more than a day, in a warm container: the stream trusts an
        # item's ``ap`` (vdq.workflow.retention.apart_trusted_after, read once a cold start).
        rt.overrides["apart_since"] = 0
        runtime_module._DEFAULT = rt
        # A warm container has read the held producers within VDQ_HOLD_CACHE_SECONDS: a
        # journey's requests are a steady rate's (the read itself: bench.bill.guard_reads).
        from vdq.results import guard

        guard.forget(rt)
        guard.held(rt)
        try:
            yield Stack(rt, clock, created.queues, boto3.client("sqs"))
        finally:
            Runtime.reset_default()
            motolean.uninstall(plain)


class FakeTwilio:
    """Twilio's API in-process: accepts every message (no AWS request, so nothing counted)."""

    def __init__(self, status: str = "delivered") -> None:
        self.sent: list[tuple[str, str]] = []  # (sid, receiver)
        self.status = status  # what a status fetch answers
        self.on_send: Callable[[], None] | None = None  # told of each send (a timeline)

    def send(self, from_: str, to: str, body: str, media_urls: Any = (),
             status_callback: str | None = None, validity: int | None = None) -> str:  # fmt: skip
        if self.on_send is not None:
            self.on_send()
        sid = "SM" + os.urandom(16).hex()
        self.sent.append((sid, to))
        return sid

    def fetch(self, sid: str) -> Any:
        from vdq.providers.twilio import TwilioStatus

        return TwilioStatus(status=self.status)


class LambdaContext:
    """What the Powertools decorators read from a Lambda context."""

    def __init__(self, name: str, memory_mb: int = 256) -> None:
        self.function_name = name
        self.memory_limit_in_mb = memory_mb
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
        self.aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        """The deployed function's timeout (the send function's is longer than the rest)."""
        from vdq.core import resources

        if self.function_name == "vdq-send":
            return resources.SEND_FUNCTION_TIMEOUT_SECONDS * 1000
        return resources.RESULTS_FUNCTION_TIMEOUT_SECONDS * 1000


def receive(sqs: Any, url: str, limit: int = 10) -> list[dict[str, Any]]:
    """What the event source mapping would hand to one invocation (received and deleted)."""
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=limit, WaitTimeSeconds=0)
    messages = got.get("Messages", [])
    if messages:
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                     for i, m in enumerate(messages)],
        )  # fmt: skip
    return messages


def queue_arn(url: str) -> str:
    return f"arn:aws:sqs:us-east-1:123456789012:{url.rsplit('/', 1)[-1]}"


@functools.lru_cache(maxsize=4)
def html_body(size: int = 10_000) -> str:
    """An HTML order mail of about ``size`` bytes, varied like a real one (zlib gets ~3x)."""
    words = ("order", "shipped", "parcel", "invoice", "tracking", "warehouse", "delivery",
             "customer", "account", "return", "voucher", "summary", "address", "express")
    rng = random.Random(size)
    parts, length, n = ["<html><body><h1>Your order shipped</h1><table>"], 0, 0
    while length < size - 120:
        n += 1
        name = " ".join(rng.choice(words) for _ in range(rng.randint(2, 5))).title()
        row = (f'<tr><td class="item">{name} #{rng.randint(10_000, 99_999)}</td>'
               f"<td>{rng.randint(1, 9)}</td><td>US$ {rng.randint(1, 999)}.{rng.randint(0, 99):02d}"
               "</td></tr>\n")
        parts.append(row)
        length += len(row)
    parts.append("</table><p>Thank you for shopping with us.</p></body></html>")
    return "".join(parts)
