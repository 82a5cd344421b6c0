"""What a deployment costs a month with no message: the fixed lines beside the per-message bill.

Counted from the synthesized template (``template``: the CDK app at its defaults, as
``make synth`` builds it): its CloudWatch alarms and dashboards, KMS keys, Secrets Manager
secrets (and the Twilio secret its parameter names), its schedules and what each run of them
costs (``idle_runs``: the schedule function's tasks measured on an empty table, as the bench
measures a message), and the idle polling of its SQS event source mappings. Provisioned
capacity (``vdq:capacity=provisioned``) adds the minimum capacity of the table and each index
and the alarms of their target tracking (``provisioned_resources``: the data construct alone at
the default bounds).

``monthly`` is the arithmetic, on fixed inputs in tests/infra/test_bench_bill.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench import cost, env

ROOT = Path(__file__).resolve().parents[1]
SECONDS_A_MONTH = cost.DAYS_A_MONTH * 86_400
HOURS_A_MONTH = cost.DAYS_A_MONTH * 24
FIGURES = [("idle deployment, US$ a month", "(reported)")]


def template() -> dict[str, Any]:
    """The stack's template at the repository's defaults (cdk.json) and a test identity."""
    import aws_cdk as cdk
    from infra.app import build

    context = {**json.loads((ROOT / "cdk.json").read_text())["context"],
               "vdq:sesIdentities": ["example.com"]}  # fmt: skip
    app = cdk.App(context=context)
    stack = build(app)
    return dict(app.synth().get_stack_by_name(stack.stack_name).template)


def provisioned_resources() -> dict[str, Any]:
    """The data construct alone with provisioned capacity at its default bounds."""
    import aws_cdk as cdk
    from infra.config import Capacity
    from infra.data import Data

    app = cdk.App()
    stack = cdk.Stack(app, "Idle")
    Data(stack, "Data", deletion_protection=True, noncurrent_days=1, capacity=Capacity())
    return dict(app.synth().get_stack_by_name("Idle").template)


def idle_runs() -> dict[str, dict[str, Any]]:
    """One run of each scheduled task on an empty table, measured (requests, units, log bytes,
    EMF metrics)."""
    from bench.requests import COUNTER

    handler = env.need("functions.schedule.handler", "handler")
    runs = {}
    with env.stack():
        for task in ("sms", "sweep", "purge"):
            with COUNTER.measure(units=True) as tally:
                handler({"task": task}, env.LambdaContext("vdq-schedule"))
            runs[task] = tally.as_json()
    return runs


def _resources(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r.get("Properties", {}) for r in template["Resources"].values() if r["Type"] == kind]


def runs_a_month(expression: str) -> float:
    """Runs a month of a schedule's ``rate(n unit)`` expression."""
    match = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", expression)
    if not match:
        raise ValueError(f"not a rate expression: {expression!r}")
    seconds = {"minute": 60, "hour": 3600, "day": 86_400}[match[2].rstrip("s")]
    return SECONDS_A_MONTH / (int(match[1]) * seconds)


def _task(schedule: dict[str, Any]) -> str:
    return str(json.loads(schedule["Target"]["Input"])["task"])


def monthly(template: dict[str, Any], provisioned: dict[str, Any],
            runs: dict[str, dict[str, Any]], table: dict[str, Any] | None = None, *,
            system_log_level: str = "INFO", tracing: str = "active") -> dict[str, Any]:  # fmt: skip
    """US$ a month of an idle deployment, line by line, on-demand and provisioned."""
    p = table or cost.prices()
    a, idle, cw = p["assumptions"], p["assumptions"]["idle"], p["cloudwatch"]
    lines: list[tuple[str, float, float]] = []

    alarms = _resources(template, "AWS::CloudWatch::Alarm")
    scaling = _resources(provisioned, "AWS::ApplicationAutoScaling::ScalingPolicy")
    extra_alarms = len(scaling) * idle["autoscaling_alarms_per_policy"]
    lines.append((f"CloudWatch alarms ({len(alarms)}; provisioned: +{extra_alarms} of its auto "
                  "scaling)", len(alarms) * cw["per_alarm_month"],
                  (len(alarms) + extra_alarms) * cw["per_alarm_month"]))  # fmt: skip
    dashboards = len(_resources(template, "AWS::CloudWatch::Dashboard"))
    lines.append((f"CloudWatch dashboards ({dashboards}; free if the account has at most "
                  f"{cw['free_dashboards']})", dashboards * cw["per_dashboard_month"],
                  dashboards * cw["per_dashboard_month"]))  # fmt: skip

    keys = len(_resources(template, "AWS::KMS::Key"))
    encrypted = [t for t in _resources(template, "AWS::SNS::Topic") if t.get("KmsMasterKeyId")]
    # SNS asks KMS for a data key per publishing principal (SES) every reuse period.
    kms_requests = len(encrypted) * 2 * SECONDS_A_MONTH / idle["sns_kms_data_key_seconds"]
    kms = keys * p["kms"]["per_key_month"] + kms_requests / 1e4 * p["kms"]["per_10k_requests"]
    lines.append((f"KMS keys ({keys}) and the SNS topic's data key requests", kms, kms))
    secrets = len(_resources(template, "AWS::SecretsManager::Secret"))
    secrets += sum(1 for name in template.get("Parameters", {}) if "Twilio" in name)
    lines.append((f"Secrets Manager secrets ({secrets}, the Twilio credentials included)",
                  secrets * p["secrets_manager"]["per_secret_month"],
                  secrets * p["secrets_manager"]["per_secret_month"]))  # fmt: skip

    # The schedules: the scheduler's invocations, and each run's Lambda time, requests, log
    # lines and EMF metrics, as measured on an empty table.
    invocations, lambda_usd, ddb_usd, logs_bytes, traces = 0.0, 0.0, 0.0, 0.0, 0.0
    metrics: set[str] = set()
    per_gbs = p["lambda"][f"per_gb_second_{a['lambda_architecture']}"]
    memory = cost.memory_mb()["schedule"]
    latency = cost.latency_of(p)
    platform = a["lambda_platform_log_bytes"] if system_log_level != "WARN" else 0
    for schedule in _resources(template, "AWS::Scheduler::Schedule"):
        n = runs_a_month(schedule["ScheduleExpression"])
        run = runs[_task(schedule)]
        invocations += n
        ms = a["lambda_base_ms"] + sum(count * latency(op.split(".", 1)[0])
                                       for op, count in run["requests"].items())  # fmt: skip
        lambda_usd += n * (p["lambda"]["per_million_requests"] / 1e6
                           + memory / 1024 * ms / 1000 * per_gbs)  # fmt: skip
        writes = run["dynamodb_write_units"] + run["dynamodb_index_write_units"]
        ddb_usd += n * (writes * p["dynamodb"]["per_million_write_request_units"]
                        + run["dynamodb_read_units"]
                        * p["dynamodb"]["per_million_read_request_units"]) / 1e6  # fmt: skip
        logs_bytes += n * (run["log_bytes"] + platform)
        metrics.update(run.get("metrics", {}))
        # At a few runs a minute every run is within X-Ray's reservoir of one a second.
        traces += n if tracing == "active" else 0
    scheduler = invocations * p["scheduler"]["per_million_invocations"] / 1e6
    lines.append((f"schedules: {invocations:,.0f} runs (scheduler, Lambda)", scheduler + lambda_usd,
                   scheduler + lambda_usd))  # fmt: skip
    lines.append(("schedules: their DynamoDB requests on an empty table", ddb_usd, ddb_usd))
    logs = logs_bytes / 1e9 * (p["cloudwatch_logs"]["per_gb_ingested"]
                               + p["cloudwatch_logs"]["per_gb_month_stored"])
    lines.append((f"schedules: their log lines ({logs_bytes / 1e6:,.0f} MB)", logs, logs))
    lines.append((f"schedules: X-Ray traces ({traces:,.0f})",
                  traces * p["xray"]["per_million_traces_recorded"] / 1e6,
                  traces * p["xray"]["per_million_traces_recorded"] / 1e6))  # fmt: skip
    custom = len(metrics) * cw["per_custom_metric_month"]
    lines.append((f"custom metrics the schedules emit idle ({len(metrics)})", custom, custom))

    queues = [m for m in _resources(template, "AWS::Lambda::EventSourceMapping")
              if "Queue" in json.dumps(m.get("EventSourceArn"))]  # fmt: skip
    receives = (len(queues) * idle["sqs_mapping_pollers"] * SECONDS_A_MONTH
                / idle["sqs_long_poll_seconds"])  # fmt: skip
    polls = receives * p["sqs"]["per_million_requests"] / 1e6
    lines.append((f"SQS mappings' idle long polls ({len(queues)} queues, {receives / 1e6:.1f}M "
                  "receives)", polls, polls))  # fmt: skip

    units = {"write": 0, "read": 0}
    for table_props in _resources(provisioned, "AWS::DynamoDB::Table"):
        indexes = table_props.get("GlobalSecondaryIndexes", [])
        throughput = [table_props.get("ProvisionedThroughput", {}),
                      *(i.get("ProvisionedThroughput", {}) for i in indexes)]  # fmt: skip
        units["write"] += sum(t.get("WriteCapacityUnits", 0) for t in throughput)
        units["read"] += sum(t.get("ReadCapacityUnits", 0) for t in throughput)
    minimum = HOURS_A_MONTH * (units["write"] * p["dynamodb"]["provisioned_per_wcu_hour"]
                               + units["read"] * p["dynamodb"]["provisioned_per_rcu_hour"])
    lines.append((f"DynamoDB provisioned minimum ({units['write']} WCU, {units['read']} RCU "
                  "on the table and its indexes)", 0.0, minimum))  # fmt: skip
    return {"lines": [(t, round(o, 4), round(v, 4)) for t, o, v in lines],
            "on_demand": round(sum(o for _, o, _ in lines), 2),
            "provisioned": round(sum(v for _, _, v in lines), 2),
            "metrics": sorted(metrics)}  # fmt: skip


def measure() -> dict[str, Any]:
    config = cost.deployed()
    return monthly(template(), provisioned_resources(), idle_runs(),
                   system_log_level=config["system_log_level"], tracing=config["tracing"])


def rows(result: dict[str, Any]) -> list[Any]:
    from bench.figures import Row

    return [Row(FIGURES[0][0], FIGURES[0][1],
                f"US${result['on_demand']:.2f} on-demand, US${result['provisioned']:.2f} "
                f"provisioned ({len(result['lines'])} lines: see the bill)", None, result)]
