"""The repair of stream batches the mapping skipped: what ``vdq repair-stream`` does.

When the stream mapping gives up on a batch (its retries spent, halved down to one record, or
its records too old), Lambda sends the schedules' dead-letter queue a record of where the batch
was, not the batch (``DDBStreamBatchInfo``: the stream, the shard, the first and last sequence
number, how many records). A repair reads each such message, reads those records from the
stream again (``GetShardIterator`` at the first sequence number, ``GetRecords`` past the last),
keeps those the mapping's filters let through, and hands them to what the schedule function
does with a batch (vdq.schedules.stream), with the settings of the function the record names.
The message is deleted only once its records are applied.

The stream keeps a record 24 hours. Records it no longer has are lost: a batch whose records
are all, or in part, gone is reported with how many are missing and when they arrived, its
remaining records are applied, and its message stays (the alarm's evidence) unless the
operator drops it.

Applying a batch twice changes nothing twice. Its postings and counts are written under a
shard of the repair's own, named after the batch (``repair/<shard>/<first>-<last>``), with its
checkpoint: a repair run again, or after a crash between its writes and the message's
deletion, finds what it wrote and writes only the rest, as a window given again does
(vdq.schedules.postings). The shard's own checkpoint cannot serve: the windows after the
skipped batch moved it past the batch's records. Stamping the expirations and archiving write
the same again; the state events are published again with the same ``event_id`` (consumers
drop duplicates by it), hours late, which their change time tells.

The mapping may give up on a batch whose invocation wrote its window (the reputation guard's
look, or a step after the window, failed each time). Such an invocation marked the batch's
first and last sequence number before the window's writes and again after them (the flush
markers of vdq.store.postings): a batch inside a marker of its shard is not counted again
(its stamps, archive and events are done again, and the guard's look: for the producers whose
bounces or complaints the window counted, which the marker names, those of the window's
batches before this one included); one whose window was begun and never finished (its writes
refused each time) is not counted again either, since what landed cannot be told from what
did not: it is reported ``partly-written`` and its message stays. A batch inside no marker was
never written: it is applied.

One repair at a time applies a batch: it holds the batch's lease (a conditional write that
ends after ``LEASE_SECONDS``) from before it reads the batch from the stream to after its
writes, so the run that applies first read the batch no later than any other (the stream
only ever trims records from a batch), and renews it before it applies what it read: a run
whose lease passed while it read, and that another took, applies nothing (``busy``).
Another repair of the same batch meanwhile (the message delivered twice, or shown again past
its visibility) is refused, ``busy``, and its message stays; a lease left by a repair that
died passes after its time.

Other messages of the queue (the input of a scheduled run that EventBridge Scheduler gave up
on) are left as they are.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from vdq.core.streams import as_lambda_gives, passes
from vdq.schedules import stream
from vdq.schedules.archive import is_ttl_delete
from vdq.store.postings import Tallies, shard_tag

if TYPE_CHECKING:
    from vdq.runtime import Runtime

BATCH_INFO = "DDBStreamBatchInfo"
# A message is hidden from other readers while its batch is repaired; one left by a run that
# died shows again after this long.
VISIBILITY_SECONDS = 900
# A batch's lease (one repair applies it at a time) lasts as long as its message is hidden.
LEASE_SECONDS = VISIBILITY_SECONDS
RECEIVE_ROUNDS = 100  # receives of up to ten messages a run
RECEIVE_WAIT_SECONDS = 1
GET_RECORDS_LIMIT = 1000
# GetRecords may answer an empty page before the records of an open shard: this many in a row
# and the batch's last record is taken for not there.
MAX_EMPTY_PAGES = 25


@dataclass(frozen=True)
class SkippedBatch:
    """A batch the mapping gave up on, as its on-failure record names it."""

    stream_arn: str
    shard_id: str
    first: str  # sequence numbers, as the stream writes them (digits)
    last: str
    size: int
    first_arrival: str = ""
    last_arrival: str = ""
    condition: str = ""  # why the mapping gave up: RetryAttemptsExhausted, RecordAgeExceeded
    function_arn: str = ""

    @classmethod
    def parse(cls, body: str) -> SkippedBatch | None:
        """The batch a message names; None for a message that is no stream's on-failure
        record (a scheduled run's input); ValueError, naming the field, for a broken one."""
        try:
            data = json.loads(body)
        except ValueError:
            return None
        if not isinstance(data, dict) or BATCH_INFO not in data:
            return None
        info = data[BATCH_INFO]
        if not isinstance(info, dict):
            raise ValueError(f"{BATCH_INFO} is not an object")
        for name in ("streamArn", "shardId", "startSequenceNumber", "endSequenceNumber"):
            if not isinstance(info.get(name), str) or not info[name]:
                raise ValueError(f"{BATCH_INFO}.{name} is missing")
        for name in ("startSequenceNumber", "endSequenceNumber"):
            if not info[name].isdigit():
                raise ValueError(f"{BATCH_INFO}.{name} is not a sequence number")
        if int(info["startSequenceNumber"]) > int(info["endSequenceNumber"]):
            raise ValueError(f"{BATCH_INFO}.startSequenceNumber is after endSequenceNumber")
        size = info.get("batchSize")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"{BATCH_INFO}.batchSize is not a count")
        context = data.get("requestContext")
        context = context if isinstance(context, dict) else {}
        return cls(info["streamArn"], info["shardId"], info["startSequenceNumber"],
                   info["endSequenceNumber"], size,
                   str(info.get("approximateArrivalOfFirstRecord") or ""),
                   str(info.get("approximateArrivalOfLastRecord") or ""),
                   str(context.get("condition") or ""),
                   str(context.get("functionArn") or ""))  # fmt: skip

    @property
    def region(self) -> str:
        return self.stream_arn.split(":")[3] if self.stream_arn.count(":") >= 5 else ""

    @property
    def repair_shard(self) -> str:
        """The shard the repair writes the batch's postings and counts as (see the module's
        docstring): one per batch, so batches repaired in any order are each counted once."""
        return f"repair/{self.shard_id}/{self.first}-{self.last}"

    def event(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        """The records as one whole window of the repair's shard."""
        return {"Records": records, "shardId": self.repair_shard, "state": {},
                "eventSourceARN": self.stream_arn, "isFinalInvokeForWindow": True,
                "isWindowTerminatedEarly": False}  # fmt: skip

    def describe(self) -> dict[str, Any]:
        return {"stream": self.stream_arn, "shard": self.shard_id, "first": self.first,
                "last": self.last, "size": self.size, "first_arrival": self.first_arrival,
                "last_arrival": self.last_arrival, "condition": self.condition,
                "function": self.function_arn}  # fmt: skip


@dataclass
class Reading:
    """What the stream still holds of a batch."""

    records: list[dict[str, Any]]
    trimmed: bool = False  # the stream no longer has the batch's first record (24 h)
    gone: str = ""  # why nothing could be read: the shard or the stream no longer exists
    complete: bool = False  # every record from the first to the last was read

    def lost(self, batch: SkippedBatch) -> int:
        """How many of the batch's records the stream no longer has."""
        return 0 if self.complete else max(batch.size - len(self.records), 0)


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code") or "")


def _message(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Message") or _error_code(exc))


def _iterator(streams: Any, batch: SkippedBatch, where: dict[str, Any]) -> str:
    return str(streams.get_shard_iterator(StreamArn=batch.stream_arn, ShardId=batch.shard_id,
                                          **where)["ShardIterator"])  # fmt: skip


def read_batch(streams: Any, batch: SkippedBatch,
               keep: Callable[[dict[str, Any]], bool] = passes) -> Reading:  # fmt: skip
    """The batch's records the stream still holds, as the mapping handed them on (``keep``:
    its filters). ``streams``: a DynamoDB Streams client."""
    first, last = int(batch.first), int(batch.last)
    where: dict[str, Any] = {"ShardIteratorType": "AT_SEQUENCE_NUMBER",
                             "SequenceNumber": batch.first}  # fmt: skip
    trimmed = False
    try:
        iterator = _iterator(streams, batch, where)
    except ClientError as exc:
        if _error_code(exc) == "ResourceNotFoundException":
            return Reading([], trimmed=True, gone=_message(exc))
        if _error_code(exc) != "TrimmedDataAccessException":
            raise
        # Its first records are past the 24 hours: what is left, from the oldest on.
        trimmed = True
        iterator = _iterator(streams, batch, {"ShardIteratorType": "TRIM_HORIZON"})
    records: list[dict[str, Any]] = []
    empty, highest = 0, -1
    while iterator and empty < MAX_EMPTY_PAGES:
        try:
            page = streams.get_records(ShardIterator=iterator, Limit=GET_RECORDS_LIMIT)
        except ClientError as exc:
            if _error_code(exc) != "TrimmedDataAccessException":
                raise
            # Trimmed while read: on from the oldest record left.
            trimmed = True
            iterator = _iterator(streams, batch, {"ShardIteratorType": "TRIM_HORIZON"})
            continue
        got = page.get("Records") or []
        empty = 0 if got else empty + 1
        for record in got:
            sequence = int((record.get("dynamodb") or {}).get("SequenceNumber") or 0)
            if sequence > last:
                return Reading(records, trimmed, complete=not trimmed)
            if sequence < first or sequence <= highest:
                continue  # before the batch, or read again after a trimming
            highest = sequence
            shaped = as_lambda_gives(record, batch.stream_arn)
            if keep(shaped):
                records.append(shaped)
            if sequence == last:
                return Reading(records, trimmed, complete=not trimmed)
        iterator = page.get("NextShardIterator")  # None: a closed shard's end
    return Reading(records, trimmed)


@dataclass
class Outcome:
    """What a repair did with one message of the queue."""

    message_id: str
    result: str  # see RESULTS
    batch: SkippedBatch | None = None
    found: int = 0  # records read again
    lost: int = 0  # records the stream no longer has
    applied: dict[str, Any] = field(default_factory=dict)  # the batch's answer
    deleted: bool = False  # --dry-run: would be
    why: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "result": self.result,
                "batch": self.batch.describe() if self.batch else None, "found": self.found,
                "lost": self.lost, "applied": self.applied, "deleted": self.deleted,
                "why": self.why}  # fmt: skip


RESULTS = {
    "repaired": "its records were applied and the message deleted",
    "repaired-part": "the records the stream still had were applied; the others are lost",
    "lost": "the stream no longer has any of its records",
    "would-repair": "--dry-run: its records would be applied and the message deleted",
    "would-repair-part": "--dry-run: the records the stream still has would be applied",
    "failed": "reading or applying its records failed: the message stays",
    "partly-written": "the schedule function wrote its window in part and never finished: "
                      "not counted again, its missing counts reported; the message stays",
    "busy": "another repair is applying the same batch: the message stays for it",
    "malformed": "an on-failure record without the batch's place: the message stays",
    "not-a-batch": "no stream batch (a scheduled run's input): left as it is",
}


def keep_for(runtime: Runtime) -> Callable[[dict[str, Any]], bool]:
    """The mapping's filters as the function's settings deploy them: TTL's deletions too with
    ``VDQ_ARCHIVE=s3`` (infra/stack.py)."""
    archive_on = runtime.settings.archive == "s3"
    return lambda record: passes(record) or (archive_on and is_ttl_delete(record))


def repair_message(message: dict[str, Any],
                   runtime_of: Callable[[SkippedBatch], Runtime], *, dry_run: bool = False,
                   drop_lost: bool = False) -> Outcome:  # fmt: skip
    """Repair the batch one message names (``deleted``: the message may go). A repair holds
    the batch's lease from before it reads the batch from the stream: a run that read it
    earlier, whole, before the stream trimmed its first records, would otherwise find them
    below the checkpoint of a run that read it later and applied first, and say it repaired
    what it never counted."""
    message_id = str(message.get("MessageId") or "")
    try:
        batch = SkippedBatch.parse(str(message.get("Body") or ""))
    except ValueError as exc:
        return Outcome(message_id, "malformed", why=str(exc))
    if batch is None:
        return Outcome(message_id, "not-a-batch")
    holder = uuid.uuid4().hex
    try:
        runtime = runtime_of(batch)  # its clients in the stream's region
        tallies = Tallies(runtime.client("dynamodb"), runtime.settings.table_name)
        now = int(runtime.clock.now().timestamp())
        held = None if dry_run else tallies.take_lease(batch.repair_shard, holder, now,
                                                       LEASE_SECONDS)  # fmt: skip
    except Exception as exc:  # reported, and the message stays
        return Outcome(message_id, "failed", batch, why=f"{type(exc).__name__}: {exc}")
    if held is not None:
        return Outcome(message_id, "busy", batch, why=(
            f"another repair is applying this batch (its lease ends {_when(held)}): the "
            "message stays for it"))  # fmt: skip
    try:
        return _repair_batch(message_id, batch, runtime, tallies, None if dry_run else holder,
                             drop_lost=drop_lost)  # fmt: skip
    finally:
        if not dry_run:
            with contextlib.suppress(ClientError):  # else it passes after LEASE_SECONDS
                tallies.drop_lease(batch.repair_shard, holder)


def _repair_batch(message_id: str, batch: SkippedBatch, runtime: Runtime, tallies: Tallies,
                  holder: str | None, *, drop_lost: bool) -> Outcome:  # fmt: skip
    """Read the batch from the stream and apply it, as ``holder`` of its lease (None: a dry
    run, which holds none)."""
    dry_run = holder is None
    try:
        reading = read_batch(runtime.client("dynamodbstreams"), batch, keep_for(runtime))
        # Whether an invocation of the mapping holding the batch wrote its window (None: none
        # began to), and whom its look was for, read before anything is applied.
        marked = tallies.flushed(shard_tag(batch.shard_id), batch.first, batch.last) \
            if reading.records else None  # fmt: skip
        live = None if marked is None else marked.written
        before = dry_run and live is None and bool(reading.records) and _applied_before(
            batch, reading, tallies)  # fmt: skip
    except Exception as exc:  # reported, and the message stays
        return Outcome(message_id, "failed", batch, why=f"{type(exc).__name__}: {exc}")
    lost = reading.lost(batch)
    outcome = Outcome(message_id, "", batch, found=len(reading.records), lost=lost,
                      why=_why_lost(batch, reading) if lost else "")  # fmt: skip
    if live is not None:
        outcome.why = "; ".join(filter(None, [outcome.why, WRITTEN if live else PARTLY]))
    if dry_run:
        outcome.result = "lost" if lost and not reading.records else (
            "would-repair-part" if lost else "would-repair")  # fmt: skip
        if before:
            outcome.why = "; ".join(filter(None, [outcome.why, "applied by an earlier repair: "
                                                  "only the message would be deleted"]))
        if live is False:
            outcome.result = "partly-written"
        outcome.deleted = (not lost and live is not False) or drop_lost
        return outcome
    if reading.records:
        try:
            # A read slow past the lease: another run may have taken it and applied a later
            # reading; this one is applied only while the lease is still its own.
            kept = tallies.keep_lease(batch.repair_shard, holder or "",
                                      int(runtime.clock.now().timestamp()), LEASE_SECONDS)
        except Exception as exc:  # reported, and the message stays
            outcome.result, outcome.why = "failed", f"{type(exc).__name__}: {exc}"
            return outcome
        if not kept:
            outcome.result = "busy"
            outcome.why = ("its lease passed while it read the batch, and another repair "
                           "took it: the message stays for a later run")  # fmt: skip
            return outcome
        try:
            answer = stream.consume(batch.event(reading.records), runtime, mark=False,
                                    write=marked is None, marked=marked)  # fmt: skip
            outcome.applied = {k: v for k, v in answer.items() if k != "state"}  # a whole window
        except Exception as exc:  # reported, and the message stays
            outcome.result, outcome.why = "failed", f"{type(exc).__name__}: {exc}"
            return outcome
    outcome.result = "lost" if lost and not reading.records else (
        "repaired-part" if lost else "repaired")  # fmt: skip
    if live is False:
        outcome.result = "partly-written"
    outcome.deleted = (not lost and live is not False) or drop_lost
    return outcome


WRITTEN = ("its window was written by the schedule function before it failed: its postings and "
           "counts are not written again")  # fmt: skip
PARTLY = ("its window was written in part by the schedule function, which never finished it: "
          "not written again (what landed would count twice); the counts of that window's "
          "hours may be short of it")  # fmt: skip


def _when(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _why_lost(batch: SkippedBatch, reading: Reading) -> str:
    when = (f" (arrived {batch.first_arrival} to {batch.last_arrival})"
            if batch.first_arrival else "")  # fmt: skip
    if reading.gone:
        return f"the stream or shard is gone: {reading.gone}{when}"
    if reading.trimmed:
        return f"past the stream's 24 hours{when}"
    return f"the stream did not hand on its last record {batch.last}{when}"


def _applied_before(batch: SkippedBatch, reading: Reading, tallies: Tallies) -> bool:
    """A repair wrote the batch's postings and counts already (its shard's checkpoint)."""
    last = max(int(r["dynamodb"]["SequenceNumber"]) for r in reading.records)
    return tallies.shard_checkpoint(shard_tag(batch.repair_shard)) >= last


def repair(sqs: Any, queue_url: str,
           runtime_of: Callable[[SkippedBatch], Runtime], *, dry_run: bool = False,
           drop_lost: bool = False, limit: int = 10 * RECEIVE_ROUNDS,
           ) -> Iterator[Outcome]:  # fmt: skip
    """Repair the batches the queue's messages name, one message at a time, up to ``limit``
    messages; yields each outcome once its message is deleted (or kept). A message kept is
    hidden until the run ends (so it is read once), then shown again."""
    seen: set[str] = set()
    kept: list[str] = []
    try:
        for _ in range(RECEIVE_ROUNDS):
            if len(seen) >= limit:
                return
            # A long poll asks every SQS server: a short one may answer none while some wait.
            got = sqs.receive_message(QueueUrl=queue_url, VisibilityTimeout=VISIBILITY_SECONDS,
                                      MaxNumberOfMessages=min(10, limit - len(seen)),
                                      WaitTimeSeconds=RECEIVE_WAIT_SECONDS,
                                      ).get("Messages", [])  # fmt: skip
            if not got:
                return
            for message in got:
                if message["MessageId"] in seen:  # SQS gave it twice: once is enough
                    kept.append(message["ReceiptHandle"])
                    continue
                seen.add(message["MessageId"])
                outcome = repair_message(message, runtime_of, dry_run=dry_run,
                                         drop_lost=drop_lost)  # fmt: skip
                if outcome.deleted and not dry_run:
                    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
                else:
                    kept.append(message["ReceiptHandle"])
                yield outcome
    finally:
        for handle in kept:
            with contextlib.suppress(ClientError):  # else it shows after VISIBILITY_SECONDS
                sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=handle,
                                              VisibilityTimeout=0)  # fmt: skip
