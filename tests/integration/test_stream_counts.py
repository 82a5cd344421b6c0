"""The stream's postings and counts on moto, as the deployed mapping drives the schedule
function: each window of a shard counted exactly once however its records are batched, retried,
halved or given again, and a shard's split counted by its children as well."""

from __future__ import annotations

import pytest
from functions.webhook import handler as webhook

from tests.support.results import (
    LambdaContext,
    new_email,
    new_sms,
    ses_event,
    sqs_event,
    to_awaiting,
)
from tests.support.stream import SHARD, Stream
from vdq.python_api import DEFAULT_PRODUCER
from vdq.schedules import postings
from vdq.store.postings import ALL, Tallies, counter_sk, shard_tag
from vdq.workflow.transitions import Step, apply


def deliver(body):
    assert webhook.handler(sqs_event(body), LambdaContext()) == {"batchItemFailures": []}


@pytest.fixture
def day(aws, runtime):
    """A small day: two emails delivered (one of them complained about), one bounced, one
    rejected, an SMS sent and cancelled, one email still queued. Returns its stream."""
    delivered = to_awaiting(new_email(runtime, "ada@example.org"), runtime, "m-1")
    deliver(ses_event("delivery", message_id="m-1", item_id=delivered.id))
    deliver(ses_event("complaint", message_id="m-1", item_id=delivered.id))
    other = to_awaiting(new_email(runtime, "grace@example.org"), runtime, "m-2")
    deliver(ses_event("delivery", message_id="m-2", item_id=other.id))
    bounced = to_awaiting(new_email(runtime, "bounce@example.org"), runtime, "m-3")
    deliver(ses_event("bounce_permanent", message_id="m-3", item_id=bounced.id))
    rejected = to_awaiting(new_email(runtime, "reject@example.org"), runtime, "m-4")
    deliver(ses_event("reject", message_id="m-4", item_id=rejected.id))
    text = new_sms(runtime)
    apply(text.id, Step("cancel", actor="op", source="operator"), runtime)
    new_email(runtime, "later@example.org")
    return Stream(aws["table"])


EXPECTED = {"email.queued": 5, "email.sent": 4, "email.succeeded": 2, "email.complaint": 1,
            "email.bounce": 1, "email.reject": 1, "email.errored": 2, "sms.queued": 1,
            "sms.cancelled": 1}  # fmt: skip


def counts(aws, runtime):
    tallies = Tallies(runtime.client("dynamodb"), aws["table"])
    hour = runtime.clock.now().strftime("%Y-%m-%dT%H")
    return {k: v for k, v in tallies.counters([hour]).get(hour, {}).items() if v}


def test_a_window_counts_what_entered_each_state_and_the_providers_signals(aws, runtime, day):
    answer = day.window(batch=3)
    assert answer["state"] == {} and answer["written"] > 0
    assert counts(aws, runtime) == EXPECTED
    tallies = Tallies(runtime.client("dynamodb"), aws["table"])
    reputation = tallies.reputation(runtime.clock.now().strftime("%Y-%m-%dT%H"))
    assert reputation[("i", "shop@example.com")] == {"sent": 4, "succeeded": 2, "complaint": 1,
                                                     "bounce": 1, "reject": 1}
    # The Python API's items are its default producer's when the call names none.
    assert reputation[("p", DEFAULT_PRODUCER)]["sent"] == 4 and ("p", "-") not in reputation


def test_the_last_call_given_again_counts_nothing_twice(aws, runtime, day):
    records = day.new_records()
    state = day.invoke(records, {}, final=False)["state"]
    first = day.invoke([], state, final=True)
    again = day.invoke([], state, final=True)  # its answer was lost: Lambda calls it again
    assert first["written"] > 0 and again["written"] == 0
    assert again["replayed"] == first["written"]
    assert counts(aws, runtime) == EXPECTED


def test_records_given_again_in_a_later_window_count_nothing_twice(aws, runtime, day):
    records = day.new_records()
    day.invoke([], day.invoke(records, {}, final=False)["state"], final=True)
    # Any batching of the same records, in another window of the same shard.
    state: dict = {}
    for record in records:
        state = day.invoke([record], state, final=False)["state"]
    assert day.invoke([], state, final=True)["written"] == 0
    assert counts(aws, runtime) == EXPECTED


def test_a_failed_batch_halved_and_given_again_counts_each_record_once(aws, runtime, day):
    records = day.new_records()
    half = len(records) // 2
    day.invoke(records, {}, final=False)  # failed after it ran: its state is dropped
    state = day.invoke(records[:half], {}, final=False)["state"]  # bisected, the state before
    day.invoke(records[half:], {}, final=False)  # this half fails too ...
    state = day.invoke(records[half:], state, final=False)["state"]  # ... and is given again
    day.invoke([], state, final=True)
    assert counts(aws, runtime) == EXPECTED


def test_records_given_again_within_their_window_count_once(aws, runtime, day):
    # Lambda processes a window's records at least once, not exactly once: "in rare cases,
    # such as error handling, some records might be processed more than once", and then
    # perhaps out of order. A record given again with a state that has it already adds
    # nothing.
    records = day.new_records()
    half = len(records) // 2
    state = day.invoke(records[:half], {}, final=False)["state"]
    state = day.invoke(records, state, final=False)["state"]  # the first half once more
    state = day.invoke(records[half - 1 : half], state, final=False)["state"]
    day.invoke([], state, final=True)
    assert counts(aws, runtime) == EXPECTED


def test_a_record_given_again_at_the_start_of_the_next_window_costs_it_nothing(aws, runtime,
                                                                              day):  # fmt: skip
    # A repeat "might be processed out of order": the last record of a window written, handed
    # on again at the head of the next window. Its counter records' checkpoints refuse a
    # window that starts at or before them, and with it the window's new records.
    records = day.new_records()
    half = len(records) // 2
    day.invoke([], day.invoke(records[:half], {}, final=False)["state"], final=True)
    state = day.invoke(records[half - 1 :], {}, final=False)["state"]
    day.invoke([], state, final=True)
    assert counts(aws, runtime) == EXPECTED


def test_a_last_call_that_failed_half_way_writes_the_rest_when_given_again(aws, runtime, day,
                                                                          monkeypatch):  # fmt: skip
    records = day.new_records()
    state = day.invoke(records, {}, final=False)["state"]
    real = Tallies.add_counts
    calls = []

    def failing_second(self, *args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise RuntimeError("the function died between two writes")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Tallies, "add_counts", failing_second)
    with pytest.raises(RuntimeError):
        day.invoke([], state, final=True)
    monkeypatch.setattr(Tallies, "add_counts", real)
    again = day.invoke([], state, final=True)
    assert again["replayed"] >= 1 and again["written"] >= 1
    assert counts(aws, runtime) == EXPECTED


def test_a_window_ended_early_and_its_rest_count_each_record_once(aws, runtime, day):
    records = day.new_records()
    half = len(records) // 2
    state = day.invoke(records[:half], {}, final=False)["state"]
    early = {"Records": [], "state": state, "shardId": SHARD, "isWindowTerminatedEarly": True,
             "isFinalInvokeForWindow": False}
    assert postings.consume(early, runtime)["state"] == {}  # written: the window goes on fresh
    state = day.invoke(records[half:], {}, final=False)["state"]
    day.invoke([], state, final=True)
    assert counts(aws, runtime) == EXPECTED


def test_a_shards_children_count_after_it_with_checkpoints_of_their_own(aws, runtime, day):
    records = day.new_records()
    parent, child = Stream(aws["table"], SHARD), Stream(aws["table"], SHARD + "-child")
    parent.invoke([], parent.invoke(records[:4], {}, final=False)["state"], final=True)
    # After the split the rest of the records come from the child shard: a new checkpoint.
    child_state = child.invoke(records[4:], {}, final=False)["state"]
    assert child.invoke([], child_state, final=True)["written"] > 0
    assert child.invoke([], child_state, final=True)["written"] == 0  # given again
    assert counts(aws, runtime) == EXPECTED
    key = {"pk": {"S": "CNT#" + runtime.clock.now().strftime("%Y-%m-%dT%H")},
           "sk": {"S": counter_sk(ALL, None, shard_tag(SHARD))}}
    row = runtime.client("dynamodb").get_item(TableName=aws["table"], Key=key)["Item"]
    assert {n for n in row if n.startswith("ck.")} == {f"ck.{shard_tag(SHARD)}",
                                                      f"ck.{shard_tag(SHARD + '-child')}"}


def test_an_event_without_a_shard_writes_its_postings_and_counts_nothing(aws, runtime, day):
    records = day.new_records()
    answer = postings.consume({"Records": records}, runtime)
    assert answer["written"] >= 1 and counts(aws, runtime) == {}
