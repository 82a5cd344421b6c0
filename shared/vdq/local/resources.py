"""Every table, queue, bucket, topic and bus of VDQ, created in moto from ``vdq.resources``.

The same definitions the CDK app deploys, so the local stack cannot drift from AWS: the table and
its indexes, each queue with its dead-letter queue (redrive after ``MAX_RECEIVE_COUNT``), the SES
events topic delivering raw to the results queue, the attachments bucket and the event bus.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vdq import resources

PREFIX = "vdq-local"


@dataclass(frozen=True)
class LocalResources:
    table: str
    bucket: str
    bus: str
    configuration_set: str
    topic_arn: str
    queues: dict[str, str]  # name ("send", "results", "send-dlq", ...) -> URL

    def env(self) -> dict[str, str]:
        """The VDQ settings that point the handlers at these resources."""
        return {
            "VDQ_TABLE_NAME": self.table,
            "VDQ_ATTACHMENTS_BUCKET": self.bucket,
            "VDQ_SEND_QUEUE_URL": self.queues[resources.SEND_QUEUE],
            "VDQ_RESULTS_QUEUE_URL": self.queues[resources.RESULTS_QUEUE],
            "VDQ_EVENT_BUS_NAME": self.bus,
            "VDQ_SES_CONFIGURATION_SET": self.configuration_set,
        }


def create(session: Any, visibility_seconds: int) -> LocalResources:
    """Create everything in the moto server the session's clients point at."""
    table = f"{PREFIX}-items"
    session.client("dynamodb").create_table(**resources.table_definition(table))
    _enable_ttl(session.client("dynamodb"), table)

    sqs = session.client("sqs")
    queues: dict[str, str] = {}
    for name in (resources.SEND_QUEUE, resources.RESULTS_QUEUE):
        dlq_name = f"{name}{resources.DEAD_LETTER_SUFFIX}"
        dlq_url = sqs.create_queue(QueueName=f"{PREFIX}-{dlq_name}")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        queues[dlq_name] = dlq_url
        queues[name] = sqs.create_queue(
            QueueName=f"{PREFIX}-{name}",
            Attributes={
                "VisibilityTimeout": str(visibility_seconds),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": resources.MAX_RECEIVE_COUNT}
                ),
            },
        )["QueueUrl"]

    bucket = f"{PREFIX}-attachments"
    session.client("s3").create_bucket(Bucket=bucket)
    bus = f"{PREFIX}-bus"
    session.client("events").create_event_bus(Name=bus)

    sns = session.client("sns")
    topic_arn = sns.create_topic(Name=f"{PREFIX}-{resources.SES_EVENTS_TOPIC}")["TopicArn"]
    results_arn = sqs.get_queue_attributes(
        QueueUrl=queues[resources.RESULTS_QUEUE], AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=results_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    configuration_set = f"{PREFIX}-events"
    return LocalResources(table, bucket, bus, configuration_set, topic_arn, queues)


def _enable_ttl(dynamodb: Any, table: str) -> None:
    dynamodb.update_time_to_live(
        TableName=table,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": resources.TABLE_TTL_ATTRIBUTE},
    )
