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


def provisioned_dynamodb(usage: dict[str, float], table: dict[str, Any]) -> float:
    """US$ per million messages of the same units on provisioned capacity, auto scaled to the
    table's target utilization: at a steady rate the cost per unit does not depend on it."""
    d, a = table["dynamodb"], table["assumptions"]
    per_wru = d["provisioned_per_wcu_hour"] / 3600 / a["provisioned_utilization"]
    per_rru = d["provisioned_per_rcu_hour"] / 3600 / a["provisioned_utilization"]
    return 1e6 * (usage["wru"] * per_wru + usage["rru"] * per_rru)


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
    usage = first["usage"]
    out.append(f"\nper delivered {names[0]}: {usage['wru']:.1f} write units, {usage['rru']:.1f} "
               f"read units, {usage['log_bytes']:.0f} log bytes, {usage['sqs']:.2f} SQS "
               f"requests, {first['stored_bytes']:,.0f} bytes stored for "
               f"{cost.months_stored() * cost.DAYS_A_MONTH:.0f} days; prices of "
               f"{first['prices_checked']} (bench/prices.json; Twilio's not rechecked since "
               "2025: see its note there).")
    return "\n".join(out)
