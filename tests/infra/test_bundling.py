"""Lambda assets carry the runtime dependencies and the function's code, nothing of the CDK."""

from __future__ import annotations

import pytest

from infra import bundling

pytestmark = pytest.mark.infra


def test_dependencies_layer_is_built_for_arm64_and_carries_no_build_or_test_tools(synth):
    layer = bundling.dependencies_layer()
    site = layer.path / "python"
    names = {p.name for p in site.iterdir()}
    assert {"aws_lambda_powertools", "pynamodb", "twilio", "wrapt"} <= names
    assert not names & {"aws_cdk", "constructs", "jsii", "cdk_nag", "moto", "pytest", "cfnlint"}
    native = list((site / "wrapt").glob("*.so")) + list((site / "charset_normalizer").glob("*.so"))
    assert native and all("aarch64" in so.name and "cpython-313" in so.name for so in native)


def test_function_code_is_vdq_plus_its_own_handler_directory(synth):
    code = bundling.function_code("webhook")
    top = {p.name for p in code.path.iterdir()}
    assert top == {"vdq", "functions"}
    # and the bytecode of functions/__init__.py (see the bytecode tests below)
    assert {p.name for p in (code.path / "functions").iterdir()} == {
        "__init__.py",
        "__pycache__",
        "webhook",
    }


def test_a_repeated_build_reuses_the_cached_bundle(synth):
    first = bundling.function_code("send")
    marker = first.path / ".probe"
    marker.write_text("cached")
    try:
        again = bundling.function_code("send")
        assert again.path == first.path and (again.path / ".probe").exists()
    finally:
        marker.unlink()


def test_bundling_refuses_a_bundle_that_would_carry_the_cdk(tmp_path):
    (tmp_path / "aws_cdk").mkdir()
    with pytest.raises(bundling.BundlingError, match="aws_cdk"):
        bundling._refuse_forbidden("probe", tmp_path)


def _pyc_flags(pyc) -> int:
    """The flags word of a .pyc header (PEP 552): 1 = hash-based, source never checked."""
    return int.from_bytes(pyc.read_bytes()[4:8], "little")


def _module_without_bytecode(root):
    for source in root.rglob("*.py"):
        pyc = source.parent / "__pycache__" / f"{source.stem}.{bundling.CACHE_TAG}.pyc"
        if not pyc.is_file():
            return source
    return None


def test_function_code_ships_unchecked_hash_bytecode_of_the_runtimes_python(synth):
    code = bundling.function_code("send")
    assert bundling.CACHE_TAG == "cpython-313"
    assert _module_without_bytecode(code.path) is None
    pycs = list(code.path.rglob("*.pyc"))
    assert pycs and all(p.name.endswith(".cpython-313.pyc") for p in pycs)
    assert {_pyc_flags(p) for p in pycs} == {1}  # unchecked-hash: no stat, no source hashing


def test_dependencies_layer_ships_bytecode_of_the_runtimes_python(synth):
    site = bundling.dependencies_layer().path / "python"
    for package in ("boto3", "botocore", "aws_lambda_powertools", "pynamodb", "twilio"):
        assert _module_without_bytecode(site / package) is None, package
    init = site / "botocore" / "__pycache__" / "__init__.cpython-313.pyc"
    assert _pyc_flags(init) == 1
    assert not [p for p in site.rglob("*.pyc") if ".cpython-313." not in p.name]


def test_without_the_runtimes_python_the_build_stops_and_says_how_to_go_on(monkeypatch):
    monkeypatch.setattr(bundling, "_candidates", lambda: [])
    monkeypatch.delenv(bundling.BYTECODE_SWITCH, raising=False)
    with pytest.raises(bundling.BundlingError, match=r"python3\.13.*VDQ_BUNDLE_BYTECODE=off"):
        bundling.runtime_python()


def test_building_without_bytecode_is_explicit_and_gets_its_own_cache_entry(monkeypatch,
                                                                            tmp_path):  # fmt: skip
    (tmp_path / "m.py").write_text("x = 1\n")
    with_bytecode = bundling._bytecode_tag()
    monkeypatch.setenv(bundling.BYTECODE_SWITCH, "off")
    monkeypatch.setattr(bundling, "_candidates", lambda: [])  # never asked for
    bundling.compile_bytecode(tmp_path)
    assert not list(tmp_path.rglob("*.pyc"))
    assert bundling._bytecode_tag() != with_bytecode


def test_the_deploy_page_gives_each_bundles_size():
    """docs/deploying/details.md tells the deployer what `make synth` prints of each bundle:
    the layer's size and a function's code asset's, bytecode included, within 15%."""
    import re
    from pathlib import Path

    from infra.config import FUNCTIONS

    page = (Path(__file__).resolve().parents[2] / "docs/deploying/details.md").read_text()
    stated = {row: float(size) for row, size in re.findall(
        r"^\| (the dependencies layer|one code asset per function) \|.*about ([\d.]+) MB",
        page, re.M)}  # fmt: skip
    built = {
        "the dependencies layer": bundling.dependencies_layer().size_bytes / 1e6,
        "one code asset per function":
            max(bundling.function_code(name).size_bytes for name in FUNCTIONS) / 1e6,
    }
    assert stated.keys() == built.keys(), stated
    for row, size in built.items():
        assert abs(stated[row] - size) <= 0.15 * size, f"{row}: about {stated[row]} MB, {size:.1f}"
