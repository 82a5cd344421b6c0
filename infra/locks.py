"""The two lock files, with hashes: the Lambda layer's and the development environment's.

- ``requirements/runtime.lock``: ``[project].dependencies`` resolved for the functions' runtime
  (CPython 3.13, manylinux aarch64): one wheel a distribution, each with its sha256. The layer
  is downloaded and installed from it with ``--require-hashes`` (infra.bundling).
- ``requirements/dev.lock``: the project with its ``dev`` and ``cdk`` extras resolved for this
  machine's Python and platform (recorded in the file's header), the runtime distributions at
  the versions of the runtime lock. ``make venv`` installs from it with ``--require-hashes``.

Both are written by ``python -m infra.bundling lock``, which asks pip for a resolution
(``pip install --dry-run --report``: the index's hashes, no install). Each file's header holds a
digest of what it was resolved from (the requirement lists of pyproject.toml and the target), so
a test fails when pyproject.toml changes without a new lock.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_LOCK = ROOT / "requirements" / "runtime.lock"
DEV_LOCK = ROOT / "requirements" / "dev.lock"
DEV_EXTRAS = ("dev", "cdk")  # what `make venv` installs
PROJECT = "vdq"
PYTHON_VERSION = "3.13"  # the functions' runtime (infra/functions.py)
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")  # Amazon Linux 2023, arm64


def pip_platform_args() -> list[str]:
    """pip's options that pick wheels for the functions' runtime, whatever this machine is."""
    args = []
    for name in PLATFORMS:
        args += ["--platform", name]
    return [*args, "--python-version", PYTHON_VERSION, "--implementation", "cp",
            "--only-binary=:all:"]  # fmt: skip


def project() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return dict(tomllib.load(fh)["project"])


def runtime_requirements() -> list[str]:
    """The ``[project].dependencies`` of pyproject.toml: what a Lambda layer carries."""
    return list(project()["dependencies"])


def dev_requirements() -> list[str]:
    """The runtime and every extra ``make venv`` installs (an extra may name another)."""
    extras = project().get("optional-dependencies", {})
    found = runtime_requirements()
    for name in extras:
        found += [f"[{name}] {r}" for r in extras[name]]
    return found


def _inputs(requirements: list[str], target: str = "") -> str:
    text = "\n".join([target, *sorted(requirements)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def runtime_inputs() -> str:
    """The runtime requirements and the runtime's Python and platforms."""
    return _inputs(runtime_requirements(), f"cp{PYTHON_VERSION} {' '.join(PLATFORMS)}")


def dev_target() -> str:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return f"cp{version} {sys.platform} {platform.machine()}"


def dev_inputs() -> str:
    """The requirement lists only: the machine the dev lock was resolved on is in its header."""
    return _inputs(dev_requirements())


def recorded_inputs(lock: Path) -> str | None:
    """The digest in a lock file's header (None: no such file or line)."""
    if not lock.is_file():
        return None
    for line in lock.read_text().splitlines():
        if line.startswith("# inputs: "):
            return line.removeprefix("# inputs: ").strip()
    return None


def pins(lock: Path) -> dict[str, str]:
    """``{normalized name: version}`` of a lock file."""
    found = {}
    for line in lock.read_text().splitlines():
        if "==" in line and not line.startswith(("#", " ")):
            name, _, rest = line.partition("==")
            found[normalize(name)] = rest.split()[0]
    return found


def normalize(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _resolve(args: list[str]) -> list[dict[str, Any]]:
    """pip's resolution of ``args`` (no install): one report entry a distribution."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed",
             "--report", str(report), *args],
            check=True, cwd=ROOT,
        )  # fmt: skip
        return list(json.loads(report.read_text())["install"])


def _render(entries: list[dict[str, Any]], header: list[str]) -> str:
    lines = [f"# {line}" if line else "#" for line in header]
    for entry in sorted(entries, key=lambda e: normalize(e["metadata"]["name"])):
        name, version = normalize(entry["metadata"]["name"]), entry["metadata"]["version"]
        if name == PROJECT:
            continue
        hashes = entry["download_info"].get("archive_info", {}).get("hashes", {})
        if "sha256" not in hashes:
            raise RuntimeError(f"the index gave no sha256 for {name} {version}")
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{hashes['sha256']}")
    return "\n".join(lines) + "\n"


def kept(lock: Path, requirements: list[str],
         needs: dict[str, set[str]] | None = None) -> dict[str, str]:  # fmt: skip
    """What ``lock`` pins that ``requirements`` (as ``dev_requirements`` lists them) still
    allow: pins for ``lock --keep``, so that a changed requirement moves only what it must.
    ``needs`` (``dependencies`` of a resolution of the requirements as they are now): what a
    moved or new requirement needs, at any depth, moves with it (a raised boto3 needs its
    botocore, which no requirement names: kept, it would make the resolution impossible)."""
    from packaging.requirements import Requirement  # pytest's dependency: in dev.lock

    wanted: dict[str, list[Any]] = {}
    for text in requirements:
        requirement = Requirement(text.split("] ", 1)[1] if text.startswith("[") else text)
        wanted.setdefault(normalize(requirement.name), []).append(requirement.specifier)
    pinned = pins(lock)
    moved = {name for name, version in pinned.items()
             if not all(spec.contains(version, prereleases=True)
                        for spec in wanted.get(name, []))}  # fmt: skip
    moved |= set(wanted) - set(pinned) - {PROJECT}  # a new requirement (not the project's own)
    todo = list(moved)
    while needs is not None and todo:
        for name in needs.get(todo.pop(), set()) - moved:
            moved.add(name)
            todo.append(name)
    return {name: version for name, version in pinned.items() if name not in moved}


def dependencies(entries: list[dict[str, Any]]) -> dict[str, set[str]]:
    """``{name: the names it requires}`` of a pip report's entries (markers and extras aside:
    every name it may need)."""
    from packaging.requirements import Requirement

    return {normalize(e["metadata"]["name"]):
            {normalize(Requirement(r).name) for r in e["metadata"].get("requires_dist") or []}
            for e in entries}  # fmt: skip


def _constraints(path: Path, versions: dict[str, str]) -> list[str]:
    if not versions:
        return []
    path.write_text("".join(f"{name}=={version}\n" for name, version in versions.items()))
    return ["-c", str(path)]


def _resolve_keeping(args: list[str], lock: Path | None, requirements: list[str],
                     fixed: dict[str, str]) -> list[dict[str, Any]]:  # fmt: skip
    """pip's resolution of ``args`` with ``fixed`` pinned and, given a ``lock``, its pins kept
    where the requirements and what they need now allow (``kept``); without them when even
    those conflict (a kept pin that a moved distribution's new version excludes)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = _resolve([*_constraints(Path(tmp) / "fixed.txt", fixed), *args])
        if lock is None or not lock.is_file():
            return fresh
        versions = kept(lock, requirements, dependencies(fresh)) | fixed
        try:
            return _resolve([*_constraints(Path(tmp) / "kept.txt", versions), *args])
        except subprocess.CalledProcessError:
            print(f"{lock.name}: its pins conflict with the requirements; resolved afresh",
                  file=sys.stderr)  # fmt: skip
            return fresh


def write_runtime_lock(keep: bool = False) -> None:
    """``keep``: what the lock pins stays where pyproject.toml still allows it (``kept``)."""
    with tempfile.TemporaryDirectory() as target:
        entries = _resolve_keeping(["--target", target, *pip_platform_args(),
                                    *runtime_requirements()],
                                   RUNTIME_LOCK if keep else None, runtime_requirements(), {})
    RUNTIME_LOCK.parent.mkdir(exist_ok=True)
    RUNTIME_LOCK.write_text(_render(entries, [
        "The Lambda layer: [project].dependencies of pyproject.toml for the functions' runtime,",
        "CPython 3.13 on manylinux aarch64 (arm64). Installed with --require-hashes.",
        "Written by `python -m infra.bundling lock`: do not edit.",
        f"inputs: {runtime_inputs()}",
    ]))  # fmt: skip


def write_dev_lock(keep: bool = False) -> None:
    """The runtime lock's versions, and with ``keep`` the dev lock's where still allowed."""
    entries = _resolve_keeping([f".[{','.join(DEV_EXTRAS)}]"], DEV_LOCK if keep else None,
                               dev_requirements(), pins(RUNTIME_LOCK))  # fmt: skip
    DEV_LOCK.write_text(_render(entries, [
        f"Development: the project with its {' and '.join(DEV_EXTRAS)} extras, for "
        f"{dev_target()}",
        "(elsewhere: pip install -e '.[dev,cdk]', unlocked); the runtime distributions at the",
        "versions of runtime.lock. Written by `python -m infra.bundling lock`: do not edit.",
        f"inputs: {dev_inputs()}",
    ]))  # fmt: skip


def main(keep: bool = False) -> None:
    write_runtime_lock(keep)
    write_dev_lock(keep)
    for lock in (RUNTIME_LOCK, DEV_LOCK):
        print(f"{lock.relative_to(ROOT)}: {len(pins(lock))} distributions")
