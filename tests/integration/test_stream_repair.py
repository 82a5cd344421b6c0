"""The repair of stream batches the mapping skipped (``vdq repair-stream``), on moto: the
records a dead letter names read again from the stream and applied as the schedule function
applies them, each once, its message deleted only then; records the stream no longer has
reported as lost."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from functions.webhook import handler as webhook

from tests.support.results import LambdaContext, new_email, ses_event, sqs_event, to_awaiting
from tests.support.stream import Stream
from vdq.core.streams import as_lambda_gives, passes
from vdq.python_api import DEFAULT_PRODUCER
from vdq.results import guard
from vdq.schedules import postings, repair
from vdq.store.postings import Tallies, shard_tag
from vdq.workflow.stateevents import StateEvents

FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:Vdq-Schedule"
# The story's counts: three emails queued and sent, one delivered, one bounced (errored).
EXPECTED = {"email.queued": 3, "email.sent": 3, "email.succeeded": 1, "email.errored": 1,
            "email.bounce": 1}  # fmt: skip


class RecordedEvents(StateEvents):
    """The state events published, as EventBridge receives them."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.sent: list[dict[str, Any]] = []

    def emit_many(self, details: list[dict[str, Any]]) -> None:
        super().emit_many(details)
        self.sent.extend(details)


class Trimmed:
    """A stream client whose stream has dropped every record before ``horizon`` (its 24 hours
    passed), as DynamoDB Streams answers then; moto's stream keeps every record."""

    def __init__(self, client: Any, horizon: int) -> None:
        self._client = client
        self._horizon = horizon

    def get_shard_iterator(self, **kwargs: Any) -> Any:
        if kwargs["ShardIteratorType"] == "TRIM_HORIZON":
            kwargs = dict(kwargs, ShardIteratorType="AT_SEQUENCE_NUMBER",
                          SequenceNumber=str(self._horizon))  # fmt: skip
        elif int(kwargs.get("SequenceNumber", 0)) < self._horizon:
            raise ClientError({"Error": {"Code": "TrimmedDataAccessException",
                                         "Message": "the data is past the trim horizon"}},
                              "GetShardIterator")  # fmt: skip
        return self._client.get_shard_iterator(**kwargs)

    def get_records(self, **kwargs: Any) -> Any:
        return self._client.get_records(**kwargs)


@pytest.fixture(autouse=True)
def short_polls(monkeypatch):
    # moto's SQS holds a long poll its whole wait when the queue is empty: every run ends so.
    monkeypatch.setattr(repair, "RECEIVE_WAIT_SECONDS", 0)


@pytest.fixture
def streams(aws):
    # In-process moto answers DynamoDB Streams on its regional endpoint only.
    return boto3.client("dynamodbstreams", config=Config(account_id_endpoint_mode="disabled"))


@pytest.fixture
def events(aws, runtime):
    recorded = RecordedEvents(runtime.client("events"), aws["bus"], runtime.settings.state_events)
    runtime.overrides["state_events"] = recorded
    return recorded


@pytest.fixture
def dead_letters(aws):
    return aws["sqs"].create_queue(QueueName="vdq-test-schedule-dlq")["QueueUrl"]


@pytest.fixture
def day(aws, runtime, streams, events):
    """Three emails: one delivered, one bounced, one sent without news yet. Returns the
    stream's shard and the records the mapping's filters let through."""
    delivered = to_awaiting(new_email(runtime, "ada@example.org"), runtime, "m-1")
    deliver(ses_event("delivery", message_id="m-1", item_id=delivered.id))
    bounced = to_awaiting(new_email(runtime, "bob@example.org"), runtime, "m-2")
    deliver(ses_event("bounce_permanent", message_id="m-2", item_id=bounced.id))
    to_awaiting(new_email(runtime, "cy@example.org"), runtime, "m-3")
    arn = runtime.client("dynamodb").describe_table(TableName=aws["table"])["Table"][
        "LatestStreamArn"]  # fmt: skip
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    got = streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
    records = [r for r in (as_lambda_gives(r, arn) for r in got) if passes(r)]
    return {"arn": arn, "shard": shard["ShardId"], "records": records,
            "delivered": delivered.id, "bounced": bounced.id}  # fmt: skip


def deliver(body):
    assert webhook.handler(sqs_event(body), LambdaContext()) == {"batchItemFailures": []}


def skip(aws, day, first: int, last: int) -> list[dict[str, Any]]:
    """The mapping's window over the day's records, but for records ``first``..``last``,
    which it gave up on (their events, stamps, postings and counts missing); the skipped
    records."""
    records = day["records"]
    skipped = records[first : last + 1]
    mapping = Stream(aws["table"], shard=day["shard"])  # its checkpoint passes the skipped
    state = mapping.invoke(records[:first], {}, final=False)["state"]
    state = mapping.invoke(records[last + 1 :], state, final=False)["state"]
    mapping.invoke([], state, final=True)
    return skipped


def dead_letter(day, skipped: list[dict[str, Any]], *, size: int | None = None) -> str:
    """Lambda's on-failure record of a batch of the mapping."""
    return json.dumps({
        "requestContext": {"requestId": "316aa6d0-8154-xmpl-9af7-85d5f4a6bc81",
                           "functionArn": FUNCTION_ARN, "condition": "RetryAttemptsExhausted",
                           "approximateInvokeCount": 11},
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST",
                            "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": "2026-12-05T10:00:49.717Z",
        "DDBStreamBatchInfo": {
            "shardId": day["shard"],
            "startSequenceNumber": skipped[0]["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": skipped[-1]["dynamodb"]["SequenceNumber"],
            "approximateArrivalOfFirstRecord": "2026-12-05T10:00:19Z",
            "approximateArrivalOfLastRecord": "2026-12-05T10:00:20Z",
            "batchSize": len(skipped) if size is None else size,
            "streamArn": day["arn"],
        },
    })  # fmt: skip


def counts(aws, runtime):
    tallies = Tallies(runtime.client("dynamodb"), aws["table"])
    hour = runtime.clock.now().strftime("%Y-%m-%dT%H")
    return {k: v for k, v in tallies.counters([hour]).get(hour, {}).items() if v}


def done_ids(aws, runtime):
    tallies = Tallies(runtime.client("dynamodb"), aws["table"])
    month = runtime.clock.now().strftime("%Y-%m")
    return {d.item_id for entries, _ in tallies.done_minutes(month) for d in entries}


def messages(aws, url):
    got = aws["sqs"].receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return [m["Body"] for m in got.get("Messages", [])]


def run(aws, url, runtime, streams, **options):
    runtime.overrides["dynamodbstreams"] = streams
    return list(repair.repair(aws["sqs"], url, lambda batch: runtime, **options))


def test_a_skipped_batch_is_read_again_applied_and_its_message_deleted(
        aws, runtime, streams, events, day, dead_letters):  # fmt: skip
    skipped = skip(aws, day, 2, len(day["records"]) - 2)
    before = counts(aws, runtime)
    assert before != EXPECTED and day["delivered"] not in done_ids(aws, runtime)
    published = len(events.sent)
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=dead_letter(day, skipped))

    (outcome,) = run(aws, dead_letters, runtime, streams)

    assert (outcome.result, outcome.found, outcome.lost, outcome.deleted) == (
        "repaired", len(skipped), 0, True)
    assert counts(aws, runtime) == EXPECTED
    assert day["delivered"] in done_ids(aws, runtime)  # the sent list shows it
    assert len(events.sent) - published == outcome.applied["published"] > 0
    assert messages(aws, dead_letters) == []


def test_a_repair_run_twice_counts_nothing_twice(aws, runtime, streams, events, day,
                                                 dead_letters):  # fmt: skip
    skipped = skip(aws, day, 1, len(day["records"]) - 1)
    body = dead_letter(day, skipped)
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=body)
    (first,) = run(aws, dead_letters, runtime, streams)
    sent = [e["event_id"] for e in events.sent]
    # The same record delivered again (SQS delivers at least once), in a later run.
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=body)
    (looked,) = run(aws, dead_letters, runtime, streams, dry_run=True)
    assert "applied by an earlier repair" in looked.why
    (again,) = run(aws, dead_letters, runtime, streams)

    assert first.result == again.result == "repaired"
    assert first.applied["written"] > 0
    assert (again.applied["written"], again.applied["replayed"]) == (0, 0)  # its checkpoint
    assert counts(aws, runtime) == EXPECTED
    # The events go out again, with the same ids, for consumers to drop.
    assert [e["event_id"] for e in events.sent][len(sent):] == sent[-again.applied["published"]:]
    assert messages(aws, dead_letters) == []


def test_a_run_that_dies_mid_write_keeps_the_message_and_the_next_counts_once(
        aws, runtime, streams, events, day, dead_letters, monkeypatch):  # fmt: skip
    skipped = skip(aws, day, 0, len(day["records"]) - 2)
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=dead_letter(day, skipped))
    add_counts, calls = Tallies.add_counts, []

    def dies_after_one(self, *args, **kwargs):
        if calls:
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "down"}},
                              "UpdateItem")  # fmt: skip
        calls.append(1)
        return add_counts(self, *args, **kwargs)

    monkeypatch.setattr(Tallies, "add_counts", dies_after_one)
    (failed,) = run(aws, dead_letters, runtime, streams)
    assert (failed.result, failed.deleted) == ("failed", False)
    assert "InternalServerError" in failed.why
    assert len(messages(aws, dead_letters)) == 1  # kept, and shown again for the next run

    monkeypatch.setattr(Tallies, "add_counts", add_counts)
    (repaired,) = run(aws, dead_letters, runtime, streams)
    assert (repaired.result, repaired.deleted) == ("repaired", True)
    assert repaired.applied["replayed"] > 0  # what the first run wrote, found written
    assert counts(aws, runtime) == EXPECTED
    assert messages(aws, dead_letters) == []


def test_a_run_that_dies_before_deleting_the_message_applies_nothing_twice(
        aws, runtime, streams, events, day, dead_letters):  # fmt: skip
    skipped = skip(aws, day, 0, len(day["records"]) - 1)
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=dead_letter(day, skipped))
    runtime.overrides["dynamodbstreams"] = streams
    (message,) = aws["sqs"].receive_message(QueueUrl=dead_letters, VisibilityTimeout=0)[
        "Messages"]  # fmt: skip
    applied = repair.repair_message(message, lambda batch: runtime)  # then the process dies
    assert applied.result == "repaired" and counts(aws, runtime) == EXPECTED

    (rerun,) = run(aws, dead_letters, runtime, streams)
    assert (rerun.result, rerun.deleted, rerun.applied["written"]) == ("repaired", True, 0)
    assert counts(aws, runtime) == EXPECTED
    assert messages(aws, dead_letters) == []


def test_records_the_stream_trimmed_are_reported_lost_and_the_rest_applied(
        aws, runtime, streams, events, day, dead_letters):  # fmt: skip
    records = day["records"]
    skipped = skip(aws, day, 0, len(records) - 1)
    horizon = int(skipped[3]["dynamodb"]["SequenceNumber"])  # three records past 24 hours
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=dead_letter(day, skipped))

    (outcome,) = run(aws, dead_letters, runtime, Trimmed(streams, horizon))

    assert (outcome.result, outcome.found, outcome.lost) == (
        "repaired-part", len(skipped) - 3, 3)
    assert "past the stream's 24 hours" in outcome.why and "2026-12-05T10:00:19Z" in outcome.why
    assert outcome.applied["folded"] == len(skipped) - 3
    # The first three records were the first email's queueing, claim and sending.
    assert counts(aws, runtime) == {**EXPECTED, "email.queued": 2, "email.sent": 2}
    assert not outcome.deleted and len(messages(aws, dead_letters)) == 1  # the evidence stays

    # Dropped once the operator says so; what was applied is not applied again.
    (dropped,) = run(aws, dead_letters, runtime, Trimmed(streams, horizon), drop_lost=True)
    assert (dropped.result, dropped.deleted, dropped.applied["written"]) == (
        "repaired-part", True, 0)
    assert messages(aws, dead_letters) == []


def test_a_batch_wholly_past_the_streams_24_hours_is_reported_lost(
        aws, runtime, streams, events, day, dead_letters):  # fmt: skip
    skipped = skip(aws, day, 0, 4)
    horizon = int(day["records"][5]["dynamodb"]["SequenceNumber"])
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=dead_letter(day, skipped))
    before = counts(aws, runtime)

    (outcome,) = run(aws, dead_letters, runtime, Trimmed(streams, horizon))

    assert (outcome.result, outcome.found, outcome.lost, outcome.deleted) == ("lost", 0, 5, False)
    assert counts(aws, runtime) == before
    assert len(messages(aws, dead_letters)) == 1


def test_a_dry_run_says_what_it_would_do_and_changes_nothing(
        aws, runtime, streams, events, day, dead_letters):  # fmt: skip
    skipped = skip(aws, day, 2, len(day["records"]) - 2)
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=dead_letter(day, skipped))
    before, published = counts(aws, runtime), len(events.sent)

    (outcome,) = run(aws, dead_letters, runtime, streams, dry_run=True)

    assert (outcome.result, outcome.found, outcome.deleted) == ("would-repair", len(skipped),
                                                                True)  # fmt: skip
    assert outcome.applied == {}
    assert counts(aws, runtime) == before and len(events.sent) == published
    assert len(messages(aws, dead_letters)) == 1


def test_messages_that_name_no_stream_batch_are_left_as_they_are(
        aws, runtime, streams, day, dead_letters):  # fmt: skip
    scheduled = json.dumps({"task": "sms"})  # a scheduled run's input, from the Scheduler
    broken = json.dumps({"DDBStreamBatchInfo": {"streamArn": day["arn"], "batchSize": 1,
                                                "startSequenceNumber": "1",
                                                "endSequenceNumber": "2"}})  # fmt: skip
    for body in (scheduled, broken):
        aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=body)

    outcomes = run(aws, dead_letters, runtime, streams)

    assert sorted((o.result, o.why, o.deleted) for o in outcomes) == [
        ("malformed", "DDBStreamBatchInfo.shardId is missing", False),
        ("not-a-batch", "", False)]
    assert sorted(messages(aws, dead_letters)) == sorted([scheduled, broken])


@pytest.fixture
def schedule_function(aws):
    """The schedule function as deployed, for its settings (the command reads its
    environment): moto keeps its configuration and runs nothing."""
    import io
    import zipfile

    role = boto3.client("iam").create_role(RoleName="vdq-schedule",
                                           AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return {}\n")
    boto3.client("lambda").create_function(
        FunctionName="Vdq-Schedule", Runtime="python3.12", Role=role, Handler="handler.handler",
        Code={"ZipFile": code.getvalue()},
        Environment={"Variables": {"VDQ_TABLE_NAME": aws["table"],
                                   "VDQ_ATTACHMENTS_BUCKET": aws["bucket"],
                                   "VDQ_EVENT_BUS_NAME": aws["bus"]}})  # fmt: skip


@pytest.fixture
def command(monkeypatch, tmp_path):
    from vdq.cli.main import main

    # In-process moto answers DynamoDB Streams on its regional endpoint only.
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    monkeypatch.chdir(tmp_path)  # no cdk.json
    return main


def test_the_command_repairs_with_the_settings_of_the_function_the_message_names(
        aws, runtime, day, dead_letters, schedule_function, command, capsys):  # fmt: skip
    skipped = skip(aws, day, 2, len(day["records"]) - 2)
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=dead_letter(day, skipped))

    assert command(["repair-stream", "--queue-url", dead_letters, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would-repair" in out and "would delete the message" in out
    assert "dry run, nothing changed: 1 message" in out

    assert command(["repair-stream", "--queue-url", dead_letters, "--json"]) == 0
    (repaired,) = json.loads(capsys.readouterr().out)["messages"]
    assert (repaired["result"], repaired["deleted"]) == ("repaired", True)
    assert repaired["batch"]["function"] == FUNCTION_ARN
    assert repaired["applied"]["published"] > 0  # on the bus its settings name
    assert counts(aws, runtime) == EXPECTED
    assert messages(aws, dead_letters) == []


def test_the_command_exits_9_when_a_batch_is_lost(aws, runtime, day, dead_letters,
                                                   schedule_function, command, capsys):  # fmt: skip
    skipped = skip(aws, day, 0, 1)
    body = json.loads(dead_letter(day, skipped))
    gone = day["arn"].replace(f"table/{aws['table']}/", "table/dropped/")  # a table deleted
    body["DDBStreamBatchInfo"]["streamArn"] = gone
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=json.dumps(body))

    assert command(["repair-stream", "--queue-url", dead_letters]) == 9
    out = capsys.readouterr().out
    assert "lost; shard" in out and "2 LOST" in out and "message kept" in out
    assert "2 stream records lost" in out
    assert len(messages(aws, dead_letters)) == 1


def test_the_command_names_the_missing_stack_output(aws, command, capsys):
    assert command(["repair-stream", "--stack", "Nope"]) == 2
    err = capsys.readouterr().err
    assert "cannot read stack 'Nope'" in err and "--queue-url" in err
    assert command(["repair-stream", "--queue-url", "x", "--max-messages", "0"]) == 2
    assert "--max-messages takes 1 to 1000" in capsys.readouterr().err


# ---- a batch the mapping gave up on after its window's writes ------------------------------

# What a window writes, in the order it writes them (vdq.schedules.postings.flush), each a
# fault seam: the marker of the invocation's batch first and last, the window's records between.
WRITES = ("begin_flush", "put_posting", "put_done", "add_counts", "set_shard_checkpoint",
          "end_flush")  # fmt: skip
WINDOW_WRITES = 8  # the story's window: a marker, a posting, a done posting, 3 counters, ...


def dying_writes(monkeypatch, at: int, tries: tuple[int, ...]) -> list[str]:
    """The window's writes die at the ``at``-th (from 0) of each of the ``tries``-th
    invocations of the failing batch (from 1): a function that died between two writes, or a
    table that refused that write each time. Returns the writes as tried, "|" before each
    invocation, "!" after one that died."""
    tried: list[str] = []
    for name in WRITES:
        real = getattr(Tallies, name)

        def write(self, *args, _real=real, _name=name, **kwargs):
            attempt = tried.count("|")
            done = tried[::-1].index("|") if attempt else len(tried)  # writes of this one
            tried.append(_name)
            if attempt in tries and done == at:
                tried.append("!")
                raise ClientError({"Error": {"Code": "InternalServerError", "Message": "died"}},
                                  _name)  # fmt: skip
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(Tallies, name, write)
    return tried


def the_looks_fail(monkeypatch) -> None:
    """The reputation guard's look, after the window's writes, fails each time."""
    from vdq.results import judging

    def look(*args, **kwargs):
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}},
                          "BatchGetItem")  # fmt: skip

    monkeypatch.setattr(judging, "evaluate", look)


ATTEMPTS = 3


def given_up(aws, day, first: int, last: int, tries: list[str], *, opened: int | None = None
             ) -> list[dict[str, Any]]:  # fmt: skip
    """The mapping over the day's records: a window of those before ``first`` (``opened``:
    of those before it, and the next window's first batch those from it to ``first``), then
    the window's batch ``first``..``last``, its last, which fails ATTEMPTS times (given again
    with the window's state of before it) and is given up on, then a window of the rest; the
    skipped records."""
    records = day["records"]
    start = first if opened is None else opened
    mapping = Stream(aws["table"], shard=day["shard"])
    mapping.invoke([], mapping.invoke(records[:start], {}, final=False)["state"], final=True)
    state = mapping.invoke(records[start:first], {}, final=False)["state"] if start < first \
        else {}  # fmt: skip
    for _ in range(ATTEMPTS):
        tries.append("|")
        with pytest.raises(ClientError):
            mapping.invoke(records[first : last + 1], state, final=True)
    tries.append("|")
    mapping.invoke([], mapping.invoke(records[last + 1 :], {}, final=False)["state"], final=True)
    return records[first : last + 1]


def test_a_batch_given_up_on_after_its_window_was_written_is_not_counted_again(
        aws, runtime, streams, events, day, dead_letters, monkeypatch):  # fmt: skip
    with monkeypatch.context() as faults:
        the_looks_fail(faults)
        skipped = given_up(aws, day, 4, len(day["records"]) - 2, [], opened=1)
    assert counts(aws, runtime) == EXPECTED  # the window was written before the look failed
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=dead_letter(day, skipped))
    published = len(events.sent)

    (looked,) = run(aws, dead_letters, runtime, streams, dry_run=True)
    (outcome,) = run(aws, dead_letters, runtime, streams)

    assert looked.result == "would-repair" and "written by the schedule function" in looked.why
    assert (outcome.result, outcome.deleted) == ("repaired", True)
    assert "written by the schedule function" in outcome.why
    assert (outcome.applied["written"], outcome.applied["replayed"]) == (0, 0)
    assert counts(aws, runtime) == EXPECTED
    assert len(events.sent) - published == outcome.applied["published"] > 0  # again, same ids
    assert messages(aws, dead_letters) == []


@pytest.mark.parametrize("where", ["before", "in"])
def test_a_repair_of_a_window_written_before_its_look_failed_looks_at_its_bounces(
        aws, runtime, streams, events, day, dead_letters, monkeypatch, where):  # fmt: skip
    # The window's writes landed and its look failed each time, until the mapping gave up on
    # its last batch. The bounce it counted was in that batch, or in one of the window's
    # batches before it (the repair reads the given-up batch alone): the repair holds its
    # producer all the same.
    runtime.settings = replace(runtime.settings, reputation_min_sent=3)
    records = day["records"]
    (bounce,) = [n for n, r in enumerate(records)
                 if (change := postings.change_of(r, lambda _: None)) and change.signals]
    assert 1 <= bounce < len(records) - 2  # in the window given up on
    first = bounce + 1 if where == "before" else bounce
    with monkeypatch.context() as faults:
        the_looks_fail(faults)
        skipped = given_up(aws, day, first, len(records) - 2, [], opened=1)
    assert counts(aws, runtime) == EXPECTED
    assert guard.holds_of(runtime).level(DEFAULT_PRODUCER) is None
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=dead_letter(day, skipped))

    (outcome,) = run(aws, dead_letters, runtime, streams)

    assert (outcome.result, outcome.deleted) == ("repaired", True)
    assert counts(aws, runtime) == EXPECTED
    level = guard.holds_of(runtime).level(DEFAULT_PRODUCER)
    assert level is not None and level.level == "hold"
    assert "bounce rate 33.33%" in level.reason


def publishing_fails(faults, events) -> None:
    """EventBridge refuses the state events each time."""

    def refused(details):
        raise ClientError({"Error": {"Code": "InternalException", "Message": "down"}},
                          "PutEvents")  # fmt: skip

    faults.setattr(events, "emit_many", refused)


@pytest.mark.parametrize("later", ["look", "publish"])
@pytest.mark.parametrize("at", range(WINDOW_WRITES))
def test_a_window_that_died_between_two_writes_then_was_finished_counts_once(
        aws, runtime, streams, events, day, dead_letters, monkeypatch, at, later):  # fmt: skip
    # The first try dies at a write; the next finishes the window's writes, then the guard's
    # look or the publishing of the state events fails, as every later try's, until the
    # mapping gives up on the batch.
    with monkeypatch.context() as faults:
        if later == "look":
            the_looks_fail(faults)
        else:
            publishing_fails(faults, events)
        tries = dying_writes(faults, at, (1,))
        skipped = given_up(aws, day, 4, len(day["records"]) - 2, tries, opened=1)
    assert "!" in tries
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=dead_letter(day, skipped))

    (outcome,) = run(aws, dead_letters, runtime, streams)

    assert (outcome.result, outcome.deleted) == ("repaired", True)
    assert counts(aws, runtime) == EXPECTED
    assert messages(aws, dead_letters) == []


# (Dying at the last, the end mark, each time leaves the checkpoint set: the next try finds
# nothing to write, marks the window written and succeeds; the mapping gives up on nothing.)
@pytest.mark.parametrize("at", range(WINDOW_WRITES - 1))
def test_a_window_never_finished_is_reported_and_not_counted_twice(
        aws, runtime, streams, events, day, dead_letters, monkeypatch, at):  # fmt: skip
    # Every try dies at the same write (the table refuses it until the mapping gives up).
    with monkeypatch.context() as faults:
        tries = dying_writes(faults, at, tuple(range(1, ATTEMPTS + 1)))
        skipped = given_up(aws, day, 2, len(day["records"]) - 2, tries)
    assert tries.count("!") == ATTEMPTS
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=dead_letter(day, skipped))
    published = len(events.sent)

    (outcome,) = run(aws, dead_letters, runtime, streams)

    assert outcome.applied["published"] > 0 and len(events.sent) > published
    if at == 0:  # nothing of the window was written: the repair writes it
        assert (outcome.result, outcome.deleted) == ("repaired", True)
        assert counts(aws, runtime) == EXPECTED
        return
    # Written in part: what was written stays once, the rest is reported, the message kept.
    assert (outcome.result, outcome.deleted) == ("partly-written", False)
    assert "written in part by the schedule function" in outcome.why
    found = counts(aws, runtime)
    assert all(found.get(name, 0) <= n for name, n in EXPECTED.items()) and \
        set(found) <= set(EXPECTED)  # fmt: skip
    assert len(messages(aws, dead_letters)) == 1
    (dropped,) = run(aws, dead_letters, runtime, streams, drop_lost=True)
    assert (dropped.result, dropped.deleted) == ("partly-written", True)
    assert counts(aws, runtime) == found and messages(aws, dead_letters) == []


# ---- two repairs of one batch at once -------------------------------------------------------


def test_a_second_repair_of_a_batch_under_repair_refuses_it_and_keeps_its_message(
        aws, runtime, streams, events, day, dead_letters, monkeypatch):  # fmt: skip
    skipped = skip(aws, day, 2, len(day["records"]) - 2)
    body = dead_letter(day, skipped)
    for _ in range(2):  # SQS delivered the on-failure record twice
        aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=body)
    runtime.overrides["dynamodbstreams"] = streams
    first, second = aws["sqs"].receive_message(QueueUrl=dead_letters, MaxNumberOfMessages=10,
                                               VisibilityTimeout=60)["Messages"]  # fmt: skip
    real, seen, started = repair.stream.consume, [], []

    def meanwhile(event, rt, **kwargs):  # the other run reads the same batch, mid-apply
        if not started:
            started.append(event)
            seen.append(repair.repair_message(second, lambda batch: runtime))
        return real(event, rt, **kwargs)

    with monkeypatch.context() as faults:
        faults.setattr(repair.stream, "consume", meanwhile)
        outcome = repair.repair_message(first, lambda batch: runtime)

    (other,) = seen
    assert (other.result, other.deleted, other.applied) == ("busy", False, {})
    assert "another repair" in other.why
    assert (outcome.result, outcome.deleted) == ("repaired", True)
    assert counts(aws, runtime) == EXPECTED
    # Once the first is done, the copies are repaired again (nothing written twice).
    for message in (first, second):
        aws["sqs"].change_message_visibility(QueueUrl=dead_letters, VisibilityTimeout=0,
                                             ReceiptHandle=message["ReceiptHandle"])  # fmt: skip
    again = run(aws, dead_letters, runtime, streams)
    assert [(o.result, o.applied["written"]) for o in again] == [("repaired", 0)] * 2
    assert counts(aws, runtime) == EXPECTED


def test_a_lease_left_by_a_repair_that_died_passes_after_its_time(
        aws, runtime, streams, events, day, dead_letters, clock):  # fmt: skip
    skipped = skip(aws, day, 2, len(day["records"]) - 2)
    aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=dead_letter(day, skipped))
    batch = repair.SkippedBatch.parse(dead_letter(day, skipped))
    assert batch is not None
    tallies = Tallies(runtime.client("dynamodb"), aws["table"])
    now = int(clock.now().timestamp())
    assert tallies.take_lease(batch.repair_shard, "died", now, repair.LEASE_SECONDS) is None

    (busy,) = run(aws, dead_letters, runtime, streams)
    assert (busy.result, busy.deleted) == ("busy", False)
    assert len(messages(aws, dead_letters)) == 1

    clock.advance(repair.LEASE_SECONDS + 1)
    (repaired,) = run(aws, dead_letters, runtime, streams)
    assert (repaired.result, repaired.deleted) == ("repaired", True)
    assert counts(aws, runtime) == EXPECTED


def test_a_repair_that_read_a_batch_whole_counts_it_whole_whatever_ran_beside_it(
        aws, runtime, streams, events, day, dead_letters, monkeypatch):  # fmt: skip
    # Two runs repair the same batch at once (its on-failure record delivered twice); the
    # stream's 24 hours pass for the batch's first records between their reads of it. The
    # run that read the batch whole and says so must have counted it whole: one that read
    # only its last records must not apply first and leave the rest below its checkpoint.
    skipped = skip(aws, day, 2, len(day["records"]) - 2)
    body = dead_letter(day, skipped)
    for _ in range(2):
        aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=body)
    stream = Trimmed(streams, 0)  # nothing past the 24 hours yet
    runtime.overrides["dynamodbstreams"] = stream
    first, second = aws["sqs"].receive_message(QueueUrl=dead_letters, MaxNumberOfMessages=10,
                                               VisibilityTimeout=60)["Messages"]  # fmt: skip
    real, seen = repair.read_batch, []

    def reading(*args, **kwargs):
        got = real(*args, **kwargs)
        if not stream._horizon:  # the first run has read it whole; the trim passes; the other
            stream._horizon = int(skipped[-2]["dynamodb"]["SequenceNumber"])
            seen.append(repair.repair_message(second, lambda batch: runtime))
        return got

    with monkeypatch.context() as faults:
        faults.setattr(repair, "read_batch", reading)
        outcome = repair.repair_message(first, lambda batch: runtime)

    (other,) = seen
    assert (outcome.result, outcome.found, outcome.deleted) == ("repaired", len(skipped), True)
    assert counts(aws, runtime) == EXPECTED
    assert (other.result, other.deleted, other.applied) == ("busy", False, {})


def test_a_repair_whose_lease_passed_while_it_read_the_batch_applies_nothing(
        aws, runtime, streams, events, day, dead_letters, clock, monkeypatch):  # fmt: skip
    # A run slow past its lease while it reads the batch: another run takes the lease, reads
    # the batch after the stream trimmed its first records, and applies what is left. The
    # slow run must not then apply its own reading as if it still held the batch.
    skipped = skip(aws, day, 2, len(day["records"]) - 2)
    body = dead_letter(day, skipped)
    for _ in range(2):
        aws["sqs"].send_message(QueueUrl=dead_letters, MessageBody=body)
    stream = Trimmed(streams, 0)
    runtime.overrides["dynamodbstreams"] = stream
    first, second = aws["sqs"].receive_message(QueueUrl=dead_letters, MaxNumberOfMessages=10,
                                               VisibilityTimeout=60)["Messages"]  # fmt: skip
    real, seen = repair.read_batch, []

    def slow(*args, **kwargs):
        got = real(*args, **kwargs)
        if not stream._horizon:
            clock.advance(repair.LEASE_SECONDS + 1)
            stream._horizon = int(skipped[-2]["dynamodb"]["SequenceNumber"])
            seen.append(repair.repair_message(second, lambda batch: runtime))
        return got

    with monkeypatch.context() as faults:
        faults.setattr(repair, "read_batch", slow)
        outcome = repair.repair_message(first, lambda batch: runtime)

    (other,) = seen
    assert (other.result, other.deleted) == ("repaired-part", False)
    assert (outcome.result, outcome.deleted, outcome.applied) == ("busy", False, {})
    assert "lease" in outcome.why


def test_the_expiry_of_a_window_marker_writes_no_marker_of_its_own(aws, runtime):
    # With VDQ_ARCHIVE=s3 the mapping hands on every TTL deletion, a window marker's too: a
    # window of nothing but such deletions counts nothing, and a marker of it would expire in
    # its turn two days later and be marked again, for ever.
    tallies = Tallies(runtime.client("dynamodb"), aws["table"])
    mapping = Stream(aws["table"])
    tallies.begin_flush(shard_tag(mapping.shard), "100", "200", 0)
    expired = {"eventName": "REMOVE", "eventSource": "aws:dynamodb",
               "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
               "dynamodb": {"SequenceNumber": "900", "ApproximateCreationDateTime": 1796600000,
                            "Keys": {"pk": {"S": f"FL#{shard_tag(mapping.shard)}"},
                                     "sk": {"S": f"{200:040d}#{100:040d}"}},
                            "OldImage": {"pk": {"S": f"FL#{shard_tag(mapping.shard)}"},
                                         "sk": {"S": f"{200:040d}#{100:040d}"},
                                         "expiration": {"N": "0"}}}}  # fmt: skip
    runtime.client("dynamodb").delete_item(TableName=aws["table"], Key=expired["dynamodb"][
        "Keys"])  # fmt: skip

    mapping.invoke([expired], {}, final=True)

    assert tallies.flushed(shard_tag(mapping.shard), "900", "900") is None
    assert runtime.client("dynamodb").query(
        TableName=aws["table"], KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"FL#{shard_tag(mapping.shard)}"}},
    )["Items"] == []  # fmt: skip
