"""SES events: configuration set -> SNS topic (the events VDQ records) -> the results queue.

The topic is encrypted with its own KMS key. The key policy gives SES the statement the SES
Developer Guide documents for an encrypted topic ("AllowSESToUseKMSKey": ses.amazonaws.com,
kms:GenerateDataKey and kms:Decrypt, no condition); who may publish is the topic policy's
business (ses.amazonaws.com, this account, this configuration set). Deliveries SNS gives up
on land in a dead-letter queue; both it and failed deliveries have alarms (infra/monitoring.py).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_ses as ses
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.nag import suppress
from vdq.core import resources

Event = ses.EmailSendingEvent
# CDK's name for each SES eventType word.
EVENT_TYPES = {
    "Send": Event.SEND,
    "Reject": Event.REJECT,
    "Bounce": Event.BOUNCE,
    "Complaint": Event.COMPLAINT,
    "Delivery": Event.DELIVERY,
    "Rendering Failure": Event.RENDERING_FAILURE,
    "DeliveryDelay": Event.DELIVERY_DELAY,
    "Open": Event.OPEN,
    "Click": Event.CLICK,
}
# What VDQ records, as the local stack's SES sandbox publishes it (vdq.core.resources.SES_EVENTS
# says why Send is not among them); open and click only with vdq:openClickTracking.
RECORDED_EVENTS = tuple(EVENT_TYPES[name] for name in resources.SES_EVENTS)
TRACKING_EVENTS = tuple(EVENT_TYPES[name] for name in resources.SES_TRACKING_EVENTS)


class EmailEvents(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        results_queue: sqs.IQueue,
        open_click_tracking: bool = False,
    ) -> None:
        super().__init__(scope, id)
        self.configuration_set = ses.ConfigurationSet(
            self, "ConfigurationSet", reputation_metrics=True, sending_enabled=True
        )
        self.key = kms.Key(
            self, "TopicKey", enable_key_rotation=True, description="VDQ SES events topic"
        )
        # SES Developer Guide, "Configuring Amazon SNS notifications for Amazon SES",
        # prerequisite 3: the statement to add to the key policy of an SSE-KMS topic, as is.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowSESToUseKMSKey",
                principals=[iam.ServicePrincipal("ses.amazonaws.com")],
                actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=["*"],
            )
        )
        self.topic = sns.Topic(self, "Topic", master_key=self.key, enforce_ssl=True)
        self.events = RECORDED_EVENTS + (TRACKING_EVENTS if open_click_tracking else ())
        # The destination adds the topic policy: sns:Publish for ses.amazonaws.com on the
        # conditions aws:SourceAccount (this account) and aws:SourceArn (this configuration set).
        self.configuration_set.add_event_destination(
            "ToTopic",
            destination=ses.EventDestination.sns_topic(self.topic),
            events=list(self.events),
        )
        # Events SNS could not deliver to the results queue (after its retries) wait here.
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        suppress(
            self.dead_letters,
            "SQS3",
            "it is a dead-letter queue: the SNS subscription's (cdk-nag sees SQS redrives only)",
        )
        self.topic.add_subscription(
            subscriptions.SqsSubscription(
                results_queue, raw_message_delivery=True, dead_letter_queue=self.dead_letters
            )
        )
