"""History entries on the state item (vdq.store.history): a state write carries its entries
there while they fit, bounded in number and size; past the bound they are records, and the
item's history reads both, in order, each entry once."""

from __future__ import annotations

import boto3

from tests.support.operator import email, move
from vdq.store import Moved, StateWrite, item_pk
from vdq.store.history import RECENT_ENTRY_BYTES, RECENT_LIMIT
from vdq.workflow import transitions
from vdq.workflow.transitions import Step, apply


def history_records(aws, item_id):
    rows = boto3.client("dynamodb").query(
        TableName=aws["table"], KeyConditionExpression="pk = :p AND begins_with(sk, :h)",
        ExpressionAttributeValues={":p": {"S": item_pk(item_id)}, ":h": {"S": "H#"}},
    )["Items"]  # fmt: skip
    return [r["sk"]["S"] for r in rows]


def cycle(runtime, item_id, times):
    """send, error, retry, ...: three state writes (and entries) a round."""
    for _ in range(times):
        move(runtime, item_id, "send", "error")
        apply(item_id, Step("retry", actor="op", source="operator"), runtime)
        runtime.clock.advance(0.001)


def test_entries_past_the_bound_are_records_and_history_reads_all_in_order(aws, runtime):
    [item] = email(runtime, "ada@example.org")
    cycle(runtime, item.id, 4)  # 12 transitions
    stored = runtime.store.get_item(item.id)
    assert len(stored.recent) == RECENT_LIMIT
    assert len(history_records(aws, item.id)) == 12 - RECENT_LIMIT
    history = runtime.store.history(item.id)
    assert [h.name for h in history] == ["send", "error", "retry"] * 4
    assert [h.sk for h in history] == sorted(h.sk for h in history)
    assert all(h.at == h.sk.split("#")[1] for h in history)


def test_an_entry_too_long_for_the_state_item_is_a_record(aws, runtime):
    [item] = email(runtime, "ada@example.org")
    move(runtime, item.id, "send")
    long = "x" * RECENT_ENTRY_BYTES
    move(runtime, item.id, "error", result=long)
    assert len(runtime.store.get_item(item.id).recent) == 1  # the send only
    assert len(history_records(aws, item.id)) == 1
    assert [h.text for h in runtime.store.history(item.id)][-1] == long


def test_a_write_that_finds_the_state_item_filled_since_its_read_writes_a_record(aws, runtime):
    [item] = email(runtime, "ada@example.org")
    cycle(runtime, item.id, 1)
    move(runtime, item.id, "send")  # four entries
    read = runtime.store.get_item(item.id)
    # Another writer adds an entry that changes no state until one place is left.
    note = transitions.history_entry(item.id, runtime.clock.now(), actor="t", source="server",
                                     kind="event", name="n0")
    runtime.store.commit(runtime.store.get_item(item.id), StateWrite(set={"result": "r"}), [note])
    assert len(runtime.store.get_item(item.id).recent) == RECENT_LIMIT - 1
    two = [transitions.history_entry(item.id, runtime.clock.now(), actor="t", source="server",
                                     kind="event", name=f"m{k}", key=f"m{k}") for k in range(2)]
    # Read with room for two, the item has room for one now: nothing else it assumed changed,
    # so the same write goes through, its entries a record (not Moved, which a caller such as
    # the give-back does not retry).
    runtime.store.commit(read, StateWrite(set={"result": "s"}), two)
    stored = runtime.store.get_item(item.id)
    assert (len(stored.recent), stored.result) == (RECENT_LIMIT - 1, "s")
    assert len(history_records(aws, item.id)) == 1
    history = runtime.store.history(item.id)
    assert [h.name for h in history][-3:] == ["n0", "m0", "m1"]
    assert len({h.sk for h in history}) == len(history)


def test_a_write_whose_item_moved_since_its_read_is_moved(aws, runtime):
    [item] = email(runtime, "ada@example.org")
    read = runtime.store.get_item(item.id)
    move(runtime, item.id, "send")
    note = transitions.history_entry(item.id, runtime.clock.now(), actor="t", source="server",
                                     kind="event", name="n0")
    try:
        runtime.store.commit(read, StateWrite(set={"result": "r"}), [note])
    except Moved as moved:
        assert moved.current is not None and moved.current.state == "sending"
    else:
        raise AssertionError("a write on an item that moved was applied")


def test_a_redelivered_event_on_the_state_item_is_a_duplicate(aws, runtime):
    [item] = email(runtime, "ada@example.org")
    move(runtime, item.id, "send", "succeed")
    late = Step("timeout", actor="vdq", late="record", event_id="ev-1")
    assert apply(item.id, late, runtime).kind == "late"
    before = runtime.store.get_item(item.id)
    assert apply(item.id, late, runtime).kind == "duplicate"
    after = runtime.store.get_item(item.id)
    assert (after.recent, after.seen) == (before.recent, before.seen)
    assert [h.name for h in runtime.store.history(item.id)].count("timeout") == 1


def test_a_claim_whose_entry_is_a_record_is_not_written_again_by_its_acceptance(aws, runtime):
    """Found by the model: the state item full, a claim writes its ``send`` entry as a record;
    the check that records SES's acceptance then saw no entry on the state item and wrote the
    claim's entry a second time, so history showed the attempt sent twice."""
    from vdq.core.clock import iso
    from vdq.dispatch import send
    from vdq.results import checks
    from vdq.workflow.lanes import message_for

    [item] = email(runtime, "ada@example.org")
    cycle(runtime, item.id, 4)  # the state item's entries are full
    queued = runtime.store.get_item(item.id)
    assert len(queued.recent) == RECENT_LIMIT and queued.state == "queued"
    claimed = send.claim(message_for(queued), runtime.clock.now(), runtime)
    assert claimed.state == "sending"
    runtime.clock.advance(1)
    sent = checks.Sent(item.id, int(queued.attempt), "0100-ses-id", iso(runtime.clock.now()))
    checks.handle({"kind": checks.KIND, "sent": [sent.as_json()]}, runtime)

    assert runtime.store.get_item(item.id).state == "awaiting"
    sends = [h for h in runtime.store.history(item.id)
             if h.name == "send" and h.attempt == int(queued.attempt)]  # fmt: skip
    assert len(sends) == 1, [h.sk for h in sends]
