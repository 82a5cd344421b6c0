"""Redelivered events and lost answers with history entries on the state item: a late event is
a duplicate when ``recent`` is full, an applied update whose answer was lost is reported as
applied, and one malformed entry does not fail the archive of its batch."""

from __future__ import annotations

from tests.integration.test_history_on_state_races import rows
from tests.support.operator import email, move
from vdq.store.history import RECENT_LIMIT
from vdq.workflow import transitions
from vdq.workflow.transitions import Step, apply, event_mark


def full_recent(runtime):
    """A queued email whose state item holds RECENT_LIMIT entries (send, error, retry, twice)
    and no marks."""
    [item] = email(runtime, "ada@example.org")
    for _ in range(2):
        move(runtime, item.id, "send", "error")
        apply(item.id, Step("retry", actor="op", source="operator"), runtime)
        runtime.clock.advance(0.001)
    stored = runtime.store.get_item(item.id)
    assert len(stored.recent) == RECENT_LIMIT and len(stored.seen or ()) == 0
    return stored


# ---- 1. _mark_in_seen's transaction: reasons[0] is the record's Put, not the state Update ----


def test_a_redelivered_late_event_is_a_duplicate_when_recent_is_full(aws, runtime):
    """recent is full, seen has room: append_history takes _mark_in_seen's transaction
    (state Update + history record). PynamoDB sends puts before updates, so the state
    Update's ConditionalCheckFailed is reasons[1]; _condition_failed looks at reasons[0]
    (the unconditional Put, code None) and re-raises the raw TransactWriteError."""
    item = full_recent(runtime)
    late = Step("timeout", actor="ses", source="provider", late="record", event_id="ev-late-1")
    assert apply(item.id, late, runtime).kind == "late"
    assert event_mark(item.id, "ev-late-1").digest in runtime.store.get_item(item.id).seen
    runtime.clock.advance(0.001)
    try:
        kind = apply(item.id, late, runtime).kind
    except Exception as exc:
        kind = f"raised {type(exc).__name__}: {exc}"
    assert kind == "duplicate", f"the redelivery of a recorded event: {kind}"


# ---- 2. an applied UpdateItem whose answer was lost (no idempotency token, unlike a tx) -------


def test_an_operator_retry_whose_answer_was_lost_is_reported_as_applied(aws, runtime):
    """The operator's retry (errored -> queued) is one UpdateItem carrying its entry on the
    state item (before e3d9f88: a TransactWriteItems, whose ClientRequestToken botocore fills
    once and reuses on its retries, so DynamoDB answers a retry of an applied transaction
    with success). DynamoDB applies it, the answer is lost (HTTP 500), botocore sends it
    again: ConditionalCheckFailed; the store re-reads, finds the item queued (its own write)
    and raises Moved; apply decides the retry again from ``queued`` and reports an invalid
    transition (no publish, an error to the operator) for a retry that was applied."""
    from moto.core.botocore_stubber import BotocoreStubber

    from tests.reliability.harsh import _error, _state_write

    [item] = email(runtime, "ada@example.org")
    move(runtime, item.id, "send", "error")
    runtime.clock.advance(0.001)
    original = BotocoreStubber.__call__
    lost = []

    def call(stub, event_name, request, **kwargs):
        answer = original(stub, event_name, request, **kwargs)
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else str(target)
        if target.endswith(".UpdateItem") and not lost:
            import json

            body = json.loads(request.body or b"{}")
            if _state_write("UpdateItem", body) and answer is not None \
                    and answer.status_code == 200:
                lost.append(body)
                return _error(500, "InternalServerError", "the answer was lost")
        return answer

    BotocoreStubber.__call__ = call
    try:
        try:
            kind = apply(item.id, Step("retry", actor="op", source="operator"), runtime).kind
        except Exception as exc:
            kind = f"raised {type(exc).__name__}: {exc}"
    finally:
        BotocoreStubber.__call__ = original
    assert lost, "the fault did not fire"
    assert runtime.store.get_item(item.id).state == "queued"  # the retry was applied
    assert kind == "moved", f"an applied retry was reported as: {kind}"


def test_a_redelivered_ses_delivery_after_one_retry_is_a_duplicate(aws, runtime):
    """End to end, the same defect: an email that needed one operator retry (send, error,
    retry, send, await) is delivered; the Delivery's entry is the 6th on the state item. SES
    (SNS, at least once) delivers the Delivery again: the late path's append_history finds
    ``recent`` full and takes _mark_in_seen's transaction, whose ConditionalCheckFailed
    (the mark is in ``seen``) is misread: the handler raises on every redelivery (to the DLQ)."""
    from tests.support.results import ses_event
    from vdq.results import matching as results

    [item] = email(runtime, "ada@example.org")
    move(runtime, item.id, "send", "error")
    apply(item.id, Step("retry", actor="op", source="operator"), runtime)
    runtime.clock.advance(0.001)
    move(runtime, item.id, "send")
    apply(item.id, Step("await", actor="vdq", provider_id="ses-msg-2"), runtime)
    runtime.clock.advance(0.001)
    event = ses_event("delivery", message_id="ses-msg-2", item_id=item.id, attempt=2)
    assert results.handle_ses_event(event, runtime) != "duplicate"
    stored = runtime.store.get_item(item.id)
    assert stored.state == "succeeded" and len(stored.recent) == RECENT_LIMIT
    runtime.clock.advance(0.001)
    try:
        again = results.handle_ses_event(event, runtime)
    except Exception as exc:
        again = f"raised {type(exc).__name__}: {exc}"
    assert again == "duplicate", f"the redelivered Delivery: {again}"


def test_an_event_that_lost_the_last_place_in_seen_is_recorded_as_a_mark_record(aws, runtime):
    """Same misread, another outcome: recent full, seen at SEEN_LIMIT - 1. Two events read
    the item at once; the first takes the last place in ``seen``; the second's transaction
    fails on _seen_room() and should fall back (_NoRoom, re-read, seen full) to an EV# mark
    record; it raises TransactWriteError instead."""
    from vdq.store.history import SEEN_LIMIT

    item = full_recent(runtime)
    for k in range(SEEN_LIMIT - 1):
        late = Step("timeout", actor="ses", source="provider", late="record", event_id=f"e{k}")
        assert apply(item.id, late, runtime).kind == "late"
        runtime.clock.advance(0.001)
    stale = runtime.store.get_item(item.id)
    assert len(stale.seen) == SEEN_LIMIT - 1
    last = Step("timeout", actor="ses", source="provider", late="record", event_id="e-last")
    assert apply(item.id, last, runtime).kind == "late"  # the other Lambda: seen is full now
    entry = transitions.history_entry(item.id, runtime.clock.now(), actor="ses",
                                      source="provider", kind="late", name="timeout",
                                      from_state=stale.state, to_state=stale.state,
                                      attempt=int(stale.attempt))  # fmt: skip
    mark = event_mark(item.id, "e-racer")
    try:
        runtime.store.append_history([entry], mark=mark, expiration=stale.expiration,
                                     item=stale)
        outcome = "recorded"
    except Exception as exc:
        outcome = f"raised {type(exc).__name__}: {exc}"
    assert outcome == "recorded", f"an event racing for the last place in seen: {outcome}"
    assert f"EV#{mark.digest}" in rows(aws, item.id, "EV#")


# ---- 3. the archive of a state item whose recent entries are not as written -----------------


def test_one_malformed_recent_entry_does_not_fail_the_archive_of_the_whole_batch():
    """Low (no product write makes one: recent_json refuses what it cannot keep whole). A
    state item whose ``recent`` holds one entry that is not the JSON recent_json wrote (an
    edit by hand, a truncated value) makes lines_of raise, so archive.archive raises for the
    whole stream batch: stamp_changes and publish_changes are retried with it, and after the
    stream's retries (bisected) the item's own line and its good entries are never archived."""
    import gzip
    import json

    from tests.unit.test_retention import _removed
    from vdq.schedules import archive

    day1 = 1_767_225_600
    good = '{"sk":"H#2026-01-01T00:00:00.000001Z#send1","name":"send","attempt":1}'
    records = [
        _removed("STATE", day1 + 5, event_id="a", state="succeeded",
                 recent=[good, '{"sk":"H#2026-01-01T00:00:02.0000']),  # truncated
        _removed("STATE", day1 + 6, event_id="b", state="succeeded", recent=[good]),
        _removed("H#2026-01-01T00:00:03.000000Z#ef34", day1 + 7, event_id="c", name="Open"),
    ]
    try:
        [body] = archive.objects(records).values()
        kinds = [json.loads(x)["kind"] for x in gzip.decompress(body).splitlines()]
    except Exception as exc:
        kinds = f"raised {type(exc).__name__}: {exc}"
    assert isinstance(kinds, list) and kinds.count("item") == 2 and "history" in kinds, kinds
