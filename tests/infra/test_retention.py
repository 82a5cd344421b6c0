"""The stream mapping in the template: its filters (and the archive's, VDQ_ARCHIVE=s3), its
batches and its tumbling window."""

from __future__ import annotations

import json

import pytest

from tests.infra.conftest import ROOT, TEST_CONTEXT
from vdq.core import resources

pytestmark = pytest.mark.infra

STATE_ITEMS = {"eventName": ["INSERT", "MODIFY"],
               "dynamodb": {"NewImage": {"sk": {"S": ["STATE"]}}}}
SPILLED_SIGNALS = {"eventName": ["INSERT"], "dynamodb": {"NewImage": {
    "sk": {"S": [{"prefix": "H#"}]}, "actor": {"S": ["ses"]},
    "name": {"S": ["error", "Bounce", "Complaint", "Reject"]}}}}
TTL_REMOVE = {"eventName": ["REMOVE"],
              "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}}


def _mapping(template_json: dict) -> dict:
    [mapping] = [r for r in template_json["Resources"].values()
                 if r["Type"] == "AWS::Lambda::EventSourceMapping"
                 and "StreamArn" in json.dumps(r["Properties"].get("EventSourceArn"))]
    return dict(mapping["Properties"])


def _stream_filters(template_json: dict) -> list[dict]:
    mapping = _mapping(template_json)
    return [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]


def test_the_stream_reaches_the_schedule_function_with_state_items_and_spilled_signals(synth):
    # New and changed state items (state events, stamps, postings, counts) and the history
    # records that hold a provider's bounce, complaint or rejection when the state item had no
    # room for them (the counts); TTL deletions (REMOVE records) never reach it.
    assert _stream_filters(synth.template_json) == [STATE_ITEMS, SPILLED_SIGNALS]
    assert list(resources.STREAM_FILTERS) == [STATE_ITEMS, SPILLED_SIGNALS]
    [table] = synth.resources("AWS::DynamoDB::Table").values()
    assert table["Properties"]["TimeToLiveSpecification"] == {
        "AttributeName": resources.TABLE_TTL_ATTRIBUTE, "Enabled": True}


def test_the_stream_counts_in_a_tumbling_window_of_in_order_batches(synth):
    # The window's state and the shard's id make the counts exactly once (vdq.schedules
    # .postings); its checkpoints need one batch of a shard at a time, in order.
    mapping = _mapping(synth.template_json)
    assert mapping["TumblingWindowInSeconds"] == resources.STREAM_TUMBLING_WINDOW_SECONDS
    assert mapping["MaximumBatchingWindowInSeconds"] == resources.STREAM_BATCHING_WINDOW_SECONDS
    assert mapping["BatchSize"] == resources.STREAM_BATCH_SIZE
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping.get("ParallelizationFactor", 1) == 1


def test_the_archive_adds_ttl_deletions_and_may_write_only_under_its_prefix(synth):
    import aws_cdk as cdk
    from aws_cdk.assertions import Template
    from infra.app import build

    context = {**json.loads((ROOT / "cdk.json").read_text())["context"], **TEST_CONTEXT,
               "VDQ_ARCHIVE": "s3"}  # fmt: skip
    stack = build(cdk.App(context=context))
    template = Template.from_stack(stack).to_json()
    assert _stream_filters(template) == [STATE_ITEMS, SPILLED_SIGNALS, TTL_REMOVE]
    # Without the archive, the schedule function writes no object at all.
    assert "s3:PutObject" not in synth.role_actions(synth.stack.functions.schedule)
    role = synth.logical_id(stack.functions.schedule.role)
    policies = [p["Properties"] for p in template["Resources"].values()
                if p["Type"] == "AWS::IAM::Policy" and {"Ref": role} in p["Properties"]["Roles"]]
    [put] = [s for p in policies for s in p["PolicyDocument"]["Statement"]
             if s["Action"] == "s3:PutObject"]
    assert json.dumps(put["Resource"]).endswith(f'"/{resources.ARCHIVE_PREFIX}*"]]}}')
