"""The AWS requests of the hot paths, pinned: a change that adds a request fails here.

Counted per service and operation with botocore events on every client (boto3's and
PynamoDB's), by the same scenarios ``make bench`` reports (``bench.requests``). If a change
removes a request, lower the pin in the same change; if it adds one, it needs a reason that
beats the issue's budget (a delivered email: at most 5 DynamoDB requests).
"""

from __future__ import annotations

import os

import pytest
from bench import requests as rq


@pytest.fixture(autouse=True)
def counter():
    # The bench's stacks set its environment for the process (metrics off among others): a
    # later test in this process must find the suite's environment again.
    saved = dict(os.environ)
    rq.COUNTER.install()
    yield rq.COUNTER
    os.environ.clear()
    os.environ.update(saved)


def by_phase(journey):
    return [(function, tally.operations()) for function, tally, _, _ in journey.phases]


def test_a_delivered_email_costs_ten_dynamodb_requests():
    # Enqueue reads the receivers' suppressions (one BatchGetItem, to flag them in its answer),
    # then writes the content before the items (an item is accepted only once all it needs
    # is stored): two BatchWriteItem requests, the same write units as one. Of SES's events
    # the configuration set records only the Delivery (not Send: the worker's record says
    # what it would). The stream carries the done state to the schedule function, which
    # stamps the records written before the done write with their expiry (a Query of the
    # item's records, an UpdateItem each: vdq.store.expiry) only when the item says some were
    # written (``apart``): none here, its history is on the state item, so no request. It
    # publishes no state event (by default only transitions into errored are announced). The
    # content expires from birth: the stream writes nothing to it.
    # The worker reads the receiver's suppression (one GetItem) before it claims the item: the
    # suppression list costs two reads per email (vdq.results.suppression). The send's second
    # UpdateItem reserves its slot at SES's rate (vdq.dispatch.pacing): one request for a batch of
    # one; a full batch of ten shares it (see the batch test below). The claim (which writes
    # its send entry) and the Delivery each carry their history entries on the state item
    # (vdq.store.history): one UpdateItem each. SES's acceptance writes nothing: the email
    # stays sending, and its Delivery (the first result, found by its tag without a read of
    # the ID's mapping) stores the message ID and the "accepted by SES" entry with its own.
    # Before the batch's messages are deleted, the worker publishes its check (one SQS
    # SendMessage a batch: the emails SES accepted, with their IDs); delayed five minutes, it
    # finds this one delivered already: one eventually consistent BatchGetItem, no write
    # (vdq.results.checks).
    # The stream window's last call (its own phase) writes, for every message of the window,
    # one posting per hour touched, one done posting per minute touched (the sent list) and
    # one counter record per hour and kind (all, the producer, the sender identity), then the
    # shard's checkpoint, which the window's first
    # batch read (a GetItem): a share of a window, not a message's (bench.cost).
    journey = rq.email_delivered()
    assert journey.final_state == "succeeded"
    assert by_phase(journey) == [
        ("enqueue", {"dynamodb.BatchGetItem": 1, "dynamodb.BatchWriteItem": 2,
                     "sqs.SendMessageBatch": 1}),
        ("send", {"dynamodb.GetItem": 1, "dynamodb.UpdateItem": 2, "sesv2.SendEmail": 1,
                  "sqs.SendMessage": 1}),
        ("webhook", {"dynamodb.GetItem": 1, "dynamodb.UpdateItem": 1}),
        ("webhook", {"dynamodb.BatchGetItem": 1}),
        ("schedule", {}),
        ("schedule", {"dynamodb.GetItem": 1, "dynamodb.PutItem": 2, "dynamodb.UpdateItem": 4}),
    ]  # fmt: skip
    check = journey.phases[3][1]
    assert check.rru == 0.5 and check.batch_billed == {}  # eventually consistent: half a unit
    total = journey.total()
    window = journey.phases[-1][1].by_service()["dynamodb"] + 1  # and its checkpoint's read
    # The check's read is a tenth of it a batch.
    assert total.by_service()["dynamodb"] - window <= 10
    # With its three history entries (coded: vdq.store.history) and no attribute at its
    # default, the delivered state item stays under one write unit.
    assert 512 < total.sizes["state"] < 1024


def test_a_delivered_email_writes_ten_dynamodb_units_and_a_share_of_a_window():
    # Table units, then index units, per phase: enqueue puts the content (10 KB of HTML in
    # 2 KB, with its expiration from birth) and the state (with the ``cx`` it relies on, and no
    # publish timer: its message is published right after, vdq.schedules.strays); the claim is
    # one unit (it writes the send entry, no timer: the send message is its lease), SES's
    # acceptance none (the Delivery stores the ID: a tagged email has no mapping record), the
    # Delivery's one (868 bytes with its entry and the event's mark: the entries coded, no
    # attribute at its default, no claim kept once done, beside the receiver index's key and
    # the subject's start). Index moves: active and receiver in at enqueue, none at the claim,
    # active out at the Delivery (the sent list is the stream's done postings: no index).
    # The check writes nothing for an email delivered by then. The stream writes nothing: the
    # content expires from birth (the done write is conditional on its ``cx``), the history is
    # on the state item, which the done write stamped. The send's pace record (its slot at
    # SES's rate) is one unit more.
    # The receiver index's entry (vdq.store.search) is written once and never moved. The
    # window's last call writes a posting, a done posting, three counter records and the
    # shard's checkpoint, a unit each, for all the messages of its window.
    journey = rq.email_delivered()
    units = [(f, t.wru, t.gsi_wru) for f, t, _, _ in journey.phases]
    assert units == [("enqueue", 3, 2), ("send", 2, 0), ("webhook", 1, 1), ("webhook", 0, 0),
                     ("schedule", 0, 0), ("schedule", 6, 0)]  # fmt: skip
    # What it leaves for its retention (the bill's storage line): as bench.storage weighs it.
    from bench import storage

    assert journey.stored_bytes == storage.per_email()["bytes"]


def test_a_delivered_sms_costs_no_more_than_an_email_and_its_two_callbacks():
    journey = rq.sms_delivered()
    assert journey.final_state == "succeeded"
    assert by_phase(journey) == [
        ("enqueue", {"dynamodb.BatchGetItem": 1, "dynamodb.BatchWriteItem": 2,
                     "sqs.SendMessageBatch": 1}),
        # Twilio's acceptance writes nothing (no transaction with a SID mapping: the status
        # callbacks name the item and attempt in their URL); the batch's check is published.
        ("send", {"dynamodb.GetItem": 1, "dynamodb.UpdateItem": 2, "sqs.SendMessage": 1}),
        # "sent", the first callback, stores the SID and the acceptance's entry with its own
        # and moves the item to awaiting (one UpdateItem, found by its key: no mapping read);
        # "delivered" is the done write, its entry on the state item too.
        ("webhook", {"dynamodb.GetItem": 1, "dynamodb.UpdateItem": 1}),
        ("webhook", {"dynamodb.GetItem": 1, "dynamodb.UpdateItem": 1}),
        ("webhook", {"dynamodb.BatchGetItem": 1}),  # the check: delivered, nothing to write
        # The table's stream, off the webhook's path, gives the records written before the
        # done write their expiry (a done state is not announced by default): none here (the
        # history is on the state item, which says no record was written beside it; the
        # content expires from birth), so no read.
        ("schedule", {}),
        # The window's: its shard's checkpoint read by its first batch, and its writes.
        ("schedule", {"dynamodb.GetItem": 1, "dynamodb.PutItem": 2, "dynamodb.UpdateItem": 4}),
    ]  # fmt: skip


def test_enqueue_to_100_receivers_batches_its_writes_and_sends():
    tally = rq.enqueue_many(100)
    # The content of several items expires from birth, later than any of them needs
    # (vdq.workflow.retention): no count to write and confirm. The receivers' suppressions are
    # read in one BatchGetItem (a hundred keys a request).
    assert tally["requests"] == {"dynamodb.BatchGetItem": 1, "dynamodb.BatchWriteItem": 5,
                                 "sqs.SendMessageBatch": 10}  # fmt: skip
    assert tally["by_service"]["dynamodb"] / 100 <= 0.2
    assert tally["by_service"]["sqs"] / 100 <= 0.15


def test_a_batch_of_ten_sends_reserves_its_pace_in_one_request():
    # Ten suppression reads (GetItem), ten claims (UpdateItem each: SES's acceptance is no
    # write), one UpdateItem of the pace record for all ten slots (0.1 pacing requests per
    # email), and one check of the ten emails SES accepted (0.1 SQS requests per email).
    tally = rq.send_batch(10)
    assert tally["requests"] == {"dynamodb.GetItem": 10, "dynamodb.UpdateItem": 11,
                                 "sesv2.SendEmail": 10, "sqs.SendMessage": 1}  # fmt: skip
    assert tally["batch_billed"] == {"sqs": 1}


def test_an_operator_retry_reads_once_writes_once_and_publishes_once():
    assert rq.retry_one()["requests"] == {
        "dynamodb.GetItem": 1, "dynamodb.UpdateItem": 1, "sqs.SendMessageBatch": 1,
    }  # fmt: skip


def test_a_resend_reads_the_original_writes_the_copy_and_publishes_it():
    # Two batch reads: the originals, then their receivers' suppressions (named in the answer,
    # as an enqueue names them).
    assert rq.resend_one()["requests"] == {
        "dynamodb.BatchGetItem": 2, "dynamodb.PutItem": 1, "dynamodb.TransactWriteItems": 1,
        "sqs.SendMessageBatch": 1,
    }  # fmt: skip


def test_the_counter_sees_pynamodb_and_boto3_clients():
    """The pin is only as good as the counter: a request it cannot see would pass unnoticed."""
    import boto3
    from bench import env

    with env.stack() as stack, rq.COUNTER.measure() as tally:
        stack.runtime.store.get_item("01KDVDNA00XJBJSC1S48FA1XNB")  # PynamoDB's own client
        boto3.client("sqs").list_queues()
    assert tally.operations() == {"dynamodb.GetItem": 1, "sqs.ListQueues": 1}


def test_the_cost_page_and_the_readme_show_the_bill_the_bench_makes():
    # The bill on the cost page is what `python -m bench --only cost` prints for the bench's
    # email and SMS, and the README quotes its totals: a change that moves the bill moves both.
    from pathlib import Path

    from bench import bill

    journeys = {"email": rq.email_delivered(), "sms": rq.sms_delivered()}
    journeys["email"].send_batch = rq.send_batch_timeline()
    journeys["sms"].send_batch = rq.send_batch_timeline(sms=True)
    bills = {name: bill.bill(journey) for name, journey in journeys.items()}
    printed = bill.table_text(bills).split("\n\nper delivered email")[0].strip()
    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "cost.md").read_text()
    assert printed in page, "docs/cost.md's bill is not the bench's: run the bench, copy it"
    email, sms = bills["email"]["total_on_demand"], bills["sms"]["total_on_demand"]
    readme = " ".join((root / "README.md").read_text().split())
    assert f"It costs US${email:.2f} per million delivered emails and US${sms:.2f} per " \
        "million SMS" in readme  # fmt: skip
