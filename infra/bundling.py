"""Lambda assets built on this machine, without Docker, for arm64 and the functions' Python.

Two kinds of asset:
- one dependencies layer: the runtime dependencies of pyproject.toml (never an extra), as
  pinned with their hashes by ``requirements/runtime.lock`` (infra.locks), installed with
  ``--require-hashes --no-index`` from a local wheelhouse of aarch64 manylinux wheels, so synth
  works offline once ``make venv`` has filled the wheelhouse;
- one code asset per function: ``vdq/`` without its tooling (``TOOLING``: the local stack, the
  CLI, the OpenAPI generator and its inputs, none of which a handler imports) plus
  ``functions/<name>/``, nothing else.

Each asset is cached under ``build/lambda/`` by a hash of its inputs, so a repeated synth only
copies nothing and hashes a few files. ``python -m infra.bundling download`` fills the wheelhouse
from the lock; ``python -m infra.bundling lock`` resolves both lock files again (infra.locks).

Both kinds carry bytecode: ``/var/task`` and ``/opt`` are read-only, so a module without a
``.pyc`` is compiled from source on every cold start (boto3 alone several times slower). The
``.pyc`` files are compiled by the runtime's own Python minor (``python3.13``, found on PATH, in
pyenv, or named by ``VDQ_BUNDLE_PYTHON``) in unchecked-hash mode: Lambda's Python loads them
without looking at the sources' times (which an asset does not keep) or hashing the sources.
Without that interpreter the build stops and says so; ``VDQ_BUNDLE_BYTECODE=off`` builds without
bytecode instead, explicitly (slower cold starts; the build prints it).
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infra import locks

ROOT = Path(__file__).resolve().parent.parent
WHEELHOUSE = ROOT / ".venv" / "wheelhouse"
BUILD = ROOT / "build" / "lambda"
PYTHON_VERSION = locks.PYTHON_VERSION  # must match the functions' runtime (infra/functions.py)
# Distributions that must never reach a bundle: the CDK, its runtime and the test tools.
FORBIDDEN = ("aws_cdk", "constructs", "jsii", "cdk_nag", "cfnlint", "moto", "pytest", "hypothesis")
# Parts of vdq (paths under shared/vdq) that only tooling runs, never a handler: the local stack
# (moto, PyJWT: the local extra), the CLI, and the OpenAPI generator with its inputs (pydantic,
# build time; the operator serves the committed openapi.json). tests/infra/test_bundling.py
# checks that the handlers' imports reach none of them.
TOOLING = (
    "local",
    "cli",
    "openapi.py",
    "operations/bodies.py",
    "operations/docs.py",
    "operations/error_docs.py",
    "operations/examples.py",
    "operations/schemas.py",
    "operations/schemas_counts.py",
    "operations/schemas_suppressions.py",
    "operations/smsbody.py",
)


CACHE_TAG = "cpython-" + PYTHON_VERSION.replace(".", "")  # the runtime's .pyc names
BYTECODE_SWITCH = "VDQ_BUNDLE_BYTECODE"  # "off": build without bytecode, explicitly
PYTHON_SWITCH = "VDQ_BUNDLE_PYTHON"  # the runtime's Python, when not on PATH or in pyenv


class BundlingError(RuntimeError):
    pass


def bytecode_enabled() -> bool:
    return os.environ.get(BYTECODE_SWITCH, "on").strip().lower() not in ("off", "0", "false", "no")


def _candidates() -> list[str]:
    name = f"python{PYTHON_VERSION}"
    found = [os.environ[PYTHON_SWITCH]] if os.environ.get(PYTHON_SWITCH) else []
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK):
            found.append(path)
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found += sorted(glob.glob(os.path.join(pyenv, "versions", f"{PYTHON_VERSION}*", "bin", name)),
                    reverse=True)  # fmt: skip
    return found


def runtime_python() -> str:
    """An interpreter of the runtime's Python minor (its .pyc are the ones Lambda loads)."""
    probe = "import sys; print(sys.implementation.cache_tag)"
    for candidate in _candidates():
        try:
            out = subprocess.run([candidate, "-c", probe], capture_output=True, text=True,
                                 timeout=30, check=False)  # fmt: skip
        except OSError:
            continue
        if out.returncode == 0 and out.stdout.strip() == CACHE_TAG:
            return candidate
    raise BundlingError(
        f"no python{PYTHON_VERSION} to compile the Lambda bytecode with (looked on PATH, in "
        f"pyenv and at ${PYTHON_SWITCH}): install it (e.g. `pyenv install {PYTHON_VERSION}`), "
        f"name it with {PYTHON_SWITCH}=/path/to/python{PYTHON_VERSION}, or build without "
        f"bytecode with {BYTECODE_SWITCH}=off (every cold start then compiles every module)"
    )


def _bytecode_tag() -> bytes:
    """What the bytecode of a bundle depends on (part of its digest)."""
    return f"bytecode:{CACHE_TAG}:unchecked-hash".encode() if bytecode_enabled() else b"source"


def compile_bytecode(directory: Path) -> None:
    """``.pyc`` of every module under ``directory``, by the runtime's Python, unchecked-hash."""
    if not bytecode_enabled():
        print(f"vdq bundle: {BYTECODE_SWITCH}=off, {directory.name} ships without bytecode",
              file=sys.stderr)  # fmt: skip
        return
    python = runtime_python()
    result = subprocess.run(
        [python, "-m", "compileall", "-q", "-q", "--invalidation-mode", "unchecked-hash",
         str(directory)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise BundlingError(f"compiling {directory} with {python} failed:\n"
                            f"{result.stdout}{result.stderr}")  # fmt: skip


@dataclass(frozen=True)
class Bundle:
    name: str
    path: Path
    digest: str

    @property
    def size_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())


def download_wheelhouse(dest: Path = WHEELHOUSE) -> None:
    """Fetch the locked aarch64 wheels of the layer (the one step that needs a network)."""
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--dest", str(dest), "--no-deps",
         "--require-hashes", "-r", str(locks.RUNTIME_LOCK), *locks.pip_platform_args()],
        check=True,
    )  # fmt: skip


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
    """The locked runtime dependencies for arm64 Python 3.13, laid out as a layer (``python/``)."""
    if not locks.RUNTIME_LOCK.is_file():
        raise BundlingError(f"no {locks.RUNTIME_LOCK}: run `python -m infra.bundling lock`")
    if not (WHEELHOUSE.is_dir() and any(WHEELHOUSE.glob("*.whl"))):
        raise BundlingError(
            f"no wheelhouse at {WHEELHOUSE}: run `make venv` once with a network connection"
        )
    lock = locks.RUNTIME_LOCK.read_bytes()
    digest = _digest([PYTHON_VERSION.encode(), _bytecode_tag(), lock])

    def build(work: Path) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-compile",
             "--no-deps", "--require-hashes", "--find-links", str(WHEELHOUSE),
             "--target", str(work / "python"), *locks.pip_platform_args(),
             "-r", str(locks.RUNTIME_LOCK)],
            capture_output=True, text=True,
        )  # fmt: skip
        if result.returncode != 0:
            raise BundlingError(
                "installing the locked runtime dependencies from the wheelhouse failed (run "
                f"`make venv` to refresh it):\n{result.stderr}"
            )
        # pip ran without compiling (its Python is not the runtime's): compile for 3.13 now.
        for cache in (work / "python").rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)
        compile_bytecode(work / "python")

    return _cached("deps", digest, build)


def is_tooling(relative: Path) -> bool:
    """A path under shared/vdq that only tooling needs (``TOOLING``), never a handler."""
    text = relative.as_posix()
    return any(text == t or text.startswith(t + "/") for t in TOOLING)


def function_code(name: str) -> Bundle:
    """``vdq/`` without its tooling, and ``functions/<name>/``: the code asset of one function."""
    shared = ROOT / "shared" / "vdq"
    handler_dir = ROOT / "functions" / name
    if not handler_dir.is_dir():
        raise BundlingError(f"no function directory {handler_dir}")
    runtime = [f for f in _source_files(shared) if not is_tooling(f.relative_to(shared))]
    files = [ROOT / "functions" / "__init__.py", *runtime, *_source_files(handler_dir)]
    digest = _digest(
        [_bytecode_tag()]
        + [p for f in files for p in (str(f.relative_to(ROOT)).encode(), f.read_bytes())]
    )

    def build(work: Path) -> None:
        for f in files:
            relative = f.relative_to(ROOT)
            if relative.parts[0] == "shared":
                relative = relative.relative_to("shared")
            (work / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, work / relative)
        compile_bytecode(work)

    return _cached(name, digest, build)


if __name__ == "__main__":
    if sys.argv[1:] == ["download"]:
        download_wheelhouse()
        print(f"wheelhouse ready: {WHEELHOUSE}")
    elif sys.argv[1:] in (["lock"], ["lock", "--keep"]):
        locks.main(keep=sys.argv[2:] == ["--keep"])
    else:
        sys.exit("usage: python -m infra.bundling download|lock [--keep]")
