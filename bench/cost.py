"""Infrastructure cost per million messages, from counted requests and the dated price table.

A journey is the list of Lambda invocations one message causes, each with the requests it made
(``bench.requests.Tally``, priced in DynamoDB units there). What the harness does on Lambda's
behalf is added here: the event source mapping's ReceiveMessage and DeleteMessageBatch for an
invocation fed by a queue, and for SES events the SNS publish plus SNS's SendMessage into the
results queue. Lambda duration is modelled as a base time plus a latency per AWS request
(``prices.json`` assumptions): in-process moto times say nothing about AWS's. Each function is
billed at the memory a deployment gives it by default (``infra.config.DEFAULT_MEMORY_MB``).

How full SQS batches are decides what an invocation and a receive cost each message: ``fill``
is messages per SQS-fed invocation (``assumptions.batch_fill``: full at volume, one at a trickle).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PRICES = Path(__file__).with_name("prices.json")


def prices() -> dict[str, Any]:
    return json.loads(PRICES.read_text())


@dataclass
class Invocation:
    function: str
    tally: dict[str, Any]  # Tally.as_json()
    queue: str | None = None  # fed by this SQS queue (the event source mapping's requests)
    sns_events: int = 0  # SES events that reached it through SNS -> SQS
    provider_calls: dict[str, int] = field(default_factory=dict)  # e.g. {"twilio": 1}
    stream_records: int = 0  # records of the table's stream it took (its share of a batch)


def memory_mb() -> dict[str, int]:
    from infra.config import DEFAULT_MEMORY_MB

    return dict(DEFAULT_MEMORY_MB)


DAYS_A_MONTH = 30  # a GB-month, as bench.storage's steady state counts it
# DynamoDB's TTL deletes an expired record within about two days: it is stored that long more.
TTL_LAG_DAYS = 2
# DynamoDB's TTL deletes an expired record within about two days: it is stored that long more.
TTL_LAG_DAYS = 2


def months_stored() -> float:
    """How long a done message's records stay: VDQ_RETENTION_DAYS' default, then up to
    TTL_LAG_DAYS until DynamoDB's TTL deletes them."""
    from vdq.core.settings import Settings

    retention = Settings.__dataclass_fields__["retention_days"].default
    return (int(retention) + TTL_LAG_DAYS) / DAYS_A_MONTH  # type: ignore[call-overload]


def journey_cost(journey: list[Invocation], messages: int = 1,
                 table: dict[str, Any] | None = None, *, fill: int | None = None,
                 stored_bytes: float = 0.0) -> dict[str, float]:  # fmt: skip
    """US$ per million messages, by service, for a journey that moved ``messages`` messages,
    with ``fill`` messages in each SQS batch (default: the table's volume case), leaving
    ``stored_bytes`` in the table for the retention (``months_stored``)."""
    p = table or prices()
    a = p["assumptions"]
    latency = a["request_latency_ms"]
    fill = fill or a["batch_fill"]["volume"]
    memory = memory_mb()
    per_gbs = p["lambda"][f"per_gb_second_{a['lambda_architecture']}"]
    usage = {"lambda_requests": 0.0, "lambda_gbs": 0.0, "wru": 0.0, "rru": 0.0, "sqs": 0.0,
             "sns": 0.0, "events": 0.0, "s3_put": 0.0, "s3_get": 0.0, "log_bytes": 0.0,
             "traces": 0.0}  # fmt: skip
    for inv in journey:
        t = inv.tally
        # An invocation fed by a queue handles ``fill`` messages: its request and base time
        # are shared by them; each message's own AWS requests are not. A stream batch holds
        # up to the mapping's batch size of records, from many messages.
        if inv.stream_records:
            share = min(1.0, inv.stream_records / a["stream_batch_records"])
        else:
            share = 1 / fill if inv.queue is not None else 1
        usage["lambda_requests"] += share
        ms = a["lambda_base_ms"] * share
        for op, n in t["requests"].items():
            service = op.split(".", 1)[0]
            ms += n * latency.get(service, latency["default"])
            if service == "s3":
                usage["s3_get" if "Get" in op or "Head" in op else "s3_put"] += n
        for provider, n in inv.provider_calls.items():
            ms += n * latency.get(provider, latency["default"])
        usage["lambda_gbs"] += memory[inv.function] / 1024 * ms / 1000
        # CloudWatch Logs: what the handler logged for this message, and Lambda's own platform
        # lines (start, report) once per invocation; X-Ray: the sampled share of invocations.
        usage["log_bytes"] += t.get("log_bytes", 0) + a["lambda_platform_log_bytes"] * share
        usage["traces"] += a["xray_sampled_share"] * share
        # The pace record's units are the batch's (one reservation of all its slots).
        pace = t.get("dynamodb_pace_write_units", 0.0)
        usage["wru"] += (t["dynamodb_write_units"] - pace + pace * share
                         + t["dynamodb_index_write_units"])  # fmt: skip
        usage["rru"] += t["dynamodb_read_units"]
        billed = t.get("billed", {})
        usage["sqs"] += billed.get("sqs", 0)
        usage["events"] += billed.get("events", 0)
        usage["sns"] += billed.get("sns", 0)
        if inv.queue is not None:
            usage["sqs"] += 2 / fill  # ReceiveMessage + DeleteMessageBatch per batch
        usage["sns"] += inv.sns_events
        usage["sqs"] += inv.sns_events  # SNS's SendMessage into the results queue
    million = 1_000_000 / messages
    dollars = {
        "lambda": million * (usage["lambda_requests"] * p["lambda"]["per_million_requests"] / 1e6
                             + usage["lambda_gbs"] * per_gbs),
        "dynamodb": million * (usage["wru"] * p["dynamodb"]["per_million_write_request_units"]
                               + usage["rru"] * p["dynamodb"]["per_million_read_request_units"])
        / 1e6,
        "sqs": million * usage["sqs"] * p["sqs"]["per_million_requests"] / 1e6,
        "sns": million * usage["sns"] * p["sns"]["per_million_publishes"] / 1e6,
        "eventbridge": million * usage["events"] * p["eventbridge"]["per_million_put_events"] / 1e6,
        "s3": million * (usage["s3_put"] * p["s3"]["per_thousand_put"]
                         + usage["s3_get"] * p["s3"]["per_thousand_get"]) / 1e3,
        "cloudwatch_logs": million * usage["log_bytes"] / 1e9
        * (p["cloudwatch_logs"]["per_gb_ingested"]
           + p["cloudwatch_logs"]["per_gb_month_stored"] * a["log_retention_months"]),
        "xray": million * usage["traces"] * p["xray"]["per_million_traces_recorded"] / 1e6,
        "dynamodb_storage": million * stored_bytes / 1024**3
        * p["dynamodb"]["per_gb_month_stored"] * months_stored(),
    }  # fmt: skip
    dollars = {k: round(v, 4) for k, v in dollars.items()}
    dollars["total"] = round(sum(dollars.values()), 4)
    dollars["_usage_per_message"] = {k: round(v / messages, 6) for k, v in usage.items()}  # type: ignore[assignment]
    return dollars


def api_gateway_per_million(messages_per_request: int,
                            table: dict[str, Any] | None = None) -> float:  # fmt: skip
    """API Gateway REST's price per million messages at ``messages_per_request``."""
    p = table or prices()
    return round(p["api_gateway_rest"]["per_million_requests"] / messages_per_request, 4)
