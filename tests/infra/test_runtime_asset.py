"""What a function's code asset holds: the runtime part of vdq and its handler, no tooling.

Each asset is built as a deploy builds it (infra.bundling, no synth). Three checks:
- its files: the runtime modules and openapi.json are there; the local stack, the CLI and the
  OpenAPI generator with its inputs (infra.bundling.TOOLING) are not;
- its imports, read from the source (every ``import``, at any depth, so also the imports a
  route makes on first use): each ``vdq`` module a handler reaches is in the asset;
- its loading: a fresh interpreter whose path is the asset and the development
  environment's site-packages, with every top-level module refused except the standard
  library and what the dependencies layer holds, imports every handler and every module of the
  asset, and moto, PyJWT, pydantic and aiohttp are refused even where the layer holds them.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from infra import bundling

pytestmark = pytest.mark.infra

FUNCTIONS = sorted(p.parent.name for p in (bundling.ROOT / "functions").glob("*/handler.py"))
# Never loaded by a function: the local extra (moto with werkzeug and flask, PyJWT), the
# OpenAPI generator's pydantic, twilio's async client (aiohttp, a hard dependency of twilio).
REFUSED = ("moto", "jwt", "werkzeug", "flask", "pydantic", "pydantic_core", "aiohttp")


def _module_name(asset: Path, path: Path) -> str:
    parts = path.relative_to(asset).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(asset: Path, path: Path, names: bool = True) -> set[str]:
    """Absolute names of every module ``path`` imports, at any depth, relative ones resolved
    (``names``: with ``pkg.name`` for each ``from pkg import name``, which may be a module)."""
    name = _module_name(asset, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            found.add(base)
            if names:
                found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _source(asset: Path, module: str) -> Path | None:
    base = asset.joinpath(*module.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _reached(asset: Path, handler: Path) -> tuple[set[str], set[str]]:
    """(vdq modules reached from the handler that the asset has, those it lacks)."""
    seen: set[str] = set()
    missing: set[str] = set()
    todo = [handler]
    while todo:
        path = todo.pop()
        for module in _imports(asset, path):
            if module.split(".")[0] != "vdq" or module in seen:
                continue
            source = _source(asset, module)
            if source is None:
                # ``from vdq.x import name`` also lists ``vdq.x.name``: a name, not a module,
                # unless the repository has such a module.
                if _source(bundling.ROOT / "shared", module) is not None:
                    missing.add(module)
                continue
            seen.add(module)
            todo.append(source)
    return seen, missing


@pytest.fixture(scope="module")
def assets() -> dict[str, Path]:
    return {name: bundling.function_code(name).path for name in FUNCTIONS}


def test_every_function_has_an_asset_to_check():
    assert FUNCTIONS == ["enqueue", "operator", "schedule", "send", "webhook"]


def test_the_asset_holds_the_runtime_and_leaves_out_the_local_stack_cli_and_generator(assets):
    for name, asset in assets.items():
        vdq = asset / "vdq"
        for runtime in ("runtime.py", "dispatch/send.py", "store/items.py", "operations/spec.py",
                        "providers/twilio.py", "openapi.json"):  # fmt: skip
            assert (vdq / runtime).is_file(), (name, runtime)
        for tooling in ("local", "cli", "openapi.py", "operations/docs.py",
                        "operations/examples.py", "operations/schemas.py",
                        "operations/schemas_counts.py",
                        "operations/schemas_suppressions.py"):  # fmt: skip
            assert not (vdq / tooling).exists(), (name, tooling)
        assert {p.name for p in (asset / "functions").iterdir()} == {
            "__init__.py", "__pycache__", name}  # fmt: skip


def test_tooling_names_only_paths_that_exist_in_the_package():
    shared = bundling.ROOT / "shared" / "vdq"
    assert all((shared / t).exists() for t in bundling.TOOLING), bundling.TOOLING


def test_every_vdq_module_a_handler_reaches_is_in_its_asset(assets):
    reached = {}
    for name, asset in assets.items():
        reached[name], missing = _reached(asset, asset / "functions" / name / "handler.py")
        assert not missing, (name, sorted(missing))
        assert {"vdq.runtime", "vdq.core.observability"} <= reached[name], name
    assert "vdq.operations.actions" in reached["operator"]  # imported by its route, first use


def test_the_import_walk_reports_a_tooling_module_a_handler_reaches(tmp_path):
    """The walk above can fail: a handler importing the local stack is reported."""
    (tmp_path / "vdq").mkdir()
    (tmp_path / "vdq" / "__init__.py").write_text("")
    handler = tmp_path / "functions" / "probe" / "handler.py"
    handler.parent.mkdir(parents=True)
    handler.write_text("def handler(e, c):\n    from vdq.local import stack\n")
    _, missing = _reached(tmp_path, handler)
    assert missing == {"vdq.local", "vdq.local.stack"}


_LOADER = """
import importlib, json, sys
allowed, refused, modules = json.loads(sys.argv[1])
allowed = set(allowed) | set(sys.stdlib_module_names)

class Refuse:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in refused or top not in allowed:
            raise ModuleNotFoundError(f"not in the Lambda runtime: {name}", name=name)
        return None

sys.meta_path.insert(0, Refuse())
sys.path[:0] = [sys.argv[2]]
sys.path += sys.argv[3:]
failed = {}
for module in modules:
    try:
        importlib.import_module(module)
    except Exception as exc:
        failed[module] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"failed": failed, "loaded": sorted(sys.modules)}))
"""


def _load(asset: Path, allowed: set[str], modules: list[str]) -> dict:
    paths = sysconfig.get_paths()
    site = list(dict.fromkeys([paths["purelib"], paths["platlib"]]))
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", _LOADER,
         json.dumps([sorted(allowed), list(REFUSED), modules]), str(asset), *site],
        capture_output=True, text=True, timeout=300, cwd=asset,
        env={"AWS_DEFAULT_REGION": "eu-west-1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.splitlines()[-1]))


def _layer_modules() -> set[str]:
    site = bundling.dependencies_layer().path / "python"
    names = set()
    for entry in site.iterdir():
        if entry.name.endswith((".dist-info", ".data")) or entry.name in ("bin", "__pycache__"):
            continue
        names.add(entry.name.split(".")[0])
    return names


def test_the_layer_holds_the_runtime_distributions_and_none_of_the_tooling():
    names = _layer_modules()
    assert {"boto3", "botocore", "aws_lambda_powertools", "aws_xray_sdk", "pynamodb", "twilio",
            "requests"} <= names  # fmt: skip
    assert not names & {"pydantic", "pydantic_core", "moto", "werkzeug", "flask", "pytest"}


def test_every_handler_and_asset_module_loads_with_the_layer_only(assets):
    allowed = _layer_modules() | {"vdq", "functions"}
    for name, asset in assets.items():
        modules = [_module_name(asset, p) for p in sorted(asset.rglob("*.py"))
                   if p.parts[len(asset.parts)] == "vdq"]  # fmt: skip
        # and the distributions' modules the asset imports on first use, inside functions
        third_party = sorted({m for p in asset.rglob("*.py") for m in _imports(asset, p, False)
                              if m.split(".")[0] not in {"vdq", "functions"}
                              and m.split(".")[0] not in sys.stdlib_module_names})  # fmt: skip
        result = _load(asset, allowed, [f"functions.{name}.handler", *modules, *third_party])
        assert result["failed"] == {}, name
        loaded = {m.partition(".")[0] for m in result["loaded"]}
        assert not loaded & set(REFUSED), name
        assert f"functions.{name}.handler" in result["loaded"]


def test_the_loader_refuses_moto_and_jwt(assets):
    """The loading check can fail: a module that needs the local extra does not load."""
    result = _load(assets["send"], _layer_modules() | {"vdq"}, ["jwt", "moto", "vdq.runtime"])
    assert set(result["failed"]) == {"jwt", "moto"}
