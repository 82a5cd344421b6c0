"""History entries on the state item under races and redeliveries: a give-back that lost the
room race, a redelivered event whose first mark is a record of its own, and the state item's
4 KB bound with the largest results and a full ``recent``."""

from __future__ import annotations

import boto3
import pytest

from tests.support.operator import email, move
from vdq.core.clock import iso
from vdq.dispatch import giveback, send
from vdq.store import Duplicate, item_pk
from vdq.store.history import RECENT_ENTRY_BYTES, recent_json
from vdq.workflow import transitions
from vdq.workflow.lanes import message_for
from vdq.workflow.transitions import Step, apply, event_mark


def rows(aws, item_id, prefix):
    got = boto3.client("dynamodb").query(
        TableName=aws["table"], KeyConditionExpression="pk = :p AND begins_with(sk, :h)",
        ExpressionAttributeValues={":p": {"S": item_pk(item_id)}, ":h": {"S": prefix}},
    )["Items"]  # fmt: skip
    return [r["sk"]["S"] for r in got]


def late_event(runtime, item_id, event_id):
    """A provider event that changes no state (a late ``timeout``), recorded with its mark:
    append_history's UpdateItem appends its entry to the state item's ``recent``."""
    step = Step("timeout", actor="ses", source="provider", late="record", event_id=event_id)
    assert apply(item_id, step, runtime).kind == "late"
    runtime.clock.advance(0.001)


# ---- 1. a give-back that lost only the room race still gives the item back -----------------


def test_give_back_that_only_lost_the_room_race_still_gives_the_item_back(aws, runtime):
    [item] = email(runtime, "ada@example.org")
    move(runtime, item.id, "send", "error")
    apply(item.id, Step("retry", actor="op", source="operator"), runtime)  # 3 entries, attempt 2
    runtime.clock.advance(0.001)
    queued = runtime.store.get_item(item.id)
    claimed = send.claim(message_for(queued), runtime.clock.now(), runtime)
    assert claimed is not None and claimed.state == "sending"
    # While the worker waits for its turn at the rate, two late events of attempt 1 are
    # recorded on the state item (no state change): the item is still sending at attempt 2.
    late_event(runtime, item.id, "late-1")
    late_event(runtime, item.id, "late-2")
    assert runtime.store.get_item(item.id).state == "sending"
    giveback.give_back(claimed, message_for(claimed), 30, runtime)
    now = runtime.store.get_item(item.id)
    assert now.state == "queued", (
        f"give_back raised Moved only because recent filled up since its read; the item "
        f"was not given back and stays {now.state!r} (no message republished)")


# ---- 2. a redelivered event whose first mark is an EV# record -------------------------------


def test_a_redelivery_is_a_duplicate_when_the_first_delivery_mark_is_a_record(aws, runtime):
    [item] = email(runtime, "ada@example.org")
    move(runtime, item.id, "send", "await")
    mark = event_mark(item.id, "ses-open-1")

    def entry(state, text):
        return transitions.history_entry(item.id, runtime.clock.now(), actor="ses",
                                         source="provider", kind="event", name="Open",
                                         from_state=state, to_state=state, attempt=1, text=text)

    # The first delivery's entry is just too long for ``recent`` (its time a second after
    # the item's queueing, four digits in the entry's key): it is a record, and its mark joins
    # ``seen`` (it was an EV# record, which the UpdateItem path of a shorter redelivery never
    # looked at).
    runtime.clock.advance(1)
    queued_at = item.queued_at
    size = len(recent_json([entry("awaiting", "x")], queued_at)[0].encode()) - 1
    text = "x" * (RECENT_ENTRY_BYTES - size + 1)
    now = iso(runtime.clock.now())
    assert recent_json([entry("awaiting", text)], now) is not None  # its time 0: one digit
    assert recent_json([entry("awaiting", text)], queued_at) is None
    current = runtime.store.get_item(item.id)
    runtime.store.append_history([entry("awaiting", text)], mark=mark,
                                 expiration=current.expiration, item=current)
    assert rows(aws, item.id, "EV#") == [] and len(rows(aws, item.id, "H#")) == 1
    assert mark.digest in runtime.store.get_item(item.id).seen
    # The same event delivered again, shorter (here: its time counted from an item queued
    # just now, three bytes shorter): it fits on ``recent``.
    later = runtime.store.get_item(item.id)
    later.queued_at = now  # only the entry's length matters to the store
    with pytest.raises(Duplicate):
        runtime.store.append_history([entry("awaiting", text)], mark=mark,
                                     expiration=later.expiration, item=later)


# ---- 3. the state item's size bound (tests/reliability/world.py MAX_STATE_BYTES) -------------
# Guards of a thin margin: these two states took 3.8 KB and 3.9 KB of 4 KB when written.


def text_room(runtime, item_id, *, kind, name, state):
    """Bytes of text an SES entry of ``kind``/``name`` in ``state`` can hold on the state item."""
    probe = transitions.history_entry(item_id, runtime.clock.now(), actor="ses",
                                      source="provider", kind=kind, name=name, from_state=state,
                                      to_state=state, attempt=1, text="x")  # fmt: skip
    base = runtime.store.get_item(item_id).queued_at  # as the store writes it (v2)
    return RECENT_ENTRY_BYTES - (len(recent_json([probe], base)[0].encode()) - 1)


def state_size(aws, item_id):
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType

    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[aws["table"]]
    return table.items[DynamoType({"S": item_pk(item_id)})][DynamoType({"S": "STATE"})].size()


def test_the_state_item_stays_under_4_kb_with_a_multibyte_result_and_full_recent(aws, runtime):
    from tests.reliability.world import MAX_STATE_BYTES

    [item] = email(runtime, "ada@example.org")
    # A provider error in Japanese: the result keeps 500 characters (1.5 KB of UTF-8); its
    # history entry is too long for ``recent`` and is a record.
    move(runtime, item.id, "send")
    move(runtime, item.id, "error", result="配信できませんでした。" * 60)
    # Late events of that attempt (SES opens, a late timeout) with short non-ASCII texts: each
    # entry just under RECENT_ENTRY_BYTES, so they fill ``recent``.
    room = text_room(runtime, item.id, kind="late", name="timeout", state="errored")
    text = "応" * (room // 3)  # the entry is at most RECENT_ENTRY_BYTES
    for k in range(5):
        step = Step("timeout", actor="ses", source="provider", late="record",
                    event_id=f"late-{k}", text=text)
        assert apply(item.id, step, runtime).kind == "late"
        runtime.clock.advance(0.001)
    stored = runtime.store.get_item(item.id)
    assert len(stored.recent) == 6
    size = state_size(aws, item.id)
    assert size <= MAX_STATE_BYTES, f"state item is {size} bytes (bound {MAX_STATE_BYTES})"


def test_the_state_item_stays_under_4_kb_after_delays_and_a_bounce_in_japanese(aws, runtime):
    """SES DeliveryDelay events (each writes the result, with its mark) fill ``recent`` and
    ``seen``; the bounce's diagnostic (the receiving server's, in Japanese) is the result."""
    import vdq
    from tests.reliability.world import MAX_STATE_BYTES
    from vdq.results.events import ProviderUpdate
    from vdq.results.updates import apply_update

    shop = {"email": "shop@example.com", "name": "株式会社山田商店 オンラインストア"}
    [item] = vdq.add_email(shop, [{"email": "taro.yamada@example.co.jp", "name": "山田 太郎"}],
                           "ご注文ありがとうございます", "本文", origin=("shop.order", "12345678"),
                           runtime=runtime)  # fmt: skip
    move(runtime, item.id, "send")
    apply(item.id, Step("await", actor="vdq", provider_id="ses-msg-1"), runtime)
    runtime.clock.advance(0.001)
    room = text_room(runtime, item.id, kind="event", name="DeliveryDelay", state="awaiting")
    delay = "一時的な障害" * (room // 18)  # the entry is just under RECENT_ENTRY_BYTES
    for k in range(12):
        update = ProviderUpdate("ses", "ses-msg-1", "deferred", "DeliveryDelay", delay,
                                event_id=f"delay-{k}")
        assert apply_update(runtime.store.get_item(item.id), update, runtime) == "event"
        runtime.clock.advance(0.001)
    bounce = ProviderUpdate("ses", "ses-msg-1", "bounced", "Bounce",
                            "宛先のメールアドレスは存在しません。" * 40,
                            event_id="bounce-1")
    apply_update(runtime.store.get_item(item.id), bounce, runtime)
    stored = runtime.store.get_item(item.id)
    assert stored.state == "errored"
    assert (len(stored.recent), len(stored.seen)) == (6, 12)
    size = state_size(aws, item.id)
    recent_bytes = sum(len(r.encode()) + 1 for r in stored.recent) + len("recent") + 3
    assert size <= MAX_STATE_BYTES, (
        f"state item is {size} bytes (bound {MAX_STATE_BYTES}); {recent_bytes} of them are "
        f"recent, without which it is {size - recent_bytes}")


def test_a_redelivered_late_ses_delivery_after_a_retry_is_a_duplicate(aws, runtime):
    """End to end: a late Delivery (attempt 1) recorded on an errored item, then redelivered
    by SQS after an operator retry. The first entry ("succeed", errored -> errored) is one byte
    over RECENT_ENTRY_BYTES, so it is a record (its mark was an EV# record); the second
    (queued -> queued, a few microseconds later: as long, or a digit longer) is one too, and
    whichever path it takes must find the first's mark."""
    from tests.support.results import ses_event
    from vdq.results import matching as results

    [item] = email(runtime, "ada@example.org")
    move(runtime, item.id, "send")
    apply(item.id, Step("await", actor="vdq", provider_id="ses-msg-1"), runtime)
    runtime.clock.advance(0.001)
    move(runtime, item.id, "error")
    # An entry of the late Delivery as transitions.apply writes it, for its size.
    probe = transitions.history_entry(item.id, runtime.clock.now(), actor="ses",
                                      source="provider", kind="late", name="succeed",
                                      from_state="errored", to_state="errored", attempt=1,
                                      text="SES delivered the message: x")
    queued_at = runtime.store.get_item(item.id).queued_at  # the entries' times count from it
    smtp = "250 2.0.0 OK " + "x" * (
        RECENT_ENTRY_BYTES + 1 - len(recent_json([probe], queued_at)[0].encode()) + 1
        - len("250 2.0.0 OK "))  # fmt: skip
    event = ses_event("delivery", message_id="ses-msg-1", item_id=item.id, attempt=1,
                      smtpResponse=smtp)
    assert results.handle_ses_event(event, runtime) == "late"
    assert rows(aws, item.id, "H#"), "the first delivery's entry should be a record"
    runtime.clock.advance(0.001)
    apply(item.id, Step("retry", actor="op", source="operator"), runtime)
    runtime.clock.advance(0.001)
    again = results.handle_ses_event(event, runtime)
    history = [(h.kind, h.name) for h in runtime.store.history(item.id)]
    assert again == "duplicate", (
        f"the redelivered Delivery was recorded again ({again!r}); history: {history}")


# ---- 4. the bench's targets for the state item of a delivered email ---------------------------


def test_a_delivered_emails_state_item_meets_the_bench_targets():
    """bench/figures.py: the state item without its history entries < 1024 B (every write of
    it one unit, as before they moved there), and with them within one read unit."""
    import os

    from bench import requests as rq
    from bench.figures import STATE_ITEM_BOUND, STATE_ITEM_MAX

    saved = dict(os.environ)
    rq.COUNTER.install()
    try:
        sizes = rq.email_delivered().total().sizes
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert 0 < sizes["state_without_history"] < STATE_ITEM_MAX, sizes
    assert sizes["state_without_history"] < sizes["state"] <= STATE_ITEM_BOUND, sizes
