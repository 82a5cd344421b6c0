"""The shape of VDQ's AWS resources, as plain data.

The CDK app (infra/) and the local stack both build their table, queues and indexes from these
definitions, so the two cannot drift apart. Pure data: importing it costs nothing at cold start.
"""

from __future__ import annotations

from dataclasses import dataclass

# One table holds every record kind; keys are prefixed by kind (see vdq.store).
TABLE_PARTITION_KEY = "pk"
TABLE_SORT_KEY = "sk"
# The TTL attribute, shared with Powertools idempotency records (its default name).
TABLE_TTL_ATTRIBUTE = "expiration"
# Presigned uploads land under this prefix of the attachments bucket (vdq.intake.uploads); an email
# that names one copies it to its files and deletes it, and the bucket's lifecycle rule expires the
# uploads no email took after this many days.
UPLOADS_PREFIX = "uploads/"
UPLOADS_EXPIRE_DAYS = 1


@dataclass(frozen=True)
class IndexSpec:
    """A sparse, write-sharded, keys-only global secondary index."""

    name: str
    partition_key: str
    sort_key: str
    purpose: str


ACTIVE_INDEX = IndexSpec(
    "active", "active_pk", "active_sk", "items not in a done state, oldest first"
)
TIMERS_INDEX = IndexSpec(
    "timers",
    "timer_pk",
    "timer_sk",
    "what a schedule must look at by time: unclaimed publishes, sending leases, awaiting SMS",
)
PURGE_INDEX = IndexSpec(
    "purge",
    "purge_pk",
    "purge_sk",
    "attachment sets whose items are all done, for the file-age purge",
)
# Every item by its receiver: the partition is a hash of the receiver as the suppression list
# compares it (vdq.store.search.receiver_key), the sort key the item's own id (a ULID: time
# first), so one Query answers "every item to ada@example.org, newest first" across the active
# queue and the sent items. Written once at enqueue, never moved.
RECEIVER_INDEX = IndexSpec(
    "receiver", "rx", "id", "every item by a hash of its normalised receiver, newest first"
)
# The items in a done state are listed from the stream's done postings, not an index: an
# entry there is a write unit an item, a posting holds a minute of a shard's (vdq.store.postings).
INDEXES = (ACTIVE_INDEX, TIMERS_INDEX, PURGE_INDEX, RECEIVER_INDEX)

# Expired records archived from the stream (VDQ_ARCHIVE=s3), in the attachments bucket.
ARCHIVE_PREFIX = "archive/"

# Queues: name suffix -> properties both deployments share.
SEND_QUEUE = "send"  # the normal priority lane's queue
# One send queue per priority lane (vdq.workflow.lanes), each with its own dead-letter queue and
# consumer.
SEND_QUEUES = {"high": "send-high", "normal": SEND_QUEUE, "bulk": "send-bulk"}
RESULTS_QUEUE = "results"
# Deliveries of a message before it goes to the dead-letter queue, where the schedule's
# dead-letter sweep errors its item (vdq.schedules.dead_letters). Each receive counts, the waits
# of a send message for its lease included (vdq.dispatch.send): ten leave room for several.
MAX_RECEIVE_COUNT = 10
# Days SQS keeps a message before it deletes it, received or not (dead-letter queues: 14). A
# send message is an item's only way to its provider (no timer stands behind it): the longest.
SEND_RETENTION_DAYS = 14
RESULTS_RETENTION_DAYS = 4
DEAD_LETTER_RETENTION_DAYS = 14
SEND_BATCH_SIZE = 10
RESULTS_BATCH_SIZE = 10
# How long Lambda may wait to fill a batch: a full batch shares one invocation and one receive
# between ten messages. Sends wait at most a second; provider results are not urgent.
SEND_BATCHING_WINDOW_SECONDS = 1
# The high lane does not wait to fill a batch: its few messages are each a code someone waits for.
HIGH_SEND_BATCHING_WINDOW_SECONDS = 0
RESULTS_BATCHING_WINDOW_SECONDS = 10
# The table's stream, to the schedule function (infra/stack.py): records per batch at most, and
# how long Lambda gathers them on a shard before invoking (bench.cost models the batches). A shard
# sees a few records a second at 1M emails a day (a shard per 10 GB of table): a 1 s window made
# an invocation of about 3 records, 10 s makes one of about 35. What the stream does (expiry
# stamps, state events into errored) is that much later; a batch stays far under the function's
# timeout and Lambda's 6 MB payload (the mapping's limits: 10,000 records, 300 s).
STREAM_BATCH_SIZE = 1000
STREAM_BATCHING_WINDOW_SECONDS = 10
SEND_FUNCTION_TIMEOUT_SECONDS = 60
RESULTS_FUNCTION_TIMEOUT_SECONDS = 30
# AWS's advice for SQS event sources: six times the function timeout plus the batching window,
# so Lambda can retry a throttled invocation before the messages come back.
VISIBILITY_FACTOR = 6


def visibility_seconds(consumer_timeout_seconds: int, batching_window_seconds: int) -> int:
    """A queue's visibility timeout, from its consumer's timeout and batching window."""
    return VISIBILITY_FACTOR * consumer_timeout_seconds + batching_window_seconds


# Each queue's dead-letter queue is named "<queue>-dlq"; SES events reach the results queue
# through this SNS topic (raw message delivery).
DEAD_LETTER_SUFFIX = "-dlq"
SES_EVENTS_TOPIC = "ses-events"
# The SES event types (their eventType) the configuration set publishes to that topic: the
# outcome of each email. Not Send: the worker records SES's acceptance from SendEmail's answer,
# so Send told nothing new, for US$1.40 per million emails. Without it, an email whose worker
# died (or failed to record) after SES accepted stays sending until its next event, which
# carries its tags and moves it on; if the lease passes first, the sweep errors it "outcome
# unknown" and that event is recorded in history as late. The webhook still reads a Send.
SES_EVENTS = ("Reject", "Bounce", "Complaint", "Delivery", "Rendering Failure", "DeliveryDelay")
# Opt-in (vdq:openClickTracking): subscribing them turns on SES's link rewriting and open pixel.
SES_TRACKING_EVENTS = ("Open", "Click")
# The stream's postings and counts (vdq.schedules.postings) are exactly once through the
# mapping's tumbling window: Lambda passes the window's state from batch to batch of a shard,
# with the shard's id, and the window's last invocation writes a handful of records for the
# whole window, each with the shard's checkpoint in the same write. So they cost a few write
# units per shard a minute, whatever the volume; the searches by time, sender and provider ID
# and the counts follow a change by up to the window and a batch's wait (70 s).
STREAM_TUMBLING_WINDOW_SECONDS = 60
# The filter of the mapping (Lambda's filter-pattern syntax, as plain data: the CDK app and the
# local stack's poller both read it): new and changed state items, and history records that
# hold a provider's bounce, complaint or rejection when they did not fit on the state item.
STREAM_FILTERS: tuple[dict, ...] = (
    {"eventName": ["INSERT", "MODIFY"], "dynamodb": {"NewImage": {"sk": {"S": ["STATE"]}}}},
    {"eventName": ["INSERT"], "dynamodb": {"NewImage": {
        "sk": {"S": [{"prefix": "H#"}]}, "actor": {"S": ["ses"]},
        "name": {"S": ["error", "Bounce", "Complaint", "Reject"]}}}},
)
STREAM_RETRY_ATTEMPTS = 10
API_FUNCTION_TIMEOUT_SECONDS = 29  # API Gateway's integration limit
SCHEDULE_FUNCTION_TIMEOUT_SECONDS = 120

# The port the local stack (`make run`, `vdq local`) serves the API on unless told another.
LOCAL_PORT = 8765
# The names of the local stack's resources start with this; its table is "<prefix>-items".
LOCAL_PREFIX = "vdq-local"

# The CloudFormation stack's name unless vdq:stackName says another (vdq smoke reads it too).
STACK_NAME = "Vdq"

# The REST API: its stage, the Cognito resource server whose scopes "<id>/<group>" machine
# clients get, and the prefix of the Cognito domain ("<prefix>-<account id>") that issues tokens.
API_STAGE = "v1"
API_RESOURCE_SERVER = "vdq"
API_DOMAIN_PREFIX = "vdq"

# Metrics (Powertools, namespace observability.NAMESPACE) that the deployed alarms watch.
METRIC_ITEMS_ERRORED = "ItemsErrored"  # an item entered errored (vdq.workflow.transitions emits it)
# A claimed send outlived its lease in sending (its holder died after the claim: outcome
# unknown): the redelivery of its send message, or the dead-letter sweep, errored it.
METRIC_LEASES_EXPIRED = "LeasesExpired"
# Metrics of dispatch control that the dashboard shows (vdq.results.suppression and
# vdq.dispatch.pacing emit them).
METRIC_SENDS_SUPPRESSED = "SendsSuppressed"  # an item not sent: its receiver is suppressed
METRIC_SUPPRESSIONS_ADDED = "SuppressionsAdded"  # a receiver joined the suppression list
METRIC_SENDS_PACED = "SendsPaced"  # an item given back to wait for its turn at the rate
METRIC_SENDS_THROTTLED = "SendsThrottled"  # the provider refused a send for its rate
# A send the provider failed: an email's automatic retry (vdq.dispatch.record), or an item
# errored by its send. Beside SendsThrottled they tell an outage from the provider's rate.
METRIC_SEND_RETRIES = "SendRetries"
METRIC_SEND_ERRORS = "SendErrors"
# The reputation guard: a producer (or the account) reached a warn or a hold threshold
# (vdq.results.judging); an email of a held producer was parked (vdq.results.guard).
METRIC_REPUTATION_WARNINGS = "ReputationWarnings"
METRIC_PRODUCERS_HELD = "ProducersHeld"
METRIC_SENDS_HELD = "SendsHeld"


def table_definition(table_name: str) -> dict:
    """CreateTable arguments (boto3 shape) for the table and its indexes."""
    attributes = {TABLE_PARTITION_KEY, TABLE_SORT_KEY}
    for index in INDEXES:
        attributes.update((index.partition_key, index.sort_key))
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        # State-change events are published from the stream (vdq.workflow.stateevents).
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        "KeySchema": [
            {"AttributeName": TABLE_PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": TABLE_SORT_KEY, "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": name, "AttributeType": "S"} for name in sorted(attributes)
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": index.name,
                "KeySchema": [
                    {"AttributeName": index.partition_key, "KeyType": "HASH"},
                    {"AttributeName": index.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
            for index in INDEXES
        ],
    }
