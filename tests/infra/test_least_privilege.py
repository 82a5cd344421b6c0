"""Each function's role allows only what that function does."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.infra

TRANSITION_WRITES = {"dynamodb:UpdateItem", "dynamodb:TransactWriteItems"}


def test_public_webhook_cannot_read_attachments(synth):
    actions = synth.role_actions(synth.stack.functions.webhook)
    assert "s3:GetObject" not in actions
    assert not any(a in ("s3:*", "s3:Get*") for a in actions)


def test_enqueue_writes_new_records_and_touches_nothing_else_but_idempotency_keys(synth):
    table_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.data.table), "Arn"]}
    dynamodb = [
        s
        for s in synth.role_statements(synth.stack.functions.enqueue)
        if any(a.startswith("dynamodb:") for a in _actions(s))
    ]
    unconditioned = {a for s in dynamodb if "Condition" not in s for a in _actions(s)}
    assert unconditioned == {"dynamodb:BatchWriteItem"}
    for statement in dynamodb:
        assert statement["Resource"] == table_arn  # never an index: no listing either
        if "Condition" in statement:
            assert statement["Condition"] == {
                "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["idempotency#*"]}
            }


def test_enqueue_cannot_read_or_delete_attachments(synth):
    actions = synth.role_actions(synth.stack.functions.enqueue)
    assert "s3:PutObject" in actions
    assert not {"s3:GetObject", "s3:DeleteObject"} & actions


def test_only_the_schedule_deletes_records(synth):
    for name, function in synth.stack.functions.by_name.items():
        deletes = "dynamodb:DeleteItem" in {
            a for s in synth.role_statements(function) if "Condition" not in s for a in _actions(s)
        }
        assert deletes == (name == "schedule"), name


def test_only_sms_paths_read_the_twilio_secret(synth):
    for name, function in synth.stack.functions.by_name.items():
        reads = "secretsmanager:GetSecretValue" in synth.role_actions(function)
        assert reads == (name in ("send", "webhook", "schedule")), name


def test_only_the_send_function_may_send_email(synth):
    for name, function in synth.stack.functions.by_name.items():
        sends = bool({"ses:SendEmail", "ses:SendRawEmail"} & synth.role_actions(function))
        assert sends == (name == "send"), name


def test_no_function_holds_a_service_wide_wildcard_action(synth):
    for function in synth.stack.functions.by_name.values():
        assert not [a for a in synth.role_actions(function) if a.endswith(":*") or a == "*"]


def _actions(statement: dict) -> list[str]:
    found = statement["Action"]
    return [found] if isinstance(found, str) else list(found)
