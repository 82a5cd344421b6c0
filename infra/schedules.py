"""EventBridge Scheduler: the periodic tasks of the schedule function.

Invocations the scheduler gives up on (after its retries, or too old) go to the schedules' own
dead-letter queue, watched by its own alarm: they say the schedule function failed, which is
another matter than a provider event the results consumer could not record.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.nag import logical_id, suppress

# task -> how often: SMS polling and timeouts, the lease/publish sweep, the daily file purge.
TASKS = {
    "sms": scheduler.ScheduleExpression.rate(Duration.minutes(1)),
    "sweep": scheduler.ScheduleExpression.rate(Duration.minutes(1)),
    "purge": scheduler.ScheduleExpression.rate(Duration.days(1)),
}


class Schedules(Construct):
    def __init__(self, scope: Construct, id: str, *, function: lambda_.IFunction) -> None:
        super().__init__(scope, id)
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
            "it is a dead-letter queue: the schedules' (cdk-nag sees SQS redrives only)",
        )
        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com")
        )
        self.schedules = {
            task: scheduler.Schedule(
                self,
                task.title(),
                description=f"VDQ schedule task {task}",
                schedule=expression,
                target=targets.LambdaInvoke(
                    function,
                    input=scheduler.ScheduleTargetInput.from_object({"task": task}),
                    # A missed minute is made up by the next run: never pile runs up.
                    max_event_age=Duration.minutes(5) if task != "purge" else Duration.hours(6),
                    retry_attempts=2,
                    dead_letter_queue=self.dead_letters,
                    role=self.role,
                ),
            )
            for task, expression in TASKS.items()
        }
        suppress(
            self.role,
            "IAM5",
            "the scheduler may invoke the schedule function's versions (its own ARN plus ':*')",
            findings=[f"Resource::<{logical_id(function)}.Arn>:*"],
        )
