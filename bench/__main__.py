"""``python -m bench``: run every benchmark, print one table, write bench/results/<date>.json.

Each figure has a target and a measured value; a figure whose code has not landed prints as
"not measured: <module> missing" (never a number), and one that failed prints its error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import env
from bench.figures import Row

RESULTS = Path(__file__).with_name("results")


def not_measured(figures: list[tuple[str, str]], why: str) -> list[Row]:
    return [Row(figure, target, f"not measured: {why}", None) for figure, target in figures]


def section(name: str, run: Callable[[], list[Row]], planned: list[tuple[str, str]]) -> list[Row]:
    started = time.perf_counter()
    try:
        rows = run()
    except env.Missing as missing:
        rows = not_measured(planned, str(missing))
    except Exception as exc:  # a broken figure must not hide the others
        traceback.print_exc(file=sys.stderr)
        rows = not_measured(planned, f"error: {type(exc).__name__}: {exc}"[:160])
    print(f"[bench] {name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return rows


def machine() -> dict[str, Any]:
    import os

    memory = None
    try:
        with open("/proc/meminfo") as f:
            memory = f"{int(f.readline().split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "memory": memory, "python": platform.python_version(),
            "platform": platform.platform()}  # fmt: skip


def table(rows: list[Row]) -> str:
    def mark(h: bool | None) -> str:
        return "n/a" if h is None else ("yes" if h else "NO")

    lines = [("figure", "target", "measured", "holds?")]
    lines += [(r.figure, r.target, r.measured, mark(r.holds)) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(4)]
    out = []
    for n, line in enumerate(lines):
        out.append(" | ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip())
        if n == 0:
            out.append("-+-".join("-" * w for w in widths))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", nargs="*", help="sections: requests cost idle keys coldstart "
                        "throughput scale search storage sendpath lanes lanespace "
                        "stacklanes")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    parser.add_argument("--stack-bulk", type=int, default=None,
                        help="bulk backlog of the stacklanes section (default 2,000; the "
                        "issue's figure: 100000)")  # fmt: skip
    args = parser.parse_args(argv)
    env.prepare_process()
    from bench import coldstart, figures, scale, storage, throughput
    from bench.requests import COUNTER

    COUNTER.install()
    started = time.perf_counter()
    wanted = set(args.only or ["requests", "cost", "idle", "keys", "coldstart", "throughput",
                               "scale", "search", "storage", "sendpath", "lanes", "lanespace",
                               "stacklanes"])  # fmt: skip
    rows: list[Row] = []
    journeys: dict[str, Any] = {}
    if "requests" in wanted or "cost" in wanted:
        rows += section("requests", lambda: figures.request_rows(journeys),
                        figures.REQUEST_FIGURES)  # fmt: skip
        if "requests" not in wanted:
            rows = []
    if "cost" in wanted:
        rows += section("cost", lambda: figures.cost_rows(journeys), figures.COST_FIGURES)
    idle: dict[str, Any] = {}
    if "idle" in wanted:
        from bench import idle as idle_month

        def idle_rows() -> list[Row]:
            idle.update(idle_month.measure())
            return idle_month.rows(idle)

        rows += section("idle", idle_rows, idle_month.FIGURES)
    keys: dict[str, Any] = {}
    if "keys" in wanted:
        from bench import hotkeys

        def key_rows() -> list[Row]:
            count = 40 if args.quick else 200
            keys["1:1"] = hotkeys.hot_keys(count)
            keys["bulk"] = hotkeys.hot_keys(count, bulk=True)
            keys["1:1 quota"] = hotkeys.hot_keys(count, quota=True)
            keys["bulk quota"] = hotkeys.hot_keys(count, bulk=True, quota=True)
            return figures.key_rows([keys["1:1"], keys["bulk"], keys["1:1 quota"],
                                     keys["bulk quota"]])

        rows += section("keys", key_rows, figures.KEY_FIGURES)
        refused = 40 if args.quick else 200
        rows += section("keys (refused)",
                        lambda: figures.refused_rows(hotkeys.refused_keys(refused)),
                        figures.REFUSED_FIGURES)  # fmt: skip
    if "coldstart" in wanted:
        rows += section("coldstart", lambda: figures.coldstart_rows(coldstart.measure()),
                        figures.COLDSTART_FIGURES)  # fmt: skip
    if "throughput" in wanted:
        count = 200 if args.quick else throughput.EMAILS
        rows += section("throughput", lambda: figures.throughput_rows(throughput.measure(count)),
                        figures.THROUGHPUT_FIGURES)  # fmt: skip
    if "scale" in wanted:
        done = 5_000 if args.quick else scale.DONE_ITEMS
        rows += section("scale", lambda: figures.scale_rows(scale.measure(done)),
                        figures.SCALE_FIGURES)  # fmt: skip
    if "search" in wanted:
        from bench import search

        sizes = (2_000, 20_000) if args.quick else search.SIZES
        rows += section("search", lambda: search.rows(search.measure(sizes)), search.FIGURES)
    if "storage" in wanted:
        days = 40 if args.quick else storage.DAYS
        rows += section("storage", lambda: figures.storage_rows(storage.measure(days)),
                        storage.FIGURES)
    if "sendpath" in wanted:
        from bench import sendpath

        rows += section("sendpath", lambda: sendpath.rows(sendpath.measure()), sendpath.FIGURES)
    if "lanes" in wanted:
        from bench import lanes

        rows += section("lanes", lambda: lanes.rows(lanes.measure(args.quick)), lanes.FIGURES)
    if "lanespace" in wanted:
        from bench import lanespace

        rows += section("lanespace", lambda: lanespace.rows(lanespace.measure(args.quick)),
                        lanespace.FIGURES)  # fmt: skip
    if "stacklanes" in wanted:
        from bench import stacklanes

        bulk = args.stack_bulk or (500 if args.quick else stacklanes.BULK)
        high = 20 if args.quick else stacklanes.HIGH
        rows += section("stacklanes", lambda: stacklanes.rows(stacklanes.measure(bulk, high)),
                        stacklanes.FIGURES)  # fmt: skip
    elapsed = time.perf_counter() - started
    print(table(rows))
    print(f"\n{len(rows)} figures in {elapsed:.0f} s on {machine()}")
    if "cost" in wanted and journeys:
        from bench import bill

        print("\n" + bill.table_text({k: bill.bill(j) for k, j in journeys.items()},
                                     idle=idle or None, keys=keys or None))  # fmt: skip
    if not args.quick and args.only is None:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"{datetime.date.today().isoformat()}.json"
        path.write_text(json.dumps({"machine": machine(), "seconds": round(elapsed, 1),
                                    "figures": [r.as_json() for r in rows]},
                                   indent=2, default=str) + "\n")  # fmt: skip
        print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
