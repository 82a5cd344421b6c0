"""Retention in the template: the stream mapping's filters, and the archive's (VDQ_ARCHIVE=s3)."""

from __future__ import annotations

import json

import pytest

from tests.infra.conftest import ROOT, TEST_CONTEXT
from vdq.core import resources

pytestmark = pytest.mark.infra

MODIFY_OF_STATE = {"eventName": ["MODIFY"], "dynamodb": {"NewImage": {"sk": {"S": ["STATE"]}}}}
TTL_REMOVE = {"eventName": ["REMOVE"],
              "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}}


def _stream_filters(template_json: dict) -> list[dict]:
    [mapping] = [r for r in template_json["Resources"].values()
                 if r["Type"] == "AWS::Lambda::EventSourceMapping"
                 and "StreamArn" in json.dumps(r["Properties"].get("EventSourceArn"))]
    return [json.loads(f["Pattern"]) for f in mapping["Properties"]["FilterCriteria"]["Filters"]]


def test_the_stream_reaches_the_schedule_function_with_state_changes_only(synth):
    # TTL deletions (REMOVE records) never reach it: no invocation, no state event for them.
    assert _stream_filters(synth.template_json) == [MODIFY_OF_STATE]
    [table] = synth.resources("AWS::DynamoDB::Table").values()
    assert table["Properties"]["TimeToLiveSpecification"] == {
        "AttributeName": resources.TABLE_TTL_ATTRIBUTE, "Enabled": True}


def test_the_archive_adds_ttl_deletions_and_may_write_only_under_its_prefix(synth):
    import aws_cdk as cdk
    from aws_cdk.assertions import Template
    from infra.app import build

    context = {**json.loads((ROOT / "cdk.json").read_text())["context"], **TEST_CONTEXT,
               "VDQ_ARCHIVE": "s3"}  # fmt: skip
    stack = build(cdk.App(context=context))
    template = Template.from_stack(stack).to_json()
    assert _stream_filters(template) == [MODIFY_OF_STATE, TTL_REMOVE]
    # Without the archive, the schedule function writes no object at all.
    assert "s3:PutObject" not in synth.role_actions(synth.stack.functions.schedule)
    role = synth.logical_id(stack.functions.schedule.role)
    policies = [p["Properties"] for p in template["Resources"].values()
                if p["Type"] == "AWS::IAM::Policy" and {"Ref": role} in p["Properties"]["Roles"]]
    [put] = [s for p in policies for s in p["PolicyDocument"]["Statement"]
             if s["Action"] == "s3:PutObject"]
    assert json.dumps(put["Resource"]).endswith(f'"/{resources.ARCHIVE_PREFIX}*"]]}}')
