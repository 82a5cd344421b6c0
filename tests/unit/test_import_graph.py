"""The package's layers, and its modules import one another without circles.

Layers, lowest first; a package may import its own modules and those of lower layers, never a
higher layer's, and the packages of one layer do not import one another (the edges excepted):

    core                      settings, errors, ids, clock, observability, resources, text
    store | providers | api   DynamoDB and S3 | SES and Twilio | the REST edge's parsing
    workflow                  the table, transitions and their side effects
    results                   provider events, suppression, unsubscribe
    intake                    request bodies, quotas, enqueue
    dispatch                  claim, pacing, provider calls
    schedules                 sweeps, retention's archive
    operations                what operators do through the REST API
    edges                     runtime (the composition root), python_api, openapi, console,
                              local, cli, and ``vdq`` itself

A stage (workflow up to operations) imports only the public modules of a lower stage: those its
``__init__`` lists in ``__all__``. Every import counts, the ones deferred into a function too: a
deferred import is how a circle hides. An import under ``if TYPE_CHECKING:`` names a type for
the checker and loads nothing: that is how the runtime, built at the edge, is passed down.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "shared"

LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(layer) for layer in (
    {"core"},
    {"store", "providers", "api"},
    {"workflow"},
    {"results"},
    {"intake"},
    {"dispatch"},
    {"schedules"},
    {"operations"},
    {"runtime", "python_api", "openapi", "console", "local", "cli", "vdq"},
))  # fmt: skip
EDGES = LAYERS[-1]
STAGES = ("workflow", "results", "intake", "dispatch", "schedules", "operations")


def _modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name | ast.Attribute) and (
            ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        ):
            inside.update(id(child) for statement in node.body for child in ast.walk(statement))
    return inside


def _imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its file (a deferred import
    too), but for the names it imports only for the type checker."""
    names: set[str] = set()
    tree = ast.parse(path.read_text())
    types_only = _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in types_only:
            continue
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            base = node.module or ""
            if node.level:
                package = module.split(".")[: None if path.name == "__init__.py" else -1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            for alias in node.names:  # a module of the package, else a name of ``base``
                full = f"{base}.{alias.name}"
                names.add(full if full in modules else base)
    found = set()
    for name in names:
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in modules and name != module and name.startswith("vdq"):
            found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def _part(module: str) -> str:
    """The package (or top-level module) of vdq a module belongs to; ``vdq`` for vdq itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _layer(part: str) -> int:
    for level, layer in enumerate(LAYERS):
        if part in layer:
            return level
    raise AssertionError(f"vdq.{part} is in no layer: add it to LAYERS (and this docstring)")


def _public(stage: str) -> set[str]:
    return {f"vdq.{stage}.{name}" for name in importlib.import_module(f"vdq.{stage}").__all__}


def _violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, imported in sorted(graph.items()):
        mine = _part(module)
        for other in sorted(imported):
            theirs = _part(other)
            if theirs == mine:
                continue
            if _layer(theirs) > _layer(mine):
                found.append(f"{module} imports {other}: a higher layer")
            elif _layer(theirs) == _layer(mine) and mine not in EDGES:
                found.append(f"{module} imports {other}: a package of its own layer")
            elif mine in STAGES and theirs in STAGES and other not in _public(theirs):
                found.append(f"{module} imports {other}: not in vdq.{theirs}.__all__")
    return found


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_module_of_the_package_is_in_an_import_circle():
    graph = _graph()
    assert graph["vdq.dispatch.send"] and graph["vdq.store"]  # the graph is read at all
    assert _circles(graph) == []


def test_no_layer_imports_a_higher_one_or_another_stages_internals():
    assert _violations(_graph()) == []


def test_every_stage_names_its_public_modules_and_each_exists():
    modules = _modules()
    for stage in STAGES:
        public = _public(stage)
        assert public, f"vdq.{stage}.__all__ is empty"
        assert public <= set(modules), sorted(public - set(modules))


def test_the_package_has_few_top_level_modules():
    top = [p for p in (ROOT / "vdq").glob("*.py") if p.name != "__init__.py"]
    assert len(top) <= 12, sorted(p.name for p in top)
    assert not {p.parent.name for p in (ROOT / "vdq").glob("*/*.py")} - {
        "core", "store", "providers", "workflow", "results", "intake", "dispatch", "schedules",
        "operations", "cli", "console", "local",
    }  # a new package joins LAYERS first


# The repository's other packages: each imports its own modules without circles too.
OTHER_PACKAGES = ("bench", "infra", "functions", "tests", "docsite")


def _repository_graph() -> dict[str, set[str]]:
    modules: dict[str, Path] = {}
    for top in OTHER_PACKAGES:
        for path in (REPO / top).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    imported.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        found = set()
        for other in imported:
            while other not in modules and "." in other:
                other = other.rsplit(".", 1)[0]
            if other in modules and other != name:
                found.add(other)
        graph[name] = found
    return graph


def test_the_repositorys_other_packages_import_without_circles():
    graph = _repository_graph()
    assert graph["bench.figures"] and graph["infra.stack"]  # the graph is read at all
    assert _circles(graph) == []


@pytest.mark.parametrize(("graph", "expected"), [
    ({"vdq.workflow.x": {"vdq.dispatch.y"}, "vdq.dispatch.y": set()},
     ["vdq.workflow.x imports vdq.dispatch.y: a higher layer"]),
    ({"vdq.store.x": {"vdq.providers.y"}, "vdq.providers.y": set()},
     ["vdq.store.x imports vdq.providers.y: a package of its own layer"]),
    ({"vdq.dispatch.x": {"vdq.results.events"}, "vdq.results.events": set()},
     ["vdq.dispatch.x imports vdq.results.events: not in vdq.results.__all__"]),
    ({"vdq.cli.x": {"vdq.local.y", "vdq.results.events"}}, []),
])  # fmt: skip
def test_the_layer_check_finds_each_kind_of_violation(graph, expected):
    assert _violations(graph) == expected


def test_the_check_finds_a_circle_through_a_deferred_import():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_an_import_for_the_type_checker_only_is_no_edge(tmp_path):
    (tmp_path / "vdq").mkdir()
    (tmp_path / "vdq" / "low.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from vdq.high import Thing\n"
        "def f():\n    from vdq.other import x\n"
    )
    modules = {"vdq.low": tmp_path / "vdq" / "low.py", "vdq.high": tmp_path, "vdq.other": tmp_path}
    assert _imported("vdq.low", modules["vdq.low"], modules) == {"vdq.other"}
