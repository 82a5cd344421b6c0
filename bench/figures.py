"""The measurements turned into the table's rows: figure, target, measured, holds."""

from __future__ import annotations

from typing import Any

from bench import cost, requests


class Row:
    def __init__(self, figure: str, target: str, measured: str, holds: bool | None,
                 detail: Any = None) -> None:  # fmt: skip
        self.figure, self.target, self.measured, self.holds = figure, target, measured, holds
        self.detail = detail

    def as_json(self) -> dict[str, Any]:
        return {"figure": self.figure, "target": self.target, "measured": self.measured,
                "holds": self.holds, "detail": self.detail}  # fmt: skip


EMAIL_DDB_MAX = 5
STATE_ITEM_MAX = 1024
# The state item holds its first history entries (vdq.store.history): it is bounded by one read
# unit (4 KB) whatever happens to it, and a delivered email's costs two write units a write.
STATE_ITEM_BOUND = 4096
BULK_DDB_PER_ITEM = 0.2
BULK_SQS_PER_ITEM = 0.15
COST_MAX = 8.0  # US$ per million emails on-demand (issue 34), every line counted
COST_MAX_PROVISIONED = 5.5
SMS_COST_MAX = 12.0
IMPORT_RATIO_MAX = 1.5
VDQ_SHARE_MAX = 0.20

REQUEST_FIGURES = [
    ("email delivered: DynamoDB requests", f"<= {EMAIL_DDB_MAX}"),
    ("email delivered: state item size, without its history entries", f"< {STATE_ITEM_MAX} B"),
    ("email delivered: state item size, with them", f"<= {STATE_ITEM_BOUND} B"),
    ("email delivered: all requests", "(reported)"),
    ("SMS delivered: all requests", "(reported)"),
    ("POST /emails x100: DynamoDB per item", f"<= {BULK_DDB_PER_ITEM}"),
    ("POST /emails x100: SQS per item", f"<= {BULK_SQS_PER_ITEM}"),
    ("retry (operator): all requests", "(reported)"),
    ("resend (operator): all requests", "(reported)"),
]
COST_FIGURES = [
    ("cost per 1M emails, behind the API, on-demand", f"<= US${COST_MAX:.2f}"),
    ("cost per 1M SMS, behind the API, on-demand", f"<= US${SMS_COST_MAX:.2f}"),
    ("API Gateway per 1M messages", "(reported)"),
    ("cost per 1M emails, behind the API, provisioned", f"<= US${COST_MAX_PROVISIONED:.2f}"),
]
KEY_FIGURES = [
    ("hottest key at 1,000 emails/s, 1:1 requests: writes, reads", "<= 30% of a partition"),
    ("hottest key at 1,000 emails/s, bulk requests: writes, reads", "<= 30% of a partition"),
    ("hottest key at 1,000 emails/s, 1:1 requests of one producer with a quota",
     "<= 30% of a partition"),
    ("hottest key at 1,000 emails/s, bulk requests of one producer with a quota",
     "<= 30% of a partition"),
]
REFUSED_FIGURES = [
    ("a producer past its limit, 1,000 requests/s: its counters records", "(reported)"),
]
COLDSTART_FIGURES = [
    ("cold start: handler import / boto3", f"<= {IMPORT_RATIO_MAX}x"),
    ("cold start: twilio in non-SMS functions", "none"),
]
THROUGHPUT_FIGURES = [
    ("throughput: 2,000 emails to terminal", "(reported)"),
    ("throughput: time in vdq code", f"< {VDQ_SHARE_MAX:.0%}"),
]
SCALE_FIGURES = [
    ("scale: list active (100k done + 50 active)", "<= 1 page read"),
    ("scale: SMS timeout (10k awaiting, 100 expired)", "<= expired + 1 page"),
]


SHORT = {"dynamodb": "ddb", "sesv2": "ses", "events": "eb"}


def ops(tally: dict[str, Any]) -> str:
    """``ddb.GetItem 1, sqs.SendMessageBatch 1``: the requests, services abbreviated."""
    out = []
    for op, n in tally["requests"].items():
        service, name = op.split(".", 1)
        out.append(f"{SHORT.get(service, service)}.{name} {n}")
    return ", ".join(out)


def _guard(figures: list[tuple[str, str]], work: Any) -> Any:
    """Run ``work``; Missing becomes "not measured" rows for ``figures``."""
    from bench.env import Missing

    try:
        return work(), None
    except Missing as missing:
        return None, [Row(f, t, f"not measured: {missing}", None) for f, t in figures]


def request_rows(journeys: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    email, missing = _guard(REQUEST_FIGURES[:4], requests.email_delivered)
    if missing:
        rows += missing
    else:
        journeys["email"] = email
        email.send_batch = requests.send_batch_timeline()
        total = email.total().as_json()
        ddb = total["by_service"].get("dynamodb", 0)
        per_phase = "; ".join(f"{f} {t.by_service().get('dynamodb', 0)}"
                              for f, t, _, _ in email.phases)  # fmt: skip
        rows.append(Row(REQUEST_FIGURES[0][0], REQUEST_FIGURES[0][1],
                        f"{ddb} ({per_phase})", ddb <= EMAIL_DDB_MAX, email.as_json()))  # fmt: skip
        bare = total["item_sizes"].get("state_without_history", 0)
        rows.append(Row(REQUEST_FIGURES[1][0], REQUEST_FIGURES[1][1], f"{bare} B (largest)",
                        0 < bare < STATE_ITEM_MAX, total["item_sizes"]))  # fmt: skip
        size = total["item_sizes"].get("state", 0)
        rows.append(Row(REQUEST_FIGURES[2][0], REQUEST_FIGURES[2][1], f"{size} B (largest)",
                        0 < size <= STATE_ITEM_BOUND, None))  # fmt: skip
        rows.append(Row(REQUEST_FIGURES[3][0], REQUEST_FIGURES[3][1],
                        f"{ops(total)} -> {email.final_state}", None))  # fmt: skip
    sms, missing = _guard(REQUEST_FIGURES[4:5], requests.sms_delivered)
    if missing:
        rows += missing
    else:
        journeys["sms"] = sms
        sms.send_batch = requests.send_batch_timeline(sms=True)
        total = sms.total().as_json()
        rows.append(Row(REQUEST_FIGURES[4][0], REQUEST_FIGURES[4][1],
                        f"{ops(total)} -> {sms.final_state}", None, sms.as_json()))  # fmt: skip
    bulk = requests.enqueue_many(100)
    ddb, sqs = bulk["by_service"].get("dynamodb", 0) / 100, bulk["by_service"].get("sqs", 0) / 100
    rows.append(Row(REQUEST_FIGURES[5][0], REQUEST_FIGURES[5][1], f"{ddb:.2f} ({ops(bulk)})",
                    ddb <= BULK_DDB_PER_ITEM, bulk))  # fmt: skip
    rows.append(Row(REQUEST_FIGURES[6][0], REQUEST_FIGURES[6][1], f"{sqs:.2f}",
                    sqs <= BULK_SQS_PER_ITEM))  # fmt: skip
    for (figure, target), run in zip(REQUEST_FIGURES[7:], (requests.retry_one,
                                                           requests.resend_one), strict=True):
        tally, missing = _guard([(figure, target)], run)
        rows += missing or [Row(figure, target, ops(tally), None, tally)]
    return rows


def cost_rows(journeys: dict[str, Any]) -> list[Row]:
    from bench import bill

    rows: list[Row] = []
    table = cost.prices()
    bills: dict[str, Any] = {}
    for (figure, target), key in zip(COST_FIGURES[:2], ("email", "sms"), strict=True):
        journey = journeys.get(key)
        if journey is None:
            module = "functions.send.handler / functions.webhook.handler"
            rows.append(Row(figure, target, f"not measured: {module} missing", None))
            continue
        billed = bills[key] = bill.bill(journey, table)
        parts = ", ".join(f"{k} {v:.2f}" for k, v in billed["lines"].items())
        trickle = cost.journey_cost(journey.invocations(table), journey.messages, table,
                                    fill=table["assumptions"]["batch_fill"]["trickle"],
                                    stored_bytes=journey.stored_bytes,
                                    table_bytes=journey.table_bytes)  # fmt: skip
        total = billed["total_on_demand"]
        text = (f"US${total:.2f} at 1M a day, SQS batches of "
                f"{table['assumptions']['batch_fill']['volume']} ({parts}); provisioned "
                f"US${billed['total_provisioned']:.2f}; US${trickle['total']:.2f} on-demand at a "
                "trickle, one message a batch")
        holds = total <= (COST_MAX if key == "email" else SMS_COST_MAX)
        detail = {**billed, "trickle": trickle}
        rows.append(Row(figure, target, text, holds, detail))
    one, ten = cost.api_gateway_per_million(1, table), cost.api_gateway_per_million(10, table)
    callbacks = f"US${bills['sms']['api_callbacks']:.2f}" if "sms" in bills else "not measured"
    rows.append(Row(COST_FIGURES[2][0], COST_FIGURES[2][1],
                    f"US${one:.2f} at 1 receiver/request, US${ten:.2f} at 10; SMS callbacks "
                    f"{callbacks}", None))  # fmt: skip
    if "email" in bills:
        provisioned = bills["email"]["total_provisioned"]
        rows.append(Row(COST_FIGURES[3][0], COST_FIGURES[3][1], f"US${provisioned:.2f}",
                        provisioned <= COST_MAX_PROVISIONED))  # fmt: skip
    return rows


def key_rows(results: list[dict[str, Any]]) -> list[Row]:
    from bench.hotkeys import HOT_SHARE, PARTITION_READ_UNITS, PARTITION_WRITE_UNITS

    rows = []
    for (figure, target), found in zip(KEY_FIGURES, results, strict=True):
        w, r = found["writes"], found["reads"]
        write_share = w.get("writes", 0) / PARTITION_WRITE_UNITS
        read_share = r.get("reads", 0) / PARTITION_READ_UNITS
        text = (f"{w.get('key')} {w.get('writes', 0):,.0f} WCU/s ({write_share:.0%}), "
                f"{r.get('key')} {r.get('reads', 0):,.0f} RCU/s ({read_share:.0%}); "
                f"from {found['emails']} emails, VDQ_INDEX_SHARDS {found['index_shards']}"
                + (f", VDQ_QUOTA_SHARDS {found['quota_shards']}"
                   if found.get("quota_shards") else ""))  # fmt: skip
        rows.append(Row(figure, target, text,
                        write_share <= HOT_SHARE and read_share <= HOT_SHARE, found))  # fmt: skip
    return rows


def refused_rows(found: dict[str, Any]) -> list[Row]:
    """A container refuses once a second from what a refusal read (vdq.store.refusals): at the
    rate, as many rounds a second as containers refusing at once; before, one a request."""
    from bench.hotkeys import PARTITION_READ_UNITS, PARTITION_WRITE_UNITS

    memo, at_rate = found["memo"], found["each_at_rate"]
    text = (f"{memo['writes']:.2f} WCU, {memo['reads']:.2f} RCU a record (the mean of "
            f"{found['quota_shards']} shards) for {found['requests']} refused in one container's "
            f"second: within 30% of a partition up to {found['containers']:,} containers refusing "
            f"at once. Remembering nothing, {at_rate['writes']:,.0f} WCU/s "
            f"({at_rate['writes'] / PARTITION_WRITE_UNITS:.0%}), {at_rate['reads']:,.0f} RCU/s "
            f"({at_rate['reads'] / PARTITION_READ_UNITS:.0%}) a record at {found['rate']:,.0f}/s")
    figure, target = REFUSED_FIGURES[0]
    return [Row(figure, target, text, None, found)]


def coldstart_rows(result: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    figure, target = COLDSTART_FIGURES[0]
    for name, got in result["functions"].items():
        label = f"{figure} ({name})"
        if "missing" in got:
            rows.append(Row(label, target, f"not measured: {got['missing']} missing", None))
        elif "error" in got:
            rows.append(Row(label, target, f"not measured: {got['error']}"[:160], None))
        else:
            text = f"{got['ms']:.0f} ms / {result['boto3_ms']:.0f} ms = {got['ratio']:.2f}x"
            rows.append(Row(label, target, text, got["ratio"] <= IMPORT_RATIO_MAX, got))
    measured = {n: g for n, g in result["functions"].items() if "ms" in g}
    offenders = [n for n, g in measured.items() if g["imports_twilio"] and not g["may_use_sms"]]
    non_sms = [n for n, g in measured.items() if not g["may_use_sms"]]
    figure, target = COLDSTART_FIGURES[1]
    text = (f"imported by {', '.join(offenders)}" if offenders
            else f"none (checked: {', '.join(non_sms) or '-'})")
    rows.append(Row(figure, target, text, not offenders if non_sms else None))
    return rows


def throughput_rows(result: dict[str, Any]) -> list[Row]:
    (f1, t1), (f2, t2) = THROUGHPUT_FIGURES
    split = result["split"]
    return [
        Row(f1, t1, f"{result['messages_per_second']:.0f} msg/s wall, "
            f"{result['messages_per_cpu_second']:.0f} msg/s CPU ({result['emails']} in "
            f"{result['seconds']:.0f} s, {result['states']})", None, result),
        Row(f2, t2, f"vdq {split['vdq']:.0%}, botocore {split['botocore']:.0%}, "
            f"moto {split['moto']:.0%}, pynamodb {split['pynamodb']:.0%}, "
            f"powertools {split['powertools']:.0%}, harness {split['harness']:.0%}, "
            f"other {split['other']:.0%}", split["vdq"] < VDQ_SHARE_MAX, split),
    ]  # fmt: skip


def scale_rows(result: dict[str, Any]) -> list[Row]:
    rows = []
    listing = result.get("listing")
    figure, target = SCALE_FIGURES[0]
    if isinstance(listing, str):
        rows.append(Row(figure, target, f"not measured: {listing}", None))
    else:
        rows.append(Row(figure, target,
                        f"{listing['items_read']} items + {listing['index_rows']} index rows read "
                        f"for a page of {listing['page']} ({listing['requests']})"
                        .replace("dynamodb.", "ddb."),
                        listing["holds"], listing))  # fmt: skip
    timeout = result.get("timeout")
    figure, target = SCALE_FIGURES[1]
    if isinstance(timeout, str):
        rows.append(Row(figure, target, f"not measured: {timeout}", None))
    else:
        rows.append(Row(figure, target,
                        f"{timeout['items_read']} items + {timeout['index_rows']} index rows read, "
                        f"{timeout['timed_out']} timed out ({timeout['requests']})"
                        .replace("dynamodb.", "ddb."),
                        timeout["holds"], timeout))  # fmt: skip
    return rows


def storage_rows(result: dict[str, Any]) -> list[Row]:
    from bench.storage import (
        FIGURES,
        GB,
        RETENTION_DAYS,
        TTL_LAG_DAYS,
        VOLUME_PER_DAY,
        steady_state_bytes,
    )

    email = result["per_email"]
    per = email["bytes"]
    kinds = ", ".join(f"{k} {v} B" for k, v in sorted(email["by_kind"].items()))
    steady = steady_state_bytes(per)
    with_ttl = result["month"]
    scale = VOLUME_PER_DAY / result["per_day"]
    # A content expires from birth, its horizon after its last item could be done at the
    # latest (vdq.workflow.retention): the table levels off that much later.
    from vdq.core.settings import Settings
    from vdq.workflow.retention import DAY, horizon_seconds

    horizon = -(-horizon_seconds(Settings()) // DAY)
    second = with_ttl.sizes[RETENTION_DAYS + TTL_LAG_DAYS + horizon:]
    flat = bool(second) and max(second) - min(second) <= max(second) * 0.02
    days = [1, 15, 30, 32, 45, len(with_ttl.sizes)]

    def series(sizes: list[int]) -> str:
        return " ".join(f"d{d}:{sizes[d - 1] * scale / GB:.0f}" for d in days
                        if d <= len(sizes))  # fmt: skip

    month_cost = steady / GB * cost.prices()["dynamodb"]["per_gb_month_stored"]
    stamping = email["stamping"]
    return [
        Row(FIGURES[0][0], FIGURES[0][1],
            f"{per:,} B in {email['records']} records ({kinds}); unstamped: "
            f"{email['without_expiration'] or 'none'}", None, email),
        Row(FIGURES[1][0], FIGURES[1][1],
            f"{ops(stamping) or 'no request'}: {stamping['dynamodb_write_units']:g} WRU, "
            f"{stamping['dynamodb_read_units']:g} RRU", None, stamping),
        Row(FIGURES[2][0], FIGURES[2][1],
            f"{steady / GB:.1f} GB at {RETENTION_DAYS} d + {TTL_LAG_DAYS} d TTL lag "
            f"(US${month_cost:.2f}/month; forever: +{per * VOLUME_PER_DAY * 30 / GB:.0f} GB "
            "every month)", None, {"bytes": steady}),
        Row(FIGURES[3][0], FIGURES[3][1],
            f"GB at 1M/day, TTL {series(with_ttl.sizes)}; none deleted "
            f"{series(with_ttl.forever)}", flat,
            {"with_ttl": with_ttl.sizes, "forever": with_ttl.forever, "scale": scale}),
    ]  # fmt: skip
