"""Infrastructure cost per million messages, from counted requests and the dated price table.

A journey is the list of Lambda invocations one message causes, each with the requests it made
(``bench.requests.Tally``, priced in DynamoDB units there). What the harness does on Lambda's
behalf is added here: the event source mapping's ReceiveMessage and DeleteMessageBatch for an
invocation fed by a queue, and for SES events the SNS publish plus SNS's SendMessage into the
results queue. Lambda duration is modelled as a base time plus a latency per AWS request
(``prices.json`` assumptions): in-process moto times say nothing about AWS's. A send invocation
of a full batch is replayed on its threads instead (``replay``): the main thread claims and
paces one message after another while up to ``VDQ_SEND_PARALLELISM`` sending threads call the
provider. Each function is billed at the memory a deployment gives it by default
(``infra.config.DEFAULT_MEMORY_MB``).

What depends on the volume is modelled at the stated one (``assumptions.volume_per_day``,
1M messages a day): how full SQS batches are (``fill``: messages per SQS-fed invocation, full
at volume, one at a trickle), how many records a stream batch carries (``stream_fill``: the
table's stream shards and the mapping's batching window), and what share of invocations X-Ray
traces (``traced_per_second``: Lambda's fixed sampling of a reservoir and a rate).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
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
    # Milliseconds a message of a full batch costs this function, replayed on the invocation's
    # threads (``replay``); None: the base time and each request's latency, one after another.
    batch_ms: float | None = None
    # Log bytes a message of a full batch prints (the invocation's metric line is the batch's);
    # None: the tally's, as measured with a batch of one.
    batch_log_bytes: float | None = None
    # The last call of a stream window and its writes (postings, counters): shared by the
    # messages one shard's tumbling window holds (``window_messages``).
    stream_window: bool = False
    # An invocation's message that a whole send batch shares (the check of the emails it sent:
    # vdq.results.checks): a message's share of it is one over the batch's fill.
    per_send_batch: bool = False


def memory_mb() -> dict[str, int]:
    from infra.config import DEFAULT_MEMORY_MB

    return dict(DEFAULT_MEMORY_MB)


def deployed() -> dict[str, str]:
    """What a default deployment does that the bill depends on: the level of Lambda's own log
    lines (``vdq:systemLogLevel``) and the functions' X-Ray tracing (``vdq:tracing``)."""
    from infra.config import DeployConfig

    config = DeployConfig()
    return {"system_log_level": config.system_log_level, "tracing": config.tracing}


DAYS_A_MONTH = 30  # a GB-month, as bench.storage's steady state counts it
# DynamoDB's TTL deletes an expired record within about two days: it is stored that long more.
TTL_LAG_DAYS = 2


def months_stored() -> float:
    """How long a done message's records stay: VDQ_RETENTION_DAYS' default, then up to
    TTL_LAG_DAYS until DynamoDB's TTL deletes them."""
    from vdq.core.settings import Settings

    retention = Settings.__dataclass_fields__["retention_days"].default
    return (int(retention) + TTL_LAG_DAYS) / DAYS_A_MONTH  # type: ignore[call-overload]


# ---- the volume model ------------------------------------------------------------------------


def per_second(table: dict[str, Any]) -> float:
    """Messages a second at the stated volume."""
    return float(table["assumptions"]["volume_per_day"]) / 86_400


def stream_shards(table_bytes: float, table: dict[str, Any]) -> int:
    """Shards of the table's stream at the stated volume: one per table partition, a partition
    per ``partition_gb`` of table data (``table_bytes`` a message, kept ``months_stored``), at
    least ``min_shards`` (the partitions a new on-demand table starts with)."""
    s = table["assumptions"]["stream"]
    held = table_bytes * table["assumptions"]["volume_per_day"] * months_stored() * DAYS_A_MONTH
    return max(int(s["min_shards"]), math.ceil(held / (s["partition_gb"] * 1e9)))


def stream_fill(records_per_second: float, window_seconds: float, batch_size: int) -> float:
    """Records per invocation of a stream mapping on one shard that sees ``records_per_second``
    (Poisson): a batching window starts when the previous invocation ends and closes after
    ``window_seconds``; a window that caught no record invokes nothing. So a batch holds
    x / (1 - e^-x) records, x = rate x window (1 for a trickle), at most ``batch_size``."""
    x = records_per_second * window_seconds
    if x <= 0:
        return 1.0
    return min(float(batch_size), x / -math.expm1(-x))


def window_share(table_bytes: float, table: dict[str, Any]) -> float:
    """Messages one shard's tumbling window holds at the stated volume (at least one): they
    share the window's last call and its postings and counters (vdq.schedules.postings)."""
    from vdq.core import resources

    per_shard = per_second(table) / stream_shards(table_bytes, table)
    return max(1.0, per_shard * resources.STREAM_TUMBLING_WINDOW_SECONDS)


def traced_per_second(invocations_per_second: float, table: dict[str, Any]) -> float:
    """Traces a second that Lambda's active tracing records of a flow of invocations: its fixed
    sampling, a reservoir of one request a second and 5% of the rest."""
    x = table["assumptions"]["xray"]
    reservoir = float(x["reservoir_per_second"])
    return min(reservoir, invocations_per_second) + x["fixed_rate"] * max(
        0.0, invocations_per_second - reservoir)  # fmt: skip


def traces_per_message(invocations: dict[str, float], table: dict[str, Any]) -> dict[str, float]:
    """Traces per message at the stated volume, for ``invocations`` per message by function:
    ``shared``, one reservoir for all that the default rule matches (X-Ray's centralized
    sampling shares a rule's reservoir), and ``per_function``, a reservoir for each."""
    rate = per_second(table)
    shared = traced_per_second(sum(invocations.values()) * rate, table) / rate
    each = sum(traced_per_second(n * rate, table) for n in invocations.values()) / rate
    return {"shared": shared, "per_function": each}


def replay(events: Sequence[tuple[Any, str]], parallelism: int,
           latency: Callable[[str], float], base_ms: float) -> float:  # fmt: skip
    """Milliseconds a send invocation takes, from its timeline (``bench.requests.Counter.
    timeline``): the main thread's requests one after another; at each ``("submit", send)``
    the send's own requests (its provider call and its record) start on a sending thread, at
    most ``parallelism`` at once (the main thread waits for one to finish before preparing
    the next message, as ``vdq.dispatch.sendbatch.Batch.make_room`` does); with one, the send
    is made in the main thread. The invocation ends when the last send is recorded."""
    sends: Counter[str] = Counter()
    for key, what in events:
        if key is not None and key != "submit":
            sends[str(key)] += latency(what)
    now, flying, room = float(base_ms), [], False
    for key, what in events:
        if key is not None and key != "submit":
            continue  # a sending thread's
        if room:
            flying = [end for end in flying if end > now]
            if len(flying) >= parallelism:
                now = min(flying)
                flying.remove(now)
            room = False
        if key is None:
            now += latency(what)
        elif parallelism <= 1:
            now += sends[what]
        else:
            flying.append(now + sends[what])
            room = True
    return max([now, *flying])


def latency_of(table: dict[str, Any]) -> Callable[[str], float]:
    latency = table["assumptions"]["request_latency_ms"]
    return lambda service: float(latency.get(service, latency["default"]))


# ---- the journey's bill ----------------------------------------------------------------------


def journey_cost(journey: list[Invocation], messages: int = 1,
                 table: dict[str, Any] | None = None, *, fill: int | None = None,
                 stored_bytes: float = 0.0,
                 table_bytes: float = 0.0) -> dict[str, Any]:  # fmt: skip
    """US$ per million messages, by service, for a journey that moved ``messages`` messages,
    with ``fill`` messages in each SQS batch (default: the table's volume case), leaving
    ``stored_bytes`` in the table and its indexes for the retention (``months_stored``), of
    which ``table_bytes`` in the table itself (point-in-time recovery bills those, and the
    table's size decides its stream's shards)."""
    p = table or prices()
    a = p["assumptions"]
    latency = latency_of(p)
    volume = a["batch_fill"]["volume"]
    fill = fill or volume
    memory = memory_mb()
    config = deployed()
    per_gbs = p["lambda"][f"per_gb_second_{a['lambda_architecture']}"]
    from vdq.core import resources

    records = sum(inv.stream_records for inv in journey) / messages
    shards = stream_shards(table_bytes / messages, p)
    stream_batch = stream_fill(records * per_second(p) / shards,
                               resources.STREAM_BATCHING_WINDOW_SECONDS,
                               resources.STREAM_BATCH_SIZE)  # fmt: skip
    window_messages = window_share(table_bytes / messages, p)
    platform = a["lambda_platform_log_bytes"] if config["system_log_level"] != "WARN" else 0
    usage = {"lambda_requests": 0.0, "lambda_gbs": 0.0, "wru": 0.0, "rru": 0.0, "sqs": 0.0,
             "sns": 0.0, "events": 0.0, "s3_put": 0.0, "s3_get": 0.0, "log_bytes": 0.0,
             "platform_log_bytes": 0.0}  # fmt: skip
    invocations: Counter[str] = Counter()
    for inv in journey:
        t = inv.tally
        # An invocation fed by a queue handles ``fill`` messages: its request and base time
        # are shared by them; each message's own AWS requests are not. A stream batch holds
        # ``stream_batch`` records, from many messages; a window's last call, a shard's
        # messages of a tumbling window. A message shared by a send batch (``per_send_batch``)
        # is a ``1 / fill`` share of one of those.
        weight = 1 / fill if inv.per_send_batch else 1.0
        if inv.stream_window:
            share = 1 / window_messages
        elif inv.stream_records:
            share = inv.stream_records / stream_batch
        else:
            share = (1 / fill if inv.queue is not None else 1) * weight
        usage["lambda_requests"] += share
        invocations[inv.function] += share / messages
        log_bytes = t.get("log_bytes", 0)
        if inv.batch_log_bytes is not None and fill == volume:
            log_bytes = inv.batch_log_bytes
        if inv.batch_ms is not None and fill == volume:
            ms = inv.batch_ms
        else:
            ms = a["lambda_base_ms"] * share
            for op, n in t["requests"].items():
                ms += n * latency(op.split(".", 1)[0]) * weight
            for provider, n in inv.provider_calls.items():
                ms += n * latency(provider) * weight
        for op, n in t["requests"].items():
            if op.startswith("s3."):
                usage["s3_get" if "Get" in op or "Head" in op else "s3_put"] += n * weight
        usage["lambda_gbs"] += memory[inv.function] / 1024 * ms / 1000
        # CloudWatch Logs: what the handler printed for this message (its log lines and its
        # EMF metric lines), and Lambda's own platform lines (start, report) per invocation
        # when the system log level keeps them.
        usage["log_bytes"] += log_bytes * weight + platform * share
        usage["platform_log_bytes"] += a["lambda_platform_log_bytes"] * share
        # The pace record's units are the batch's (one reservation of all its slots).
        pace = t.get("dynamodb_pace_write_units", 0.0)
        # A window's writes are its messages' together: each pays its share.
        own = share if inv.stream_window else weight
        usage["wru"] += own * (t["dynamodb_write_units"] - pace + pace * share
                               + t["dynamodb_index_write_units"])  # fmt: skip
        usage["rru"] += own * t["dynamodb_read_units"]
        billed, batch_billed = t.get("billed", {}), t.get("batch_billed", {})
        # A request made once for the send batch (its check) is the batch's messages' to share.
        shared_sqs = batch_billed.get("sqs", 0)
        usage["sqs"] += (billed.get("sqs", 0) - shared_sqs + shared_sqs / fill) * own
        usage["events"] += billed.get("events", 0) * own
        usage["sns"] += billed.get("sns", 0) * own
        if inv.queue is not None:
            usage["sqs"] += 2 / fill * weight  # ReceiveMessage + DeleteMessageBatch per batch
        usage["sns"] += inv.sns_events
        usage["sqs"] += inv.sns_events  # SNS's SendMessage into the results queue
    traces = traces_per_message(dict(invocations), p)
    tracing = config["tracing"] == "active"
    usage["traces"] = traces["shared"] * messages if tracing else 0.0
    million = 1_000_000 / messages
    logs_per_gb = (p["cloudwatch_logs"]["per_gb_ingested"]
                   + p["cloudwatch_logs"]["per_gb_month_stored"] * a["log_retention_months"])
    dollars: dict[str, Any] = {
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
        "cloudwatch_logs": million * usage["log_bytes"] / 1e9 * logs_per_gb,
        "xray": million * usage["traces"] * p["xray"]["per_million_traces_recorded"] / 1e6,
        "dynamodb_storage": million * stored_bytes / 1024**3
        * p["dynamodb"]["per_gb_month_stored"] * months_stored(),
        "dynamodb_pitr": million * table_bytes / 1024**3
        * p["dynamodb"]["pitr_per_gb_month"] * months_stored(),
    }  # fmt: skip
    dollars = {k: round(v, 4) for k, v in dollars.items()}
    dollars["total"] = round(sum(dollars.values()), 4)
    dollars["_usage_per_message"] = {k: round(v / messages, 6) for k, v in usage.items()}
    dollars["_model"] = {
        "messages_per_second": round(per_second(p), 2),
        "stream_records_per_message": round(records, 3), "stream_shards": shards,
        "stream_records_per_invocation": round(stream_batch, 2),
        "invocations_per_message": {k: round(v, 4) for k, v in sorted(invocations.items())},
        "traces_per_message": {k: round(v, 4) for k, v in traces.items()},
        "tracing": config["tracing"], "system_log_level": config["system_log_level"],
        "xray_per_function": round(1e6 * traces["per_function"]
                                   * p["xray"]["per_million_traces_recorded"] / 1e6, 4),
        "xray_shared": round(1e6 * traces["shared"]
                             * p["xray"]["per_million_traces_recorded"] / 1e6, 4),
        "platform_logs": round(million * usage["platform_log_bytes"] / 1e9 * logs_per_gb, 4),
    }  # fmt: skip
    return dollars


def api_gateway_per_million(messages_per_request: float,
                            table: dict[str, Any] | None = None) -> float:  # fmt: skip
    """API Gateway REST's price per million messages at ``messages_per_request``."""
    p = table or prices()
    return round(p["api_gateway_rest"]["per_million_requests"] / messages_per_request, 4)
