"""The VDQ stack: wires the constructs and grants each function only what it does."""

from __future__ import annotations

from aws_cdk import CfnOutput, CfnParameter, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.api import TWILIO_CALLBACK_PATH, Api
from infra.config import DeployConfig, camel
from infra.data import Data
from infra.email_events import EmailEvents
from infra.functions import Functions
from infra.grants import grant
from infra.messaging import Messaging
from infra.monitoring import Monitoring
from infra.nag import suppress
from infra.schedules import Schedules
from vdq.core import resources
from vdq.schedules.archive import TTL_PRINCIPAL


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
            capacity=config.capacity,
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
            # The schedule's dead-letter sweep (vdq.schedules.dead_letters).
            "VDQ_SEND_DEAD_LETTER_QUEUE_URL": messaging.send.dead_letters.queue_url,
            "VDQ_HIGH_SEND_DEAD_LETTER_QUEUE_URL":
                messaging.send_lanes["high"].dead_letters.queue_url,
            "VDQ_BULK_SEND_DEAD_LETTER_QUEUE_URL":
                messaging.send_lanes["bulk"].dead_letters.queue_url,
            "VDQ_RESULTS_DEAD_LETTER_QUEUE_URL": messaging.results.dead_letters.queue_url,
            # A claimed send's lease: no holder is alive after its function's timeout.
            "VDQ_SEND_TIMEOUT_SECONDS": str(config.timeout_seconds["send"]),
            "VDQ_EVENT_BUS_NAME": messaging.bus.event_bus_name,
            "VDQ_SES_CONFIGURATION_SET": email_events.configuration_set.configuration_set_name,
            "VDQ_TWILIO_SECRET_NAME": twilio_credentials.value_as_string,
            # Enqueue refuses a sender the send role may not send from (vdq.intake.messages).
            "VDQ_SENDER_IDENTITIES": ",".join(config.ses_identities),
        }
        # The key of one-click unsubscribe tokens (vdq.results.unsubscribe): generated, never in the
        # template; the send function seals links with it, the webhook function opens them (with
        # the secret's AWSPREVIOUS version too, during a rotation).
        unsubscribe_key = secretsmanager.Secret(
            self,
            "UnsubscribeKey",
            description="VDQ: the key that seals one-click unsubscribe links (the address and "
            "list in each)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
        )
        suppress(
            unsubscribe_key,
            "SMG4",
            "rotated by hand (Operating: rotating the unsubscribe key), not on a schedule: a "
            "rotation keeps the links sealed with the previous value working, the one after "
            "retires them, and every email sent before then loses its link; the key grants "
            "no AWS access, but it hides the addresses in links and authorises unsubscribes, "
            "so a leak is a reason to rotate",
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
        # Bulk emails link to the API's unsubscribe path (vdq.results.unsubscribe).
        functions.send.add_environment("VDQ_UNSUBSCRIBE_URL", f"{api.url}unsubscribe/")
        schedules = Schedules(self, "Schedules", function=functions.schedule)
        archive_on = config.settings.get("VDQ_ARCHIVE", "").strip().lower() == "s3"
        # The table's stream: the schedule function publishes state-change events from it, at
        # least once (a failed batch is retried, then halved, then its position goes to the
        # schedules' dead-letter queue), and folds it into postings and counts in a tumbling
        # window, exactly once (vdq.schedules.postings). The checkpoints that make them exactly
        # once need a shard's batches in order: no parallelization factor.
        functions.schedule.add_event_source(
            sources.DynamoEventSource(
                data.table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=resources.STREAM_BATCH_SIZE,
                max_batching_window=Duration.seconds(resources.STREAM_BATCHING_WINDOW_SECONDS),
                tumbling_window=Duration.seconds(resources.STREAM_TUMBLING_WINDOW_SECONDS),
                bisect_batch_on_error=True,
                retry_attempts=resources.STREAM_RETRY_ATTEMPTS,
                on_failure=sources.SqsDlq(schedules.dead_letters),
                filters=[
                    *(lambda_.FilterCriteria.filter(pattern)
                      for pattern in resources.STREAM_FILTERS),
                    # VDQ_ARCHIVE=s3: the records TTL deleted (vdq.schedules.archive), nothing else.
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

        grant(
            self, functions, data, messaging, email_events, twilio_credentials,
            config.ses_identities, archive_on,
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
            *((f"ProducerClient{camel(name)}", client.user_pool_client_id,
               f"the machine client of the producer {name}")
              for name, client in api.producer_clients.items()),
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
            ("UnsubscribeKeySecret", unsubscribe_key.secret_arn,
             "Secrets Manager secret of the unsubscribe links' key (rotate it by hand)"),
        ):
            CfnOutput(self, name, value=value, description=description)
