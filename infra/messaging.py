"""The queues between the functions and the bus that carries state-change events."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from vdq.core import resources


class WorkQueue(Construct):
    """A queue with its dead-letter queue, encrypted, TLS only."""

    def __init__(self, scope: Construct, id: str, *, consumer_timeout_seconds: int,
                 batching_window_seconds: int, retention_days: int) -> None:  # fmt: skip
        super().__init__(scope, id)
        visibility = resources.visibility_seconds(consumer_timeout_seconds, batching_window_seconds)
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(resources.DEAD_LETTER_RETENTION_DAYS),
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(visibility),
            retention_period=Duration.days(retention_days),
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=resources.MAX_RECEIVE_COUNT, queue=self.dead_letters
            ),
        )


_LANE_IDS = {"high": "SendHigh", "normal": "Send", "bulk": "SendBulk"}


class Messaging(Construct):
    def __init__(
        self, scope: Construct, id: str, *, send_timeout_seconds: int, results_timeout_seconds: int
    ) -> None:
        super().__init__(scope, id)
        # One send queue per priority lane (vdq.workflow.lanes); the normal lane keeps the
        # original's id.
        self.send_lanes = {
            priority: WorkQueue(self, _LANE_IDS[priority],
                                consumer_timeout_seconds=send_timeout_seconds,
                                batching_window_seconds=resources.SEND_BATCHING_WINDOW_SECONDS,
                                retention_days=resources.SEND_RETENTION_DAYS)
            for priority in resources.SEND_QUEUES
        }  # fmt: skip
        self.send = self.send_lanes["normal"]
        self.results = WorkQueue(self, "Results", consumer_timeout_seconds=results_timeout_seconds,
                                 batching_window_seconds=resources.RESULTS_BATCHING_WINDOW_SECONDS,
                                 retention_days=resources.RESULTS_RETENTION_DAYS)
        self.bus = events.EventBus(self, "StateEvents")
