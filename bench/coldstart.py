"""Cold start: each handler's import time in a fresh interpreter, beside a bare ``import boto3``.

Every sample is a new ``python`` process that times one import and reports which heavy modules
came with it; runs are interleaved (boto3, handler a, handler b, ..., repeat) so a noisy moment
hits all of them alike, and the minimum of the runs is the figure.

``measure()`` runs them as Lambda does: the built assets (infra/bundling.py: the layer and each
function's code, with their bytecode) laid out as ``/opt/python`` and ``/var/task``, made
read-only, on the runtime's Python minor (python3.13), with bytecode writes off; boto3 is the
layer's, measured the same way. ``measure(bytecode=False)`` lays out the same assets without
their ``.pyc`` (what a bundle without bytecode costs); ``measure_venv()`` is the old figure: the
development venv's Python and its own cached bytecode. ``python -m bench.coldstart`` prints the
Lambda-like ratios (``--source`` adds the run without bytecode, ``--venv`` the old figure).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import env

ROOT = Path(__file__).resolve().parents[1]
RUNS = 7
WATCHED = ("twilio", "pydantic", "pynamodb", "requests")
# Functions that send or receive SMS; the others must not import twilio.
SMS_FUNCTIONS = {"send", "webhook", "schedule"}

# Wall time is the figure (a cold start is wall time); CPU time of the import is reported beside
# it, steadier on a busy machine, where other processes stretch the wall time of every sample.
_PROBE = """
import json, sys, time
t, c = time.perf_counter(), time.process_time()
import {module}
elapsed, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({{"seconds": elapsed, "cpu_seconds": cpu,
                   "loaded": [m for m in {watched!r} if m in sys.modules]}}))
"""


def functions() -> list[str]:
    return sorted(p.name for p in (ROOT / "functions").iterdir()
                  if p.is_dir() and (p / "__init__.py").exists())  # fmt: skip


def _venv_probe(module: str) -> dict:
    environment = {**os.environ, **env.ENV, "PYTHONPATH": str(ROOT),
                   "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    return _run([sys.executable, "-c", _PROBE.format(module=module, watched=WATCHED)],
                ROOT, environment, module)  # fmt: skip


def _run(command: list[str], cwd: Path, environment: dict[str, str], module: str) -> dict:
    out = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True,
                         check=False)  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"import {module} failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _set_writable(root: Path, writable: bool) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        mode = mode | stat.S_IWUSR if writable else mode & ~(stat.S_IWUSR | stat.S_IWGRP
                                                             | stat.S_IWOTH)  # fmt: skip
        path.chmod(mode)


@contextmanager
def lambda_layout(names: list[str], *, bytecode: bool = True) -> Iterator[dict[str, Path]]:
    """The built assets as Lambda mounts them, read-only: ``{"opt": .., name: task dir}``."""
    from infra import bundling

    keep = shutil.ignore_patterns() if bytecode else shutil.ignore_patterns("__pycache__")
    root = Path(tempfile.mkdtemp(prefix="vdq-coldstart-"))
    try:
        layout = {"opt": root / "opt"}
        shutil.copytree(bundling.dependencies_layer().path / "python", root / "opt" / "python",
                        ignore=keep)  # fmt: skip
        for name in names:
            layout[name] = root / name / "task"
            shutil.copytree(bundling.function_code(name).path, layout[name], ignore=keep)
        _set_writable(root, False)
        yield layout
    finally:
        _set_writable(root, True)
        shutil.rmtree(root, ignore_errors=True)


def _lambda_probe(python: str, layout: dict[str, Path], task: str) -> Callable[[str], dict]:
    task_dir = layout[task]
    environment = {
        **env.ENV,
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LAMBDA_TASK_ROOT": str(task_dir),
        # Lambda's order: the function's code, then the layer.
        "PYTHONPATH": f"{task_dir}{os.pathsep}{layout['opt'] / 'python'}",
        "PYTHONDONTWRITEBYTECODE": "1",
    }

    def probe(module: str) -> dict:
        command = [python, "-s", "-c", _PROBE.format(module=module, watched=WATCHED)]
        return _run(command, task_dir, environment, module)

    return probe


def measure(runs: int = RUNS, *, bytecode: bool = True) -> dict:
    """Each handler and boto3 as Lambda imports them (see the module's docstring)."""
    from infra import bundling

    names = [n for n in functions() if (ROOT / "functions" / n / "handler.py").exists()]
    python = bundling.runtime_python()
    with lambda_layout(names, bytecode=bytecode) as layout:
        probes = {"boto3": ("boto3", _lambda_probe(python, layout, names[0]))}
        for name in names:
            probes[name] = (f"functions.{name}.handler", _lambda_probe(python, layout, name))
        result = _measure(probes, runs)
    result["how"] = (f"built assets, {Path(python).name} {bundling.CACHE_TAG}, read-only, "
                     f"PYTHONDONTWRITEBYTECODE=1, {'with' if bytecode else 'without'} .pyc")
    return result


def measure_venv(runs: int = RUNS) -> dict:
    """The development venv's Python and bytecode: not what Lambda runs."""
    probes = {"boto3": ("boto3", _venv_probe)}
    probes.update({n: (f"functions.{n}.handler", _venv_probe) for n in functions()
                   if (ROOT / "functions" / n / "handler.py").exists()})  # fmt: skip
    result = _measure(probes, runs)
    result["how"] = f"development venv, {sys.implementation.cache_tag}"
    return result


def _measure(probes: dict[str, tuple[str, Callable[[str], dict]]], runs: int) -> dict:
    names = functions()
    samples: dict[str, list[float]] = {k: [] for k in probes}
    cpu: dict[str, list[float]] = {k: [] for k in probes}
    loaded: dict[str, list[str]] = {}
    errors: dict[str, str] = {}
    module, probe = probes["boto3"]
    probe(module)  # warm the file cache once, untimed
    for _ in range(runs):
        for key, (module, probe) in probes.items():
            if key in errors:
                continue
            try:
                got = probe(module)
            except RuntimeError as exc:
                errors[key] = str(exc)
                continue
            samples[key].append(got["seconds"])
            cpu[key].append(got["cpu_seconds"])
            loaded[key] = got["loaded"]
    if "boto3" in errors:
        raise RuntimeError(errors["boto3"])
    boto3_s, boto3_cpu = min(samples["boto3"]), min(cpu["boto3"])
    result: dict = {"runs": runs, "boto3_ms": round(boto3_s * 1000, 1),
                    "boto3_cpu_ms": round(boto3_cpu * 1000, 1), "functions": {}}  # fmt: skip
    for name in names:
        if name not in probes:
            result["functions"][name] = {"missing": f"functions/{name}/handler.py"}
            continue
        if name in errors:
            result["functions"][name] = {"error": errors[name]}
            continue
        best = min(samples[name])
        result["functions"][name] = {
            "ms": round(best * 1000, 1),
            "ratio": round(best / boto3_s, 2),
            "cpu_ms": round(min(cpu[name]) * 1000, 1),
            "cpu_ratio": round(min(cpu[name]) / boto3_cpu, 2),
            "loaded": loaded[name],
            "imports_twilio": "twilio" in loaded[name],
            "may_use_sms": name in SMS_FUNCTIONS,
        }
    return result


def _report(title: str, result: dict) -> str:
    lines = [f"{title}: {result['how']}, best of {result['runs']}",
             f"  boto3     {result['boto3_ms']:7.1f} ms wall {result['boto3_cpu_ms']:7.1f} ms CPU"]
    for name, got in result["functions"].items():
        if "ms" in got:
            lines.append(f"  {name:<9} {got['ms']:7.1f} ms wall {got['cpu_ms']:7.1f} ms CPU  "
                         f"{got['ratio']:.2f}x boto3 (CPU {got['cpu_ratio']:.2f}x)")
        else:
            lines.append(f"  {name:<9} not measured: {got.get('missing') or got.get('error')}")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.coldstart", description=__doc__)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--source", action="store_true", help="also without the assets' .pyc")
    parser.add_argument("--venv", action="store_true", help="also the development venv's figure")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    results = {"lambda": measure(args.runs)}
    if args.source:
        results["lambda_without_bytecode"] = measure(args.runs, bytecode=False)
    if args.venv:
        results["venv"] = measure_venv(args.runs)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print("\n\n".join(_report(title, result) for title, result in results.items()))
