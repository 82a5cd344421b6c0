"""Alarms on what needs a person, and one dashboard."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from vdq.core import observability, resources

_FIVE_MINUTES = Duration.minutes(5)


def vdq_metric(name: str) -> cloudwatch.Metric:
    """A Powertools metric of the VDQ namespace (Powertools adds the service dimension)."""
    return cloudwatch.Metric(
        namespace=observability.NAMESPACE,
        metric_name=name,
        dimensions_map={"service": observability.SERVICE},
        statistic="Sum",
        period=_FIVE_MINUTES,
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        functions: Mapping[str, lambda_.IFunction],
        dead_letter_queues: Mapping[str, sqs.IQueue],
        email_events_topic: sns.ITopic,
        rest_api: apigw.RestApi,
        alarm_email: str | None,
    ) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(self, "Alarms", enforce_ssl=True)
        # Refusing plain HTTP gives the topic a policy of its own, in place of SNS's default
        # one: CloudWatch publishes an alarm under the topic policy alone, so it must say that
        # this account's alarms may.
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowAlarmsToPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "ArnLike": {
                        "aws:SourceArn": Stack.of(self).format_arn(
                            service="cloudwatch",
                            resource="alarm",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    }
                },
            )
        )
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        self.alarms: list[cloudwatch.Alarm] = []

        for name, queue in dead_letter_queues.items():
            self._alarm(
                f"{name}DeadLetters",
                queue.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(1), statistic="Maximum"
                ),
                f"messages in the {name} dead-letter queue: inspect, fix, redrive",
            )
        # SNS could not deliver SES events to the results queue (they go to the EmailEvents
        # dead-letter queue once SNS gives up). Events SES itself fails to publish have no
        # metric: the email timeout (VDQ_EMAIL_TIMEOUT_HOURS) is the backstop for those.
        self._alarm(
            "EmailEventDeliveryFailures",
            email_events_topic.metric_number_of_notifications_failed(
                period=_FIVE_MINUTES, statistic="Sum"
            ),
            "SNS failed to deliver SES events to the results queue",
        )
        self._alarm(
            "ErroredItems",
            vdq_metric(resources.METRIC_ITEMS_ERRORED),
            "queue items entered errored: an operator should retry or cancel them",
        )
        self._alarm(
            "StuckSending",
            vdq_metric(resources.METRIC_LEASES_EXPIRED),
            "send attempts outlived their lease in sending (outcome unknown)",
        )
        # The reputation guard: a producer's (or the account's) bounce or complaint rate
        # reached a warn or a hold threshold (vdq.results.judging), well before SES's own.
        self._alarm(
            "ReputationWarning",
            vdq_metric(resources.METRIC_REPUTATION_WARNINGS),
            "a producer's or the account's bounce or complaint rate reached a warn threshold",
        )
        self._alarm(
            "ProducerHeld",
            vdq_metric(resources.METRIC_PRODUCERS_HELD),
            "a producer's bounce or complaint rate reached a hold threshold: its email is held "
            "until an operator releases it",
        )
        for name, function in functions.items():
            self._alarm(
                f"{name.title()}Errors",
                function.metric_errors(period=_FIVE_MINUTES, statistic="Sum"),
                f"the {name} function failed",
            )
            self._alarm(
                f"{name.title()}Throttles",
                function.metric_throttles(period=_FIVE_MINUTES, statistic="Sum"),
                f"the {name} function was throttled",
            )
        server_errors = rest_api.metric_server_error(period=_FIVE_MINUTES, statistic="Sum")
        self._alarm("Api5xx", server_errors, "the REST API answered 5xx")

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard")
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Queue items",
                left=[
                    vdq_metric("ItemsEnqueued"),
                    vdq_metric(resources.METRIC_ITEMS_ERRORED),
                    vdq_metric(resources.METRIC_LEASES_EXPIRED),
                ],
            ),
            cloudwatch.GraphWidget(
                title="API",
                left=[rest_api.metric_count(period=_FIVE_MINUTES), server_errors],
                right=[rest_api.metric_latency(period=_FIVE_MINUTES)],
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Function errors",
                left=[f.metric_errors(period=_FIVE_MINUTES) for f in functions.values()],
            ),
            cloudwatch.GraphWidget(
                title="Function duration (p99)",
                left=[
                    f.metric_duration(period=_FIVE_MINUTES, statistic="p99")
                    for f in functions.values()
                ],
            ),
            cloudwatch.GraphWidget(
                title="Dead-letter queues",
                left=[
                    q.metric_approximate_number_of_messages_visible(period=Duration.minutes(1))
                    for q in dead_letter_queues.values()
                ],
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Suppression",
                left=[vdq_metric(resources.METRIC_SENDS_SUPPRESSED),
                      vdq_metric(resources.METRIC_SUPPRESSIONS_ADDED)],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Provider rate",
                left=[vdq_metric(resources.METRIC_SENDS_PACED),
                      vdq_metric(resources.METRIC_SENDS_THROTTLED),
                      vdq_metric(resources.METRIC_SEND_RETRIES),
                      vdq_metric(resources.METRIC_SEND_ERRORS)],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Reputation guard",
                left=[vdq_metric(resources.METRIC_REPUTATION_WARNINGS),
                      vdq_metric(resources.METRIC_PRODUCERS_HELD),
                      vdq_metric(resources.METRIC_SENDS_HELD)],
                width=24,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24)
        )

    def _alarm(self, id: str, metric: cloudwatch.IMetric, description: str) -> None:
        alarm = cloudwatch.Alarm(
            self,
            id,
            metric=metric,
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        self.alarms.append(alarm)
