"""Priority lanes at the provider's rate: how long high items take from enqueue to the provider
call while 100,000 bulk items wait, when the rate (SES's account sending rate), not the
workers, is the bottleneck; and what share of the rate bulk and high use meanwhile.

``bench/lanesim.py`` simulates the deployed lanes on virtual time with the product's pacing
code (each send function's own ``vdq.dispatch.pacing.Pacer``, ``vdq.dispatch.batchplan.plan`` and
``vdq.dispatch.pacing.gate`` on real message bodies, ``PaceRecords`` over an in-memory table): see
its docstring for what is modelled and what is not. ``bench/lanes.py`` simulates the lanes without
the rate; ``bench/stacklanes.py`` measures them on the local stack, which reaches about 2,000
bulk items (moto serves one request at a time).

Runs: SES at 14/s (a production account's starting rate) with high items arriving at random,
one a second on average, and at 1/s with one every 5 s (high alone at 1/s would fill the rate),
for 10 simulated minutes each, pooled over ``SEEDS`` (the seed sets the arrivals and the
pacer's jitter); the same without bulk for the floor the rate itself sets (a high item behind
another); and the bound any pacer meets at full use (a send every 1/rate s: the lowest p50 and
p99 of any such schedule, ``lanesim.ideal_percentile``; the max of giving each slot to the
oldest high item ready, ``lanesim.ideal``): at 1/s with a high item every 5 s its p99 is 2.10 s
on these seeds (2.00 s over 40), so a schedule that fills the rate is at the target at best
there. Validation:
the local stack's run (300 bulk, SES at 0.5/s, 8 high items every 3 s) simulated as the
local stack runs it (one poller per lane sharing one Pacer, no batching
window) at ``VALIDATION_SEEDS`` phases of the high items against the rate's slots.

``python -m bench --only lanespace`` or ``python -m bench.lanespace [--quick] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from bench.figures import Row
from bench.lanesim import (
    Scenario,
    Timings,
    deployed,
    ideal,
    ideal_percentile,
    percentile,
    simulate,
)

RUNS = ((14.0, 1.0), (1.0, 5.0))  # (SES rate per second, mean seconds between high items)
SEEDS = (1, 2, 3, 4, 5)
VALIDATION_SEEDS = tuple(range(10))
P99_TARGET = 2.0
USE_TARGET = 0.9
# A big sender: SES at 1,000 a second, the deploy sized for it (vdq:peakSendRate 1000), ten high
# items a second arriving at random while bulk outlasts the run; simulated for PEAK_SECONDS (a
# simulated second of it takes about half a real one).
PEAK = (1_000.0, 0.1)
PEAK_SECONDS = 30.0
PEAK_P99_TARGET = 1.0
PEAK_USE_TARGET = 0.95
# The local stack's figures (docs/architecture/sending.md, Priority lanes: bench.stacklanes
# --bulk 300 --high 8 --interval 3 --ses-rate 0.5, 2026-12-03) that ``validate`` is compared with.
STACK = {"high_sent": 8, "high": 8, "p50": 0.98, "p99": 1.75, "use": 0.92}

FIGURES = [
    *((f"lanes at SES {rate:g}/s: high p99 enqueue -> provider call, 100k bulk waiting",
       f"<= {P99_TARGET:.0f} s") for rate, _ in RUNS),
    *((f"lanes at SES {rate:g}/s: share of the rate used, bulk + high", f">= {USE_TARGET:.0%}")
      for rate, _ in RUNS),
    (f"lanes at SES {PEAK[0]:,.0f}/s (vdq:peakSendRate): high p99 enqueue -> provider call",
     f"<= {PEAK_P99_TARGET:.0f} s"),
    (f"lanes at SES {PEAK[0]:,.0f}/s (vdq:peakSendRate): share of the rate used",
     f">= {PEAK_USE_TARGET:.0%}"),
    ("lanes at the rate: pacing DynamoDB requests per send, give-backs", "(reported)"),
    ("lanes at the rate: simulation vs local stack (300 bulk, 0.5/s)", "(reported)"),
]  # fmt: skip


def pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several seeds' runs of one scenario as one: latency percentiles over all their high
    items, the lowest share of the rate used, the most sends in 10 s, sums of the rest."""
    latencies = [x for run in runs for x in run["latencies"]]
    sent = {lane: sum(run["sent"][lane] for run in runs) for lane in runs[0]["sent"]}
    requests = {lane: sum(run["pacing_requests"].get(lane, 0) for run in runs)
                for lane in ("high", "normal", "bulk", "all")}  # fmt: skip
    return {
        "rate": runs[0]["rate"], "bulk": runs[0]["bulk"], "interval": runs[0]["interval"],
        "seeds": [run["seed"] for run in runs],
        "high": sum(run["high"] for run in runs), "high_sent": len(latencies),
        "p50": statistics.median(latencies) if latencies else None,
        "p99": percentile(latencies, 0.99) if latencies else None,
        "max": max(latencies) if latencies else None,
        "p99_per_seed": [run["p99"] for run in runs],
        "use_min": min(run["use"] or 0.0 for run in runs),
        "use_per_seed": [round(run["use"] or 0.0, 4) for run in runs],
        "window_seconds": [run["window_seconds"] for run in runs],
        "most_in_10s": max(run["most_in_10s"] for run in runs),
        "rate_in_10s": runs[0]["rate_in_10s"],
        "closest_sends": min(run["closest_sends"] or float("inf") for run in runs),
        "sent": sent,
        "given_back": {lane: sum(run["given_back"].get(lane, 0) for run in runs)
                       for lane in ("high", "normal", "bulk")},
        "throttled": {lane: sum(run["throttled"].get(lane, 0) for run in runs)
                      for lane in ("high", "normal", "bulk")},
        "pacing_requests_per_send": {lane: round(n / sent[lane], 3)
                                     for lane, n in requests.items() if n and sent[lane]},
        "real_seconds": round(sum(run["real_seconds"] for run in runs), 1),
    }  # fmt: skip


def validate(timings: Timings, seeds: tuple[int, ...] = VALIDATION_SEEDS) -> dict[str, Any]:
    """The local stack's run in the simulation, as the local stack runs it and with the
    deployed lanes; each seed a phase of the high items against the rate's 2 s slots."""
    one = {"high": 1, "normal": 1, "bulk": 1}
    none = {"high": 0.0, "normal": 0.0, "bulk": 0.0}
    local = [simulate(Scenario(0.5, bulk=300, high=8, interval=3.0, poisson=False,
                               concurrency=one, windows=none, shared_pacer=True, seed=seed),
                      timings) for seed in seeds]  # fmt: skip
    lanes = [simulate(Scenario(0.5, bulk=300, high=8, interval=3.0, poisson=False, seed=seed),
                      timings) for seed in seeds]  # fmt: skip
    return {"local": pooled(local), "deployed": pooled(lanes), "stack": STACK,
            "local_per_seed": [{"p50": run["p50"], "p99": run["p99"], "use": run["use"]}
                               for run in local]}  # fmt: skip


def measure(quick: bool = False) -> dict[str, Any]:
    from bench import cost

    timings = Timings.of(cost.prices())
    seconds = 60.0 if quick else 600.0
    seeds = SEEDS[:1] if quick else SEEDS
    runs, floors, bounds = [], [], []
    for rate, interval in RUNS:
        runs.append(pooled([simulate(Scenario(rate, interval=interval, seconds=seconds,
                                              seed=seed), timings) for seed in seeds]))
        floors.append(pooled([simulate(Scenario(rate, bulk=0, interval=interval,
                                                seconds=seconds, seed=seed), timings)
                              for seed in seeds]))  # fmt: skip
        bounds.append(bound([Scenario(rate, interval=interval, seconds=seconds, seed=seed)
                             for seed in seeds], timings))  # fmt: skip
    check = validate(timings, VALIDATION_SEEDS[:3] if quick else VALIDATION_SEEDS)
    rate, interval = PEAK
    span = PEAK_SECONDS / 3 if quick else PEAK_SECONDS
    peak = simulate(Scenario(rate, bulk=int(rate * (span + 30)), interval=interval, seconds=span,
                             seed=SEEDS[0], peak=rate), timings)  # fmt: skip
    return {"timings": timings.__dict__, "runs": runs, "floors": floors, "bounds": bounds,
            "validation": check, "peak": peak}  # fmt: skip


def bound(scenarios: list[Scenario], timings: Timings) -> dict[str, float]:
    """The best any schedule that fills the rate does for the same high items
    (``lanesim.ideal``): what the lanes' latency is compared with where 2 s is out of reach."""
    latencies = [x for scenario in scenarios for x in ideal(scenario, timings)]
    # Each figure at its own best: the oldest-first schedule has the lowest max, not the
    # lowest percentiles (``lanesim.ideal_percentile``).
    return {"p50": ideal_percentile(scenarios, timings, 0.5),
            "p99": ideal_percentile(scenarios, timings, 0.99),
            "max": max(latencies)}  # fmt: skip


def _s(value: float | None) -> str:
    return "none sent" if value is None else f"{value:.2f} s"


def rows(result: dict[str, Any]) -> list[Row]:
    runs, floors, check = result["runs"], result["floors"], result["validation"]
    bounds = result["bounds"]
    out = []
    for (figure, target), run, floor, best in zip(FIGURES, runs, floors, bounds, strict=False):
        holds = run["p99"] is not None and run["p99"] <= P99_TARGET and (
            run["high_sent"] == run["high"])
        out.append(Row(figure, target,
                       f"p99 {_s(run['p99'])}, p50 {_s(run['p50'])}, max {_s(run['max'])} "
                       f"({run['high_sent']}/{run['high']} high, one per {run['interval']:g} s; "
                       f"no bulk: p99 {_s(floor['p99'])}, max {_s(floor['max'])}; the best "
                       f"schedule filling the rate: p99 {_s(best['p99'])}, p50 "
                       f"{_s(best['p50'])})", holds,
                       {"bulk": run, "no_bulk": floor, "bound": best}))  # fmt: skip
    for (figure, target), run in zip(FIGURES[len(RUNS):], runs, strict=False):
        out.append(Row(figure, target,
                       f"{run['use_min']:.1%} (lowest of {len(run['seeds'])} run(s); most in any "
                       f"10 s: {run['most_in_10s']} at {run['rate_in_10s']:g}, closest two "
                       f"{run['closest_sends']:.3f} s apart)", run["use_min"] >= USE_TARGET))
    peak = result["peak"]
    concurrency = deployed(PEAK[0])[0]
    out.append(Row(FIGURES[2 * len(RUNS)][0], FIGURES[2 * len(RUNS)][1],
                   f"p99 {_s(peak['p99'])}, p50 {_s(peak['p50'])}, max {_s(peak['max'])} "
                   f"({peak['high_sent']}/{peak['high']} high, one per {PEAK[1]:g} s, over "
                   f"{peak['window_seconds']:.0f} s; workers high {concurrency['high']}, normal "
                   f"{concurrency['normal']}, bulk {concurrency['bulk']})",
                   peak["p99"] is not None and peak["p99"] <= PEAK_P99_TARGET
                   and peak["high_sent"] == peak["high"], peak))  # fmt: skip
    per = peak["pacing_requests_per_send"]
    out.append(Row(FIGURES[2 * len(RUNS) + 1][0], FIGURES[2 * len(RUNS) + 1][1],
                   f"{peak['use']:.1%} ({peak['sent']['all']:,} sent; pacing requests per bulk "
                   f"send {per.get('bulk', 0):.2f}, per high {per.get('high', 0):.2f})",
                   peak["use"] >= PEAK_USE_TARGET))  # fmt: skip
    parts = []
    for run in runs:
        per = run["pacing_requests_per_send"]
        parts.append(f"{run['rate']:g}/s: {per.get('bulk', 0):.2f} per bulk send, "
                     f"{per.get('high', 0):.2f} per high; {run['given_back']['bulk']:,} bulk and "
                     f"{run['given_back']['high']} high given back for "
                     f"{run['sent']['bulk']:,} bulk sent")  # fmt: skip
    out.append(Row(FIGURES[-2][0], FIGURES[-2][1], "; ".join(parts), None))
    local, lanes, stack = check["local"], check["deployed"], check["stack"]
    out.append(Row(FIGURES[-1][0], FIGURES[-1][1],
                   f"sim as the local stack runs ({len(local['seeds'])} phases): "
                   f"{local['high_sent']}/{local['high']}, p50 {_s(local['p50'])}, p99 "
                   f"{_s(local['p99'])}, >= {local['use_min']:.0%} used; deployed lanes: p50 "
                   f"{_s(lanes['p50'])}, p99 {_s(lanes['p99'])}; local stack (one run): "
                   f"{stack['high_sent']}/{stack['high']}, p50 {stack['p50']:.2f} s, p99 "
                   f"{stack['p99']:.2f} s, ~{stack['use']:.0%}", None, check))  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lanespace", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="60 s of high items, one seed")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    import logging

    logging.disable(logging.WARNING)
    found = measure(args.quick)
    for row in rows(found):
        print(f"{row.figure}: {row.measured} (target {row.target})")
    if args.json:
        for side in ("runs", "floors"):
            for run in found[side]:
                run.pop("latencies", None)
        print(json.dumps(found, indent=2, default=str))


if __name__ == "__main__":
    main()
