"""Lambda assets carry the runtime dependencies and the function's code, nothing of the CDK."""

from __future__ import annotations

import pytest

from infra import bundling

pytestmark = pytest.mark.infra


def test_dependencies_layer_is_built_for_arm64_and_carries_no_build_or_test_tools(synth):
    layer = bundling.dependencies_layer()
    site = layer.path / "python"
    names = {p.name for p in site.iterdir()}
    assert {"aws_lambda_powertools", "pynamodb", "twilio", "pydantic_core"} <= names
    assert not names & {"aws_cdk", "constructs", "jsii", "cdk_nag", "moto", "pytest", "cfnlint"}
    native = list((site / "pydantic_core").glob("*.so"))
    assert native and all("aarch64" in so.name and "cpython-313" in so.name for so in native)


def test_function_code_is_vdq_plus_its_own_handler_directory(synth):
    code = bundling.function_code("webhook")
    top = {p.name for p in code.path.iterdir()}
    assert top == {"vdq", "functions"}
    assert {p.name for p in (code.path / "functions").iterdir()} == {"__init__.py", "webhook"}


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
