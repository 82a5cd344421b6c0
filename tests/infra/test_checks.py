"""The template passes cfn-lint and cdk-nag's AwsSolutions pack (or says why, per resource)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.infra


def test_cfn_lint_finds_no_errors(synth):
    from cfnlint.api import lint_file

    matches = lint_file(synth.template_path)
    errors = [m for m in matches if m.rule.severity.lower() == "error"]
    assert errors == [], "\n".join(str(m) for m in errors)


def test_cdk_nag_has_no_unacknowledged_finding(synth):
    from cdk_nag import AwsSolutionsChecks

    report = AwsSolutionsChecks().validate_scope(synth.app)
    assert report.success, [v.rule_name for v in report.violations]


def test_cdk_nag_would_catch_an_unencrypted_queue():
    import aws_cdk as cdk
    from aws_cdk import aws_sqs as sqs
    from cdk_nag import AwsSolutionsChecks

    app = cdk.App()
    stack = cdk.Stack(app, "Bare")
    sqs.Queue(stack, "Plain", encryption=sqs.QueueEncryption.UNENCRYPTED)
    report = AwsSolutionsChecks().validate_scope(app)
    assert not report.success
    assert "AwsSolutions-SQS4" in {v.rule_name for v in report.violations}


def test_every_acknowledgement_gives_a_reason(synth):
    from aws_cdk import Validations

    for construct in synth.app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                for rule, reason in entry.data.items():
                    assert len(str(reason)) > 20, (construct.node.path, rule)
