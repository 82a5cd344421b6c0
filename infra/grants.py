"""IAM: each function's role gets only the calls its code makes (tests/infra/test_least_privilege
checks the calls the tests record against these grants)."""

from __future__ import annotations

from aws_cdk import ArnFormat, CfnParameter, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3

from infra.data import Data
from infra.email_events import EmailEvents
from infra.functions import Functions
from infra.messaging import Messaging
from infra.nag import logical_id, suppress
from vdq.core import resources
from vdq.core.resources import ARCHIVE_PREFIX
from vdq.store import content_pk, item_pk
from vdq.store.holds import GUARD_PK
from vdq.store.holds import HELD_PREFIX as HELD_PK_PREFIX
from vdq.store.models import ORIGIN_PREFIX, SCHEDULED_PREFIX, suppression_history_pk
from vdq.store.quota_records import quota_pk
from vdq.store.shards import SHARDS_PK as SHARDS_PREFIX

# DynamoDB actions per role. TransactWriteItems is authorised per contained action: a
# transition is an Update of the item and Puts of its history (no ConditionCheck anywhere).
READ = ("dynamodb:GetItem", "dynamodb:BatchGetItem")
QUERY = ("dynamodb:Query",)
TRANSITION = ("dynamodb:UpdateItem", "dynamodb:PutItem")
# Provider events carry an event mark: the transaction checks the mark's record (or the item)
# without writing it. Only the functions that apply provider events (vdq.results.matching) hold it.
CONDITION_CHECK = ("dynamodb:ConditionCheckItem",)
# Publishing to a queue (SQS-managed encryption: no KMS). CDK's grant_send_messages adds
# GetQueueAttributes and GetQueueUrl, which only the schedule's sweep calls (the first);
# consumers get what Lambda's event source mapping needs from the event source itself.
SEND_MESSAGE = ("sqs:SendMessage",)
# Powertools idempotency records of enqueue live under this partition key prefix only.
IDEMPOTENCY_PREFIX = "idempotency#"
# Queue items and their history: the partition of one item (vdq.store.item_pk); a content's
# records and its reference count (vdq.store.content_pk): its own partition, or its origin's.
ITEM_PREFIX = item_pk("")
CONTENT_PREFIX = content_pk("")
CONTENT_PREFIXES = (CONTENT_PREFIX, ORIGIN_PREFIX)
# Suppressions (SUP#<n>) and their history (SUPH#<receiver>): vdq.store.suppressions.
SUPPRESSION_PREFIX = "SUP"
assert suppression_history_pk("").startswith(SUPPRESSION_PREFIX)
# A producer's quota counters (vdq.store.counters).
QUOTA_PREFIX = quota_pk("")
# The reputation guard's levels (one partition) and each held producer's parked items.
GUARD_PREFIX = GUARD_PK
HELD_PREFIX = HELD_PK_PREFIX

def grant(
    stack: Stack,
    functions: Functions,
    data: Data,
    messaging: Messaging,
    email_events: EmailEvents,
    twilio_credentials: CfnParameter,
    ses_identities: tuple[str, ...],
    archive_on: bool = False,
) -> None:
    table = data.table
    objects = data.bucket.arn_for_objects("*")
    uploads = data.bucket.arn_for_objects(f"{resources.UPLOADS_PREFIX}*")
    bus = messaging.bus
    secret_arn = stack.format_arn(
        service="secretsmanager",
        resource="secret",
        resource_name=f"{twilio_credentials.value_as_string}-??????",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )

    # Every function runs with the table's count of index shards when its setting is lower,
    # and raises the count it finds lower (vdq.store.shards), before its first write.
    for function in functions.by_name.values():
        _allow(function, ["dynamodb:GetItem", "dynamodb:UpdateItem"], [table.table_arn],
               conditions=_leading_keys(SHARDS_PREFIX))  # fmt: skip

    # enqueue: new records in one BatchWriteItem, its idempotency records, attachments in,
    # send messages out. One transition of its own, on queue item keys only: when SQS
    # refuses the publish of a new item, the item moves to errored (TransactWriteItems of
    # the item's Update and its history's Put, a GetItem when the item moved meanwhile).
    _allow(functions.enqueue, ["dynamodb:BatchWriteItem"], [table.table_arn])
    _allow(
        functions.enqueue,
        ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
        [table.table_arn],
        conditions=_leading_keys(IDEMPOTENCY_PREFIX),
    )
    _allow(
        functions.enqueue,
        ["dynamodb:GetItem", *TRANSITION],
        [table.table_arn],
        conditions=_leading_keys(ITEM_PREFIX),
    )
    # The content's reference count: confirmed once the items are written, counted off for
    # items that were not; the files of a request that stored no item are deleted.
    _allow(
        functions.enqueue,
        ["dynamodb:GetItem", "dynamodb:UpdateItem"],
        [table.table_arn],
        conditions=_leading_keys(*CONTENT_PREFIXES),
    )
    # The receivers' suppressions, read in one batch to flag them in the answer.
    _allow(
        functions.enqueue,
        ["dynamodb:BatchGetItem"],
        [table.table_arn],
        conditions=_leading_keys(SUPPRESSION_PREFIX),
    )
    _allow(functions.enqueue, ["s3:DeleteObject"], [objects])
    _allow(functions.enqueue, ["s3:PutObject"], [objects])
    # Presigned uploads: the PUT URL it signs carries its s3:PutObject (granted above);
    # enqueue reads an upload (HeadObject, the source of its CopyObject into the files),
    # then deletes it. Reading is granted under the uploads prefix only.
    _allow(functions.enqueue, ["s3:GetObject"], [uploads])
    # Every function that publishes a send may publish in every lane (vdq.workflow.lanes).
    send_queues = [lane.queue.queue_arn for lane in messaging.send_lanes.values()]
    _allow(functions.enqueue, SEND_MESSAGE, send_queues)
    # Producer quotas: the producer's counters record, charged in one conditional UpdateItem,
    # read when a window is full (and a release's earlier records of one a window, once, by
    # BatchGetItem), refunded when the items were not stored.
    _allow(
        functions.enqueue,
        ["dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:BatchGetItem"],
        [table.table_arn],
        conditions=_leading_keys(QUOTA_PREFIX),
    )

    # A held producer's request is told so: the held producers, one Query (cached).
    _allow(functions.enqueue, QUERY, [table.table_arn], conditions=_leading_keys(GUARD_PREFIX))

    # send: claim and record (transitions), read content and attachments, call SES/Twilio.
    _allow(functions.send, [*READ, *TRANSITION, *CONDITION_CHECK], [table.table_arn])
    # The held producers (one Query a cache period); parking checks the hold (ConditionCheck).
    _allow(functions.send, QUERY, [table.table_arn], conditions=_leading_keys(GUARD_PREFIX))
    _allow(functions.send, ["s3:GetObject"], [objects])
    _allow(functions.send, SEND_MESSAGE, send_queues)
    # A send message whose attempt is claimed waits for the claim's lease: its visibility is
    # set to the wait (vdq.dispatch.sendbatch), which the event source's consume grant allows
    # (sqs:ChangeMessageVisibility on each lane it reads). Its batch's check goes to the
    # results queue.
    _allow(functions.send, SEND_MESSAGE, [messaging.results.queue.queue_arn])
    # The pace records are UpdateItems on the table (granted above). The account's sending
    # rate (GetAccount) has no resource to scope it to.
    _allow(functions.send, ["ses:GetAccount"], ["*"])
    # SES v2 SendEmail (raw content included) is the one action, authorised against the
    # sender's identity and the configuration set: only the identities the deployer named.
    _allow(
        functions.send,
        ["ses:SendEmail"],
        [
            *(
                stack.format_arn(service="ses", resource="identity", resource_name=identity)
                for identity in ses_identities
            ),
            stack.format_arn(
                service="ses",
                resource="configuration-set",
                resource_name=email_events.configuration_set.configuration_set_name,
            ),
        ],
    )

    # webhook: provider events -> transitions; deferred lookups go back on the results queue.
    # It is public (Twilio callback) and never reads attachments: no s3:GetObject.
    _allow(functions.webhook, [*READ, *TRANSITION, *CONDITION_CHECK], [table.table_arn])
    _allow(functions.webhook, SEND_MESSAGE, [messaging.results.queue.queue_arn])
    # An inbound START takes a number off the suppression list (a Delete in a transaction).
    _allow(functions.webhook, ["dynamodb:DeleteItem"], [table.table_arn],
           conditions=_leading_keys(SUPPRESSION_PREFIX))  # fmt: skip

    # operator: lists (indexes), single items, operator transitions, resends (each content's
    # copies with their count: a transaction of Puts and Updates; a bulk resend's notes on its
    # originals: one BatchWriteItem), downloads.
    _allow(
        functions.operator,
        [*READ, *QUERY, *TRANSITION, "dynamodb:BatchWriteItem"],
        [table.table_arn],
    )
    # A resend of a content that expires from birth and already outlives its copies checks
    # that expiration in the copies' transaction: a check of contents only.
    _allow(functions.operator, CONDITION_CHECK, [table.table_arn],
           conditions=_leading_keys(*CONTENT_PREFIXES))  # fmt: skip
    _allow(functions.operator, QUERY, [f"{table.table_arn}/index/*"])
    # Operators take receivers off the suppression list.
    _allow(functions.operator, ["dynamodb:DeleteItem"], [table.table_arn],
           conditions=_leading_keys(SUPPRESSION_PREFIX))  # fmt: skip
    # A resend with an Idempotency-Key keeps its record under the idempotency keys.
    _allow(
        functions.operator,
        ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
        [table.table_arn],
        conditions=_leading_keys(IDEMPOTENCY_PREFIX),
    )
    _allow(functions.operator, ["s3:GetObject"], [objects])
    _allow(functions.operator, SEND_MESSAGE, send_queues)
    # A release or a cancel takes each parked item off its producer's list; a release is an
    # event on the bus. SES's reputation metrics: GetMetricData has no resource to scope to.
    _allow(functions.operator, ["dynamodb:DeleteItem"], [table.table_arn],
           conditions=_leading_keys(HELD_PREFIX))  # fmt: skip
    bus.grant_put_events_to(functions.operator)
    _allow(functions.operator, ["cloudwatch:GetMetricData"], ["*"])

    # schedule: timers and purge indexes (queried; the table only by item), sweeps
    # (transitions), purge of files. Records expire by TTL: no DeleteItem, no BatchWriteItem.
    _allow(functions.schedule, [*READ, *TRANSITION, *CONDITION_CHECK], [table.table_arn])
    _allow(functions.schedule, QUERY, [f"{table.table_arn}/index/*"])
    if archive_on:
        # VDQ_ARCHIVE=s3: the stream consumer writes what TTL deleted under archive/ only.
        _allow(functions.schedule, ["s3:PutObject"],
               [data.bucket.arn_for_objects(f"{ARCHIVE_PREFIX}*")])  # fmt: skip
    # Retention: the stream consumer gives an item that became done the expiration on its
    # older records (history, event marks), read with a Query of that item's partition only.
    _allow(functions.schedule, QUERY, [table.table_arn], conditions=_leading_keys(ITEM_PREFIX))
    # The re-publish sweep reads each lane's backlog first (GetQueueAttributes).
    _allow(functions.schedule, [*SEND_MESSAGE, "sqs:GetQueueAttributes"], send_queues)
    # The dead-letter sweep: the send lanes' dead letters, and the checks in the results
    # queue's (received, then deleted once handled; what it leaves given back at once).
    dead_letter_queues = [lane.dead_letters.queue_arn for lane in messaging.send_lanes.values()]
    dead_letter_queues.append(messaging.results.dead_letters.queue_arn)
    _allow(functions.schedule, ["sqs:ReceiveMessage", "sqs:DeleteMessage",
                                "sqs:ChangeMessageVisibility"], dead_letter_queues)  # fmt: skip
    # Long scheduled sends: due-time buckets queried by time, and a cursor a shard.
    _allow(functions.schedule, [*QUERY, "dynamodb:GetItem", "dynamodb:PutItem"],
           [table.table_arn], conditions=_leading_keys(SCHEDULED_PREFIX))  # fmt: skip
    # The minute sweep reads the guard's levels and sends what producers no longer held still
    # have parked, taking each off its producer's list (as an operator's release does); it
    # and the stream consumer delete a level record kept only for a watch that ended.
    _allow(functions.schedule, QUERY, [table.table_arn],
           conditions=_leading_keys(GUARD_PREFIX, HELD_PREFIX))  # fmt: skip
    _allow(functions.schedule, ["dynamodb:DeleteItem"], [table.table_arn],
           conditions=_leading_keys(HELD_PREFIX))  # fmt: skip
    _allow(functions.schedule, ["dynamodb:DeleteItem"], [table.table_arn],
           conditions=_leading_keys(GUARD_PREFIX))  # fmt: skip

    # Transitions may clean up files once every item of a set is done (files age 0).
    for function in (functions.send, functions.webhook, functions.operator, functions.schedule):
        _allow(function, ["s3:DeleteObject"], [objects])
    # The stream consumer announces state changes and the guard's levels.
    bus.grant_put_events_to(functions.schedule)
    # The operator function asks Twilio whom a SID went to, and when (a search by SID).
    for function in (functions.send, functions.webhook, functions.schedule, functions.operator):
        _allow(function, ["secretsmanager:GetSecretValue"], [secret_arn])
    acknowledge(functions, table, data.bucket)

def acknowledge(functions: Functions, table: dynamodb.Table, bucket: s3.IBucket) -> None:
    """The cdk-nag findings each role may keep, and why."""
    for name, function in functions.by_name.items():
        role = function.role
        assert role is not None
        suppress(
            role,
            "IAM4",
            "AWSLambdaBasicExecutionRole only lets the function write its own logs",
            findings=[
                "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaBasicExecutionRole"
            ],
        )
        wildcards = [
            "Resource::*",  # X-Ray segments have no resource ARN
            f"Resource::<{logical_id(bucket)}.Arn>/*",
        ]
        if name in ("operator", "schedule"):
            wildcards.append(f"Resource::<{logical_id(table)}.Arn>/index/*")
        if name == "enqueue":  # its own uploads, under random keys
            wildcards.append(f"Resource::<{logical_id(bucket)}.Arn>/"
                             f"{resources.UPLOADS_PREFIX}*")  # fmt: skip
        if name in ("send", "webhook", "schedule", "operator"):
            wildcards.append(
                "Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:"
                "<AWS::AccountId>:secret:<TwilioCredentialsName>-??????"
            )
        if name == "schedule":
            wildcards.append(
                f"Resource::<{logical_id(bucket)}.Arn>/{ARCHIVE_PREFIX}*")
        suppress(
            role,
            "IAM5",
            "object keys are random per attachment, the indexes are the table's own, the "
            "secret suffix is AWS's, X-Ray, SES GetAccount and CloudWatch GetMetricData have no "
            "ARN, archive objects "
            "are keyed by day and stream event",
            findings=wildcards,
        )

def _leading_keys(*prefixes: str) -> dict:
    """Only items whose partition key starts with one of ``prefixes`` (every key of a batch)."""
    return {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{p}*" for p in prefixes]}}

def _allow(
    function: lambda_.Function,
    actions: list[str] | tuple[str, ...],
    resources_: list[str],
    conditions: dict | None = None,
) -> None:
    function.add_to_role_policy(
        iam.PolicyStatement(actions=list(actions), resources=resources_, conditions=conditions)
    )
