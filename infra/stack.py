"""The VDQ stack: wires the constructs and grants each function only what it does."""

from __future__ import annotations

from aws_cdk import ArnFormat, CfnOutput, CfnParameter, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.api import TWILIO_CALLBACK_PATH, Api
from infra.config import DeployConfig
from infra.data import Data
from infra.email_events import EmailEvents
from infra.functions import Functions
from infra.messaging import Messaging
from infra.monitoring import Monitoring
from infra.nag import logical_id, suppress
from infra.schedules import Schedules
from vdq import resources
from vdq.archive import TTL_PRINCIPAL
from vdq.resources import ARCHIVE_PREFIX
from vdq.store import content_pk, item_pk
from vdq.store.counters import quota_pk
from vdq.store.models import SCHEDULED_PREFIX, suppression_history_pk

# DynamoDB actions per role. TransactWriteItems is authorised per contained action: a
# transition is an Update of the item and Puts of its history (no ConditionCheck anywhere).
READ = ("dynamodb:GetItem", "dynamodb:BatchGetItem")
QUERY = ("dynamodb:Query",)
TRANSITION = ("dynamodb:UpdateItem", "dynamodb:PutItem")
# Provider events carry an event mark: the transaction checks the mark's record (or the item)
# without writing it. Only the functions that apply provider events (vdq.results) hold it.
CONDITION_CHECK = ("dynamodb:ConditionCheckItem",)
# Publishing to a queue (SQS-managed encryption: no KMS). CDK's grant_send_messages adds
# GetQueueAttributes and GetQueueUrl, which only the schedule's sweep calls (the first);
# consumers get what Lambda's event source mapping needs from the event source itself.
SEND_MESSAGE = ("sqs:SendMessage",)
# Powertools idempotency records of enqueue live under this partition key prefix only.
IDEMPOTENCY_PREFIX = "idempotency#"
# Queue items and their history: the partition of one item (vdq.store.item_pk); a content's
# records and its reference count (vdq.store.content_pk).
ITEM_PREFIX = item_pk("")
CONTENT_PREFIX = content_pk("")
# Suppressions (SUP#<n>) and their history (SUPH#<receiver>): vdq.store.suppressions.
SUPPRESSION_PREFIX = "SUP"
assert suppression_history_pk("").startswith(SUPPRESSION_PREFIX)
# A producer's quota counters (vdq.store.counters).
QUOTA_PREFIX = quota_pk("")


class VdqStack(Stack):
    def __init__(self, scope: Construct, id: str, *, config: DeployConfig, **kwargs) -> None:
        super().__init__(
            scope, id, description="VDQ: outbound email and SMS dispatch queue", **kwargs
        )
        twilio_credentials = CfnParameter(
            self,
            "TwilioCredentialsName",
            type="String",
            default=config.twilio_secret_name,
            description="Secrets Manager secret (JSON: account_sid, auth_token) of the Twilio "
            "account; the token never enters the template",
            min_length=1,
        )
        data = Data(
            self,
            "Data",
            deletion_protection=config.deletion_protection,
            noncurrent_days=config.files_noncurrent_days,
        )
        messaging = Messaging(
            self,
            "Messaging",
            send_timeout_seconds=config.timeout_seconds["send"],
            results_timeout_seconds=config.timeout_seconds["webhook"],
        )
        email_events = EmailEvents(
            self,
            "EmailEvents",
            results_queue=messaging.results.queue,
            open_click_tracking=config.open_click_tracking,
        )
        environment = {
            **config.settings,
            "VDQ_TABLE_NAME": data.table.table_name,
            "VDQ_ATTACHMENTS_BUCKET": data.bucket.bucket_name,
            "VDQ_SEND_QUEUE_URL": messaging.send.queue.queue_url,
            "VDQ_HIGH_SEND_QUEUE_URL": messaging.send_lanes["high"].queue.queue_url,
            "VDQ_BULK_SEND_QUEUE_URL": messaging.send_lanes["bulk"].queue.queue_url,
            "VDQ_RESULTS_QUEUE_URL": messaging.results.queue.queue_url,
            "VDQ_EVENT_BUS_NAME": messaging.bus.event_bus_name,
            "VDQ_SES_CONFIGURATION_SET": email_events.configuration_set.configuration_set_name,
            "VDQ_TWILIO_SECRET_NAME": twilio_credentials.value_as_string,
            # Enqueue refuses a sender the send role may not send from (vdq.messages).
            "VDQ_SENDER_IDENTITIES": ",".join(config.ses_identities),
        }
        # The key of one-click unsubscribe tokens (vdq.unsubscribe): generated, never in the
        # template; the send function signs with it, the webhook function checks.
        unsubscribe_key = secretsmanager.Secret(
            self,
            "UnsubscribeKey",
            description="VDQ: the key that signs one-click unsubscribe links",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
        )
        suppress(
            unsubscribe_key,
            "SMG4",
            "rotating it would break the unsubscribe links of every email already sent; "
            "it signs, it grants no access",
        )
        environment["VDQ_UNSUBSCRIBE_SECRET_NAME"] = unsubscribe_key.secret_arn
        functions = Functions(self, "Functions", config=config, environment=environment)
        # One event source per priority lane, each with its own concurrency: a bulk backlog
        # holds at most the bulk lane's workers, never the high lane's.
        lane_concurrency = {"high": config.high_send_max_concurrency,
                            "normal": config.send_max_concurrency,
                            "bulk": config.bulk_send_max_concurrency}  # fmt: skip
        for priority, lane in messaging.send_lanes.items():
            functions.consume(
                functions.send,
                lane.queue,
                batch_size=resources.SEND_BATCH_SIZE,
                batching_window_seconds=resources.HIGH_SEND_BATCHING_WINDOW_SECONDS
                if priority == "high" else resources.SEND_BATCHING_WINDOW_SECONDS,
                max_concurrency=lane_concurrency[priority],
            )
        functions.consume(
            functions.webhook,
            messaging.results.queue,
            batch_size=resources.RESULTS_BATCH_SIZE,
            batching_window_seconds=resources.RESULTS_BATCHING_WINDOW_SECONDS,
            max_concurrency=config.results_max_concurrency,
        )
        api = Api(
            self,
            "Api",
            config=config,
            enqueue=functions.enqueue,
            operator=functions.operator,
            webhook=functions.webhook,
        )
        # The operator console signs users in at the pool's hosted UI (vdq.console).
        functions.operator.add_environment("VDQ_CONSOLE_AUTH_URL", api.domain.base_url())
        functions.operator.add_environment(
            "VDQ_CONSOLE_CLIENT_ID", api.console_client.user_pool_client_id
        )
        # Unset: the API's own callback path. Set empty: no callback, the schedule polls Twilio.
        if config.twilio_webhook_url is None:
            webhook_url = f"{api.url}{TWILIO_CALLBACK_PATH}"
        else:
            webhook_url = config.twilio_webhook_url or "(none: polling)"
        if config.twilio_webhook_url != "":
            for function in (functions.send, functions.webhook, functions.schedule):
                function.add_environment("TWILIO_WEBHOOK_URL", webhook_url)
        # Bulk emails link to the API's unsubscribe path (vdq.unsubscribe).
        functions.send.add_environment("VDQ_UNSUBSCRIBE_URL", f"{api.url}unsubscribe/")
        schedules = Schedules(self, "Schedules", function=functions.schedule)
        archive_on = config.settings.get("VDQ_ARCHIVE", "").strip().lower() == "s3"
        # State-change events: the schedule function publishes them from the table's stream,
        # at least once (a failed batch is retried, then halved, then its position goes to the
        # schedules' dead-letter queue).
        functions.schedule.add_event_source(
            sources.DynamoEventSource(
                data.table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=100,
                max_batching_window=Duration.seconds(1),
                bisect_batch_on_error=True,
                retry_attempts=10,
                on_failure=sources.SqsDlq(schedules.dead_letters),
                filters=[
                    lambda_.FilterCriteria.filter({
                        "eventName": lambda_.FilterRule.is_equal("MODIFY"),
                        "dynamodb": {"NewImage": {"sk": {"S": lambda_.FilterRule.is_equal(
                            "STATE")}}},
                    }),
                    # VDQ_ARCHIVE=s3: the records TTL deleted (vdq.archive), nothing else.
                    *([lambda_.FilterCriteria.filter({
                        "eventName": lambda_.FilterRule.is_equal("REMOVE"),
                        "userIdentity": {
                            "type": lambda_.FilterRule.is_equal("Service"),
                            "principalId": lambda_.FilterRule.is_equal(TTL_PRINCIPAL),
                        },
                    })] if archive_on else []),
                ],
            )
        )  # fmt: skip
        monitoring = Monitoring(
            self,
            "Monitoring",
            functions=functions.by_name,
            dead_letter_queues={
                "Send": messaging.send.dead_letters,
                "SendHigh": messaging.send_lanes["high"].dead_letters,
                "SendBulk": messaging.send_lanes["bulk"].dead_letters,
                "Results": messaging.results.dead_letters,
                "Schedule": schedules.dead_letters,
                "EmailEvents": email_events.dead_letters,
            },
            email_events_topic=email_events.topic,
            rest_api=api.rest_api,
            alarm_email=config.alarm_email,
        )
        self.data, self.messaging, self.email_events = data, messaging, email_events
        self.functions, self.api, self.schedules, self.monitoring = (
            functions,
            api,
            schedules,
            monitoring,
        )

        self._grant(
            functions, data, messaging, email_events, twilio_credentials, config.ses_identities,
            archive_on,
        )
        # The unsubscribe key: send signs links, the webhook function checks them.
        for function in (functions.send, functions.webhook):
            unsubscribe_key.grant_read(function)
        for name, value, description in (
            ("ApiUrl", api.url, "REST API base URL"),
            ("ConsoleUrl", api.console_url, "operator console (sign in with a pool user)"),
            ("TwilioWebhookUrl", webhook_url, "Twilio status callback URL"),
            ("UserPoolId", api.user_pool.user_pool_id, "Cognito user pool of operators"),
            ("OperatorClientId", api.operator_client.user_pool_client_id, "operators' client"),
            ("MachineClientId", api.machine_client.user_pool_client_id, "producers' client"),
            (
                "TokenUrl",
                f"{api.domain.base_url()}/oauth2/token",
                "client-credentials token endpoint of machine clients",
            ),
            ("TableName", data.table.table_name, "DynamoDB table"),
            ("AttachmentsBucket", data.bucket.bucket_name, "S3 bucket of attachments"),
            (
                "ConfigurationSet",
                email_events.configuration_set.configuration_set_name,
                "SES configuration set VDQ sends with",
            ),
            ("SendDeadLetterQueue", messaging.send.dead_letters.queue_url, "send DLQ"),
            ("SendHighDeadLetterQueue", messaging.send_lanes["high"].dead_letters.queue_url,
             "high priority send DLQ"),
            ("SendBulkDeadLetterQueue", messaging.send_lanes["bulk"].dead_letters.queue_url,
             "bulk priority send DLQ"),
            ("ResultsDeadLetterQueue", messaging.results.dead_letters.queue_url, "results DLQ"),
            ("ScheduleDeadLetterQueue", schedules.dead_letters.queue_url, "schedule runs DLQ"),
            (
                "EmailEventsDeadLetterQueue",
                email_events.dead_letters.queue_url,
                "SES events SNS could not deliver",
            ),
            ("Dashboard", monitoring.dashboard.dashboard_name, "CloudWatch dashboard"),
        ):
            CfnOutput(self, name, value=value, description=description)

    def _grant(
        self,
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
        secret_arn = self.format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=f"{twilio_credentials.value_as_string}-??????",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )

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
            conditions=_leading_keys(CONTENT_PREFIX),
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
        # Every function that publishes a send may publish in every lane (vdq.lanes).
        send_queues = [lane.queue.queue_arn for lane in messaging.send_lanes.values()]
        _allow(functions.enqueue, SEND_MESSAGE, send_queues)
        # Producer quotas: the counters of the current windows, charged in one transaction of
        # conditional ADDs, read when one is full, refunded when the items were not stored.
        _allow(
            functions.enqueue,
            ["dynamodb:UpdateItem", "dynamodb:BatchGetItem"],
            [table.table_arn],
            conditions=_leading_keys(QUOTA_PREFIX),
        )

        # send: claim and record (transitions), read content and attachments, call SES/Twilio.
        _allow(functions.send, [*READ, *TRANSITION, *CONDITION_CHECK], [table.table_arn])
        _allow(functions.send, ["s3:GetObject"], [objects])
        _allow(functions.send, SEND_MESSAGE, send_queues)
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
                    self.format_arn(service="ses", resource="identity", resource_name=identity)
                    for identity in ses_identities
                ),
                self.format_arn(
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

        # operator: lists (indexes), single items, operator transitions, resends, downloads.
        _allow(
            functions.operator,
            [*READ, *QUERY, *TRANSITION, "dynamodb:BatchWriteItem"],
            [table.table_arn],
        )
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
        # Long scheduled sends: due-time buckets queried by time, and a cursor a shard.
        _allow(functions.schedule, [*QUERY, "dynamodb:GetItem", "dynamodb:PutItem"],
               [table.table_arn], conditions=_leading_keys(SCHEDULED_PREFIX))  # fmt: skip

        # Transitions may clean up files once every item of a set is done (files age 0).
        for function in (functions.send, functions.webhook, functions.operator, functions.schedule):
            _allow(function, ["s3:DeleteObject"], [objects])
        # Only the stream consumer announces state changes.
        bus.grant_put_events_to(functions.schedule)
        for function in (functions.send, functions.webhook, functions.schedule):
            _allow(function, ["secretsmanager:GetSecretValue"], [secret_arn])
        self._acknowledge(functions, table)

    def _acknowledge(self, functions: Functions, table: dynamodb.Table) -> None:
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
                f"Resource::<{logical_id(self.data.bucket)}.Arn>/*",
            ]
            if name in ("operator", "schedule"):
                wildcards.append(f"Resource::<{logical_id(table)}.Arn>/index/*")
            if name == "enqueue":  # its own uploads, under random keys
                wildcards.append(f"Resource::<{logical_id(self.data.bucket)}.Arn>/"
                                 f"{resources.UPLOADS_PREFIX}*")  # fmt: skip
            if name in ("send", "webhook", "schedule"):
                wildcards.append(
                    "Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:"
                    "<AWS::AccountId>:secret:<TwilioCredentialsName>-??????"
                )
            if name == "schedule":
                wildcards.append(
                    f"Resource::<{logical_id(self.data.bucket)}.Arn>/{ARCHIVE_PREFIX}*")
            suppress(
                role,
                "IAM5",
                "object keys are random per attachment, the indexes are the table's own, the "
                "secret suffix is AWS's, X-Ray and SES GetAccount have no ARN, archive objects "
                "are keyed by day and stream event",
                findings=wildcards,
            )


def _leading_keys(prefix: str) -> dict:
    """Only items whose partition key starts with ``prefix`` (every key of a batch)."""
    return {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{prefix}*"]}}


def _allow(
    function: lambda_.Function,
    actions: list[str] | tuple[str, ...],
    resources_: list[str],
    conditions: dict | None = None,
) -> None:
    function.add_to_role_policy(
        iam.PolicyStatement(actions=list(actions), resources=resources_, conditions=conditions)
    )
