"""The deploy choices as the documentation lists them: each CDK context key VDQ reads, what it
means and its default (docs/reference/settings.md is made from ``CHOICES``)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from infra.config import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_SECONDS,
    EVENTS_PER_WORKER,
    SENDS_PER_WORKER,
    Capacity,
    DeployConfig,
)
from vdq.core import resources


@dataclass(frozen=True)
class Choice:
    """A deploy choice as the documentation lists it. ``field``: the ``DeployConfig`` attribute
    whose default is the choice's default; ``default``: the default in words, where no single
    attribute holds it. tests/unit/test_deploy_choices.py checks that the keys are the ones
    infra/ reads."""

    key: str
    meaning: str
    field: str | None = None
    default: str | None = None


CHOICES = (
    Choice("vdq:stackName",
           "CloudFormation stack name. One VDQ stack per account and region: the user pool's "
           f"domain prefix is `{resources.API_DOMAIN_PREFIX}-<account>` whatever the name",
           default=f"`{resources.STACK_NAME}`"),
    Choice("vdq:sesIdentities",
           "SES identities email is sent from: `[\"example.com\"]` or "
           "`example.com,shop@example.org`; no wildcards. The send function may send from these "
           "only, so a deploy needs them (`make synth` uses `example.com` when none is set)",
           default="(required)"),
    Choice("vdq:deletionProtection",
           "deletion protection of the table and the user pool (and retain on delete)",
           "deletion_protection"),
    Choice("vdq:logRetentionDays",
           "days the functions' and the access logs are kept (1, 7, 14, 30, 90, 180, 365, 3653)",
           "log_retention_days"),
    Choice("vdq:memoryMb", "memory per function in MB, e.g. `{\"send\": 1024}`",
           default=" ".join(f"{k} {v}," for k, v in DEFAULT_MEMORY_MB.items()).rstrip(",")
           if len(set(DEFAULT_MEMORY_MB.values())) > 1 else
           f"{next(iter(DEFAULT_MEMORY_MB.values()))} each"),
    Choice("vdq:timeoutSeconds",
           "timeout per function in seconds. send must be more than 35 s (the longest provider "
           "call and its record), or the synth fails. Each queue's visibility timeout is six "
           "times its consumer's timeout, plus its batching window (send 1 s, results 10 s)",
           default=", ".join(f"{k} {v}" for k, v in DEFAULT_TIMEOUT_SECONDS.items())),
    Choice("vdq:peakSendRate",
           "the most emails a second the deployment sends at (its SES sending rate, e.g. "
           "`1000`): the normal and bulk lanes' concurrency become one worker for every "
           f"{SENDS_PER_WORKER} emails a second, the results consumer's one for every "
           f"{EVENTS_PER_WORKER}, and VDQ_INDEX_SHARDS one shard for every 150 (a power of two, "
           "at least 4; by VDQ_SES_MAX_SEND_RATE where that is larger, the rate the send "
           "functions then pace at), unless set themselves (VDQ_INDEX_SHARDS may not be set "
           "lower). Raise "
           "it with the rate; a lower rate later lowers the lanes, not the index shards (the "
           "functions keep the most the table has used). The account's Lambda concurrency must "
           "hold the sum",
           default="unset: the defaults below, for 14 a second"),
    Choice("vdq:sendMaxConcurrency",
           "most send functions running at once on the normal lane: keep sends within the SES "
           "sending rate; 2 to 1000 (default: from vdq:peakSendRate)", "send_max_concurrency"),
    Choice("vdq:highSendMaxConcurrency",
           "the same for the high lane: headroom of its own, so a code or a reset never waits "
           "for a worker the other lanes hold; 2 to 1000", "high_send_max_concurrency"),
    Choice("vdq:bulkSendMaxConcurrency",
           "the same for the bulk lane: a bulk backlog takes at most these workers; 2 to 1000 "
           "(default: from vdq:peakSendRate)", "bulk_send_max_concurrency"),
    Choice("vdq:resultsMaxConcurrency",
           "most results consumers (SES events, deferred Twilio lookups) at once, so a burst of "
           "SES events cannot take a new account's whole concurrency (often 10) and throttle "
           "the API; 2 to 1000 (default: from vdq:peakSendRate)", "results_max_concurrency"),
    Choice("vdq:openClickTracking",
           "also subscribe SES open and click events. SES then rewrites every link and adds a "
           "tracking pixel to every HTML email. Each open or click costs an SNS publish "
           "(US$0.50 per million), SQS requests (about US$0.50 per million), a share of a "
           "batched Lambda invocation and DynamoDB requests: about US$2 to 4 per million "
           "events before Lambda time", "open_click_tracking"),
    Choice("vdq:cloudWatchRole",
           "create API Gateway's CloudWatch role and set it as the account's. This is an "
           "account- and region-wide setting: the stack overrides any role already set, and on "
           "delete leaves the account pointing at the deleted role", "cloud_watch_role"),
    Choice("vdq:apiLogs",
           "stage execution logs (ERROR) and access logs. They need the account's API Gateway "
           "CloudWatch role, set once by you (`aws apigateway update-account --patch-operations "
           "op=replace,path=/cloudwatchRoleArn,value=ROLE_ARN`) or by `vdq:cloudWatchRole`; "
           "without it a deploy with logs fails", default="as `vdq:cloudWatchRole`"),
    Choice("vdq:apiThrottleRate", "API stage throttling: requests per second",
           "api_throttle_rate"),
    Choice("vdq:apiThrottleBurst", "API stage throttling: burst", "api_throttle_burst"),
    Choice("vdq:twilioSecretName",
           "default of the `TwilioCredentialsName` parameter: the Secrets Manager secret with "
           "the Twilio credentials. It names the secret at the stack's first deploy only: "
           "`cdk deploy` keeps a parameter's value from one deploy to the next, so to use "
           "another secret later, deploy with `--parameters TwilioCredentialsName=NAME`",
           "twilio_secret_name"),
    Choice("vdq:machineScopes",
           "groups the stack's own machine client may act as (scopes `vdq/<group>`)",
           "machine_scopes"),
    Choice("vdq:producerClients",
           "names of producing services, each given a machine client of its own with the "
           "scopes of `vdq:producerScopes` (output `ProducerClient<Name>`, the name in "
           "CamelCase): VDQ tells producers apart by the client's id for quotas, holds and "
           "counts; lower-case letters, digits and dashes", "producer_clients"),
    Choice("vdq:producerScopes",
           "groups each client of `vdq:producerClients` may act as", "producer_scopes"),
    Choice("vdq:alarmEmail", "an address to subscribe to the alarm topic", default="(none)"),
    Choice("vdq:filesNoncurrentDays",
           "days a deleted attachment's old version is kept (the bucket is versioned)",
           "files_noncurrent_days"),
    Choice("vdq:capacity",
           "the table's capacity: `on-demand`, or `provisioned` with target-tracking auto "
           "scaling of the table and each of its 4 indexes. Provisioned costs about 59% less "
           "per unit at a steady load kept at 70% utilization, but its minimum is paid even "
           "idle (5 write and 5 read units on each of the 5: about US$14 a month), and a burst "
           "beyond what auto scaling has reached (it takes minutes) is throttled: a send is "
           "late, not lost, and an API request may fail with a 5xx that is safe to repeat with "
           "the same `Idempotency-Key`. A table may move from on-demand to provisioned at any "
           "time, and back up to four times in 24 hours", default="`on-demand`"),
    Choice("vdq:writeCapacity",
           "with `provisioned`: the write auto scaling bounds, `<min>-<max>` units, of the "
           "table and each index", default=f"`{Capacity.min_write}-{Capacity.max_write}`"),
    Choice("vdq:readCapacity", "with `provisioned`: the read auto scaling bounds, likewise",
           default=f"`{Capacity.min_read}-{Capacity.max_read}`"),
    Choice("vdq:capacityTarget",
           "with `provisioned`: the utilization auto scaling keeps, in percent (20 to 90)",
           default=f"`{Capacity.target}`"),
    Choice("vdq:systemLogLevel",
           "level of Lambda's own log lines in each function's log group (JSON). `WARN` keeps "
           "its warnings and errors (a timeout, a crash) and leaves out the start and report "
           "line of every invocation; `INFO` keeps those too (duration, billed duration, memory "
           "used): about 700 bytes an invocation, US$0.49 per million emails at 1M a day (SMS "
           "US$1.17, its callbacks being invocations of their own); `DEBUG` adds more. The "
           "handlers' own lines and metric lines are not affected", "system_log_level"),
    Choice("vdq:tracing",
           "X-Ray. `passthrough` traces only a request that arrives sampled: no function starts "
           "a trace and the API stage traces nothing, so X-Ray costs nothing. `active` samples "
           "every function's invocations and the API stage's requests as Lambda's fixed rule "
           "does (the first request each second and 5% of the rest): US$0.74 per million emails "
           "at 1M a day with one reservoir shared, up to US$1.97 with one a function, and the "
           "minute schedules' runs (US$0.43 a month)", "tracing"),
)  # fmt: skip


def choice_default(choice: Choice) -> str:
    """The default of ``choice`` as the documentation shows it."""
    if choice.default is not None:
        return choice.default
    value = getattr(DeployConfig(), str(choice.field))
    if isinstance(value, bool):
        value = str(value).lower()
    elif isinstance(value, tuple):
        value = json.dumps(list(value))
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"
