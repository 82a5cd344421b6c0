"""SES events: configuration set -> SNS topic (every event type) -> the results queue."""

from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_ses as ses
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct


class EmailEvents(Construct):
    def __init__(self, scope: Construct, id: str, *, results_queue: sqs.IQueue) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.configuration_set = ses.ConfigurationSet(
            self, "ConfigurationSet", reputation_metrics=True, sending_enabled=True
        )
        source = {
            "aws:SourceAccount": Aws.ACCOUNT_ID,
            "aws:SourceArn": stack.format_arn(
                service="ses",
                resource="configuration-set",
                resource_name=self.configuration_set.configuration_set_name,
            ),
        }
        self.key = kms.Key(
            self, "TopicKey", enable_key_rotation=True, description="VDQ SES events topic"
        )
        # SES encrypts what it publishes to the topic; only for this account's configuration set.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("ses.amazonaws.com")],
                actions=["kms:GenerateDataKey*", "kms:Decrypt"],
                resources=["*"],
                conditions={"StringEquals": source},
            )
        )
        self.topic = sns.Topic(self, "Topic", master_key=self.key, enforce_ssl=True)
        # The destination adds the topic policy: sns:Publish for ses.amazonaws.com on the
        # conditions aws:SourceAccount (this account) and aws:SourceArn (this configuration set).
        self.configuration_set.add_event_destination(
            "ToTopic",
            destination=ses.EventDestination.sns_topic(self.topic),
            events=list(ses.EmailSendingEvent),
        )
        self.topic.add_subscription(
            subscriptions.SqsSubscription(results_queue, raw_message_delivery=True)
        )
