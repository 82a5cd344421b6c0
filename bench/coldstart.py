"""Cold start: each handler's import time in a fresh interpreter, beside a bare ``import boto3``.

Every sample is a new ``python`` process that times one import and reports which heavy modules
came with it; runs are interleaved (boto3, handler a, handler b, ..., repeat) so a noisy moment
hits all of them alike, and the minimum of the runs is the figure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench import env

ROOT = Path(__file__).resolve().parents[1]
RUNS = 7
WATCHED = ("twilio", "pydantic", "pynamodb", "requests")
# Functions that send or receive SMS; the others must not import twilio.
SMS_FUNCTIONS = {"send", "webhook", "schedule"}

_PROBE = """
import json, sys, time
t = time.perf_counter()
import {module}
elapsed = time.perf_counter() - t
print(json.dumps({{"seconds": elapsed,
                   "loaded": [m for m in {watched!r} if m in sys.modules]}}))
"""


def functions() -> list[str]:
    return sorted(p.name for p in (ROOT / "functions").iterdir()
                  if p.is_dir() and (p / "__init__.py").exists())  # fmt: skip


def _probe(module: str) -> dict:
    environment = {**os.environ, **env.ENV, "PYTHONPATH": str(ROOT),
                   "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(module=module, watched=WATCHED)],
        cwd=ROOT, env=environment, capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"import {module} failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(runs: int = RUNS) -> dict:
    names = functions()
    present = {n: (ROOT / "functions" / n / "handler.py").exists() for n in names}
    modules = {"boto3": "boto3"}
    modules.update({n: f"functions.{n}.handler" for n in names if present[n]})
    samples: dict[str, list[float]] = {k: [] for k in modules}
    loaded: dict[str, list[str]] = {}
    errors: dict[str, str] = {}
    _probe("boto3")  # warm the file cache once, untimed
    for _ in range(runs):
        for key, module in modules.items():
            if key in errors:
                continue
            try:
                got = _probe(module)
            except RuntimeError as exc:
                errors[key] = str(exc)
                continue
            samples[key].append(got["seconds"])
            loaded[key] = got["loaded"]
    boto3_s = min(samples["boto3"])
    result: dict = {"runs": runs, "boto3_ms": round(boto3_s * 1000, 1), "functions": {}}
    for name in names:
        if not present[name]:
            result["functions"][name] = {"missing": f"functions/{name}/handler.py"}
            continue
        if name in errors:
            result["functions"][name] = {"error": errors[name]}
            continue
        best = min(samples[name])
        result["functions"][name] = {
            "ms": round(best * 1000, 1),
            "ratio": round(best / boto3_s, 2),
            "loaded": loaded[name],
            "imports_twilio": "twilio" in loaded[name],
            "may_use_sms": name in SMS_FUNCTIONS,
        }
    return result


if __name__ == "__main__":
    print(json.dumps(measure(), indent=2))
