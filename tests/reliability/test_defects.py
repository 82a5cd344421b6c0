"""One deterministic regression test per defect of issue 14, each reproduced through the harsh
world's fault seam (harsh.py) with public functions only.

Each pins the behaviour expected once the defect is fixed; on a1687ad every one of them fails.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

import vdq
from tests.reliability.harsh import Plan
from tests.reliability.support import Crash, forget_garbage, fresh_clock
from tests.reliability.world import MAX_STATE_BYTES, World, engagement_event, harsh_world
from tests.support.results import ses_event
from vdq.api import Caller
from vdq.core.errors import PartiallyEnqueued, VdqError
from vdq.dispatch import send
from vdq.operations import actions
from vdq.results import checks
from vdq.results import matching as results
from vdq.schedules import sweeps as schedules
from vdq.store import StoreBusy
from vdq.workflow import retention
from vdq.workflow.sendqueue import SendMessage
from vdq.workflow.transitions import Step, apply

OPERATOR = Caller("op-1", ("vdq-operators",),
                  frozenset({"vdq.can_resend", "vdq.list_queueitem", "vdq.read_queueitem",
                             "vdq.read_workflow", "vdq.can_retry", "vdq.can_cancel"}))  # fmt: skip
FILE = {"filename": "invoice.pdf", "content_type": "application/pdf",
        "content_base64": "JVBERi0xLjQK"}
# 4 KB holds about 230 marks. moto deep-copies the whole table in every transaction, and the
# flood adds two records an event: its time grows with the square of the flood, so the soak's
# is a few times the suite's (30,000 ran out of 24 GB; 3,000 ran past 10 minutes).
FLOOD = 1_000 if os.environ.get("VDQ_SOAK") == "1" else 300


@pytest.fixture(scope="module")
def world_once() -> Iterator[World]:
    with harsh_world(index_shards=2, max_files_age_seconds=0) as created:
        yield created


@pytest.fixture
def world(world_once: World) -> World:
    world_once.fresh(fresh_clock())
    return world_once


def deliver(world: World, item_id: str, plan: Plan | None = None) -> str | None:
    """Process the latest send message of ``item_id`` (None when the worker was killed); once
    processed, the message leaves the queue, as the mapping deletes it."""
    body = [b for b in world.seam.sends if SendMessage.parse(b).item_id == item_id][-1]
    with world.seam.step(plan or Plan()):
        try:
            outcome = send.process(SendMessage.parse(body), world.rt)
        except Crash:
            return None
    world.send_queue.consume(body)
    return outcome


def twilio_status(world: World, sid: str, status: str, item_id: str | None,
                  attempt: int | None = None) -> str:  # fmt: skip
    params = {"MessageSid": sid, "MessageStatus": status}
    if status in ("undelivered", "failed"):
        params.update(ErrorCode="30003", ErrorMessage="Unreachable destination handset")
    return results.handle_twilio_callback(params, item_id, world.rt,
                                          attempt=None if attempt is None else str(attempt))


def sent_as(world: World, item_id: str) -> str:
    """The provider ID the item's current attempt was accepted as (the item stores it once
    its first result or its check came)."""
    attempt = int(world.item(item_id).attempt)
    [found] = [m for m, key in {**world.ses.accepted, **world.twilio.accepted}.items()
               if key == (item_id, attempt)]
    return found


def run_checks(world: World) -> None:
    """The checks the send published, handled now (their delay passed)."""
    for message in list(world.results_queue.messages):
        data = json.loads(message.body)
        if data.get("kind") == checks.KIND:
            checks.handle(data, world.rt)


def ses(world: World, kind: str, message_id: str, item_id: str, attempt: int) -> str:
    event = ses_event(kind, message_id=message_id, item_id=item_id, attempt=attempt)
    return results.handle_ses_event(event, world.rt)


def operator(world: World, item_id: str, name: str) -> None:
    apply(item_id, Step(name, actor="op-1", source="operator"), world.rt)


def email(world: World, receivers: list[str], files: bool = False) -> list[Any]:
    return vdq.add_email({"email": "shop@example.com"}, receivers, "Hi", "Text",
                         attachments=[FILE] if files else None, runtime=world.rt)  # fmt: skip


def stream_stamps(world: World) -> None:
    """What the table's stream consumer does for every item that reached a done state (the
    harsh world runs no stream): stamp its records and its content."""
    for item in world.items().values():
        if item.expiration is not None:
            retention.stamp_item(item.id, item.content_id, int(item.expiration), world.rt,
                                 counted=bool(item.counted), files=bool(item.has_files))


def content_expiration(item: Any) -> int | None:
    from vdq.store.models import ContentRecord, content_key

    record = ContentRecord.get(*content_key(item.content_id), consistent_read=True)
    return None if record.expiration is None else int(record.expiration)


def sent_without_answer(world: World, item_id: str) -> str:
    """Attempt 1 of an email: SES takes it, the worker dies, its send message comes back past
    the claim's lease and errors it (outcome unknown)."""
    world.ses.plan = "crash"
    assert deliver(world, item_id) is None
    world.ses.plan = "ok"
    (message_id,) = world.ses.accepted
    world.rt.clock.advance(world.rt.settings.lease_seconds + 1)
    assert deliver(world, item_id) == send.ERRORED
    assert world.item(item_id).state == "errored"
    return message_id


# ---- 1. retry keeps the old provider ID ----------------------------------------------------------


def test_1_a_late_status_of_the_old_sid_never_moves_the_retried_sms(world):
    (item,) = vdq.add_sms("+15005550006", ["+14155550100"], "Your code", runtime=world.rt)
    assert deliver(world, item.id) == send.ACCEPTED
    sid1 = sent_as(world, item.id)
    twilio_status(world, sid1, "undelivered", item.id, 1)
    assert world.item(item.id).state == "errored"
    operator(world, item.id, "retry")
    # Attempt 2 is in Twilio's create call when attempt 1's late "sent" status arrives.
    world.twilio.during = lambda: twilio_status(world, sid1, "sent", item.id, 1)
    deliver(world, item.id)
    sid2 = max(world.twilio.accepted)
    run_checks(world)  # no status of attempt 2 came: its check records it
    stored = world.item(item.id)
    assert (stored.state, stored.attempt, stored.provider_id) == ("awaiting", 2, sid2)
    twilio_status(world, sid2, "delivered", item.id, 2)
    assert world.item(item.id).state == "succeeded"


# ---- 2. partial enqueue failure sends twice ------------------------------------------------------


@pytest.mark.parametrize("mode", ["half_throttle", "half_unprocessed", "throttle"])
def test_2_a_partial_enqueue_answers_exactly_what_was_stored_and_sends_it_once(world, mode):
    receivers = [f"r{n}@example.org" for n in range(4)]
    with world.seam.step(Plan(batch=mode)), pytest.raises(Exception) as raised:
        email(world, receivers)
    exc = raised.value
    stored = world.items()
    assert isinstance(exc, VdqError) and exc.status == 503, repr(exc)
    assert sorted(exc.details.get("accepted", [])) == sorted(stored)
    told = exc.details.get("rejected", receivers)
    rejected = [r if isinstance(r, str) else r.get("email") for r in told]
    assert sorted(rejected) == sorted(set(receivers) - {i.receiver for i in stored.values()})
    if mode != "throttle":
        assert stored, "the half-applied batch stored some items"
    # Every message, then the re-publish sweep, then every message again.
    for body in list(world.seam.sends):
        send.process(SendMessage.parse(body), world.rt)
        world.send_queue.consume(body)
    world.rt.clock.advance(world.rt.settings.publish_grace_seconds + 1)
    schedules.run(["sweep"], world.rt)
    for body in list(world.seam.sends):
        send.process(SendMessage.parse(body), world.rt)
        world.send_queue.consume(body)
    sends = {i: sum(n for (j, _), n in world.ses.calls.items() if j == i) for i in stored}
    assert sends == {i: 1 for i in stored}


# ---- 3. a failed bulk resend deletes the copies' files -------------------------------------------


def test_3_a_failed_bulk_resend_keeps_the_files_of_the_copies_it_stored(world):
    """A bulk resend stores its copies content by content, each with its count (one
    transaction): a worker that dies after the first content leaves that copy stored and
    counted, and the second content's count untouched. (On a1687ad copies were written in
    batches after every count was taken, and a failure gave back the stored copies' counts.)"""
    a, c = email(world, ["a@example.org", "c@example.org"], files=True)
    b, d = email(world, ["b@example.org", "d@example.org"], files=True)
    for item in (a, b):
        deliver(world, item.id)
        ses(world, "delivery", sent_as(world, item.id), item.id, 1)
    files_of_b = set(world.files()[b.content_id])
    with world.seam.step(Plan(crash_after="TransactWriteItems")), pytest.raises(Crash):
        actions.resend([a.id, b.id], OPERATOR, world.rt)
    (copy,) = [i for i in world.items().values() if i.resent_from]
    assert copy.resent_from == a.id, "the first content's copy is stored"
    assert world.rt.store.get_refs(b.content_id).open_items == 1, "b's content counts d only"
    # The last originals finish: a's content's count must still hold the stored copy.
    for item in (c, d):
        deliver(world, item.id)
        ses(world, "delivery", sent_as(world, item.id), item.id, 1)
    world.rt.clock.advance(world.rt.settings.publish_grace_seconds + 1)
    schedules.run(["sweep", "purge"], world.rt)  # publishes the copy, which the crash did not
    assert not files_of_b & world.s3_keys(), "b's files were kept by a count of no item"
    assert deliver(world, copy.id) == send.ACCEPTED
    run_checks(world)
    assert world.item(copy.id).state == "awaiting"


def test_3_a_bulk_resend_that_fails_part_way_names_the_copies_it_stored(world, monkeypatch):
    (a,) = email(world, ["a@example.org"])
    (b,) = email(world, ["b@example.org"])
    for item in (a, b):
        deliver(world, item.id)
        ses(world, "delivery", sent_as(world, item.id), item.id, 1)
    store_copies = world.rt.store.store_copies
    calls = []

    def second_fails(content_id: str, copies: list[Any], *, files: bool) -> bool:
        calls.append(content_id)
        if len(calls) == 2:
            raise StoreBusy("DynamoDB kept cancelling the write")
        return store_copies(content_id, copies, files=files)

    monkeypatch.setattr(world.rt.store, "store_copies", second_fails)
    with pytest.raises(PartiallyEnqueued) as answer:
        actions.resend([a.id, b.id], OPERATOR, world.rt)
    (copy,) = [i for i in world.items().values() if i.resent_from]
    assert answer.value.details == {"accepted": [copy.id], "rejected": ["b@example.org"]}
    assert deliver(world, copy.id) == send.ACCEPTED, "the stored copy was published"
    assert world.rt.store.get_refs(b.content_id) is None, "b's content counts nothing"


# ---- 4. a stale read overwrites another attempt's provider ID ------------------------------------


def test_4_an_event_of_attempt_1_never_replaces_the_id_attempt_2_stored(world):
    (item,) = email(world, ["ada@example.org"])
    m1 = sent_without_answer(world, item.id)
    operator(world, item.id, "retry")
    # The event of attempt 1 reads the item; attempt 2's worker records M2; the event writes.
    race = Plan(interleave=("write", lambda: deliver(world, item.id)))
    with world.seam.step(race):
        ses(world, "delivery", m1, item.id, 1)
    m2 = max(world.ses.accepted)
    run_checks(world)  # attempt 2 is recorded by its check (no event of it came yet)
    stored = world.item(item.id)
    assert (stored.state, stored.attempt, stored.provider_id) == ("awaiting", 2, m2)
    ses(world, "delivery", m2, item.id, 2)
    assert world.item(item.id).state == "succeeded"


# ---- 5. a tagged SES event for a cancelled email loses its result --------------------------------


@pytest.mark.parametrize("kind", ["delivery", "bounce_permanent"])
def test_5_a_result_of_an_earlier_attempt_is_written_to_a_cancelled_email(world, kind):
    (item,) = email(world, ["ada@example.org"])
    m1 = sent_without_answer(world, item.id)
    operator(world, item.id, "cancel")
    event = ses_event(kind, message_id=m1, item_id=item.id, attempt=1)
    results.handle_ses_event(event, world.rt)
    stored = world.item(item.id)
    assert (stored.state, stored.result) == ("cancelled", results.parse_ses_event(event).text)


# ---- 6. attachments read eventually consistent ---------------------------------------------------


def test_6_a_send_right_after_enqueue_finds_its_fresh_attachment(world):
    (item,) = email(world, ["ada@example.org"], files=True)
    outcome = deliver(world, item.id, Plan(stale=True))
    run_checks(world)
    stored = world.item(item.id)
    assert (outcome, stored.state) == (send.ACCEPTED, "awaiting"), stored.result


# ---- 7. a crash after the done commit leaks files ------------------------------------------------


def test_7_files_are_released_although_the_worker_died_after_the_done_commit(world):
    (item,) = email(world, ["ada@example.org"], files=True)
    deliver(world, item.id)
    message_id = sent_as(world, item.id)
    with world.seam.step(Plan(crash_after="TransactWriteItems")), pytest.raises(Crash):
        ses(world, "delivery", message_id, item.id, 1)
    assert world.item(item.id).state == "succeeded"
    ses(world, "delivery", message_id, item.id, 1)  # SQS delivers the event again
    world.rt.clock.advance(2)
    schedules.run(["purge"], world.rt)
    (keys,) = world.files().values()
    assert not set(keys) & world.s3_keys(), "the files of a done content are still stored"


# ---- 8. open/click events grow the state item without bound --------------------------------------


def test_8_a_flood_of_opens_keeps_the_state_item_small_and_writable(world):
    (item,) = email(world, ["ada@example.org"])
    deliver(world, item.id)
    message_id = sent_as(world, item.id)
    for n in range(FLOOD):
        results.handle_ses_event(engagement_event("Open", message_id, item.id, 1, n), world.rt)
        if n % 100 == 99:
            forget_garbage(world.backend())
    size = world.raw_items()[item.id].size()
    assert size <= MAX_STATE_BYTES, f"{FLOOD} opens made the state item {size} bytes"
    ses(world, "delivery", message_id, item.id, 1)
    assert world.item(item.id).state == "succeeded"


# ---- found by the 20,000-schedule soak (session 5) -----------------------------------------------


@pytest.mark.parametrize("files", [True, False], ids=["with files", "without files"])
def test_a_resend_that_dies_after_its_first_write_leaves_no_count_behind(world, files):
    """The soak's counterexample: a resend counted its copies on the content, then died before
    storing them; the count stayed for ever (files never purged, content never expiring). A
    content without files counts nothing now: it expires from birth, after every item of it
    (the copy's resend moved its expiration in the copy's own transaction)."""
    item, other = email(world, ["ada@example.org", "bob@example.org"], files=files)
    deliver(world, item.id)
    ses(world, "delivery", sent_as(world, item.id), item.id, 1)
    # Resent while the other receiver's item is open (so the files are still there).
    with world.seam.step(Plan(crash_after="TransactWriteItems")), pytest.raises(Crash):
        actions.resend([item.id], OPERATOR, world.rt)
    # Whatever the crash left is finished: a stored copy is published by the sweep (once the
    # lane has no backlog: the other receiver's send is delivered first) and sent.
    deliver(world, other.id)
    ses(world, "delivery", sent_as(world, other.id), other.id, 1)
    world.rt.clock.advance(world.rt.settings.publish_grace_seconds + 1)
    schedules.run(["sweep"], world.rt)
    for copy in [i for i in world.items().values() if i.resent_from == item.id]:
        deliver(world, copy.id)
        ses(world, "delivery", sent_as(world, copy.id), copy.id, 1)
    assert all(i.state == "succeeded" for i in world.items().values())
    refs = world.rt.store.get_refs(item.content_id)
    if files:
        assert refs is not None and refs.open_items == 0, "a count is left on the content"
    else:
        assert refs is None, "a content without files keeps a count"
    world.rt.clock.advance(2)
    schedules.run(["purge"], world.rt)
    if files:
        (keys,) = world.files().values()
        assert not set(keys) & world.s3_keys(), "the files of a done content are still stored"
    stream_stamps(world)
    expires = content_expiration(item)
    assert expires is not None, "the content of done items never expires"
    latest = max(int(i.expiration) for i in world.items().values())
    assert expires >= latest, "the content expires before an item of it"


def test_an_email_with_the_most_attachments_expires_and_can_be_resent(world):
    """Stamping and resending write every attachment record in one transaction with the
    content and its count (DynamoDB: at most 100 actions a transaction)."""
    many = [dict(FILE, filename=f"part{n}.pdf") for n in range(vdq.intake.messages.MAX_ATTACHMENTS)]
    item, other = vdq.add_email({"email": "shop@example.com"},
                                ["ada@example.org", "bob@example.org"], "Hi", "Text",
                                attachments=many, runtime=world.rt)  # fmt: skip
    deliver(world, item.id)
    ses(world, "delivery", sent_as(world, item.id), item.id, 1)
    (copy,) = actions.resend([item.id], OPERATOR, world.rt)  # 100 actions: the most there are
    for each in (other, copy):
        deliver(world, each.id)
        ses(world, "delivery", sent_as(world, each.id), each.id, 1)
    assert {i.state for i in world.items().values()} == {"succeeded"}
    stream_stamps(world)  # 99 actions
    assert content_expiration(item) is not None, "the content was never stamped"


@pytest.mark.parametrize("files", [True, False], ids=["with files", "without files"])
def test_an_enqueue_that_dies_before_confirming_its_items_leaves_its_content_to_expire(world,
                                                                                      files):
    """The items were written, their content's count is still pending: once they are done,
    the purge settles the count and the content expires after them (before, it never did:
    its stamp waited for a confirmation that never came). A content without files has no
    count to confirm: it expires from birth, after its items."""
    with world.seam.step(Plan(crash_after="BatchWriteItem#2")), pytest.raises(Crash):
        email(world, ["a@example.org", "b@example.org"], files=files)
    assert len(world.items()) == 2, "the items were written, their confirmation was not"
    world.rt.clock.advance(world.rt.settings.publish_grace_seconds + 1)
    schedules.run(["sweep"], world.rt)
    for item in world.items().values():
        deliver(world, item.id)
        ses(world, "delivery", sent_as(world, item.id), item.id, 1)
    stream_stamps(world)
    world.rt.clock.advance(2)
    schedules.run(["purge"], world.rt)
    (item, _) = world.items().values()
    refs = world.rt.store.get_refs(item.content_id)
    if files:
        assert refs is not None and refs.pending is None and refs.open_items == 0
        (keys,) = world.files().values()
        assert not set(keys) & world.s3_keys(), "the files of a done content are still stored"
    else:
        assert refs is None, "a content without files keeps a count"
    expires = content_expiration(item)
    assert expires is not None, "the content of done items never expires"
    assert expires >= max(int(i.expiration) for i in world.items().values())


def test_a_tagged_result_of_a_cancelled_email_wins_over_the_orphans_that_came_before_it(world):
    """The soak's counterexample (session 6): SES took attempt 1 without an answer; its bounce
    arrived untagged and waited as an orphan; the email was cancelled; a tagged reject of the
    same message then stored the mapping, and the older orphan, replayed after it, wrote its
    text over the reject's. The seed: the latest result of a cancelled email is its result."""
    (item,) = email(world, ["ada@example.org"])
    message_id = sent_without_answer(world, item.id)
    untagged = ses_event("bounce_permanent", message_id=message_id, item_id=None, attempt=None)
    results.handle_ses_event(untagged, world.rt)  # no item knows the message yet: an orphan
    operator(world, item.id, "cancel")
    reject = ses_event("reject", message_id=message_id, item_id=item.id, attempt=1)
    results.handle_ses_event(reject, world.rt)
    stored = world.item(item.id)
    assert stored.state == "cancelled"
    assert stored.result == results.parse_ses_event(reject).text
