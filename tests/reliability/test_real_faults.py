"""Ways AWS and the providers really behave, each against the paths it threatens: half-applied
transactions and batches, answers lost after DynamoDB applied a write, functions killed between
writes, redelivered and late events. Each test says the scenario and what the seed and
DESIGN.md promise."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

import vdq
from tests.reliability.support import (
    FIGURES,
    Crash,
    FakeSes,
    RecordingQueue,
    make_settings,
    moto_aws,
    runtime_for,
)
from tests.support.results import new_sms, ses_event, to_sending
from vdq import store
from vdq.api import Caller
from vdq.core.errors import PartiallyEnqueued
from vdq.core.settings import ALL_PERMISSIONS
from vdq.dispatch import record, send
from vdq.operations import actions
from vdq.results import matching as results
from vdq.schedules import sweeps as schedules
from vdq.store import ContentRefsRecord, QueueItemRecord, content_key, refs_key
from vdq.workflow.sendqueue import SendMessage
from vdq.workflow.transitions import Step, apply

OPERATOR = Caller("ops@example.com", ("vdq-operators",), ALL_PERMISSIONS)
HOOKS: list[tuple[Any, str, Any]] = []  # (client, event, handler) registered by this module
# Faults a test arms to fire once: each must have fired by the end of its test, so a change
# of which request carries a write cannot turn a fault test into one that injects nothing.
ARMED: list[tuple[str, list[int]]] = []


def hook(client: Any, event: str, handler: Any) -> None:
    """Register a botocore handler until the end of the test (PynamoDB keeps its client)."""
    client.meta.events.register(event, handler)
    HOOKS.append((client, event, handler))


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    # put_new backs off between retries of unprocessed items: no real waiting in a test.
    monkeypatch.setattr(store.tx.time, "sleep", lambda _s: None)
    with moto_aws() as urls:
        ses, queue = FakeSes(), RecordingQueue()
        settings = make_settings(urls, max_files_age_seconds=0)
        rt = runtime_for(settings, ses_provider=ses, send_queue=queue)
        try:
            yield {"rt": rt, "ses": ses, "queue": queue, "urls": urls}
        finally:
            while HOOKS:
                client, event, handler = HOOKS.pop()
                client.meta.events.unregister(event, handler)
            unfired = [what for what, left in ARMED if left[0] > 0]
            ARMED.clear()
        assert not unfired, f"armed faults that never fired: {unfired}"


def dynamodb_client() -> Any:
    return QueueItemRecord._get_connection().connection.client


def lease_ends(rt: Any, queue: RecordingQueue, item_id: str) -> None:
    """The claim's holder died (or is too slow): the item's send message, delivered again past
    the claim's lease, errors it "outcome unknown" (vdq.dispatch.send)."""
    rt.clock.advance(rt.settings.lease_seconds + 1)
    body = next(b for b in queue.bodies if SendMessage.parse(b).item_id == item_id)
    assert send.process(SendMessage.parse(body), rt) == send.ERRORED


def half_apply_batch_writes(keep: int) -> None:
    """From now on, BatchWriteItem stores only the first ``keep`` put requests it is given
    (through the same moto, past this hook) and answers every other as UnprocessedItems, as
    DynamoDB does under throttling of a partition: a half-applied batch whose retries are
    refused again."""
    client = dynamodb_client()
    direct = boto3.client("dynamodb", region_name=client.meta.region_name)
    busy: list[int] = []
    budget = [keep]

    def answer(params: dict[str, Any], **_: Any) -> Any:
        if busy:
            return None  # the hook's own write of the applied half
        ((table, requests),) = json.loads(params["body"])["RequestItems"].items()
        stored, left = requests[: budget[0]], requests[budget[0] :]
        budget[0] -= len(stored)
        if stored:
            busy.append(1)
            try:
                direct.batch_write_item(RequestItems={table: stored})
            finally:
                busy.clear()
        FIGURES["faults injected"] += 1
        body = {"UnprocessedItems": {table: left} if left else {},
                "ResponseMetadata": {"HTTPStatusCode": 200}}  # fmt: skip
        return AWSResponse("https://injected", 200, {}, None), body

    hook(client, "before-call.dynamodb.BatchWriteItem", answer)


def writes_history(params: dict[str, Any]) -> bool:
    """A state write that carries history entries on the state item (a transition's), not a
    claim, a pace reservation or a timer move."""
    return "recent" in str(params.get("body"))


def throttle_once(operation: str, after: int = 0,
                  when: Callable[[dict[str, Any]], bool] | None = None,
                  times: int = 1) -> None:  # fmt: skip
    """The next ``operation`` on the table (past the first ``after``; of those ``when``
    accepts) is throttled (ProvisionedThroughputExceeded), and so are its ``times - 1`` tries
    after it."""
    left = [times]
    passed = [after]
    ARMED.append((f"throttle {operation}", left))

    def answer(params: dict[str, Any], **_: Any) -> Any:
        if when is not None and not when(params):
            return None
        if passed[0] > 0:
            passed[0] -= 1
            return None
        if left[0] <= 0:
            return None
        left[0] -= 1
        FIGURES["faults injected"] += 1
        body = {"Error": {"Code": "ProvisionedThroughputExceededException",
                          "Message": "injected throttling"},
                "ResponseMetadata": {"HTTPStatusCode": 400}}  # fmt: skip
        return AWSResponse("https://injected", 400, {}, None), body

    hook(dynamodb_client(), f"before-call.dynamodb.{operation}", answer)


def attachment(name: str) -> dict[str, Any]:
    return {"filename": name, "content_type": "text/plain",
            "content_base64": base64.b64encode(f"file {name}".encode()).decode()}  # fmt: skip


def deliver(rt: Any, queue: RecordingQueue, ses: FakeSes, item_ids: list[str]) -> None:
    """Send each item's pending message, then report its SES delivery: the items succeed."""
    wanted = set(item_ids)
    for body in list(queue.bodies):
        message = SendMessage.parse(body)
        if message.item_id in wanted:
            assert send.process(message, rt) == send.ACCEPTED
    for message_id, (item_id, attempt) in ses.accepted.items():
        if item_id in wanted:
            event = ses_event("delivery", message_id=message_id, item_id=item_id, attempt=attempt)
            results.handle_ses_event(event, rt)
    for item_id in item_ids:
        assert rt.store.get_item(item_id).state == "succeeded"


def files_of(rt: Any, content_id: str) -> list[str]:
    bucket = rt.settings.attachments_bucket
    listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=f"files/{content_id}/")
    return [o["Key"] for o in listed.get("Contents", [])]


def open_items(content_id: str) -> int:
    return int(ContentRefsRecord.get(*refs_key(content_id),
                                     consistent_read=True).open_items)  # fmt: skip


# ---- files of a partial bulk resend -----------------------------------------------------------


def test_a_half_applied_bulk_resend_of_two_contents_gives_back_each_contents_own_count(env):
    """Bulk resend of three done emails: two share content A (one email to two receivers),
    one has content B. The store takes the copies of A and refuses the copy of B. The answer
    is a partial enqueue (503) naming the stored copies; they must still be sendable (their
    files kept: A counts two open items), and B's count must stay at 0 so its files are deleted
    (seed: files are deleted when all items that use them are done; issue 14: no leaked file,
    none deleted early).

    On 86b31df ``_release_unborn`` gives the whole count of the rejected copies back to the
    first rejected copy's content: A drops to 0 and its files are deleted under the stored
    copy (which then errors "file was deleted"), B stays at 1 and keeps its files forever.
    (Since ccde45c each content's copies are one transaction with their count: the refused
    write is B's transaction, throttled; before, one BatchWriteItem held every copy.)"""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    rt.settings = replace(rt.settings, max_files_age_seconds=None)  # keep them while done
    a1, a2 = vdq.add_email("shop@example.com", ["ada@example.org", "bob@example.org"], "A",
                           "Text", attachments=[attachment("a.txt")], runtime=rt)  # fmt: skip
    (b1,) = vdq.add_email("shop@example.com", ["cy@example.org"], "B", "Text",
                          attachments=[attachment("b.txt")], runtime=rt)  # fmt: skip
    deliver(rt, queue, ses, [a1.id, a2.id, b1.id])
    rt.settings = replace(rt.settings, max_files_age_seconds=0)  # files go when all are done
    assert open_items(a1.content_id) == 0 and open_items(b1.content_id) == 0

    throttle_once("TransactWriteItems", after=1)  # A's copies are stored, B's write refused
    with pytest.raises(PartiallyEnqueued) as raised:
        actions.resend([a1.id, a2.id, b1.id], OPERATOR, rt)
    assert raised.value.details["rejected"] == ["cy@example.org"]
    stored = [rt.store.get_item(i) for i in raised.value.details["accepted"]]
    assert {c.content_id for c in stored} == {a1.content_id} and len(stored) == 2

    assert open_items(a1.content_id) == 2, "content A: its stored copies are open"
    assert open_items(b1.content_id) == 0, "content B: no copy was stored"
    schedules.run(["purge"], rt)  # B stayed in the purge index: nothing took it out
    assert files_of(rt, a1.content_id), "content A's files were deleted under a stored copy"
    assert files_of(rt, b1.content_id) == [], "content B's files are kept forever"


# ---- a function killed between the two writes of an enqueue -----------------------------------


def all_files(rt: Any) -> list[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket=rt.settings.attachments_bucket,
                                                Prefix="files/")  # fmt: skip
    return [o["Key"] for o in listed.get("Contents", [])]


def test_an_enqueue_killed_between_its_records_and_its_items_leaves_no_file_forever(
    env, monkeypatch
):
    """``store_and_publish`` writes the content, file and refs records first, then the items.
    The enqueue Lambda dies (timeout, out of memory) after the first BatchWriteItem and before
    the second: no item exists, so the request accepted nothing and the client sends it again
    (a new content). The first try's uploaded file and records reference no item; the refs
    record counts its receivers as open forever and is never in the purge index, and no S3
    lifecycle rule expires current objects: the file is kept forever.

    Issue 14 ("no leaked file"; files released exactly when the seed says): with immediate
    cleanup (VDQ_MAX_FILES_AGE_IN_SECONDS=0) the purge run must delete the orphaned file once
    no item can ever use it. On 86b31df it is never deleted."""
    rt = env["rt"]
    calls = []
    original = store.Store.put_new

    def dies_before_the_items(self: Any, records: Any) -> Any:
        calls.append(len(records))
        if len(calls) == 2:
            raise Crash()
        return original(self, records)

    monkeypatch.setattr(store.Store, "put_new", dies_before_the_items)
    with pytest.raises(Crash):
        vdq.add_email("shop@example.com", ["ada@example.org"], "Hi", "Text",
                      attachments=[attachment("a.txt")], runtime=rt)  # fmt: skip
    monkeypatch.setattr(store.Store, "put_new", original)
    assert len(all_files(rt)) == 1
    assert env["queue"].bodies == [], "no item was stored or published"

    for _ in range(3):  # the daily purge, days later
        rt.clock.advance(86_400)
        schedules.run(["purge"], rt)
    assert all_files(rt) == [], "a file of a request that stored no item is kept forever"


# ---- a BatchWriteItem applied, its answer lost -----------------------------------------------


def applied_then_failed(call_number: int) -> None:
    """BatchWriteItem call ``call_number`` (1-based, counted from now) is applied by DynamoDB,
    but its caller gets an error instead of the answer: the response was lost (a read timeout)
    and botocore's retries of it were throttled. An AWS write that errors may have been
    applied; only a read can say."""
    client = dynamodb_client()
    direct = boto3.client("dynamodb", region_name=client.meta.region_name)
    seen = [0]
    busy: list[int] = []

    def answer(params: dict[str, Any], **_: Any) -> Any:
        if busy:
            return None
        seen[0] += 1
        if seen[0] != call_number:
            return None
        busy.append(1)
        try:
            direct.batch_write_item(RequestItems=json.loads(params["body"])["RequestItems"])
        finally:
            busy.clear()
        FIGURES["faults injected"] += 1
        body = {"Error": {"Code": "ProvisionedThroughputExceededException",
                          "Message": "injected: the applied request's retries were throttled"},
                "ResponseMetadata": {"HTTPStatusCode": 400}}  # fmt: skip
        return AWSResponse("https://injected", 400, {}, None), body

    hook(client, "before-call.dynamodb.BatchWriteItem", answer)


def stored_items(rt: Any) -> dict[str, str]:
    """receiver -> item id of every queue item in the table."""
    return {i.receiver: i.id for i in QueueItemRecord.scan(QueueItemRecord.sk == "STATE")}


def test_a_partial_enqueue_answer_names_every_item_the_store_holds(env):
    """An email to 30 receivers: the content record (one BatchWriteItem), then items in two
    chunks (25 + 5). The second chunk is applied but its answer is lost and the retries fail.
    ``put_new`` counts a request that raised as not applied, so the 503 lists those 5
    receivers as rejected while their items are stored with a publish timer: the republish
    sweep sends them, and the client, told to send the rejected receivers again, sends them a
    second time (issue 14 defect 2: "the answer must say exactly which receivers were stored
    (each then sent once)").

    Expected: every stored item is in ``accepted`` (or the unconfirmed ones were made sure
    absent, e.g. read back consistently or deleted before answering), and no rejected receiver
    has an item that will be sent."""
    rt = env["rt"]
    receivers = [f"r{n:02d}@example.org" for n in range(30)]
    applied_then_failed(call_number=3)
    try:
        answered = vdq.add_email("shop@example.com", receivers, "Hi", "Text", runtime=rt)
    except PartiallyEnqueued as partial:
        accepted = set(partial.details["accepted"])
        rejected = set(partial.details["rejected"])
    else:  # the store read back what the failed request wrote: all of it
        accepted, rejected = {i.id for i in answered}, set()
    assert len(accepted) + len(rejected) == 30
    stored = stored_items(rt)
    sent_twice = sorted(r for r in rejected if r in stored)
    assert sent_twice == [], (
        f"{len(sent_twice)} receivers answered as rejected have a stored item that the "
        "republish sweep will send; the client sends them again"
    )
    assert set(stored.values()) == accepted


# ---- duplicate events across the two places a mark lives --------------------------------------


def test_a_redelivered_event_recorded_as_a_mark_record_changes_nothing_after_a_cancel(env):
    """SES took attempt 1 of an email, then its worker died before storing the message ID; the
    item's send message, back past the claim's lease, moved it to errored. SES's Delivery event
    (tagged: item, attempt 1) arrives: a late event on an errored item, written to history with its
    mark as an EV# record (events that change no state never write the state item). An operator
    cancels the item (attempt 2). SQS delivers the same event again (at least once): now the
    cancelled item would absorb it, and ``Store.commit`` checks only the ``seen`` set (which has
    room), never the EV# record: the duplicate writes the result, stores the message ID and adds an
    ``ignored`` entry to history.

    Expected (vdq.results.matching: "a duplicate or replayed delivery changes nothing the second
    time"): the second delivery is a duplicate and the item is as the first left it."""
    rt = env["rt"]
    (item,) = vdq.add_email("shop@example.com", ["ada@example.org"], "Hi", "Text", runtime=rt)
    to_sending(rt.store.get_item(item.id), rt)  # claimed; SES takes it as M1; the worker dies
    lease_ends(rt, env["queue"], item.id)
    assert rt.store.get_item(item.id).state == "errored"

    event = ses_event("delivery", message_id="0100019a-m1", item_id=item.id, attempt=1)
    results.handle_ses_event(event, rt)
    actions.run_transition(item.id, "cancel", OPERATOR, rt)
    before = rt.store.get_item(item.id)
    history = len(rt.store.history(item.id))

    assert results.handle_ses_event(event, rt) == "duplicate"
    after = rt.store.get_item(item.id)
    assert (after.result, after.provider_id) == (before.result, before.provider_id)
    assert len(rt.store.history(item.id)) == history


# ---- Twilio callbacks without the signed attempt ----------------------------------------------


def test_a_late_callback_without_the_attempt_never_takes_over_a_later_attempt(env):
    """Issue 14 defect 1, for a status callback whose URL carries ``queue_item`` but no ``attempt``
    (every message created before 86b31df was deployed; Twilio keeps the URL it was given). Attempt
    1: Twilio created SID1, the worker died before storing it, its send message (back past the
    claim's lease) moved the item to errored; an operator retried (attempt 2, claimed, in Twilio's
    create call). SID1's "sent" callback arrives now: the keyed item stores no ID and no mapping
    names SID1, so it is taken as attempt 2's, stores SID1 and moves attempt 2 to awaiting. Then
    SID2 cannot be stored and its "delivered" callback is refused: the item waits for the timeout,
    which fetches SID1's status.

    Expected: a callback that cannot say its attempt does not store its SID on an item that
    has had more than one attempt (it matches by mapping or is looked up later); attempt 2
    ends with SID2 and succeeds on SID2's delivery."""
    rt = env["rt"]
    item = new_sms(rt)
    to_sending(item, rt)  # Twilio creates SID1; the worker dies before storing it
    lease_ends(rt, env["queue"], item.id)
    actions.run_transition(item.id, "retry", OPERATOR, rt)
    claimed = to_sending(rt.store.get_item(item.id), rt)
    assert int(claimed.attempt) == 2

    old = {"MessageSid": "SM" + "1" * 32, "MessageStatus": "sent"}
    results.handle_twilio_callback(old, item.id, rt)  # no attempt in its (older) URL
    record.accepted(claimed, "SM" + "2" * 32, rt)
    new = {"MessageSid": "SM" + "2" * 32, "MessageStatus": "delivered"}
    results.handle_twilio_callback(new, item.id, rt, attempt="2")

    final = rt.store.get_item(item.id)
    assert final.provider_id == "SM" + "2" * 32
    assert final.state == "succeeded"


# ---- "sending it again with the same Idempotency-Key is safe" ---------------------------------


def test_a_failure_after_the_items_are_stored_is_not_repeated_by_a_retry_with_the_same_key(env):
    """SQS refuses the new items' send messages (an SQS brown-out), so ``_publish`` moves each
    item to errored; that write is throttled once. The exception leaves
    ``enqueue_once`` after the items were stored: Powertools deletes the in-progress
    idempotency record, and the enqueue handler answers 500 "sending it again with the same
    Idempotency-Key is safe". The client does; the request runs again and stores every
    receiver a second time, while the first items (queued, publish timer set) are re-published
    by the sweep: each receiver is sent the email twice.

    Expected (issue 14 defect 2: "a retried request with the same Idempotency-Key must not
    duplicate"): the retry answers the first request's items (or an error) and stores none."""
    from vdq.intake import rest as intake

    rt, queue = env["rt"], env["queue"]
    writer = Caller("app", ("vdq-writers",), ALL_PERMISSIONS)
    body = {"sender": {"email": "shop@example.com"}, "to": [{"email": "ada@example.org"}],
            "subject": "Hi", "text": "Text"}  # fmt: skip
    queue.fail = True
    # The move to errored, with its history, throttled through the store's own retries.
    throttle_once("UpdateItem", when=writes_history, times=store.tx.UPDATE_TRIES)
    try:  # the items are stored: an answer must not invite a retry that stores them again
        intake.submit("email", body, writer, rt, idempotency_key="order-42")
    except Exception as exc:
        FIGURES["idempotent enqueue: first try refused"] += 1
        del exc
    queue.fail = False
    try:
        intake.submit("email", body, writer, rt, idempotency_key="order-42")
    except Exception as exc:  # an error answer is acceptable; a second item is not
        FIGURES["idempotent enqueue: retry refused"] += 1
        del exc
    # The sweep re-publishes whatever is queued with a passed publish timer; the worker sends.
    rt.clock.advance(rt.settings.publish_grace_seconds + 1)
    schedules.run(["sweep"], rt)
    for body in list(queue.bodies):
        send.process(SendMessage.parse(body), rt)
    items = [i for i in QueueItemRecord.scan(QueueItemRecord.sk == "STATE")]
    sent = {i.receiver: 0 for i in items}
    for item_id, _attempt in env["ses"].calls:
        sent[next(i.receiver for i in items if i.id == item_id)] += 1
    assert sent == {"ada@example.org": 1}, (
        f"{len(items)} items for one receiver after a retry with the same Idempotency-Key; "
        f"SES calls per receiver: {sent}"
    )


# ---- the shared content counter in every done transaction --------------------------------------


def conflict_on_the_content_counter(times: int) -> list[int]:
    """The next ``times`` TransactWriteItems that update a content's refs record are cancelled
    with TransactionConflict on it, as DynamoDB cancels a transaction while another one writes
    the same item (every item of one email's receivers releases the same refs record)."""
    client = dynamodb_client()
    left = [times]

    def answer(params: dict[str, Any], **_: Any) -> Any:
        request = json.loads(params["body"])
        writes = request["TransactItems"]
        keys = [w.get("Update", {}).get("Key", {}).get("sk", {}).get("S") for w in writes]
        at = [n for n, sk in enumerate(keys)
              if sk == store.REFS_SK or (sk or "").startswith("R#")]  # fmt: skip
        if not at or left[0] <= 0:
            return None
        left[0] -= 1
        FIGURES["faults injected"] += 1
        reasons = [{"Code": "TransactionConflict" if n in at else "None"}
                   for n in range(len(writes))]  # fmt: skip
        body = {"Error": {"Code": "TransactionCanceledException",
                          "Message": "Transaction cancelled, please refer cancellation reasons "
                                     "for specific reasons [TransactionConflict]"},
                "CancellationReasons": reasons,
                "ResponseMetadata": {"HTTPStatusCode": 400}}  # fmt: skip
        return AWSResponse("https://injected", 400, {}, None), body

    hook(client, "before-call.dynamodb.TransactWriteItems", answer)
    return left


def test_a_transaction_conflict_on_the_shared_file_counter_does_not_fail_the_delivery(env):
    """86b31df moves every done transition of an item with files into one transaction with its
    content's refs record: all receivers of one email now write the same item as their
    deliveries arrive together, and DynamoDB cancels concurrent transactions on one item with
    TransactionConflict (a retryable cancellation). ``Store.commit`` re-raises it as it is, so
    the results message fails; SQS redelivers it at most MAX_RECEIVE_COUNT (5) times, then
    dead-letters it, and the item waits 72 hours to become unconfirmed though it was
    delivered. The old release was a separate UpdateItem (an atomic ADD never conflicts).

    Expected: a transaction cancelled only for TransactionConflict is retried (AWS: retry
    with backoff), and one conflict costs the delivery nothing."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    (item,) = vdq.add_email("shop@example.com", ["ada@example.org"], "Hi", "Text",
                            attachments=[attachment("a.txt")], runtime=rt)  # fmt: skip
    assert send.process(SendMessage.parse(queue.bodies[0]), rt) == send.ACCEPTED
    (message_id,) = ses.accepted
    conflict_on_the_content_counter(times=1)
    event = ses_event("delivery", message_id=message_id, item_id=item.id, attempt=1)
    try:
        results.handle_ses_event(event, rt)
    except Exception as exc:
        pytest.fail(f"one TransactionConflict failed the delivery event: {exc!r}")
    assert rt.store.get_item(item.id).state == "succeeded"
    assert open_items(item.content_id) == 0


def test_a_resend_whose_publish_fails_after_the_copy_is_stored_keeps_the_copys_files(env):
    """A resend of a done email with a file: the copy is stored, SQS refuses its send message,
    and the write that would move the copy to errored is throttled. The exception
    reaches ``resend``'s "nothing was stored" branch, which gives back the copy's count: the
    content counts 0 open items with the copy queued, so immediate cleanup deletes the file;
    the sweep re-publishes the copy (its publish timer is set) and it errors "file was deleted"
    (and its done transition would later count the content below 0).

    Expected (seed: files are deleted when all items that use them are done; issue 14 defect 3
    "failed bulk resend deletes the copies' files"): a stored copy keeps its files and is sent."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    rt.settings = replace(rt.settings, max_files_age_seconds=None)
    (item,) = vdq.add_email("shop@example.com", ["ada@example.org"], "Hi", "Text",
                            attachments=[attachment("a.txt")], runtime=rt)  # fmt: skip
    deliver(rt, queue, ses, [item.id])
    rt.settings = replace(rt.settings, max_files_age_seconds=0)

    queue.fail = True
    # The resend's transaction counts the copy on the content (and takes the content's
    # expiration off: vdq.workflow.retention); the write moving the copy to errored (its history on
    # the state item) is throttled.
    throttle_once("UpdateItem", when=writes_history, times=store.tx.UPDATE_TRIES)
    try:  # the copy is stored and stays queued for the re-publish sweep
        actions.resend([item.id], OPERATOR, rt)
    except Exception as exc:
        FIGURES["resend: refused"] += 1
        del exc
    queue.fail = False
    copies = [i for i in QueueItemRecord.scan(QueueItemRecord.sk == "STATE") if i.id != item.id]
    assert len(copies) == 1, "the copy is stored"
    assert files_of(rt, item.content_id), "the stored copy's file was deleted"
    assert open_items(item.content_id) == 1


# ---- the worker's late ID store on a cancelled item ------------------------------------------


class SlowUntaggedSes(FakeSes):
    """SES for a strategy that tags nothing: ``during`` runs while SES holds the request (the
    worker's call is slow), then SES accepts the message."""

    def __init__(self, during: Any) -> None:
        super().__init__()
        self.during = during

    def send_raw(self, *, sender: str, receiver: str, raw: bytes, tags: Any = ()) -> str:
        assert not tags, "the no-op strategy attaches nothing"
        self.during()
        return "0100019a-slow-m1"


def test_a_send_that_ends_after_a_cancel_still_stores_its_id_so_the_result_reaches_the_item(env):
    """Events matched by message ID only (the no-op tracking strategy; a deployment that does not
    use SES tags). The worker's SES call is slow: the lease passes, a copy of its send message (SQS
    delivers at least once) moves the item to errored, an operator cancels it (attempt 2); then SES
    accepts the message as M1. The worker stores M1 with ``store_provider_id(attempt=1)``, which
    86b31df conditions on the attempt: the cancel moved it, so neither the ID nor its mapping is
    written. SES's Delivery event for M1 then matches no item and waits as an orphan until its TTL:
    the cancelled item never gets the result.

    Expected (seed: a delivery or failure event for a cancelled item leaves it cancelled and
    its text is written to ``result``; defect 5): the ID of the cancelled item's last send is
    stored (the cancelled item absorbs its attempts' results), and the Delivery writes the
    result."""
    from vdq.results.tracking import EmailTrackingStrategy

    rt, queue = env["rt"], env["queue"]
    rt.overrides["email_tracking"] = EmailTrackingStrategy()
    (item,) = vdq.add_email("shop@example.com", ["ada@example.org"], "Hi", "Text", runtime=rt)

    def lease_passes_and_an_operator_cancels() -> None:
        lease_ends(rt, queue, item.id)
        actions.run_transition(item.id, "cancel", OPERATOR, rt)

    rt.overrides["ses_provider"] = SlowUntaggedSes(lease_passes_and_an_operator_cancels)
    send.process(SendMessage.parse(queue.bodies[0]), rt)
    assert rt.store.get_item(item.id).state == "cancelled"

    event = ses_event("delivery", message_id="0100019a-slow-m1", item_id=None)
    results.handle_ses_event(event, rt)
    final = rt.store.get_item(item.id)
    assert final.state == "cancelled"
    assert final.provider_id == "0100019a-slow-m1"
    assert final.result and final.result.startswith("SES delivered"), final.result


# ---- the signed attempt, as API Gateway hands it over ----------------------------------------


def test_a_signed_callback_with_the_attempt_is_authentic_in_any_parameter_order(env):
    """86b31df adds a second query parameter (``attempt``) to Twilio's status callback URL.
    Twilio signs the URL as given (``...?queue_item=X&attempt=2``); the webhook rebuilds it
    from API Gateway's ``(multiValue)queryStringParameters`` "in the order received". API
    Gateway's Lambda proxy integration documents that "the order of the request parameters
    isn't preserved": received as ``{attempt, queue_item}`` the rebuilt URL differs, the
    check fails and every status callback is refused with 403 (the items wait for the
    timeout). With one parameter the order could not matter.

    Expected: an authentic callback is accepted whatever order the parameters arrive in."""
    from twilio.request_validator import RequestValidator

    from tests.support.results import (
        SAMPLE_ACCOUNT_SID,
        SAMPLE_AUTH_TOKEN,
        SAMPLE_WEBHOOK_URL,
        twilio_event,
    )
    from vdq.dispatch import outbound
    from vdq.results import twilio_signature

    settings = replace(env["rt"].settings, twilio_webhook_url=SAMPLE_WEBHOOK_URL,
                       twilio_auth_token=SAMPLE_AUTH_TOKEN,
                       twilio_account_sid=SAMPLE_ACCOUNT_SID)  # fmt: skip
    item_id = "01KBF3ZQ0M8Y4T6R2W9X5N7C3D"
    signed_url = outbound.status_callback_url(SAMPLE_WEBHOOK_URL, item_id, 2)
    for order in ("as sent", "reversed"):
        event = twilio_event("delivered", sid="SM" + "3" * 32, item_id=item_id, sign=False)
        params = twilio_signature.form_params(event)
        query = [("queue_item", item_id), ("attempt", "2")]
        if order == "reversed":
            query.reverse()
        event["queryStringParameters"] = dict(query)
        event["multiValueQueryStringParameters"] = {k: [v] for k, v in query}
        signature = RequestValidator(SAMPLE_AUTH_TOKEN).compute_signature(signed_url, params)
        event["headers"]["X-Twilio-Signature"] = signature
        assert twilio_signature.is_authentic(event, params, settings), f"refused {order}"


def test_a_mapping_written_before_the_deploy_does_not_move_a_later_attempt(env):
    """Mappings that 86b31df did not write have no ``attempt``. An SMS sent before the deploy
    as SID1 (mapped, no attempt) failed; after the deploy an operator retries it (attempt 2,
    claimed, SID1 cleared from the item). A late "undelivered" for SID1 (a Twilio retry of the
    callback, or an account-level one) matches through the mapping, whose missing attempt is
    read as "the item's current attempt": attempt 2 moves to errored while its own message is
    in Twilio's hands, and SID2's statuses then arrive late.

    Expected (defect 1: an event of an earlier attempt never moves a later one): a mapping
    without an attempt whose item no longer stores its ID belongs to an attempt the item has
    left (history only)."""
    from vdq.store import MAP_SK, ProviderRecord, provider_pk

    rt = env["rt"]
    item = new_sms(rt)
    sent = to_sending(item, rt)
    apply(sent, Step("await", actor="worker", provider_id="SM" + "1" * 32,
                     map_provider_id=False), rt)  # fmt: skip
    ProviderRecord(provider_pk("SM" + "1" * 32), MAP_SK, item_id=item.id).save()  # old shape
    results.handle_twilio_callback({"MessageSid": "SM" + "1" * 32, "MessageStatus": "failed"},
                                   item.id, rt)  # fmt: skip
    assert rt.store.get_item(item.id).state == "errored"
    actions.run_transition(item.id, "retry", OPERATOR, rt)
    claimed = to_sending(rt.store.get_item(item.id), rt)
    assert int(claimed.attempt) == 2 and claimed.provider_id is None

    late = {"MessageSid": "SM" + "1" * 32, "MessageStatus": "undelivered"}
    results.handle_twilio_callback(late, None, rt)  # account-level: no queue_item
    assert rt.store.get_item(item.id).state == "sending", "attempt 1's status moved attempt 2"


# ---- orphans adopted by a worker that then dies -----------------------------------------------


class UntaggedSes(FakeSes):
    """SES for the no-op strategy; ``first`` runs after SES took the message and before the
    worker hears back (its events can overtake the answer)."""

    def __init__(self, first: Any) -> None:
        super().__init__()
        self.first = first

    def send_raw(self, *, sender: str, receiver: str, raw: bytes, tags: Any = ()) -> str:
        self.first("0100019a-early-m1")
        return "0100019a-early-m1"


def test_orphans_adopted_by_a_worker_that_dies_are_still_applied(env, monkeypatch):
    """Message-ID matching (the no-op strategy). SES's Delivery event for M1 overtakes the
    worker's answer: no item stores M1, so it waits as an orphan on M1's mapping. The worker
    then stores M1 on the item and dies before adopting the mapping and replaying the orphans.
    (Fixed by storing the ID first: the email timeout finds the waiting events through it.)
    SQS redelivers the send (dropped: already claimed)
    and the lease sweep moves the item to errored, "outcome unknown ... a retry may send it
    twice", while VDQ holds SES's word that it was delivered: nothing ever replays an adopted
    mapping's orphans, and the item stores no ID that a later event could match.

    Expected (send.adopt_orphans: "until it does they stay on the mapping: none is lost";
    DESIGN: unmatched email events are kept and re-matched): the Delivery reaches the item,
    which ends succeeded, not "outcome unknown"."""
    from vdq.results.tracking import EmailTrackingStrategy

    rt, queue = env["rt"], env["queue"]
    rt.overrides["email_tracking"] = EmailTrackingStrategy()
    (item,) = vdq.add_email("shop@example.com", ["ada@example.org"], "Hi", "Text", runtime=rt)

    def delivery_overtakes(message_id: str) -> None:
        event = ses_event("delivery", message_id=message_id, item_id=None)
        assert results.handle_ses_event(event, rt) == "orphan"

    rt.overrides["ses_provider"] = UntaggedSes(delivery_overtakes)
    def dies_before_the_adoption(*args: Any, **kwargs: Any) -> Any:
        raise Crash()

    message = SendMessage.parse(queue.bodies[0])
    with monkeypatch.context() as patch:
        patch.setattr(rt.store, "adopt_orphans", dies_before_the_adoption)
        with pytest.raises(Crash):
            send.process(message, rt)
    assert rt.store.get_item(item.id).provider_id == "0100019a-early-m1"
    assert send.process(message, rt) == send.DROPPED  # SQS redelivers it
    rt.clock.advance(rt.settings.lease_seconds + 1)
    schedules.run(["sweep"], rt)
    rt.clock.advance(rt.settings.email_timeout_hours * 3600)
    schedules.run(["sweep"], rt)
    final = rt.store.get_item(item.id)
    assert final.state == "succeeded", f"{final.state}: {final.result}"


# ---- a resend's copies stored with their count, the purge settling -----------------------------


def applied_then_answered(answer_body: dict[str, Any]) -> None:
    """The next TransactWriteItems is applied by DynamoDB, but its caller gets ``answer_body``
    (an error) instead of the answer: the response was lost and botocore's retry of it was
    throttled (ProvisionedThroughputExceeded), or the retry found the first try's writes and
    was cancelled (TransactionCanceled with a failed condition on the items it had put)."""
    client = dynamodb_client()
    direct = boto3.client("dynamodb", region_name=client.meta.region_name)
    left = [1]
    ARMED.append(("applied, then answered with an error", left))

    def answer(params: dict[str, Any], **_: Any) -> Any:
        if not left[0]:
            return None
        left[0] = 0
        request = json.loads(params["body"])
        direct.transact_write_items(TransactItems=request["TransactItems"])
        FIGURES["faults injected"] += 1
        return AWSResponse("https://injected", 400, {}, None), answer_body

    hook(client, "before-call.dynamodb.TransactWriteItems", answer)


THROTTLED = {"Error": {"Code": "ProvisionedThroughputExceededException",
                       "Message": "injected: the applied request's retries were throttled"},
             "ResponseMetadata": {"HTTPStatusCode": 400}}  # fmt: skip


def copies_of(item_id: str) -> list[QueueItemRecord]:
    return [i for i in QueueItemRecord.scan(QueueItemRecord.sk == "STATE")
            if i.resent_from == item_id]  # fmt: skip


def published(queue: RecordingQueue, item_id: str) -> bool:
    return any(SendMessage.parse(b).item_id == item_id for b in queue.bodies)


@pytest.mark.parametrize("files", [False, True], ids=["without files", "with files"])
def test_a_resend_whose_transaction_was_applied_but_its_answer_lost_answers_with_the_copy(env,
                                                                                         files):
    """The copy and its count are one TransactWriteItems; DynamoDB applies it and the answer is
    lost (PynamoDB raises TransactWriteError without cancellation reasons). ``_store_chunk``
    promises a read-back of the first copy for exactly this; on ccde45c the read-back sits in
    an ``except Exception`` that a TransactWriteError never reaches: the resend answers 503
    while its copy is stored (the sweep publishes it later; a client that resends again sends
    the email twice)."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    rt.settings = replace(rt.settings, max_files_age_seconds=None)  # the files are kept
    (item,) = vdq.add_email("shop@example.com", ["ada@example.org"], "Hi", "Text",
                            attachments=[attachment("a.txt")] if files else None,
                            runtime=rt)  # fmt: skip
    deliver(rt, queue, ses, [item.id])
    applied_then_answered(THROTTLED)
    (copy,) = actions.resend([item.id], OPERATOR, rt)
    assert [c.id for c in copies_of(item.id)] == [copy.id]
    assert published(queue, copy.id), "the stored copy was answered and published"


def test_a_resend_the_sdk_retried_after_it_was_applied_is_not_refused_as_purged(env):
    """botocore retries a TransactWriteItems whose answer was lost (a 500, a reset connection);
    VDQ sends no ClientRequestToken, so the retry is a new transaction: the first try stored
    the copy, and the retry is cancelled for the copy's ``does_not_exist`` condition. On
    ccde45c any failed condition means "files purged or content expired": the resend answers
    409 "the attachment files ... were deleted by cleanup" while the copy is stored, counted
    and its files kept, and the sweep later sends it."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    rt.settings = replace(rt.settings, max_files_age_seconds=None)  # the files are kept
    (item,) = vdq.add_email("shop@example.com", ["ada@example.org"], "Hi", "Text",
                            attachments=[attachment("a.txt")], runtime=rt)  # fmt: skip
    deliver(rt, queue, ses, [item.id])
    # refs, content, one attachment record: fine; the copy: it exists (the first try put it).
    reasons = [{"Code": "None"}] * 3 + [{"Code": "ConditionalCheckFailed",
                                         "Message": "The conditional request failed"}]
    applied_then_answered({"Error": {"Code": "TransactionCanceledException",
                                     "Message": "Transaction cancelled, please refer "
                                                "cancellation reasons for specific reasons "
                                                "[None, None, None, ConditionalCheckFailed]"},
                           "CancellationReasons": reasons,
                           "ResponseMetadata": {"HTTPStatusCode": 400}})  # fmt: skip
    (copy,) = actions.resend([item.id], OPERATOR, rt)
    assert [c.id for c in copies_of(item.id)] == [copy.id]
    assert published(queue, copy.id)


def test_a_resend_of_one_content_that_fails_after_its_first_chunk_names_the_stored_copies(env):
    """An email with the most attachments (97) leaves room for one copy a transaction, so a
    resend of two of its receivers is two transactions. The second fails (throttled, nothing
    written): the first copy is stored, counted and will be sent. The answer must be the
    partial enqueue naming it (503 partially_enqueued, accepted/rejected), as the docstring of
    ``resend`` promises; on ccde45c it is a plain 503 ("nothing was written, try again") and
    the stored copy is neither published nor noted on its original."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    rt.settings = replace(rt.settings, max_files_age_seconds=None)  # the files are kept
    many = [attachment(f"part{n}.txt") for n in range(vdq.intake.messages.MAX_ATTACHMENTS)]
    a, b = vdq.add_email("shop@example.com", ["ada@example.org", "bob@example.org"], "Hi",
                         "Text", attachments=many, runtime=rt)  # fmt: skip
    deliver(rt, queue, ses, [a.id, b.id])
    throttle_once("TransactWriteItems", after=1)
    with pytest.raises(PartiallyEnqueued) as raised:
        actions.resend([a.id, b.id], OPERATOR, rt)
    (copy,) = copies_of(a.id)
    assert copies_of(b.id) == []
    assert raised.value.details == {"accepted": [copy.id], "rejected": ["bob@example.org"]}
    assert published(queue, copy.id), "the stored copy is sent"
    assert open_items(a.content_id) == 1, "the stored copy, and only it, is counted"


def stamp_done_items(rt: Any) -> None:
    """What the table's stream does for every item that reached a done state: stamp it and
    its content (refused while the content's count is pending)."""
    from vdq.workflow import retention

    for item in QueueItemRecord.scan(QueueItemRecord.sk == "STATE"):
        if item.expiration is not None:
            retention.stamp_item(item.id, item.content_id, int(item.expiration), rt,
                                 counted=bool(item.counted), files=bool(item.has_files))


def content_expiration(content_id: str) -> int | None:
    from vdq.store import ContentRecord

    record = ContentRecord.get(*content_key(content_id), consistent_read=True)
    return None if record.expiration is None else int(record.expiration)


def unconfirmed_email(rt: Any, monkeypatch: pytest.MonkeyPatch, receivers: list[str],
                      files: bool) -> list[QueueItemRecord]:  # fmt: skip
    """An enqueue whose items were written and published, and whose confirmation of its
    content's count failed: the count stays pending for the purge to settle."""

    def lost(content_id: str) -> None:
        raise RuntimeError("injected: the confirmation was throttled")

    with monkeypatch.context() as patch:
        patch.setattr(rt.store, "confirm_refs", lost)
        return vdq.add_email("shop@example.com", receivers, "Hi", "Text",
                             attachments=[attachment("a.txt")] if files else None,
                             runtime=rt)  # fmt: skip


def test_a_purge_killed_after_settling_a_pending_count_still_lets_the_content_expire(
    env, monkeypatch
):
    """Daily purge (files age one hour). An enqueue's confirmation failed; its items are done,
    and their stamps were refused while the count was pending. The purge settles the count
    and dies before deleting the files and stamping the content. The next run finds the count
    settled (``pending`` gone), deletes the files, and on ccde45c never stamps the content:
    content, REFS and file records are kept for ever (retention: a content expires with its
    last item)."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    rt.settings = replace(rt.settings, max_files_age_seconds=3600)
    a, b = unconfirmed_email(rt, monkeypatch, ["ada@example.org", "bob@example.org"], True)
    deliver(rt, queue, ses, [a.id, b.id])
    stamp_done_items(rt)
    assert content_expiration(a.content_id) is None, "refused while the count is pending"
    settle = rt.store.settle_pending

    def dies_after_settling(refs: Any) -> None:
        settle(refs)
        raise Crash()

    rt.clock.advance(2 * 3600)
    with monkeypatch.context() as patch:
        patch.setattr(rt.store, "settle_pending", dies_after_settling)
        with pytest.raises(Crash):
            schedules.run(["purge"], rt)
    rt.clock.advance(86_400)
    schedules.run(["purge"], rt)
    assert files_of(rt, a.content_id) == []
    assert content_expiration(a.content_id) is not None, "the content never expires"


def test_a_resend_before_the_purge_settles_a_pending_count_still_lets_the_content_expire(
    env, monkeypatch
):
    """An email without files to two receivers. Both are delivered, one is resent, and the copy
    is delivered. On ccde45c its confirmation failing left its count pending, the resend's
    transaction took the content out of the purge index, the purge never settled the count,
    every stamp was refused, and the content was kept for ever. A content without files counts
    nothing now (there is no confirmation to fail): it expires from birth, after every item of
    it, the copy's included (its resend moved the expiration)."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    rt.settings = replace(rt.settings, max_files_age_seconds=3600)
    a, b = unconfirmed_email(rt, monkeypatch, ["ada@example.org", "bob@example.org"], False)
    deliver(rt, queue, ses, [a.id, b.id])
    rt.clock.advance(10 * 86_400)  # resent days later: its content must outlive the copy
    (copy,) = actions.resend([a.id], OPERATOR, rt)
    deliver(rt, queue, ses, [copy.id])
    stamp_done_items(rt)
    for _ in range(3):  # the daily purge, days later
        rt.clock.advance(86_400)
        schedules.run(["purge"], rt)
    stamp_done_items(rt)
    assert rt.store.get_refs(a.content_id) is None, "a content without files keeps a count"
    expires = content_expiration(a.content_id)
    assert expires is not None, "the content never expires"
    done = [rt.store.get_item(i) for i in (a.id, b.id, copy.id)]
    assert all(i is not None and i.expiration is not None and expires >= i.expiration
               for i in done), "the content expires before an item of it"  # fmt: skip


def test_a_resend_whose_notes_on_the_originals_fail_answers_with_the_copies_it_sent(env):
    """The copies are stored with their counts and published; then the "resent" notes on the
    originals (one BatchWriteItem) are half applied and refused. On ccde45c that failure is
    the answer (503 store_unavailable, "the store refused the write"): the caller is told
    nothing was resent while every copy is on its way, and resending again sends them twice.
    The answer must be the copies (201): the notes are secondary to what was sent."""
    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    a, b = vdq.add_email("shop@example.com", ["ada@example.org", "bob@example.org"], "Hi",
                         "Text", runtime=rt)  # fmt: skip
    deliver(rt, queue, ses, [a.id, b.id])
    half_apply_batch_writes(keep=1)
    copies = actions.resend([a.id, b.id], OPERATOR, rt)
    assert {c.id for c in copies} == {c.id for c in copies_of(a.id) + copies_of(b.id)}
    assert all(published(queue, c.id) for c in copies)


def test_a_bulk_resend_with_a_content_purged_meanwhile_stores_the_others_and_says_why(env,
                                                                                    monkeypatch):
    """Three done emails, each its own content with a file. The resend reads that no content
    is purged; then, before the second content's transaction, the purge deletes that content's
    files (it was idle). Its copy is refused; the first and third are stored and sent. The
    answer is the partial enqueue naming both stored copies and the refused receiver, and it
    says why (the files were cleaned up: resending it again is a 409, the documented status).
    On ccde45c the resend stopped at the refused content without trying the third, and told
    the caller "before the store failed ... resend the others again"."""
    from vdq.workflow import attachments

    rt, ses, queue = env["rt"], env["ses"], env["queue"]
    rt.settings = replace(rt.settings, max_files_age_seconds=None)  # the files are kept
    a, b, c = [vdq.add_email("shop@example.com", [who], "Hi", "Text",
                             attachments=[attachment("a.txt")], runtime=rt)[0]
               for who in ("ada@example.org", "bob@example.org", "cy@example.org")]  # fmt: skip
    deliver(rt, queue, ses, [a.id, b.id, c.id])
    store_copies = rt.store.store_copies

    def purged_meanwhile(content_id: str, copies: Any, *, files: bool) -> bool:
        if content_id == b.content_id:
            assert attachments.purge_content_files(b.content_id, rt) == 1
        return store_copies(content_id, copies, files=files)

    monkeypatch.setattr(rt.store, "store_copies", purged_meanwhile)
    with pytest.raises(PartiallyEnqueued) as raised:
        actions.resend([a.id, b.id, c.id], OPERATOR, rt)
    stored = copies_of(a.id) + copies_of(c.id)
    assert len(stored) == 2 and copies_of(b.id) == []
    assert raised.value.details == {"accepted": [x.id for x in stored],
                                    "rejected": ["bob@example.org"]}  # fmt: skip
    assert all(published(queue, x.id) for x in stored)
    assert "deleted by cleanup" in raised.value.message
    assert "again" not in raised.value.message, "a purged content cannot be resent again"
