"""What the stream consumer writes and the searches read, encoded and decoded (pure): postings'
entries, counter keys and checkpoints, content keys in an origin's partition, ids as time
bounds, and what one stream record counts."""

from __future__ import annotations

import base64
import json

import pytest
from boto3.dynamodb.types import TypeSerializer
from hypothesis import given
from hypothesis import strategies as st

from tests.support.results import ses_body
from vdq.core import ids
from vdq.results.events import parse_ses_event
from vdq.schedules import postings as consumer
from vdq.store.models import (
    ORIGIN_SHARDS,
    content_id_of,
    content_key,
    origin_content_id,
    origin_partitions,
    refs_key,
)
from vdq.store.postings import (
    ENTRY_BYTES,
    Accepted,
    Entered,
    counter_kind,
    counter_sk,
    decode_entries,
    encode_entries,
    hour_of,
    provider_hash,
    sender_hash,
    sequence_bytes,
    shard_tag,
)
from vdq.store.search import excerpt, receiver_key
from vdq.workflow.views import entry_signals

ULID = st.builds(ids.new_id, st.integers(0, 2**48 - 1))


@given(item_id=ULID, method=st.sampled_from(["email", "sms"]),
       lane=st.sampled_from(["normal", "high", "bulk"]), scheduled=st.booleans(),
       sender=st.text(min_size=1, max_size=40), provider=st.text(min_size=1, max_size=60))
def test_entries_read_back_as_written(item_id, method, lane, scheduled, sender, provider):
    entries = [Entered(item_id, method, lane, scheduled, sender_hash(sender)),
               Accepted(item_id, provider_hash(provider))]
    blob = encode_entries(entries)
    assert len(blob) == 2 * ENTRY_BYTES
    assert decode_entries(blob) == entries


@pytest.mark.parametrize("blob", [b"x" * 24, b"z" + b"\0" * 24,
                                  b"q" + b"\0" * 16 + bytes([7, 0, 0, 0]) + b"\0" * 4])
def test_a_posting_no_release_wrote_is_refused(blob):
    with pytest.raises(ValueError):
        decode_entries(blob)


@given(a=st.integers(0, 10**40 - 1), b=st.integers(0, 10**40 - 1))
def test_sequence_numbers_compare_as_bytes_as_they_do_as_numbers(a, b):
    assert (sequence_bytes(str(a)) < sequence_bytes(str(b))) == (a < b)


def test_counter_records_are_named_by_kind_and_keep_the_name_whole():
    tag = shard_tag("shardId-00000001700000000000-0a1b2c3d")
    assert counter_sk("all", None, tag) == "all#0"
    assert counter_kind(counter_sk("p", "group:ops#1", tag)) == ("p", "group:ops#1")
    assert counter_kind(counter_sk("i", "shop@example.com", tag)) == ("i", "shop@example.com")
    assert shard_tag("a") != shard_tag("b") and len(shard_tag("a")) == 8


def test_a_content_of_a_request_with_an_origin_lives_in_its_partition():
    plain = ids.new_id()
    assert content_key(plain) == (f"CT#{plain}", "CONTENT")
    assert refs_key(plain) == (f"CT#{plain}", "REFS")
    mine = origin_content_id(plain, "shop.order", "7")
    pk, sk = content_key(mine)
    assert pk.startswith("CO#") and sk == f"C#{plain}" and pk in origin_partitions("shop.order",
                                                                                   "7")
    assert content_key(origin_content_id(plain, "shop.order", "7")) == (pk, sk)  # stable
    assert content_key(origin_content_id(plain, "shop.order", "8"))[0] != pk
    assert refs_key(mine) == (pk, f"R#{plain}")
    # A request's shard is a hash of its ulid: an origin's requests use every partition.
    others = {content_key(origin_content_id(ids.new_id(), "shop.order", "7"))[0]
              for _ in range(400)}  # fmt: skip
    assert others == set(origin_partitions("shop.order", "7")[1:])
    # Every shard's ids are as long: a record's size (and the bill's figures) never varies by it.
    assert len({len(origin_content_id(ids.new_id(), "shop.order", "7")) for _ in range(400)}) == 1
    assert len(origin_partitions("shop.order", "7")) == ORIGIN_SHARDS + 1
    assert not set(origin_partitions("shop.order", "7")) & set(origin_partitions("shop.order", "8"))
    unsharded = f"{plain}.{origin_partitions('shop.order', '7')[0].removeprefix('CO#')}"
    assert content_key(unsharded) == (origin_partitions("shop.order", "7")[0], f"C#{plain}")
    for cid in (plain, mine, unsharded):
        assert content_id_of(*content_key(cid)) == cid == content_id_of(*refs_key(cid))


def test_ids_bound_their_millisecond_and_tell_it():
    ms = 1_796_000_000_123
    item = ids.new_id(ms)
    assert ids.bound(ms, upper=False) <= item <= ids.bound(ms, upper=True)
    assert ids.bound(ms - 1, upper=True) < item < ids.bound(ms + 1, upper=False)
    assert ids.time_ms(item) == ms and ids.is_id(ids.bound(ms, upper=True))


def test_a_receivers_key_and_an_excerpt():
    assert receiver_key("ada@example.org") == receiver_key("ada@example.org")
    assert receiver_key("ada@example.org") != receiver_key("ada+x@example.org")
    assert len(receiver_key("+14155550100")) == 13
    assert excerpt("  Your order\n  has   shipped ") == "Your order has shipped"
    assert excerpt("x" * 100) == "x" * 40 and excerpt("") is None and excerpt(None) is None


@pytest.mark.parametrize(("sample", "signals"), [
    ("bounce_permanent", {"bounce"}), ("bounce_transient", set()), ("complaint", {"complaint"}),
    ("reject", {"reject"}), ("delivery", set()), ("delivery_delay", set()),
])  # fmt: skip
def test_the_signals_are_read_from_what_an_ses_event_writes(sample, signals):
    update = parse_ses_event(ses_body(sample))
    assert entry_signals(update.name, update.text) == signals


@pytest.mark.parametrize(("sample", "subtype", "signals"), [
    ("bounce_permanent", "OnAccountSuppressionList", {"suppressed"}),
    ("bounce_permanent", "Suppressed", {"bounce"}),  # SES's global list: a bounce it counts
    ("complaint_suppression_list", None, {"suppressed"}),
])  # fmt: skip
def test_a_send_ses_refused_for_the_accounts_list_is_no_bounce(sample, subtype, signals):
    # SES does not count a send to an address on the account-level suppression list toward the
    # bounce rate: it never left. Counted as a bounce or complaint, it would weigh on a sender
    # identity's reputation figures; listed, it reads as suppressed.
    body = ses_body(sample)
    if subtype is not None:
        body["bounce"]["bounceSubType"] = subtype
    update = parse_ses_event(body)
    assert entry_signals(update.name, update.text) == signals


# ---- what one stream record counts ------------------------------------------------------------

SER = TypeSerializer()


def image(**attrs):
    return {k: SER.serialize(v) for k, v in attrs.items() if v is not None}


def entry(name, text, source="provider", actor="ses"):
    return json.dumps(["2026-12-05T10:00:01.000000Z#x", actor, source, "transition", name,
                       "awaiting", "errored", 1, text])


ITEM = {"pk": "QI#01KDVDNA00W0K7FSHK3EK68SE2", "sk": "STATE", "id": "01KDVDNA00W0K7FSHK3EK68SE2",
        "method": "email", "sender": "Shop@Example.com", "created_by": "client-1",
        "queued_at": "2026-12-05T10:00:00.000000Z", "updated_at": "2026-12-05T10:00:00.000000Z",
        "priority": "bulk"}  # fmt: skip


def record(seq, event, new, old=None):
    data = {"SequenceNumber": str(seq), "NewImage": image(**new)}
    if old is not None:
        data["OldImage"] = image(**old)
    return {"eventName": event, "dynamodb": data}


def test_a_new_item_is_queued_and_posted_by_the_hour_it_was_queued():
    window = consumer.Window(shard="s1")
    assert consumer.fold(window, [record(5, "INSERT", {**ITEM, "state": "queued"})],
                         lambda _: None) == 1  # fmt: skip
    assert window.counts == {"2026-12-05T10|all#0": {"f": "5", "l": "5",
                                                     "n": {"email.queued": 1}}}
    [(hour, slot)] = window.postings.items()
    assert hour == "2026-12-05T10"
    [entered] = decode_entries(base64.b64decode(slot["e"]))
    assert entered == Entered(ITEM["id"], "email", "bulk", False, sender_hash("shop@example.com"))


def test_a_done_write_counts_the_state_entered_the_provider_id_and_its_signals():
    old = {**ITEM, "state": "awaiting", "recent": [entry("await", "accepted")]}
    new = {**old, "state": "errored", "provider_id": "m-1", "updated_at":
           "2026-12-05T11:00:02.000000Z",
           "recent": [entry("await", "accepted"),
                      entry("error", "SES bounce (Permanent/General): a@b.c: 550")]}  # fmt: skip
    window = consumer.Window(shard="s1")
    consumer.fold(window, [record(9, "MODIFY", new, old)], lambda _: None)
    assert window.counts["2026-12-05T11|all#0"]["n"] == {"email.sent": 1, "email.errored": 1,
                                                          "email.bounce": 1}
    assert window.counts["2026-12-05T11|p#client-1#0"]["n"] == {"sent": 1, "bounce": 1}
    assert window.counts["2026-12-05T11|i#shop@example.com#0"]["n"] == {"sent": 1, "bounce": 1}
    [accepted] = decode_entries(base64.b64decode(window.postings["2026-12-05T11"]["e"]))
    assert accepted == Accepted(ITEM["id"], provider_hash("m-1"))


def test_a_complaint_that_did_not_fit_on_the_state_item_is_counted_from_its_record():
    history = {"pk": ITEM["pk"], "sk": "H#2026-12-05T12:00:00.000000Z#ab", "actor": "ses",
               "source": "provider", "kind": "event", "name": "Complaint",
               "at": "2026-12-05T12:00:00.000000Z", "text": "SES complaint (abuse) from a"}
    looked: list[str] = []

    def lookup(item_id):
        looked.append(item_id)
        return dict(ITEM)

    window = consumer.Window(shard="s1")
    consumer.fold(window, [record(11, "INSERT", history)], lookup)
    assert looked == [ITEM["id"]]
    assert window.counts["2026-12-05T12|all#0"]["n"] == {"email.complaint": 1}
    # A record with no signal in it reads nothing.
    consumer.fold(window, [record(12, "INSERT", {**history, "name": "Open", "text": "opened"})],
                  lookup)  # fmt: skip
    assert looked == [ITEM["id"]]


def test_a_state_kept_or_a_claim_counts_nothing_but_its_signals():
    old = {**ITEM, "state": "queued"}
    window = consumer.Window(shard="s1")
    consumer.fold(window, [record(3, "MODIFY", {**old, "state": "sending"}, old)],
                  lambda _: None)  # fmt: skip
    assert window.counts == {} and window.postings == {}


def test_a_windows_state_goes_to_lambda_and_back_whole():
    window = consumer.Window(shard="s1")
    consumer.fold(window, [record(5, "INSERT", {**ITEM, "state": "queued"})], lambda _: None)
    state = window.state()
    assert list(state) == ["vdq"] and all(isinstance(v, str) for v in state.values())
    again = consumer.Window.from_state(state, "s1")
    assert (again.counts, again.postings) == (window.counts, window.postings)
    # The record given again (even after an early write emptied the counts) adds nothing.
    again.counts.clear()
    again.postings.clear()
    again = consumer.Window.from_state(again.state(), "s1")
    assert consumer.fold(again, [record(5, "INSERT", {**ITEM, "state": "queued"})],
                         lambda _: None) == 0 and again.counts == {}  # fmt: skip
    assert consumer.Window().state() == {} and consumer.Window.from_state({}, "x").counts == {}
    assert hour_of("2026-12-05T10:59:59.999999Z") == "2026-12-05T10"
