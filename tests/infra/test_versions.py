"""The CDK's versions move together: aws-cdk-lib pinned with the CLI that reads its output."""

from __future__ import annotations

import json
import re
from importlib import metadata

import pytest

from infra import locks

pytestmark = pytest.mark.infra


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def _cdk_requirement(name: str) -> str:
    extra = locks.project()["optional-dependencies"]["cdk"]
    return next(r for r in extra if re.split(r"[<>=~ ]", r)[0] == name)


def test_the_cli_of_package_json_is_the_one_package_lock_json_installs():
    wanted = json.loads((locks.ROOT / "package.json").read_text())["dependencies"]["aws-cdk"]
    lock = json.loads((locks.ROOT / "package-lock.json").read_text())
    assert re.fullmatch(r"\d+\.\d+\.\d+", wanted), "the CLI is pinned exactly"
    assert lock["packages"][""]["dependencies"]["aws-cdk"] == wanted
    assert lock["packages"]["node_modules/aws-cdk"]["version"] == wanted


def test_aws_cdk_lib_is_pinned_exactly_and_locked_at_that_version():
    spec = _cdk_requirement("aws-cdk-lib")
    assert spec.startswith("aws-cdk-lib=="), spec
    assert locks.pins(locks.DEV_LOCK)["aws-cdk-lib"] == spec.removeprefix("aws-cdk-lib==")


def test_the_pinned_cli_reads_the_cloud_assembly_of_the_pinned_library():
    """A library newer than the CLI writes a cloud assembly the CLI refuses to deploy."""
    pytest.importorskip("aws_cdk", reason="the cdk extra is not installed")
    from aws_cdk import cloud_assembly_schema

    assert metadata.version("aws-cdk-lib") == _cdk_requirement("aws-cdk-lib").split("==")[1]
    cli = json.loads((locks.ROOT / "package.json").read_text())["dependencies"]["aws-cdk"]
    assert _version(cli) >= _version(cloud_assembly_schema.Manifest.cli_version())


def test_cdk_nag_stays_within_one_major_version():
    spec = _cdk_requirement("cdk-nag")
    low = re.search(r">=(\d+)", spec)
    high = re.search(r"<(\d+)(?!\.)", spec)
    assert low and high and int(high.group(1)) == int(low.group(1)) + 1, spec
    major = int(locks.pins(locks.DEV_LOCK)["cdk-nag"].split(".")[0])
    assert major == int(low.group(1))
