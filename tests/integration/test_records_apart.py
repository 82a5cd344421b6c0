"""The state item's ``ap``: the stream reads an item's records for their expiry only when the
item says some were written beside its state item, and only once no function of a release
that does not say so can still be running (vdq.workflow.retention.apart_trusted_after)."""

from __future__ import annotations

from tests.integration.test_retention import _note, expected, records_of, run_stream
from tests.support.operator import call, dynamodb_requests, email, move, sms, succeed
from vdq.store import item_pk
from vdq.store.history import EventMark
from vdq.workflow import retention


def reads_of_records(monkeypatch, runtime) -> list[str]:
    """The items whose records the stream reads (vdq.store.expiry.stamp_item_records)."""
    read: list[str] = []
    original = runtime.store.stamp_item_records

    def reading(item_id, expiration):
        read.append(item_id)
        return original(item_id, expiration)

    monkeypatch.setattr(runtime.store, "stamp_item_records", reading)
    return read


def test_a_note_an_earlier_release_wrote_beside_an_item_of_this_release_expires(aws, runtime):
    # A rollout (functions update one by one: intake first, the send worker still the release
    # before): the item was born with ``ap`` 0, and a send worker of the release before wrote
    # a late note beside it as that release did (a plain PutItem, no ``ap``).
    [item] = email(runtime, "ada@example.org")
    move(runtime, item.id, "send")
    assert runtime.store.get_item(item.id).apart == 0
    _note(runtime, item.id).save()  # what append_history([note]) of the release before did
    move(runtime, item.id, "succeed")
    done = expected(runtime, item.id)
    run_stream(aws)
    assert set(records_of(aws, item_pk(item.id)).values()) == {done}


def test_an_event_mark_an_earlier_release_wrote_beside_an_item_of_this_release_expires(
        aws, runtime):  # fmt: skip
    # The same for a webhook of the release before: a provider event's mark as a record of its
    # own (its seen set full), written in a transaction that checks the state item only.
    [item] = email(runtime, "ada@example.org")
    move(runtime, item.id, "send")
    EventMark(item.id, "0123456789abcdef").record().save()
    move(runtime, item.id, "succeed")
    done = expected(runtime, item.id)
    run_stream(aws)
    assert set(records_of(aws, item_pk(item.id)).values()) == {done}


def test_a_day_after_the_first_stamp_an_item_that_says_nothing_beside_it_is_not_read(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    read = reads_of_records(monkeypatch, runtime)
    [first] = email(runtime, "ada@example.org")
    succeed(runtime, first.id)
    run_stream(aws)  # the first stamp of this release: CFG#apart, and a read (a day to settle)
    assert read == [first.id]
    clock.advance(retention.APART_SETTLE_SECONDS + 1)
    [quiet, noted] = email(runtime, "grace@example.org", "alan@example.org")
    move(runtime, noted.id, "send")
    runtime.store.append_history([_note(runtime, noted.id)])  # says so: ap 1
    succeed(runtime, quiet.id)
    move(runtime, noted.id, "succeed")
    read.clear()
    run_stream(aws)  # every record so far: the first item's again (queued before the trust)
    assert sorted(read) == sorted([first.id, noted.id])  # not the quiet one
    assert set(records_of(aws, item_pk(noted.id)).values()) == {expected(runtime, noted.id)}
    # Another container, later, reads the same first stamp (written once, never moved).
    since = runtime.overrides.pop("apart_since")
    clock.advance(60)
    assert retention.apart_trusted_after(runtime) == since + retention.APART_SETTLE_SECONDS


def test_a_bulk_resend_notes_its_originals_in_one_batch(aws, runtime, monkeypatch):
    # The notes of a bulk resend carry each done original's expiration: written together.
    items = sms(runtime, "+14155550100", "+14155550101", "+14155550102", "+14155550103")
    for item in items:
        succeed(runtime, item.id)
    with dynamodb_requests(monkeypatch) as counts:
        answer = call("bulk_resend", body={"ids": [i.id for i in items]})
    assert answer.status == 201, answer.body
    notes = {op: n for op, n in counts.items() if op in ("PutItem", "BatchWriteItem")}
    assert notes == {"BatchWriteItem": 1}, counts


def test_a_provider_id_the_status_update_stored_first_costs_no_read(aws, runtime, monkeypatch):
    # The send worker's store_provider_id after a status update stored the same ID itself:
    # one failed transaction, which answers with the item as it was.
    [item] = sms(runtime)
    move(runtime, item.id, "send")
    move(runtime, item.id, "await", provider_id="SM0123")
    with dynamodb_requests(monkeypatch) as counts:
        stored = runtime.store.store_provider_id(item.id, "SM0123", [_note(runtime, item.id)],
                                                 attempt=1)  # fmt: skip
    assert stored is False
    assert counts == {"TransactWriteItems": 1}, counts
