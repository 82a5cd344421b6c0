"""The deployed resources have the properties the design needs (not just the right count)."""

from __future__ import annotations

import json
import re

import pytest
from aws_cdk.assertions import Match

from vdq.core import resources

pytestmark = pytest.mark.infra


def test_table_has_the_keys_and_four_keys_only_indexes_of_vdq_resources(synth):
    definition = resources.table_definition("x")
    synth.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": definition["KeySchema"],
            "BillingMode": "PAY_PER_REQUEST",
            "GlobalSecondaryIndexes": Match.array_with(
                [
                    Match.object_like(
                        {
                            "IndexName": index.name,
                            "KeySchema": [
                                {"AttributeName": index.partition_key, "KeyType": "HASH"},
                                {"AttributeName": index.sort_key, "KeyType": "RANGE"},
                            ],
                            "Projection": {"ProjectionType": "KEYS_ONLY"},
                        }
                    )
                    for index in resources.INDEXES
                ]
            ),
        },
    )


def test_table_keeps_point_in_time_recovery_ttl_and_deletion_protection(synth):
    synth.template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": Match.object_like(
                {
                    "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                    "TimeToLiveSpecification": {
                        "AttributeName": resources.TABLE_TTL_ATTRIBUTE,
                        "Enabled": True,
                    },
                    "DeletionProtectionEnabled": True,
                }
            ),
            "DeletionPolicy": "Retain",
        },
    )


def test_attachments_bucket_is_private_encrypted_tls_only_and_expires_purged_versions_and_uploads(
    synth,
):
    bucket_id = synth.logical_id(synth.stack.data.bucket)
    synth.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "BucketEncryption": Match.any_value(),
            "LifecycleConfiguration": {
                "Rules": [
                    Match.object_like(
                        {"NoncurrentVersionExpiration": {"NoncurrentDays": 1}, "Status": "Enabled"}
                    ),
                    # Presigned uploads no email took (vdq.intake.uploads), gone after a day.
                    Match.object_like({
                        "Id": "untaken-uploads", "Prefix": resources.UPLOADS_PREFIX,
                        "ExpirationInDays": resources.UPLOADS_EXPIRE_DAYS,
                        "NoncurrentVersionExpiration": {
                            "NoncurrentDays": resources.UPLOADS_EXPIRE_DAYS},
                        "Status": "Enabled",
                    }),
                ]
            },
        },
    )
    synth.template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": {"Ref": bucket_id},
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            },
        },
    )


@pytest.mark.parametrize(("queue", "consumer"), [("send", "send"), ("results", "webhook")])
def test_each_queue_redrives_to_its_dlq_and_outlasts_its_consumer_sixfold(synth, queue, consumer):
    work = getattr(synth.stack.messaging, queue)
    properties = synth.template_json["Resources"][synth.logical_id(work.queue)]["Properties"]
    assert properties["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [synth.logical_id(work.dead_letters), "Arn"]},
        "maxReceiveCount": resources.MAX_RECEIVE_COUNT,
    }
    assert properties["SqsManagedSseEnabled"] is True
    function = synth.template_json["Resources"][
        synth.logical_id(synth.stack.functions.by_name[consumer])
    ]
    assert properties["VisibilityTimeout"] >= 6 * function["Properties"]["Timeout"]


def test_every_queue_refuses_plain_http(synth):
    queues = synth.resources("AWS::SQS::Queue")
    policies = synth.resources("AWS::SQS::QueuePolicy").values()
    guarded = set()
    for policy in policies:
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}:
                guarded.update(q["Ref"] for q in policy["Properties"]["Queues"])
    assert guarded == set(queues)


def test_sqs_event_sources_report_batch_item_failures_and_wait_to_fill_batches(synth):
    for queue, function, batch, window in (
        (synth.stack.messaging.send.queue, synth.stack.functions.send, resources.SEND_BATCH_SIZE,
         resources.SEND_BATCHING_WINDOW_SECONDS),
        (
            synth.stack.messaging.results.queue,
            synth.stack.functions.webhook,
            resources.RESULTS_BATCH_SIZE,
            resources.RESULTS_BATCHING_WINDOW_SECONDS,
        ),
    ):
        synth.template.has_resource_properties(
            "AWS::Lambda::EventSourceMapping",
            {
                "EventSourceArn": {"Fn::GetAtt": [synth.logical_id(queue), "Arn"]},
                "FunctionName": {"Ref": synth.logical_id(function)},
                "FunctionResponseTypes": ["ReportBatchItemFailures"],
                "BatchSize": batch,
                "MaximumBatchingWindowInSeconds": window,
            },
        )


def test_send_concurrency_is_capped_to_respect_the_ses_rate(synth):
    synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "FunctionName": {"Ref": synth.logical_id(synth.stack.functions.send)},
            "ScalingConfig": {"MaximumConcurrency": 2},
        },
    )


def test_every_function_is_arm64_python_passes_traces_through_and_runs_its_own_handler(synth):
    # X-Ray: a function traces a request that arrives sampled, and starts no trace of its own
    # (vdq:tracing=active does: tests/infra/test_tracing.py).
    for name, function in synth.stack.functions.by_name.items():
        properties = synth.template_json["Resources"][synth.logical_id(function)]["Properties"]
        assert properties["Architectures"] == ["arm64"]
        assert properties["Runtime"] in ("python3.12", "python3.13")
        assert properties["TracingConfig"] == {"Mode": "PassThrough"}
        assert properties["Handler"] == f"functions.{name}.handler.handler"
        assert properties["Layers"] == [{"Ref": synth.logical_id(synth.stack.functions.layer)}]
        log_group = synth.template_json["Resources"][properties["LoggingConfig"]["LogGroup"]["Ref"]]
        assert log_group["Properties"]["RetentionInDays"] == 30


def test_functions_get_settings_by_their_vdq_names_and_never_the_twilio_token(synth):
    from vdq.core.settings import Settings

    names = {f.metadata["env"] for f in Settings.__dataclass_fields__.values()}
    for function in synth.stack.functions.by_name.values():
        properties = synth.template_json["Resources"][synth.logical_id(function)]["Properties"]
        variables = properties["Environment"]["Variables"]
        vdq_names = {v for v in variables if not v.startswith("POWERTOOLS_")}
        assert vdq_names <= names
        assert "TWILIO_AUTH_TOKEN" not in variables
        assert variables["VDQ_TABLE_NAME"] == {"Ref": synth.logical_id(synth.stack.data.table)}
        assert variables["VDQ_TWILIO_SECRET_NAME"] == {"Ref": "TwilioCredentialsName"}
    assert synth.template_json["Parameters"]["TwilioCredentialsName"]["Default"] == "vdq/twilio"


def test_twilio_webhook_url_is_derived_from_the_api_url(synth):
    variables = synth.template_json["Resources"][synth.logical_id(synth.stack.functions.send)][
        "Properties"
    ]["Environment"]["Variables"]
    url = variables["TWILIO_WEBHOOK_URL"]["Fn::Join"][1]
    assert {"Ref": synth.logical_id(synth.stack.api.rest_api)} in url
    assert url[-1].endswith("/v1/twilio/status-callback")


def test_ses_events_reach_the_results_queue_through_a_topic_only_this_accounts_ses_may_use(synth):
    synth.template.has_resource_properties(
        "AWS::SES::ConfigurationSetEventDestination",
        {
            "EventDestination": Match.object_like(
                {
                    "Enabled": True,
                    "MatchingEventTypes": Match.array_with(
                        [
                            "reject",
                            "bounce",
                            "complaint",
                            "delivery",
                            "renderingFailure",
                            "deliveryDelay",
                        ]
                    ),
                    "SnsDestination": {
                        "TopicARN": {"Ref": synth.logical_id(synth.stack.email_events.topic)}
                    },
                }
            )
        },
    )
    synth.template.has_resource_properties(
        "AWS::SNS::Subscription",
        {
            "Protocol": "sqs",
            "RawMessageDelivery": True,
            "Endpoint": {
                "Fn::GetAtt": [synth.logical_id(synth.stack.messaging.results.queue), "Arn"]
            },
        },
    )
    events_topic = {"Ref": synth.logical_id(synth.stack.email_events.topic)}
    policies = [p for p in synth.resources("AWS::SNS::TopicPolicy").values()
                if events_topic in p["Properties"]["Topics"]]  # fmt: skip
    assert len(policies) == 1  # the alarm topic's own policy lets this account's alarms publish
    for policy in policies:
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Allow" and "sns:Publish" in statement["Action"]:
                assert statement["Principal"] == {"Service": "ses.amazonaws.com"}
                condition = statement["Condition"]["StringEquals"]
                # IAM condition keys are case-insensitive; CDK's own statement says "AWS:".
                assert {k.lower() for k in condition} == {"aws:sourceaccount", "aws:sourcearn"}
                assert condition[
                    next(k for k in condition if k.lower() == "aws:sourceaccount")
                ] == {"Ref": "AWS::AccountId"}


def test_twilio_webhooks_unsubscribe_health_openapi_and_console_are_the_only_open_paths(synth):
    open_paths = set()
    for (method, path), construct in synth.stack.api.methods.items():
        properties = synth.template_json["Resources"][synth.logical_id(construct)]["Properties"]
        if properties["AuthorizationType"] == "NONE":
            open_paths.add((method, path))
        else:
            assert properties["AuthorizationType"] == "COGNITO_USER_POOLS"
            assert "vdq/vdq-senders" in properties["AuthorizationScopes"]
    assert open_paths == {
        ("POST", "twilio/status-callback"),
        ("POST", "twilio/inbound"),  # signed by Twilio, checked by the webhook function
        ("GET", "unsubscribe/{token}"),  # RFC 8058: no sign-in; the signed token decides
        ("POST", "unsubscribe/{token}"),
        ("GET", "health"),
        ("GET", "openapi.json"),
        ("GET", "console"),
        ("GET", "console/{file}"),
    }


def test_stage_is_throttled_and_not_traced(synth):
    # Access logs are opt-in (vdq:apiLogs): tests/infra/test_first_deploy.py; tracing too
    # (vdq:tracing=active: tests/infra/test_tracing.py).
    synth.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "StageName": "v1",
            "MethodSettings": Match.array_with(
                [Match.object_like({"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100})]
            ),
            "TracingEnabled": False,
        },
    )


def test_the_streams_batches_gather_many_records_within_the_mappings_limits(synth):
    # A shard sees a few records a second at 1M emails a day: a 10 s window makes a batch of
    # tens of records (bench.cost.stream_fill), where 1 s made one of about three.
    [mapping] = [m["Properties"]
                 for m in synth.resources("AWS::Lambda::EventSourceMapping").values()
                 if "StreamArn" in str(m["Properties"]["EventSourceArn"])]  # fmt: skip
    assert mapping["BatchSize"] == resources.STREAM_BATCH_SIZE
    assert mapping["MaximumBatchingWindowInSeconds"] == resources.STREAM_BATCHING_WINDOW_SECONDS
    # Lambda's limits for a DynamoDB stream: 10,000 records, a 300 s window.
    assert 1_000 <= resources.STREAM_BATCH_SIZE <= 10_000
    assert 10 <= resources.STREAM_BATCHING_WINDOW_SECONDS <= 300
    assert mapping["BisectBatchOnFunctionError"] is True


def test_every_alarm_on_a_vdq_metric_watches_one_the_code_emits(synth):
    # tests/integration/test_alarm_metrics.py shows the code printing each of these, one JSON
    # line an invocation (what survives Lambda's JSON log format unchanged).
    watched = {a["Properties"]["MetricName"] for a in synth.resources("AWS::CloudWatch::Alarm")
               .values() if a["Properties"].get("Namespace") == "VDQ"}  # fmt: skip
    assert watched == {resources.METRIC_ITEMS_ERRORED, resources.METRIC_LEASES_EXPIRED,
                       resources.METRIC_REPUTATION_WARNINGS, resources.METRIC_PRODUCERS_HELD}


def test_user_pool_has_the_four_groups_and_machine_scopes_named_after_them(synth):
    groups = {
        g["Properties"]["GroupName"]
        for g in synth.resources("AWS::Cognito::UserPoolGroup").values()
    }
    assert groups == {"vdq-senders", "vdq-viewers", "vdq-operators", "vdq-suppressions",
                      "vdq-admins"}
    synth.template.has_resource_properties(
        "AWS::Cognito::UserPoolResourceServer",
        {
            "Identifier": "vdq",
            "Scopes": Match.array_with(
                [
                    Match.object_like({"ScopeName": g})
                    for g in ("vdq-senders", "vdq-viewers", "vdq-operators", "vdq-suppressions",
                              "vdq-admins")
                ]
            ),
        },
    )
    synth.template.has_resource_properties(
        "AWS::Cognito::UserPoolClient",
        {
            "AllowedOAuthFlows": ["client_credentials"],
            "GenerateSecret": True,
            "AllowedOAuthScopes": ["vdq/vdq-senders"],
        },
    )
    synth.template.has_resource_properties(
        "AWS::Cognito::UserPool", {"AdminCreateUserConfig": {"AllowAdminCreateUserOnly": True}}
    )


def test_each_producer_client_is_a_machine_client_of_its_own_with_its_output(synth):
    """Quotas, holds and counts tell producers apart by the token's subject, a client's id:
    each name in vdq:producerClients (the test context: shop-orders) gets a client like the
    stack's machine client, and an output with its id. Its scopes are vdq:producerScopes'
    (enqueue only by default), not the stack's client's: the test context gives that one the
    smoke test's operator scopes, which once reached every producer's client too."""
    machine = [v["Properties"] for v in synth.resources("AWS::Cognito::UserPoolClient").values()
               if v["Properties"].get("AllowedOAuthFlows") == ["client_credentials"]]
    [own] = [p for p in machine if p.get("ClientName") == "vdq-shop-orders"]
    [stacks] = [p for p in machine if "ClientName" not in p]
    assert stacks["AllowedOAuthScopes"] == ["vdq/vdq-senders", "vdq/vdq-operators"]
    assert own == {**stacks, "ClientName": "vdq-shop-orders",
                   "AllowedOAuthScopes": ["vdq/vdq-senders"]}
    [(logical, _)] = [(k, v) for k, v in synth.resources("AWS::Cognito::UserPoolClient").items()
                      if v["Properties"].get("ClientName") == "vdq-shop-orders"]
    assert synth.template_json["Outputs"]["ProducerClientShopOrders"]["Value"] == {
        "Ref": logical}


def test_console_client_signs_in_with_the_code_flow_at_the_hosted_ui_and_calls_back_to_it(synth):
    [(client_id, client)] = [
        (k, v) for k, v in synth.resources("AWS::Cognito::UserPoolClient").items()
        if v["Properties"].get("AllowedOAuthFlows") == ["code"]
    ]  # fmt: skip
    props = client["Properties"]
    # A public client (PKCE, no secret) that gets no vdq/<group> scope: groups come from the
    # user's cognito:groups claim only.
    assert props.get("GenerateSecret") in (None, False)
    assert props["AllowedOAuthFlowsUserPoolClient"] is True
    assert sorted(props["AllowedOAuthScopes"]) == ["aws.cognito.signin.user.admin", "openid"]
    assert props["SupportedIdentityProviders"] == ["COGNITO"]
    rest_api = synth.logical_id(synth.stack.api.rest_api)
    for urls in (props["CallbackURLs"], props["LogoutURLs"]):
        [url] = urls
        text = json.dumps(url)
        assert rest_api in text and text.endswith('/console/"]]}'), text
    assert synth.resources("AWS::Cognito::UserPoolDomain")  # the hosted UI's domain
    # The operator function serves the console and tells it where to sign in.
    operator = synth.template_json["Resources"][synth.logical_id(synth.stack.functions.operator)]
    env = operator["Properties"]["Environment"]["Variables"]
    assert env["VDQ_CONSOLE_CLIENT_ID"] == {"Ref": client_id}
    assert "amazoncognito.com" in json.dumps(env["VDQ_CONSOLE_AUTH_URL"])
    outputs = synth.template_json["Outputs"]
    assert any(k.startswith("ConsoleUrl") for k in outputs), sorted(outputs)


def test_schedules_invoke_the_schedule_function_with_each_task(synth):
    function_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.functions.schedule), "Arn"]}
    for task, expression in (
        ("sms", "rate(1 minute)"),
        ("sweep", "rate(1 minute)"),
        ("purge", "rate(1 day)"),
    ):
        synth.template.has_resource_properties(
            "AWS::Scheduler::Schedule",
            {
                "ScheduleExpression": expression,
                "State": "ENABLED",
                "Target": Match.object_like({"Arn": function_arn, "Input": f'{{"task":"{task}"}}'}),
            },
        )


def test_alarms_watch_dead_letters_errored_items_stuck_sends_functions_and_api(synth):
    alarms = synth.resources("AWS::CloudWatch::Alarm").values()
    metrics = {
        (a["Properties"].get("Namespace"), a["Properties"].get("MetricName")) for a in alarms
    }
    assert ("VDQ", resources.METRIC_ITEMS_ERRORED) in metrics
    assert ("VDQ", resources.METRIC_LEASES_EXPIRED) in metrics
    assert ("AWS/SQS", "ApproximateNumberOfMessagesVisible") in metrics
    assert ("AWS/Lambda", "Errors") in metrics
    assert ("AWS/Lambda", "Throttles") in metrics
    assert ("AWS/ApiGateway", "5XXError") in metrics
    dead_letter_alarms = [
        a
        for a in alarms
        if a["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"
    ]
    # the three send lanes, results, schedule, undeliverable SES events
    assert len(dead_letter_alarms) == 6
    assert all(a["Properties"]["AlarmActions"] for a in alarms)
    (dashboard,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for name in (resources.METRIC_SENDS_SUPPRESSED, resources.METRIC_SUPPRESSIONS_ADDED,
                 resources.METRIC_SENDS_PACED, resources.METRIC_SENDS_THROTTLED):
        assert f'\\"{name}\\"' in body, f"the dashboard shows no {name}"


def test_cloudwatch_may_publish_every_alarm_to_the_alarm_topic(synth):
    """The alarm topic refuses plain HTTP (enforce_ssl), which gives it a topic policy of its
    own in place of SNS's default one (whose statement let this account's services publish).
    CloudWatch publishes an alarm as the service, under the topic policy alone: without a
    statement that allows cloudwatch.amazonaws.com, every alarm fires and no one hears of it
    (its history says "not authorized to perform: SNS:Publish")."""
    topic = synth.logical_id(synth.stack.monitoring.topic)
    alarms = synth.resources("AWS::CloudWatch::Alarm").values()
    assert all(a["Properties"]["AlarmActions"] == [{"Ref": topic}] for a in alarms)
    [policy] = [p["Properties"]["PolicyDocument"] for p in
                synth.resources("AWS::SNS::TopicPolicy").values()
                if {"Ref": topic} in p["Properties"]["Topics"]]  # fmt: skip
    allowed = [s for s in policy["Statement"] if s["Effect"] == "Allow"
               and s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]  # fmt: skip
    assert allowed, "no statement lets CloudWatch publish the alarms"
    [statement] = allowed
    assert statement["Action"] == "sns:Publish"
    assert statement["Resource"] == {"Ref": topic}
    # only this account's alarms: the condition names the alarms of this account and region
    assert "alarm:*" in json.dumps(statement["Condition"]["ArnLike"]["aws:SourceArn"])


def test_the_api_alarm_and_dashboard_watch_this_stacks_api_alone(synth):
    """API Gateway counts an API's requests, latency and 5XXError by its name (ApiName), which
    every API of the account and region with that name adds to. Told no name, CDK names an API
    after its construct id, `RestApi`: the name of any other app's API built the same way,
    whose 5xx would fire Api5xx and whose traffic would fill the dashboard's API graph. The
    API is named after its stack, one VDQ stack per account and region."""
    name = synth.stack.stack_name
    [api] = synth.resources("AWS::ApiGateway::RestApi").values()
    assert api["Properties"]["Name"] == name
    [alarm] = [a["Properties"] for a in synth.resources("AWS::CloudWatch::Alarm").values()
               if a["Properties"].get("MetricName") == "5XXError"]  # fmt: skip
    assert alarm["Dimensions"] == [{"Name": "ApiName", "Value": name}]
    [dashboard] = synth.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"]).replace('\\"', '"')
    assert set(re.findall(r'"ApiName","([^"]+)"', body)) == {name}
