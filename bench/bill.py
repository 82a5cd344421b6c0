"""The bill, line by line: what a million delivered emails (or SMS) cost on each AWS service
the deployed stack uses, from the journeys the request bench measured (``bench.requests``) and
the dated price table (``prices.json``), at the stated volume (1M a day: ``bench.cost``). The
providers' own fees (SES, Twilio), API Gateway and the idle month (``bench.idle``) are rows of
their own, outside the total that the issue's targets are about.
"""

from __future__ import annotations

from typing import Any

from bench import cost

# Line items in the order of a message's path, with what each is billed on.
LINES = (
    ("lambda", "Lambda requests and GB-seconds (arm64, each function at its default memory)"),
    ("dynamodb", "DynamoDB on-demand writes, index writes and reads (misses included)"),
    ("sqs", "SQS requests (sends, the mappings' receives and deletes)"),
    ("sns", "SNS publishes of SES events (SES -> SNS -> results queue)"),
    ("eventbridge", "EventBridge PutEvents of state events (default: into errored only)"),
    ("s3", "S3 requests (attachments)"),
    ("cloudwatch_logs", "CloudWatch Logs: handler lines, EMF metric lines, platform lines"),
    ("xray", "X-Ray traces (Lambda's sampling: 1/s + 5%, one reservoir shared)"),
    ("dynamodb_storage", "DynamoDB storage of what a message leaves, for its retention + TTL lag"),
    ("dynamodb_pitr", "DynamoDB point-in-time recovery of the table's share of it"),
)


# The floor of the design: the DynamoDB writes that what the product promises makes for a
# delivered email, each of an item under one write unit, and no more. No write here can go
# without giving up a promise; the bill's other lines are then as measured, less X-Ray and the
# handlers' own log lines. The floor's total is the least a delivered email can cost in this
# design: a target below it needs another design, not another lever.
FLOOR_WRITES = (
    ("enqueue: the item's state, kept from the 202 on", 1),
    ("enqueue: its content, which a retry or a resend sends again", 1),
    ("enqueue: its entry in the list of open items (operators list them)", 1),
    ("enqueue: its entry in the receiver index (search by receiver)", 1),
    ("claim: a conditional write (SQS delivers a message twice at times: no double send)", 1),
    ("result: the done state and its open entry out (the done list is the stream's)", 2),
)
FLOOR_READS = 1.0  # the worker reads the item and its content (each under 4 KB)


def provisioned_dynamodb(usage: dict[str, float], table: dict[str, Any]) -> float:
    """US$ per million messages of the same units on provisioned capacity, auto scaled to the
    table's target utilization: at a steady rate the cost per unit does not depend on it."""
    d, a = table["dynamodb"], table["assumptions"]
    per_wru = d["provisioned_per_wcu_hour"] / 3600 / a["provisioned_utilization"]
    per_rru = d["provisioned_per_rcu_hour"] / 3600 / a["provisioned_utilization"]
    return 1e6 * (usage["wru"] * per_wru + usage["rru"] * per_rru)


def floor(billed: dict[str, Any], table: dict[str, Any] | None = None) -> dict[str, float]:
    """US$ per million of the design's floor (``FLOOR_WRITES``), on-demand and provisioned,
    beside ``billed`` (a ``bill``): its other lines as measured, less X-Ray and the handlers'
    log lines (Lambda's platform lines stay when the deployment keeps them)."""
    p = table or cost.prices()
    usage, lines = billed["usage"], billed["lines"]
    units = {"wru": float(sum(n for _, n in FLOOR_WRITES)), "rru": FLOOR_READS}
    d = p["dynamodb"]
    on_demand_ddb = (units["wru"] * d["per_million_write_request_units"]
                     + units["rru"] * d["per_million_read_request_units"])  # fmt: skip
    platform = usage["platform_log_bytes"] if billed["model"]["system_log_level"] != "WARN" else 0
    logs = lines["cloudwatch_logs"] * (platform / usage["log_bytes"] if usage["log_bytes"] else 0)
    rest = sum(v for k, v in lines.items() if k not in ("dynamodb", "xray", "cloudwatch_logs"))
    return {**units, "on_demand": round(rest + logs + on_demand_ddb, 2),
            "provisioned": round(rest + logs + provisioned_dynamodb(units, p), 2)}


def api_requests(journey: Any) -> int:
    """API Gateway requests a message makes after its enqueue: the provider's callbacks that
    reach the webhook function through the API (Twilio's status callbacks)."""
    return sum(1 for function, _, queue, _ in journey.phases
               if function == "webhook" and queue is None)  # fmt: skip


def lambda_ms_cost(ms: float, function: str, table: dict[str, Any]) -> float:
    """US$ per million messages of ``ms`` of one function's time a message."""
    a = table["assumptions"]
    per_gbs = table["lambda"][f"per_gb_second_{a['lambda_architecture']}"]
    return 1e6 * cost.memory_mb()[function] / 1024 * ms / 1000 * per_gbs


def bill(journey: Any, table: dict[str, Any] | None = None) -> dict[str, Any]:
    p = table or cost.prices()
    stored = journey.stored_bytes / journey.messages
    dollars = cost.journey_cost(journey.invocations(p), journey.messages, p,
                                stored_bytes=journey.stored_bytes,
                                table_bytes=journey.table_bytes)  # fmt: skip
    usage, model = dollars["_usage_per_message"], dollars["_model"]
    on_demand = sum(v for k, v in dollars.items() if k in dict(LINES))
    provisioned = on_demand - dollars["dynamodb"] + provisioned_dynamodb(usage, p)
    fees = p["providers"]
    rest_per_request = cost.api_gateway_per_million(1, p)
    send: dict[str, Any] = {}
    if journey.send_batch is not None:
        from bench.requests import send_batch_ms

        batch = journey.send_batch
        paced_ms = 1000 * batch["paced_seconds"] / batch["messages"]
        send = {"ms": round(send_batch_ms(batch, p), 2), "parallelism": batch["parallelism"],
                "serial_ms": round(send_batch_ms(dict(batch, parallelism=1), p), 2),
                "paced_ms": round(paced_ms, 2),
                "paced_usd": round(lambda_ms_cost(paced_ms, "send", p), 4)}  # fmt: skip
    # What the observability choices cost, in the total or not (``model`` says which apply).
    variants = {"xray_shared": model["xray_shared"],
                "xray_per_function": model["xray_per_function"],
                "platform_logs": model["platform_logs"]}  # fmt: skip
    return {"lines": {k: dollars[k] for k, _ in LINES}, "usage": usage, "model": model,
            "stored_bytes": stored, "table_bytes": journey.table_bytes / journey.messages,
            "total_on_demand": round(on_demand, 2), "total_provisioned": round(provisioned, 2),
            "dynamodb_provisioned": round(provisioned_dynamodb(usage, p), 2),
            "api_gateway": {"1": rest_per_request, "10": cost.api_gateway_per_million(10, p)},
            "api_callbacks": round(api_requests(journey) * rest_per_request, 4),
            "send": send, "variants": {k: round(v, 4) for k, v in variants.items()},
            "ses_fee": None if journey.sms else 1e3 * fees["ses_per_thousand_emails"],
            "twilio_fee": 1e6 * fees["twilio_us_sms_per_segment"] if journey.sms else None,
            "prices_checked": p["checked"], "search": search_writes(journey, p),
            "guard": guard_reads(model, p)}  # fmt: skip


def search_writes(journey: Any, table: dict[str, Any]) -> dict[str, float]:
    """What finding items adds to a message's writes: the receiver index's entry (one unit at
    enqueue, never moved) and its share of a stream window's postings and counters."""
    from bench.requests import WINDOW

    window = sum(t.wru + t.gsi_wru for _, t, queue, _ in journey.phases if queue == WINDOW)
    share = window / cost.window_share(journey.table_bytes / journey.messages, table)
    return {"receiver_index": 1.0, "stream_window": round(share, 3),
            "total": round(1.0 + share, 3)}


# The reputation guard's reads (vdq.results.guard and vdq.results.judging), which no journey
# makes on its own: they are per container and per stream window, not per message. Assumed: the
# warm send and enqueue containers that read the holds at 1M a day, and how many producers one
# window of a shard saw bounce or complain (every window is taken to have some: the worst case
# at a 1% bounce rate).
GUARD_CONTAINERS = 4
GUARD_PRODUCERS_A_WINDOW = 2


def guard_reads(model: dict[str, Any], table: dict[str, Any]) -> dict[str, float]:
    """Read units a message the guard adds: the held producers read once a cache period per
    container (one strongly consistent Query, 1 unit), and per stream window of a shard that
    counted a bounce or a complaint, for each such producer, its level (GetItem, 1 unit) and its
    window's hourly counters (BatchGetItem, eventually consistent: half a unit each)."""
    from vdq.core import resources
    from vdq.core.settings import Settings

    s = Settings()
    rate = model["messages_per_second"]
    cache = GUARD_CONTAINERS / s.hold_cache_seconds / rate
    windows = model["stream_shards"] / resources.STREAM_TUMBLING_WINDOW_SECONDS
    look = 1 + 0.5 * s.reputation_window_hours
    evaluate = windows * GUARD_PRODUCERS_A_WINDOW * look / rate
    rru = cache + evaluate
    price = table["dynamodb"]["per_million_read_request_units"]
    return {"cache_rru": round(cache, 4), "evaluate_rru": round(evaluate, 4),
            "rru": round(rru, 4), "usd_per_million": round(rru * price, 4)}


def _row(text: str, values: list[float | None]) -> str:
    return f"{text:<76}" + "".join("         -" if v is None else f"{v:>10.2f}" for v in values)


def table_text(bills: dict[str, dict[str, Any]], idle: dict[str, Any] | None = None,
               keys: dict[str, Any] | None = None) -> str:  # fmt: skip
    """The line items side by side for each journey, per million messages, in US$; then what
    lies outside the total (API Gateway, the providers' fees, the deploy choices' prices, the
    idle month), and the model's assumptions."""
    names = list(bills)
    out = [f"{'line item (US$ per 1M delivered)':<76}" + "".join(f"{n:>10}" for n in names)]
    out.append("-" * (76 + 10 * len(names)))
    for key, text in LINES:
        out.append(_row(text, [bills[n]["lines"][key] for n in names]))
    out.append("-" * (76 + 10 * len(names)))
    out.append(_row("total, DynamoDB on-demand (the default)",
                    [bills[n]["total_on_demand"] for n in names]))  # fmt: skip
    out.append(_row("total, DynamoDB provisioned with auto scaling (70% target)",
                    [bills[n]["total_provisioned"] for n in names]))  # fmt: skip
    out.append("")
    out.append(_row("outside the total: API Gateway REST, one receiver a request",
                    [bills[n]["api_gateway"]["1"] for n in names]))  # fmt: skip
    out.append(_row("outside the total: API Gateway REST, ten receivers a request",
                    [bills[n]["api_gateway"]["10"] for n in names]))  # fmt: skip
    out.append(_row("outside the total: API Gateway REST, the provider's callbacks",
                    [bills[n]["api_callbacks"] for n in names]))  # fmt: skip
    out.append(_row("outside the total: SES's own fee, US$0.10 per 1,000 emails",
                    [bills[n]["ses_fee"] for n in names]))  # fmt: skip
    out.append(_row("outside the total: Twilio's own fee, a US SMS of one segment",
                    [bills[n]["twilio_fee"] for n in names]))  # fmt: skip
    first = bills[names[0]]
    model = first["model"]
    active = " (in the total)" if model["tracing"] == "active" else ""
    out.append(_row(f"X-Ray if tracing is active, one reservoir shared{active}",
                    [bills[n]["variants"]["xray_shared"] for n in names]))  # fmt: skip
    out.append(_row("X-Ray if tracing is active, a reservoir per function",
                    [bills[n]["variants"]["xray_per_function"] for n in names]))  # fmt: skip
    kept = " (in the total)" if model["system_log_level"] != "WARN" else ""
    out.append(_row(f"Lambda's start and report lines at system log level INFO{kept}",
                    [bills[n]["variants"]["platform_logs"] for n in names]))  # fmt: skip
    out.append(_row("pacing: the send function waiting for slots at the bench's rate, +",
                    [bills[n]["send"].get("paced_usd") for n in names]))  # fmt: skip
    low = floor(first)
    out.append(_row(f"the floor of the design for an {names[0]}, on-demand (bench/bill.py)",
                    [low["on_demand"]]))  # fmt: skip
    out.append(_row(f"the floor of the design for an {names[0]}, provisioned",
                    [low["provisioned"]]))  # fmt: skip
    if idle:
        out.append("")
        out.append(idle_text(idle))
    usage = first["usage"]
    out.append(f"\nper delivered {names[0]}: {usage['wru']:.1f} write units, {usage['rru']:.1f} "
               f"read units, {usage['log_bytes']:.0f} log bytes, {usage['sqs']:.2f} SQS "
               f"requests, {first['stored_bytes']:,.0f} bytes stored ({first['table_bytes']:,.0f} "
               f"in the table) for {cost.months_stored() * cost.DAYS_A_MONTH:.0f} days; prices "
               f"of {first['prices_checked']} (bench/prices.json; Twilio's not rechecked since "
               "2025: see its note there).")
    send = first["send"]
    out.append(
        f"at {model['messages_per_second']:.1f} {names[0]}s a second (1M a day): the table's "
        f"stream has {model['stream_shards']} shards (one a partition of 10 GB, at least 4), "
        f"each batch of the stream mapping ({_window()}) carries "
        f"{model['stream_records_per_invocation']:.1f} records "
        f"({model['stream_records_per_message']:g} an {names[0]}); Lambda's tracing is "
        f"{model['tracing']} (if active: {model['traces_per_message']['shared']:.3f} traces an "
        f"{names[0]} with one reservoir, {model['traces_per_message']['per_function']:.3f} with "
        f"one a function); the system log level is {model['system_log_level']}.")
    if send:
        out.append(
            f"the send invocation of a full batch, replayed on its threads (VDQ_SEND_PARALLELISM "
            f"{send['parallelism']}): {send['ms']:.1f} ms an {names[0]} ({send['serial_ms']:.1f} ms"
            f" one send after another); it also slept {send['paced_ms']:.0f} ms an {names[0]} for "
            "its slots at the bench's provider rate (SES 14/s: the pacing row), none at a rate "
            "well above the traffic.")
    if keys:
        out.append(keys_text(keys))
    out.append(f"the floor: {low['wru']:.0f} write units and {low['rru']:.0f} read unit, the "
               "writes the product's promises make (FLOOR_WRITES), other lines as measured "
               "without X-Ray and handler logs.")
    found = first["search"]
    out.append(f"of its write units, search's: {found['total']:.3f} (the receiver index's entry "
               f"{found['receiver_index']:.0f}, a share of the stream window's postings and "
               f"counters {found['stream_window']:.3f}).")
    guard = first["guard"]
    out.append(f"the reputation guard (outside the journey, at 1M a day): {guard['rru']:.3f} read "
               f"units an {names[0]} (the held producers' cache {guard['cache_rru']:.3f}, the "
               f"looks of stream windows that saw a bounce {guard['evaluate_rru']:.3f}): "
               f"US${guard['usd_per_million']:.3f} per million; nothing is written while no "
               "level changes.")
    return "\n".join(out)


def _window() -> str:
    from vdq.core import resources

    return (f"batches of up to {resources.STREAM_BATCH_SIZE}, a "
            f"{resources.STREAM_BATCHING_WINDOW_SECONDS} s window")


def idle_text(idle: dict[str, Any]) -> str:
    """The idle month, line by line, on-demand and provisioned."""
    out = [f"{'an idle deployment, US$ a month (bench/idle.py, from the synthesized template)':<76}"
           f"{'on-demand':>10}{'provis.':>10}"]  # fmt: skip
    for text, on_demand, provisioned in idle["lines"]:
        out.append(f"{text:<76}{on_demand:>10.2f}{provisioned:>10.2f}")
    out.append(f"{'total a month':<76}{idle['on_demand']:>10.2f}{idle['provisioned']:>10.2f}")
    return "\n".join(out)


def keys_text(keys: dict[str, Any]) -> str:
    """The hottest keys at a send rate, against 30% of a partition's limits."""
    from bench.hotkeys import HOT_SHARE, PARTITION_READ_UNITS, PARTITION_WRITE_UNITS

    out = []
    for name, found in keys.items():
        w, r = found["writes"], found["reads"]
        out.append(
            f"hottest keys at {found['rate']:,.0f} emails/s ({name}, from the requests of "
            f"{found['emails']} emails): writes {w.get('key')} {w.get('writes', 0):,.0f} WCU/s "
            f"({w.get('writes', 0) / PARTITION_WRITE_UNITS:.0%} of a partition), reads "
            f"{r.get('key')} {r.get('reads', 0):,.0f} RCU/s "
            f"({r.get('reads', 0) / PARTITION_READ_UNITS:.0%}); target <= {HOT_SHARE:.0%} "
            f"({HOT_SHARE * PARTITION_WRITE_UNITS:,.0f} WCU/s, "
            f"{HOT_SHARE * PARTITION_READ_UNITS:,.0f} RCU/s); VDQ_INDEX_SHARDS "
            f"{found['index_shards']}"
            + (f", VDQ_QUOTA_SHARDS {found['quota_shards']}" if found.get("quota_shards") else ""))
    return "\n".join(out)
