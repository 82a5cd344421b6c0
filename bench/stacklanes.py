"""Priority lanes on the local stack: how long high items take from enqueue to the SES call while
a bulk backlog waits, measured, not simulated (``bench/lanes.py`` simulates the deployed lanes).

The stack is ``vdq local``'s own (vdq.local.stack: moto, the front, one send poller per lane,
the SES sandbox), started in a child process so that its environment (AWS_ENDPOINT_URL and the
VDQ settings it sets) stays out of the other benchmarks. The child enqueues ``--bulk`` bulk
emails through the API (POST /emails, 1,000 receivers a request), waits until the bulk lane is
sending, then enqueues ``--high`` high emails, one a request, every ``--interval`` seconds (and
the same high emails first on a stack with no backlog: the floor the stack itself sets). A
high item's latency runs from just before its POST to the time the SES sandbox recorded its
call (``at`` of ``/_sandbox/emails``, the same clock). Bulk throughput is the bulk emails SES
took while the high items went through, per second. The stack's pollers run in one process on
this machine's cores, and the lanes' concurrency is one poller each, not the deployment's; moto
serves DynamoDB and SQS one request at a time (vdq.local.aws), so every lane's requests queue
for it: the figures include where moto's time went (``moto_during_high``). moto's transactions
are made lean as in the other benchmarks (``env.lean_moto_transactions``).

``python -m bench --only stacklanes`` (``--stack-bulk 100000`` for the issue's backlog; enqueueing
it on moto takes a while), or ``python -m bench.stacklanes`` to print the figures alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime
from typing import Any

from bench.figures import Row

BULK = 2_000  # 5,000 took 15 min on 2 loaded cores (moto); --stack-bulk raises it
HIGH = 60
INTERVAL = 0.5  # seconds between high items
P99_TARGET = 2.0
PER_REQUEST = 1_000  # VDQ_MAX_RECEIVERS' default
SENDER = "shop@example.com"

FIGURES = [
    ("lanes, local stack: high p50 enqueue -> SES call, bulk waiting", "(reported)"),
    ("lanes, local stack: high p99 enqueue -> SES call, bulk waiting", f"<= {P99_TARGET:.0f} s"),
    ("lanes, local stack: bulk emails sent per second meanwhile", "(reported)"),
]


class MotoTimes:
    """Where the local stack's time goes: moto serves DynamoDB and SQS one request at a time
    (vdq.local.aws.Serial); per operation, how long requests waited for it and were served."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str, float, float]] = []  # (at, operation, wait, serve)

    def install(self) -> MotoTimes:
        from vdq.local import aws

        original = aws.Serial.__call__
        calls = self.calls

        def timed(serial: Any, environ: dict[str, Any], start_response: Any) -> Any:
            target = environ.get("HTTP_X_AMZ_TARGET") or ""
            if not target.startswith(aws.SERIAL_TARGETS) or target in aws.UNSERIALIZED:
                return original(serial, environ, start_response)
            asked = time.time()
            with serial._lock:
                got = time.time()
                answer = list(serial.app(environ, start_response))
            calls.append((asked, target.split(".")[-1], got - asked, time.time() - got))
            return answer

        aws.Serial.__call__ = timed  # type: ignore[method-assign,assignment]
        return self

    def busiest(self, since: float, top: int = 6) -> dict[str, Any]:
        """Requests from ``since``: count, mean wait and serve (ms) per operation, the busiest
        by time served first."""
        per: dict[str, list[float]] = {}
        for at, operation, wait, serve in list(self.calls):
            if at >= since:
                entry = per.setdefault(operation, [0, 0.0, 0.0])
                entry[0] += 1
                entry[1] += wait
                entry[2] += serve
        ranked = sorted(per.items(), key=lambda kv: -kv[1][2])[:top]
        return {op: {"requests": int(n), "wait_ms": round(1000 * w / n, 1),
                     "serve_ms": round(1000 * v / n, 1)} for op, (n, w, v) in ranked}  # fmt: skip


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(share * len(ordered) + 0.5) - 1))]


def _at(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def run(bulk: int, high: int, interval: float, ses_rate: float | None = None) -> dict[str, Any]:
    """Start the local stack in this process, measure, stop it; the figures as a dict.

    ``ses_rate``: the SES sandbox's sending rate (VDQ_LOCAL_SES_RATE, which the pacer reads
    through GetAccount); None: it takes every send, so the lanes alone are measured."""
    import requests
    from bench import env
    from vdq.core import resources
    from vdq.local.front import make_token
    from vdq.local.stack import LocalStack, Options

    moto = MotoTimes().install()
    env.lean_moto_transactions()  # moto copies the whole table per transaction: not VDQ's cost
    os.environ.update(POWERTOOLS_METRICS_DISABLED="true")  # schedules as `make run` has them
    for name in [k for k in os.environ if k.startswith(("VDQ_LOCAL_SES", "VDQ_LOCAL_FAULT"))]:
        del os.environ[name]
    if ses_rate is not None:
        os.environ["VDQ_LOCAL_SES_RATE"] = str(ses_rate)
    stack = LocalStack(Options(port=0, log_level="ERROR")).start()
    try:
        headers = {"Authorization": f"Bearer {make_token(stack.secret, ['vdq-senders'])}"}
        url = f"{stack.front.url}/emails"

        def post(receivers: list[str], subject: str, priority: str) -> None:
            body: dict[str, Any] = {
                "sender": {"email": SENDER}, "to": [{"email": r} for r in receivers],
                "subject": subject, "text": "x", "priority": priority}  # fmt: skip
            answer = requests.post(url, json=body, headers=headers, timeout=600)
            if answer.status_code != 201:
                raise RuntimeError(f"POST /emails: {answer.status_code} {answer.text[:300]}")

        started = time.time()
        for start in range(0, bulk, PER_REQUEST):
            count = min(PER_REQUEST, bulk - start)
            post([f"bulk{start + i}@example.org" for i in range(count)], "bulk", "bulk")
        enqueued = time.time() - started
        while bulk and not stack.ses.sent:  # the bulk lane is sending: the backlog waits on it
            time.sleep(0.05)
        sent_before = len(stack.ses.sent)
        posted: dict[str, float] = {}
        window_start = time.time()
        for n in range(high):
            due = window_start + n * interval
            time.sleep(max(0.0, due - time.time()))
            subject = f"high {n}"
            posted[subject] = time.time()
            post([f"high{n}@example.org"], subject, "high")
        deadline = time.time() + 60
        while time.time() < deadline:
            with stack.ses._lock:
                seen = {m["subject"]: _at(m["at"]) for m in stack.ses.sent
                        if m["subject"] in posted}  # fmt: skip
            if len(seen) == len(posted):
                break
            time.sleep(0.1)
        window = time.time() - window_start
        with stack.ses._lock:
            bulk_sent = sum(m["subject"] == "bulk" for m in stack.ses.sent[sent_before:])
        waiting = stack.status()["queues"]
        latencies = [seen[s] - posted[s] for s in posted if s in seen]
        busiest = moto.busiest(window_start)
    finally:
        stack.stop()
    bulk_queue = waiting.get(resources.SEND_QUEUES["bulk"], {})
    return {
        "machine_load": os.getloadavg()[0], "ses_rate": ses_rate,
        "bulk": bulk, "high": high, "interval": interval, "enqueue_seconds": round(enqueued, 1),
        "high_sent": len(latencies), "window_seconds": round(window, 1),
        "p50": statistics.median(latencies) if latencies else None,
        "p99": percentile(latencies, 0.99) if latencies else None,
        "max": max(latencies) if latencies else None,
        "bulk_per_second": bulk_sent / window if window else 0.0,
        "bulk_waiting_at_end": bulk_queue.get("visible"),
        "moto_during_high": busiest,
    }  # fmt: skip


def measure(bulk: int = BULK, high: int = HIGH, interval: float = INTERVAL,
            ses_rate: float | None = None) -> dict[str, Any]:  # fmt: skip
    """``run`` in a child process each (its own environment and moto), without a backlog (the
    stack's own floor) and with one: {"baseline": figures, "loaded": figures}."""
    return {"baseline": _child(0, high, interval, ses_rate),
            "loaded": _child(bulk, high, interval, ses_rate)}  # fmt: skip


def _child(bulk: int, high: int, interval: float, ses_rate: float | None) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.stacklanes", "--bulk", str(bulk), "--high", str(high),
               "--interval", str(interval), "--json"]  # fmt: skip
    if ses_rate is not None:
        command += ["--ses-rate", str(ses_rate)]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ),
                          timeout=3600)  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"bench.stacklanes exited {done.returncode}: {done.stderr[-600:]}")
    return json.loads(lines[-1])


def _seconds(value: float | None) -> str:
    return "no high item sent" if value is None else f"{value:.2f} s"


def rows(figures: dict[str, Any]) -> list[Row]:
    loaded, baseline = figures["loaded"], figures["baseline"]
    sent = f"{loaded['high_sent']}/{loaded['high']} high sent"
    p99 = loaded["p99"]
    holds = p99 is not None and p99 <= P99_TARGET and loaded["high_sent"] == loaded["high"]
    return [
        Row(FIGURES[0][0], FIGURES[0][1],
            f"{_seconds(loaded['p50'])} ({loaded['bulk']:,} bulk enqueued; {sent})", None,
            figures),
        Row(FIGURES[1][0], FIGURES[1][1],
            f"{_seconds(p99)} (max {_seconds(loaded['max'])}; no backlog: p50 "
            f"{_seconds(baseline['p50'])}, p99 {_seconds(baseline['p99'])}; load "
            f"{loaded['machine_load']:.1f})", holds),
        Row(FIGURES[2][0], FIGURES[2][1],
            f"{loaded['bulk_per_second']:.1f}/s over {loaded['window_seconds']} s; "
            f"{loaded['bulk_waiting_at_end']} still queued", None),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.stacklanes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bulk", type=int, default=BULK, help="bulk emails enqueued first")
    parser.add_argument("--high", type=int, default=HIGH, help="high emails enqueued after")
    parser.add_argument("--interval", type=float, default=INTERVAL,
                        help="seconds between high emails")  # fmt: skip
    parser.add_argument("--ses-rate", type=float, default=None,
                        help="the SES sandbox's sending rate (default: unlimited)")
    parser.add_argument("--json", action="store_true",
                        help="one stack, in this process: print its figures as JSON")  # fmt: skip
    args = parser.parse_args()
    if args.json:
        print(json.dumps(run(args.bulk, args.high, args.interval, args.ses_rate)), flush=True)
        return
    figures = measure(args.bulk, args.high, args.interval, args.ses_rate)
    for row in rows(figures):
        print(f"{row.figure}: {row.measured} (target {row.target})")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
