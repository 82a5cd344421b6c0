"""What a first `cdk deploy` needs and a template shows: each defect of issue 15 pinned offline.

The default app (the session's synth) answers for the defaults; opt-in choices are checked on a
small stack holding only the construct concerned, so no test pays for a second full synth.
"""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match

pytestmark = pytest.mark.infra

# Each email's outcome; not Send, which the worker's record of SES's answer makes redundant.
RECORDED = {"reject", "bounce", "complaint", "delivery", "deliveryDelay", "renderingFailure"}


def _config(context: dict):
    import aws_cdk as cdk
    from infra.config import DeployConfig

    return DeployConfig.from_context(cdk.App(context=context).node)


def _small_stack():
    import aws_cdk as cdk

    app = cdk.App()
    return cdk.Stack(app, "Probe", env=cdk.Environment(account="123456789012", region="eu-west-1"))


def _template(stack):
    from aws_cdk.assertions import Template

    return Template.from_stack(stack)


# ---- 4: SES events: the recorded ones only; open and click tracking opt-in -------------------


def test_the_configuration_set_publishes_only_the_events_vdq_records(synth):
    [destination] = synth.resources("AWS::SES::ConfigurationSetEventDestination").values()
    types = destination["Properties"]["EventDestination"]["MatchingEventTypes"]
    assert set(types) == RECORDED and len(types) == len(RECORDED)
    assert not synth.stack.email_events.configuration_set.node.try_find_child("TrackingOptions")


def test_open_and_click_tracking_is_an_opt_in_choice():
    from aws_cdk import aws_sqs as sqs
    from infra.email_events import EmailEvents

    assert _config({}).open_click_tracking is False
    assert _config({"vdq:openClickTracking": "true"}).open_click_tracking is True
    stack = _small_stack()
    EmailEvents(stack, "Events", results_queue=sqs.Queue(stack, "Q"), open_click_tracking=True)
    [destination] = _template(stack).find_resources(
        "AWS::SES::ConfigurationSetEventDestination"
    ).values()
    types = set(destination["Properties"]["EventDestination"]["MatchingEventTypes"])
    assert types == RECORDED | {"open", "click"}


# ---- 11: the topic key's policy is the documented one; failed deliveries alarm ----------------


def test_the_topic_key_gives_ses_the_documented_statement_without_conditions(synth):
    key_id = synth.logical_id(synth.stack.email_events.key)
    statements = synth.template_json["Resources"][key_id]["Properties"]["KeyPolicy"]["Statement"]
    [ses] = [s for s in statements if s.get("Principal") == {"Service": "ses.amazonaws.com"}]
    assert sorted(ses.pop("Action")) == ["kms:Decrypt", "kms:GenerateDataKey"]  # CDK sorts them
    assert ses == {  # no Condition: SES's publish may not carry aws:SourceArn/SourceAccount
        "Sid": "AllowSESToUseKMSKey",
        "Effect": "Allow",
        "Principal": {"Service": "ses.amazonaws.com"},
        "Resource": "*",
    }
    topic = synth.template_json["Resources"][synth.logical_id(synth.stack.email_events.topic)]
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}


def test_undeliverable_ses_events_go_to_a_dead_letter_queue_and_alarm(synth):
    events = synth.stack.email_events
    dead_letters = {"Fn::GetAtt": [synth.logical_id(events.dead_letters), "Arn"]}
    synth.template.has_resource_properties(
        "AWS::SNS::Subscription",
        {
            "Protocol": "sqs",
            "TopicArn": {"Ref": synth.logical_id(events.topic)},
            "RedrivePolicy": {"deadLetterTargetArn": dead_letters},
        },
    )
    synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/SNS",
            "MetricName": "NumberOfNotificationsFailed",
            "Dimensions": [
                {
                    "Name": "TopicName",
                    "Value": {"Fn::GetAtt": [synth.logical_id(events.topic), "TopicName"]},
                }
            ],
            "Threshold": 0,
            "AlarmActions": Match.any_value(),
        },
    )
    _assert_dead_letter_alarm(synth, events.dead_letters)


# ---- 8: the results consumer has a maximum concurrency --------------------------------------


def test_the_results_consumer_has_a_maximum_concurrency(synth):
    synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {
                "Fn::GetAtt": [synth.logical_id(synth.stack.messaging.results.queue), "Arn"]
            },
            "FunctionName": {"Ref": synth.logical_id(synth.stack.functions.webhook)},
            "ScalingConfig": {"MaximumConcurrency": 2},
        },
    )


@pytest.mark.parametrize("value", [1, 1001])
def test_a_maximum_concurrency_outside_what_lambda_takes_fails_the_synth(value):
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match="vdq:resultsMaxConcurrency"):
        _config({"vdq:resultsMaxConcurrency": value})
    assert _config({"vdq:resultsMaxConcurrency": 5}).results_max_concurrency == 5


# ---- 9: the scheduler has its own dead-letter queue and alarm -------------------------------


def test_the_schedules_have_their_own_dead_letter_queue_and_alarm(synth):
    own = {"Fn::GetAtt": [synth.logical_id(synth.stack.schedules.dead_letters), "Arn"]}
    schedules = synth.resources("AWS::Scheduler::Schedule").values()
    assert len(schedules) == 3
    for schedule in schedules:
        assert schedule["Properties"]["Target"]["DeadLetterConfig"] == {"Arn": own}
    assert synth.stack.schedules.dead_letters is not synth.stack.messaging.results.dead_letters
    _assert_dead_letter_alarm(synth, synth.stack.schedules.dead_letters)


def _assert_dead_letter_alarm(synth, queue) -> None:
    synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/SQS",
            "MetricName": "ApproximateNumberOfMessagesVisible",
            "Dimensions": [
                {
                    "Name": "QueueName",
                    "Value": {"Fn::GetAtt": [synth.logical_id(queue), "QueueName"]},
                }
            ],
            "AlarmActions": Match.any_value(),
        },
    )


# ---- 10: API Gateway's account-wide CloudWatch role is the deployer's choice ------------------


def test_by_default_the_stack_sets_no_account_wide_api_gateway_role(synth):
    assert synth.resources("AWS::ApiGateway::Account") == {}
    for role in synth.resources("AWS::IAM::Role").values():
        trust = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert all(s["Principal"] != {"Service": "apigateway.amazonaws.com"} for s in trust)
    # Stage logs would need that role: off with it, so a fresh account deploys.
    [stage] = synth.resources("AWS::ApiGateway::Stage").values()
    assert "AccessLogSetting" not in stage["Properties"]
    assert all("LoggingLevel" not in m for m in stage["Properties"].get("MethodSettings", []))


def test_the_cloud_watch_role_and_stage_logs_are_opt_in():
    from aws_cdk import aws_lambda as lambda_
    from infra.api import Api

    assert (_config({}).cloud_watch_role, _config({}).api_logs) == (False, False)
    chosen = _config({"vdq:cloudWatchRole": True})
    assert (chosen.cloud_watch_role, chosen.api_logs) == (True, True)
    existing_role = _config({"vdq:apiLogs": "true"})
    assert (existing_role.cloud_watch_role, existing_role.api_logs) == (False, True)

    stack = _small_stack()
    functions = {
        name: lambda_.Function.from_function_attributes(
            stack, name, function_arn=f"arn:aws:lambda:eu-west-1:123456789012:function:{name}",
            same_environment=True,
        )
        for name in ("enqueue", "operator", "webhook")
    }  # fmt: skip
    Api(stack, "Api", config=chosen, **functions)
    template = _template(stack)
    template.resource_count_is("AWS::ApiGateway::Account", 1)
    template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "AccessLogSetting": Match.object_like(
                {"Format": Match.string_like_regexp("requestId")}
            ),
            "MethodSettings": Match.array_with([Match.object_like({"LoggingLevel": "ERROR"})]),
        },
    )
