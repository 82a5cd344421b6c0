"""The bill, line by line: what a million delivered emails (or SMS) cost on each AWS service
the deployed stack uses, from the journeys the request bench measured (``bench.requests``) and
the dated price table (``prices.json``). The providers' own fees (SES, Twilio) and API Gateway
are rows of their own, outside the total that the US$5 target is about.
"""

from __future__ import annotations

from typing import Any

from bench import cost

# Line items in the order of a message's path, with what each is billed on.
LINES = (
    ("lambda", "Lambda requests and GB-seconds (arm64, each function at its default memory)"),
    ("dynamodb", "DynamoDB on-demand writes, index writes and reads"),
    ("sqs", "SQS requests (sends, the mappings' receives and deletes)"),
    ("sns", "SNS publishes of SES events (SES -> SNS -> results queue)"),
    ("eventbridge", "EventBridge PutEvents of state events (default: into errored only)"),
    ("s3", "S3 requests (attachments)"),
    ("cloudwatch_logs", "CloudWatch Logs: handler logs at INFO, EMF metrics, platform lines"),
    ("xray", "X-Ray traces (active tracing, default sampling)"),
    ("dynamodb_storage", "DynamoDB storage of what a message leaves, for its retention + TTL lag"),
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
    ("enqueue: its timer entry (the sweep republishes an item whose publish failed)", 1),
    ("claim: a conditional write (SQS delivers a message twice at times: no double send)", 1),
    ("accepted: the provider's ID (a crash after SES accepted is not a crash before)", 1),
    ("result: the done state, its open and timer entries out, its done-list entry in", 4),
    ("retention: the content's expiry, a write of its own (a resend may share it)", 1),
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
    log lines (Lambda's platform lines stay)."""
    p = table or cost.prices()
    usage, lines = billed["usage"], billed["lines"]
    units = {"wru": float(sum(n for _, n in FLOOR_WRITES)), "rru": FLOOR_READS}
    d = p["dynamodb"]
    on_demand_ddb = (units["wru"] * d["per_million_write_request_units"]
                     + units["rru"] * d["per_million_read_request_units"])  # fmt: skip
    platform = usage["lambda_requests"] * p["assumptions"]["lambda_platform_log_bytes"]
    logs = lines["cloudwatch_logs"] * (platform / usage["log_bytes"] if usage["log_bytes"] else 0)
    rest = sum(v for k, v in lines.items() if k not in ("dynamodb", "xray", "cloudwatch_logs"))
    return {**units, "on_demand": round(rest + logs + on_demand_ddb, 2),
            "provisioned": round(rest + logs + provisioned_dynamodb(units, p), 2)}


def bill(journey: Any, table: dict[str, Any] | None = None) -> dict[str, Any]:
    p = table or cost.prices()
    stored = journey.stored_bytes / journey.messages
    dollars = cost.journey_cost(journey.invocations(), journey.messages, p,
                                stored_bytes=journey.stored_bytes)  # fmt: skip
    usage = dollars["_usage_per_message"]
    on_demand = sum(v for k, v in dollars.items() if k in dict(LINES))
    provisioned = on_demand - dollars["dynamodb"] + provisioned_dynamodb(usage, p)
    fees = p["providers"]
    return {"lines": {k: dollars[k] for k, _ in LINES}, "usage": usage,
            "stored_bytes": stored,
            "total_on_demand": round(on_demand, 2), "total_provisioned": round(provisioned, 2),
            "dynamodb_provisioned": round(provisioned_dynamodb(usage, p), 2),
            "api_gateway": cost.api_gateway_per_million(1, p),
            "ses_fee": None if journey.sms else 1e3 * fees["ses_per_thousand_emails"],
            "twilio_fee": 1e6 * fees["twilio_us_sms_per_segment"] if journey.sms else None,
            "prices_checked": p["checked"]}  # fmt: skip


def table_text(bills: dict[str, dict[str, Any]]) -> str:
    """The line items side by side for each journey, per million messages, in US$."""
    names = list(bills)
    out = [f"{'line item (US$ per 1M delivered)':<76}" + "".join(f"{n:>10}" for n in names)]
    out.append("-" * (76 + 10 * len(names)))
    for key, text in LINES:
        out.append(f"{text:<76}" + "".join(f"{bills[n]['lines'][key]:>10.2f}" for n in names))
    out.append("-" * (76 + 10 * len(names)))
    rows = (("total, DynamoDB on-demand (the default)", "total_on_demand"),
            ("total, DynamoDB provisioned with auto scaling (70% target)", "total_provisioned"),
            ("API Gateway REST, one message a request (outside the total)", "api_gateway"),
            ("SES's own fee, US$0.10 per 1,000 emails (outside the total)", "ses_fee"),
            ("Twilio's own fee, a US SMS of one segment (outside the total)", "twilio_fee"))
    for text, key in rows:
        out.append(f"{text:<76}" + "".join("         -" if bills[n][key] is None
                                            else f"{bills[n][key]:>10.2f}" for n in names))
    first = bills[names[0]]
    low = floor(first)
    out.append(f"{'the floor of the design for an ' + names[0] + ', on-demand (bench/bill.py)':<76}"
               f"{low['on_demand']:>10.2f}")
    out.append(f"{'the floor of the design for an ' + names[0] + ', provisioned':<76}"
               f"{low['provisioned']:>10.2f}")
    usage = first["usage"]
    out.append(f"\nper delivered {names[0]}: {usage['wru']:.1f} write units, {usage['rru']:.1f} "
               f"read units, {usage['log_bytes']:.0f} log bytes, {usage['sqs']:.2f} SQS "
               f"requests, {first['stored_bytes']:,.0f} bytes stored for "
               f"{cost.months_stored() * cost.DAYS_A_MONTH:.0f} days; prices of "
               f"{first['prices_checked']} (bench/prices.json; Twilio's not rechecked since "
               "2025: see its note there).")
    out.append(f"the floor: {low['wru']:.0f} write units and {low['rru']:.0f} read unit, the "
               "writes the product's promises make (FLOOR_WRITES), other lines as measured "
               "without X-Ray and handler logs.")
    return "\n".join(out)
