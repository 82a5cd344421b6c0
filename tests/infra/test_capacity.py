"""Provisioned capacity as a deploy choice: the table and every index get capacity and target
tracking; on-demand (the default) has neither; bad bounds fail the synth naming the key."""

from __future__ import annotations

import pytest

from tests.infra.conftest import TEST_CONTEXT

pytestmark = pytest.mark.infra


def _config(context: dict):
    import aws_cdk as cdk
    from infra.config import DeployConfig

    return DeployConfig.from_context(cdk.App(context={**TEST_CONTEXT, **context}).node)


def _data_template(capacity):
    """The data construct alone, in a stack of its own (seconds, not a whole synth), through
    the AwsSolutions checks as every synth is: a finding fails it."""
    import aws_cdk as cdk
    from cdk_nag import AwsSolutionsChecks
    from infra.data import Data

    app = cdk.App()
    stack = cdk.Stack(app, "CapacityTest")
    Data(stack, "Data", deletion_protection=True, noncurrent_days=1, capacity=capacity)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app.synth().get_stack_by_name("CapacityTest").template["Resources"]


def _of(resources: dict, kind: str) -> list[dict]:
    return [r["Properties"] for r in resources.values() if r["Type"] == kind]


def test_on_demand_is_the_default_and_has_no_scaling(synth):
    assert _config({}).capacity is None
    [table] = _of(synth.template_json["Resources"], "AWS::DynamoDB::Table")
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert not _of(synth.template_json["Resources"], "AWS::ApplicationAutoScaling::ScalableTarget")


def test_provisioned_gives_the_table_and_each_index_capacity_and_target_tracking():
    from vdq.core import resources as vdq_resources

    capacity = _config({"vdq:capacity": "provisioned", "vdq:writeCapacity": "10-2000",
                        "vdq:readCapacity": "5-300", "vdq:capacityTarget": 60}).capacity
    resources = _data_template(capacity)
    [table] = _of(resources, "AWS::DynamoDB::Table")
    assert table.get("BillingMode", "PROVISIONED") == "PROVISIONED"
    assert table["ProvisionedThroughput"] == {"ReadCapacityUnits": 5, "WriteCapacityUnits": 10}
    indexes = vdq_resources.table_definition("x")["GlobalSecondaryIndexes"]
    assert len(table["GlobalSecondaryIndexes"]) == len(indexes)
    for index in table["GlobalSecondaryIndexes"]:
        assert index["ProvisionedThroughput"] == {"ReadCapacityUnits": 5,
                                                  "WriteCapacityUnits": 10}
    targets = _of(resources, "AWS::ApplicationAutoScaling::ScalableTarget")
    dimensions = sorted(t["ScalableDimension"] for t in targets)
    assert dimensions == sorted(
        ["dynamodb:table:WriteCapacityUnits", "dynamodb:table:ReadCapacityUnits"]
        + ["dynamodb:index:WriteCapacityUnits", "dynamodb:index:ReadCapacityUnits"] * len(indexes))
    for t in targets:
        write = "Write" in t["ScalableDimension"]
        assert (t["MinCapacity"], t["MaxCapacity"]) == ((10, 2000) if write else (5, 300))
    policies = _of(resources, "AWS::ApplicationAutoScaling::ScalingPolicy")
    assert len(policies) == len(targets)
    for p in policies:
        tracking = p["TargetTrackingScalingPolicyConfiguration"]
        assert tracking["TargetValue"] == 60
        assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] in (
            "DynamoDBWriteCapacityUtilization", "DynamoDBReadCapacityUtilization")


@pytest.mark.parametrize("context,key", [
    ({"vdq:capacity": "reserved"}, "vdq:capacity"),
    ({"vdq:capacity": "provisioned", "vdq:writeCapacity": "100-5"}, "vdq:writeCapacity"),
    ({"vdq:capacity": "provisioned", "vdq:writeCapacity": "0-5"}, "vdq:writeCapacity"),
    ({"vdq:capacity": "provisioned", "vdq:readCapacity": "lots"}, "vdq:readCapacity"),
    ({"vdq:capacity": "provisioned", "vdq:capacityTarget": 95}, "vdq:capacityTarget"),
    ({"vdq:writeCapacity": "5-10"}, "vdq:writeCapacity"),  # on-demand has no bounds
])
def test_bad_capacity_choices_fail_the_synth_naming_the_key(context, key):
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match=key):
        _config(context)


def test_lambdas_own_log_lines_are_left_out_by_default_and_info_keeps_them(synth):
    """vdq:systemLogLevel: WARN (the default) leaves Lambda's start and report lines out (about
    700 bytes an invocation, the logs' largest share of an email); INFO keeps them. Every
    function takes the choice, in the JSON log format (the EMF metric lines pass through it:
    tests/integration/test_alarm_metrics.py)."""
    import aws_cdk.aws_lambda as lambda_
    from infra.config import SYSTEM_LOG_LEVELS

    functions = _of(synth.template_json["Resources"], "AWS::Lambda::Function")
    vdq = [f for f in functions if f.get("Description", "").startswith("VDQ ")]
    assert len(vdq) == 5
    for f in vdq:
        assert f["LoggingConfig"]["LogFormat"] == "JSON"
        assert f["LoggingConfig"]["SystemLogLevel"] == "WARN"
        assert "ApplicationLogLevel" not in f["LoggingConfig"]  # the handlers' own, at INFO
    assert _config({}).system_log_level == "WARN"
    assert _config({"vdq:systemLogLevel": "info"}).system_log_level == "INFO"
    for level in SYSTEM_LOG_LEVELS:  # each choice names one of Lambda's levels
        assert getattr(lambda_.SystemLogLevel, level).value == level


def test_an_unknown_system_log_level_fails_the_synth_naming_the_key():
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match="vdq:systemLogLevel"):
        _config({"vdq:systemLogLevel": "ERROR"})
