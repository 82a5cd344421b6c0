"""``vdq repair-stream``: apply again the stream batches the schedule function's mapping skipped.

It reads the schedules' dead-letter queue (the stack's ``ScheduleDeadLetterQueue`` output, or
``--queue-url``) with the deployer's AWS credentials, and does for each batch a message names
what vdq.schedules.repair says: read its records from the stream again, apply them as the
schedule function does (with that function's settings, read from its configuration), and
delete the message once they are applied. ``--dry-run`` reads and reports only.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vdq.cli import render
from vdq.cli.client import EXIT_OK, EXIT_PARTIAL, UsageError
from vdq.cli.deployment import _cdk_context, aws_client, aws_error
from vdq.core import resources

if TYPE_CHECKING:
    from vdq.runtime import Runtime
    from vdq.schedules.repair import Outcome, SkippedBatch

QUEUE_OUTPUT = "ScheduleDeadLetterQueue"
# The clients what the schedule function does with a batch may ask for.
RUNTIME_SERVICES = ("dynamodb", "dynamodbstreams", "events", "s3", "sqs", "cloudwatch")

HELP = f"""Apply again the batches of the table's stream that the schedule function's mapping
gave up on (alarm ScheduleDeadLetters), then delete their messages.

Each message of the schedules' dead-letter queue that names a stream batch (the shard and the
first and last sequence number; the records themselves are not in it) is repaired: its records
are read from the stream again, the mapping's filters applied, and the schedule function's work
done with them (the expirations of items done in the batch, the state events, the sent list's
and the searches' postings, the counts), with the settings of the function the message names.
A message is deleted once its records are applied. Running it again, or after it died half
way, counts nothing twice: the postings and counts of a batch are written under a checkpoint
of the batch's own, by one run at a time (a lease on the batch: another run meanwhile reports
it busy and leaves its message). State events are published again with the same event_id. A
batch whose window the schedule function wrote before its error is not counted again (its
events, expirations and the reputation guard's look are done again); one whose window it
wrote in part and never finished is not counted again either, reported partly-written, and its
message stays unless --drop-lost.

The stream keeps a record 24 hours: records it no longer has are reported (how many, when
they arrived) and lost; the rest are applied and the message stays, for the record, unless
--drop-lost. Messages that name no stream batch (a scheduled run EventBridge Scheduler gave up
on: the next run did its work) are listed and left as they are.

where and who: --stack NAME (default: cdk.json's vdq:stackName, else {resources.STACK_NAME})
reads the output {QUEUE_OUTPUT} with cloudformation:DescribeStacks, or
--queue-url names the queue. The AWS credentials need sqs:ReceiveMessage, DeleteMessage and
ChangeMessageVisibility on the queue, dynamodb:GetShardIterator and GetRecords on the stream,
lambda:GetFunctionConfiguration on the schedule function, what that function does with a
batch (the table, the event bus, the bucket with VDQ_ARCHIVE=s3), and dynamodb:Query and
DeleteItem on the table (the window markers, the batch's lease)."""

EXIT_HELP = """exit codes:
  0  every stream batch was repaired (--dry-run: can be), or there was none
  2  bad command line, no queue, or no AWS credentials or region
  9  some batch lost records, could not be read or applied, was written in part by the
     schedule function, was being repaired by another run, or its message is malformed: its
     message stays (see the output)"""

# Results after which nothing more can be done for the message but to read the report.
TROUBLE = frozenset({"failed", "malformed", "lost", "repaired-part", "would-repair-part",
                     "partly-written", "busy"})  # fmt: skip


def add_parser(command: Callable[..., Any]) -> None:
    p = command("repair-stream", "apply again the stream batches the schedule function skipped "
                "(alarm ScheduleDeadLetters) and delete their dead letters", run, [])
    p.description = HELP
    p.epilog = EXIT_HELP
    where = p.add_mutually_exclusive_group()
    where.add_argument("--stack", help="the stack whose ScheduleDeadLetterQueue output to read")
    where.add_argument("--queue-url", help="the schedules' dead-letter queue's URL")
    p.add_argument("--region", help="the region VDQ is deployed in (default: $AWS_REGION, else "
                   "boto3's: $AWS_DEFAULT_REGION or the profile's)")  # fmt: skip
    p.add_argument("--dry-run", action="store_true",
                   help="read the messages and the stream, say what would be done, change "
                        "nothing")  # fmt: skip
    p.add_argument("--drop-lost", action="store_true",
                   help="delete the message of a batch whose records the stream lost, in part "
                        "or in whole, once the rest are applied, or whose window the schedule "
                        "function wrote in part (the loss is reported anyway)")
    p.add_argument("--max-messages", type=int, default=1000,
                   help="messages to read at most (1-1000, 1000)")  # fmt: skip
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print JSON for scripts")  # fmt: skip


def run(args: argparse.Namespace,
        aws: Callable[[str, str | None], Any] = aws_client) -> int:  # fmt: skip
    from botocore.exceptions import BotoCoreError, ClientError

    from vdq.core.observability import logger
    from vdq.schedules.repair import repair

    if not 1 <= args.max_messages <= 1000:
        raise UsageError("--max-messages takes 1 to 1000")
    # What the schedule function logs goes to stderr here: stdout is the report (--json's).
    handler = logger.registered_handler
    logs = handler if isinstance(handler, logging.StreamHandler) else None
    to = logs.setStream(sys.stderr) if logs is not None else None
    try:
        queue_url = args.queue_url or _queue_url(args, aws)
        sqs = aws("sqs", args.region)
        outcomes = []
        for outcome in repair(sqs, queue_url, function_runtime(aws),
                              dry_run=args.dry_run, drop_lost=args.drop_lost,
                              limit=args.max_messages):  # fmt: skip
            outcomes.append(outcome)
            if not getattr(args, "json", False):
                print(describe(outcome, dry_run=args.dry_run), flush=True)
    except (BotoCoreError, ClientError) as exc:
        raise aws_error("cannot read the queue", exc) from None
    finally:
        if logs is not None and to is not None:
            logs.setStream(to)
    if getattr(args, "json", False):
        print(json.dumps({"dry_run": args.dry_run, "queue_url": queue_url,
                          "messages": [o.as_dict() for o in outcomes]}, indent=2))  # fmt: skip
    else:
        print(summary(outcomes, dry_run=args.dry_run))
    return EXIT_PARTIAL if any(o.result in TROUBLE for o in outcomes) else EXIT_OK


def _queue_url(args: argparse.Namespace, aws: Callable[[str, str | None], Any]) -> str:
    from botocore.exceptions import ClientError

    stack = args.stack or _cdk_context("vdq:stackName") or resources.STACK_NAME
    try:
        answer = aws("cloudformation", args.region).describe_stacks(StackName=stack)
    except ClientError as exc:
        why = exc.response.get("Error", {}).get("Message") or str(exc)
        raise UsageError(f"cannot read stack {stack!r}: {why}; or pass --queue-url") from None
    outputs = {o.get("OutputKey"): o.get("OutputValue")
               for s in answer.get("Stacks") or [] for o in s.get("Outputs") or []}  # fmt: skip
    if not outputs.get(QUEUE_OUTPUT):
        raise UsageError(f"stack {stack!r} has no output {QUEUE_OUTPUT}: is it VDQ's stack, "
                         "and deployed? (or pass --queue-url)")  # fmt: skip
    return str(outputs[QUEUE_OUTPUT])


def function_runtime(aws: Callable[[str, str | None], Any]
                     ) -> Callable[[SkippedBatch], Runtime]:  # fmt: skip
    """A batch's runtime: the settings of the function its message names (its environment),
    with clients of the stream's region. One per function."""
    made: dict[str, Runtime] = {}

    def runtime_of(batch: SkippedBatch) -> Runtime:
        from vdq import store
        from vdq.core.settings import Settings
        from vdq.runtime import Runtime

        if not batch.function_arn:
            raise ValueError("the message names no function (requestContext.functionArn)")
        if batch.function_arn not in made:
            region = batch.region or None
            found = aws("lambda", region).get_function_configuration(
                FunctionName=batch.function_arn)  # fmt: skip
            variables = (found.get("Environment") or {}).get("Variables") or {}
            settings = Settings.from_env(variables)
            runtime = Runtime(settings=settings,
                              overrides={s: aws(s, region) for s in RUNTIME_SERVICES})
            store.bind(settings.table_name, region)
            runtime.keep_index_shards()
            made[batch.function_arn] = runtime
        return made[batch.function_arn]

    return runtime_of


def describe(outcome: Outcome, *, dry_run: bool) -> str:
    """One message for people: what was (or would be) done, and what was lost."""
    batch = outcome.batch
    where = (f"shard {batch.shard_id} {batch.first}..{batch.last}: {outcome.found} of "
             f"{batch.size} records read again" if batch else "")  # fmt: skip
    fate = ("would delete the message" if outcome.deleted else "the message would stay") \
        if dry_run else ("message deleted" if outcome.deleted else "message kept")  # fmt: skip
    parts = [outcome.result, where]
    if outcome.lost:
        parts.append(f"{outcome.lost} LOST")
    if outcome.applied:
        parts.append(", ".join(f"{k} {v}" for k, v in outcome.applied.items() if v))
    if outcome.why:
        parts.append(outcome.why)
    parts.append(fate)
    return f"{outcome.message_id}  " + "; ".join(render.safe(p) for p in parts if p)


def summary(outcomes: list[Outcome], *, dry_run: bool) -> str:
    from vdq.schedules.repair import RESULTS

    if not outcomes:
        return "no message in the queue"
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.result] = counts.get(o.result, 0) + 1
    n = len(outcomes)
    lines = [("dry run, nothing changed: " if dry_run else "")
             + f"{n} message{'' if n == 1 else 's'}"]  # fmt: skip
    lines += [f"  {count} {result}: {RESULTS[result]}" for result, count in sorted(counts.items())]
    lost = sum(o.lost for o in outcomes)
    if lost:
        lines.append(f"  {lost} stream records lost: their items' state events, expirations, "
                     "postings and counts are missing (see the runbook)")  # fmt: skip
    return "\n".join(lines)
