"""How the lanes simulation's headline figures (bench/lanespace.py) move with the latencies it
assumes: request latencies with tails, slower medians, the function's own time per send, and
bursts of high items, at a send function's parallelism (VDQ_SEND_PARALLELISM; default: the
deployed one). ``python -m bench.lanesens [--seconds S] [--seeds N] [--parallelism P]``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from bench.lanesim import Scenario, Timings, simulate
from bench.lanespace import pooled

# Slower medians than prices.json (ms): a TransactWriteItems of three items, SES's SendEmail
# from a Lambda in the same region, an SQS ReceiveMessage and the ESM's invoke of the function.
SLOW = {"ddb": 0.010, "after": 0.020, "before": 0.020, "provider": 0.120, "pickup": 0.040,
        "base": 0.020, "give_back": 0.035}  # fmt: skip

CASES: list[tuple[str, dict[str, Any], dict[str, float]]] = [
    ("as published (constant prices.json latencies)", {}, {}),
    ("latency tails p99 = 3x median", {"tail": 3.0}, {}),
    ("latency tails p99 = 6x median", {"tail": 6.0}, {}),
    ("slower medians (SLOW)", {}, SLOW),
    ("slower medians + tails 3x", {"tail": 3.0}, SLOW),
    ("+ 20 ms CPU per send", {"cpu": 0.020}, {}),
    ("slower medians + tails 3x + 20 ms CPU", {"tail": 3.0, "cpu": 0.020}, SLOW),
    ("clock at epoch 1.76e9 (as published otherwise)", {"epoch": 1.764e9}, {}),
    ("SES median 100 ms", {}, {"provider": 0.100}),
    ("SES median 150 ms", {}, {"provider": 0.150}),
    ("SES median 200 ms", {}, {"provider": 0.200}),
    ("SES median 150 ms + tails 3x", {"tail": 3.0}, {"provider": 0.150}),
    ("lanes share the function's environments", {"environments": True}, {}),
    ("rate read by GetAccount (as deployed)", {"read_limit": True}, {}),
    ("pickup 250 ms (ESM receive + invoke)", {}, {"pickup": 0.250}),
    ("burst of 20 high at once", {"burst": 20}, {}),
    ("burst of 100 high at once", {"burst": 100}, {}),
    ("SES refuses any call over its rate in 1 s", {"ses_burst": 0}, {}),
    ("SES refuses past its rate + 1 in 1 s", {"ses_burst": 1}, {}),
    ("SES refuses over its rate + tails 3x", {"ses_burst": 0, "tail": 3.0}, {}),
]


def main() -> None:
    from bench import cost

    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--rates", default="14,1")
    parser.add_argument("--parallelism", type=int, default=None)
    args = parser.parse_args()
    base = Timings.of(cost.prices())
    for rate in (float(r) for r in args.rates.split(",")):
        interval = 1.0 if rate >= 14 else 5.0
        for name, knobs, slow in CASES:
            timings = dataclasses.replace(base, **slow)
            runs = [simulate(Scenario(rate, interval=interval, seconds=args.seconds, seed=seed,
                                      parallelism=args.parallelism, **knobs), timings)
                    for seed in range(1, args.seeds + 1)]  # fmt: skip
            p = pooled(runs)
            print(f"{rate:>4g}/s  {name:<42} high {p['high_sent']}/{p['high']}  "
                  f"p50 {p['p50']:.2f}  p99 {p['p99']:.2f}  max {p['max']:.2f}  "
                  f"use {p['use_min']:.1%}  most/10s {p['most_in_10s']}/{p['rate_in_10s']:g}  "
                  f"at SES most in 1 s {max(r['most_landed_in_1s'] for r in runs)}  "
                  f"given back {p['given_back']}  throttled {p['throttled']}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
