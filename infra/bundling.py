"""Lambda assets built on this machine, without Docker, for arm64 and the functions' Python.

Two kinds of asset:
- one dependencies layer: the runtime dependencies of pyproject.toml (never the dev or cdk
  extras), installed from a local wheelhouse of aarch64 manylinux wheels with ``--no-index``,
  so synth works offline once ``make venv`` has filled the wheelhouse;
- one code asset per function: ``vdq/`` plus ``functions/<name>/``, nothing else.

Each asset is cached under ``build/lambda/`` by a hash of its inputs, so a repeated synth only
copies nothing and hashes a few files. ``python -m infra.bundling download`` fills the wheelhouse.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELHOUSE = ROOT / ".venv" / "wheelhouse"
BUILD = ROOT / "build" / "lambda"
PYTHON_VERSION = "3.13"  # must match the functions' runtime (infra/functions.py)
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")  # Amazon Linux 2023, arm64
# Distributions that must never reach a bundle: the CDK, its runtime and the test tools.
FORBIDDEN = ("aws_cdk", "constructs", "jsii", "cdk_nag", "cfnlint", "moto", "pytest", "hypothesis")


class BundlingError(RuntimeError):
    pass


@dataclass(frozen=True)
class Bundle:
    name: str
    path: Path
    digest: str

    @property
    def size_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())


def runtime_requirements() -> list[str]:
    """The ``[project].dependencies`` of pyproject.toml: what a Lambda bundle carries."""
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


def _pip_platform_args() -> list[str]:
    args = []
    for platform in PLATFORMS:
        args += ["--platform", platform]
    return [
        *args,
        "--python-version",
        PYTHON_VERSION,
        "--implementation",
        "cp",
        "--only-binary=:all:",
    ]


def download_wheelhouse(dest: Path = WHEELHOUSE) -> None:
    """Fetch the aarch64 wheels of the runtime dependencies (the one step that needs a network)."""
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--dest",
            str(dest),
            *_pip_platform_args(),
            *runtime_requirements(),
        ],
        check=True,
    )


def _digest(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()[:16]


def _source_files(*dirs: Path) -> list[Path]:
    """Every file of the package (code and data such as openapi.json), no bytecode."""
    files: list[Path] = []
    for d in dirs:
        files += [
            p for p in d.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        ]  # fmt: skip
    return sorted(files)


def _cached(name: str, digest: str, build: Callable[[Path], None]) -> Bundle:
    target = BUILD / f"{name}-{digest}"
    if not target.is_dir():
        work = BUILD / f".{name}-{digest}.{os.getpid()}.tmp"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        build(work)
        _refuse_forbidden(name, work)
        try:
            work.rename(target)
        except OSError:  # a concurrent synth built the same inputs first
            shutil.rmtree(work, ignore_errors=True)
        for stale in BUILD.glob(f"{name}-*"):
            if stale != target:
                shutil.rmtree(stale, ignore_errors=True)
    bundle = Bundle(name, target, digest)
    print(
        f"vdq bundle {name:<12} {bundle.size_bytes / 1e6:6.1f} MB  {target.relative_to(ROOT)}",
        file=sys.stderr,
    )
    return bundle


def _refuse_forbidden(name: str, directory: Path) -> None:
    for entry in directory.rglob("*"):
        if entry.is_dir() and entry.name in FORBIDDEN:
            raise BundlingError(f"bundle {name} would carry {entry.name}: {entry}")


def dependencies_layer() -> Bundle:
    """The runtime dependencies for arm64 Python 3.13, laid out as a layer (``python/``)."""
    requirements = runtime_requirements()
    wheels = sorted(WHEELHOUSE.glob("*.whl")) if WHEELHOUSE.is_dir() else []
    if not wheels:
        raise BundlingError(
            f"no wheelhouse at {WHEELHOUSE}: run `make venv` once with a network connection"
        )
    digest = _digest(
        [
            PYTHON_VERSION.encode(),
            *(r.encode() for r in requirements),
            *(w.name.encode() for w in wheels),
        ]
    )

    def build(work: Path) -> None:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-index",
                "--no-compile",
                "--find-links",
                str(WHEELHOUSE),
                "--target",
                str(work / "python"),
                *_pip_platform_args(),
                *requirements,
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise BundlingError(
                "installing the runtime dependencies from the wheelhouse failed (run `make venv` "
                f"to refresh it):\n{result.stderr}"
            )
        for cache in (work / "python").rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)

    return _cached("deps", digest, build)


def function_code(name: str) -> Bundle:
    """``vdq/`` and ``functions/<name>/``: the code asset of one function."""
    shared = ROOT / "shared" / "vdq"
    handler_dir = ROOT / "functions" / name
    if not handler_dir.is_dir():
        raise BundlingError(f"no function directory {handler_dir}")
    files = [ROOT / "functions" / "__init__.py", *_source_files(shared, handler_dir)]
    digest = _digest(
        [p for f in files for p in (str(f.relative_to(ROOT)).encode(), f.read_bytes())]
    )

    def build(work: Path) -> None:
        for f in files:
            relative = f.relative_to(ROOT)
            if relative.parts[0] == "shared":
                relative = relative.relative_to("shared")
            (work / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, work / relative)

    return _cached(name, digest, build)


if __name__ == "__main__":
    if sys.argv[1:] == ["download"]:
        download_wheelhouse()
        print(f"wheelhouse ready: {WHEELHOUSE}")
    else:
        sys.exit("usage: python -m infra.bundling download")
