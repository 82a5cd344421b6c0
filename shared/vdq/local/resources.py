"""VDQ's table, queues, bucket, bus and topic, created in moto from ``vdq.core.resources``.

The one place that builds them outside the CDK app: the local stack, the test fixtures, the
reliability suite and the benchmarks all call ``create``, so none can drift from what is deployed.
Every name starts with a prefix; the extras only the local stack wants (dead-letter queues, the
SES events topic) can be left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vdq.core import resources

PREFIX = resources.LOCAL_PREFIX


@dataclass(frozen=True)
class LocalResources:
    table: str
    bucket: str
    bus: str
    configuration_set: str
    topic_arn: str  # "" without the SES events topic
    queues: dict[str, str]  # name ("send", "results", "send-dlq", ...) -> URL

    def env(self) -> dict[str, str]:
        """The VDQ settings that point the handlers at these resources."""
        lanes = (("SEND", resources.SEND_QUEUE), ("HIGH_SEND", resources.SEND_QUEUES["high"]),
                 ("BULK_SEND", resources.SEND_QUEUES["bulk"]), ("RESULTS", resources.RESULTS_QUEUE))
        dlqs = {setting: self.queues.get(f"{name}{resources.DEAD_LETTER_SUFFIX}")
                for setting, name in lanes}  # fmt: skip
        dead = {f"VDQ_{setting}_DEAD_LETTER_QUEUE_URL": url for setting, url in dlqs.items() if url}
        return {
            **dead,
            "VDQ_TABLE_NAME": self.table,
            "VDQ_ATTACHMENTS_BUCKET": self.bucket,
            "VDQ_SEND_QUEUE_URL": self.queues[resources.SEND_QUEUE],
            "VDQ_HIGH_SEND_QUEUE_URL": self.queues[resources.SEND_QUEUES["high"]],
            "VDQ_BULK_SEND_QUEUE_URL": self.queues[resources.SEND_QUEUES["bulk"]],
            "VDQ_RESULTS_QUEUE_URL": self.queues[resources.RESULTS_QUEUE],
            "VDQ_EVENT_BUS_NAME": self.bus,
            "VDQ_SES_CONFIGURATION_SET": self.configuration_set,
        }


def create(
    session: Any,
    visibility_seconds: int | None = None,
    *,
    prefix: str = PREFIX,
    table: str | None = None,
    dead_letters_and_topic: bool = True,
) -> LocalResources:
    """Create everything in the moto the session's clients reach, every name under ``prefix``.

    ``session`` is a boto3 Session, or the ``boto3`` module itself for its default session (moto
    in-process). The table is ``table``, else "<prefix>-items". With ``dead_letters_and_topic``
    (the local stack) each queue has its dead-letter queue and redrive policy as deployed, and
    the SES events topic delivers raw to the results queue; the in-process fixtures leave both
    out. TTL is on as deployed (moto never expires an item).
    """
    table = table or f"{prefix}-items"
    dynamodb = session.client("dynamodb")
    dynamodb.create_table(**resources.table_definition(table))
    dynamodb.update_time_to_live(
        TableName=table,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": resources.TABLE_TTL_ATTRIBUTE},
    )

    sqs = session.client("sqs")
    queues: dict[str, str] = {}
    for name in (*resources.SEND_QUEUES.values(), resources.RESULTS_QUEUE):
        days = (resources.RESULTS_RETENTION_DAYS if name == resources.RESULTS_QUEUE
                else resources.SEND_RETENTION_DAYS)  # fmt: skip
        attributes: dict[str, str] = {"MessageRetentionPeriod": str(days * 86_400)}
        if visibility_seconds is not None:
            attributes["VisibilityTimeout"] = str(visibility_seconds)
        if dead_letters_and_topic:
            dlq_name = f"{name}{resources.DEAD_LETTER_SUFFIX}"
            queues[dlq_name] = sqs.create_queue(QueueName=f"{prefix}-{dlq_name}")["QueueUrl"]
            redrive = {
                "deadLetterTargetArn": _queue_arn(sqs, queues[dlq_name]),
                "maxReceiveCount": resources.MAX_RECEIVE_COUNT,
            }
            attributes["RedrivePolicy"] = json.dumps(redrive)
        made = sqs.create_queue(QueueName=f"{prefix}-{name}", Attributes=attributes)
        queues[name] = made["QueueUrl"]

    bucket = f"{prefix}-attachments"
    session.client("s3").create_bucket(Bucket=bucket)
    bus = f"{prefix}-bus"
    session.client("events").create_event_bus(Name=bus)

    topic_arn = ""
    if dead_letters_and_topic:
        sns = session.client("sns")
        topic_arn = sns.create_topic(Name=f"{prefix}-{resources.SES_EVENTS_TOPIC}")["TopicArn"]
        sns.subscribe(
            TopicArn=topic_arn,
            Protocol="sqs",
            Endpoint=_queue_arn(sqs, queues[resources.RESULTS_QUEUE]),
            Attributes={"RawMessageDelivery": "true"},
        )
    return LocalResources(table, bucket, bus, f"{prefix}-events", topic_arn, queues)


def _queue_arn(sqs: Any, url: str) -> str:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return str(attributes["Attributes"]["QueueArn"])
