"""Synthesize the CDK app once per test session (seconds and ~1 GB): every infra test reads it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a deployer must choose, as the tests choose it: the domain the suite sends email from.
# The stack's own client with the smoke test's operator scopes, which no producer's client gets.
TEST_CONTEXT = {"vdq:sesIdentities": ["example.com"], "vdq:producerClients": ["shop-orders"],
                "vdq:machineScopes": ["vdq-senders", "vdq-operators"]}


@dataclass
class Synth:
    app: Any
    stack: Any
    template: Any  # aws_cdk.assertions.Template
    template_json: dict
    template_path: Path

    def resources(self, kind: str) -> dict[str, dict]:
        return {k: v for k, v in self.template_json["Resources"].items() if v["Type"] == kind}

    def logical_id(self, construct: Any) -> str:
        from infra.nag import logical_id

        return logical_id(construct)

    def role_statements(self, function: Any) -> list[dict]:
        """Every statement of the inline policies attached to a function's role."""
        role_id = self.logical_id(function.role)
        statements = []
        for policy in self.resources("AWS::IAM::Policy").values():
            if {"Ref": role_id} in policy["Properties"]["Roles"]:
                statements += policy["Properties"]["PolicyDocument"]["Statement"]
        return statements

    def role_actions(self, function: Any) -> set[str]:
        actions: set[str] = set()
        for statement in self.role_statements(function):
            found = statement["Action"]
            actions.update([found] if isinstance(found, str) else found)
        return actions


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    pytest.importorskip("aws_cdk", reason="the cdk extra is not installed")
    import aws_cdk as cdk
    from aws_cdk.assertions import Template
    from infra.app import build

    context = {**json.loads((ROOT / "cdk.json").read_text())["context"], **TEST_CONTEXT}
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = cdk.App(outdir=str(outdir), context=context)
    stack = build(app)
    assembly = app.synth()  # the AwsSolutions checks run here: a finding fails the session
    artifact = assembly.get_stack_by_name(stack.stack_name)
    template_json = artifact.template
    return Synth(
        app=app,
        stack=stack,
        template=Template.from_json(template_json),
        template_json=template_json,
        template_path=Path(outdir) / artifact.template_file,
    )
