"""GET /queue-items and GET /sent-items: the done/active split, order, filters, pagination."""

from __future__ import annotations

import pytest

from tests.support.operator import call, dynamodb_requests, email, move, pages, sms, succeed
from tests.support.stream import posted


def _pages(name, query, page_size):
    return pages(name, query, page_size, max_pages=100)


def _queue(runtime, clock, n, step=1.0):
    items = []
    for i in range(n):
        items += sms(runtime, f"+1415555{i:04d}")
        clock.advance(step)
    return items


def test_pages_across_shards_lose_and_repeat_no_item_oldest_first(aws, runtime, clock):
    items = _queue(runtime, clock, 23)
    got, pages = _pages("list_queue_items", {}, 5)
    assert [i["id"] for i in got] == [i.id for i in items]  # oldest first, each once
    assert pages >= 5
    shards = {runtime.store.get_item(i.id).active_pk for i in items}
    assert len(shards) > 1  # the items really are spread over several shards


def test_items_queued_in_the_same_instant_are_ordered_by_id_and_all_listed(aws, runtime):
    items = sms(runtime, *[f"+1415556{i:04d}" for i in range(12)])
    got, _ = _pages("list_queue_items", {}, 4)
    assert [i["id"] for i in got] == sorted(i.id for i in items)


def test_the_active_list_leaves_out_done_items_and_the_sent_list_shows_only_them(
    aws, runtime, clock
):
    items = _queue(runtime, clock, 6)
    succeed(runtime, items[0].id)
    move(runtime, items[1].id, "send", "error")  # errored stays active
    call("transition", params={"id": items[2].id, "name": "cancel"}, query={})
    clock.advance(5)
    succeed(runtime, items[3].id)
    active, _ = _pages("list_queue_items", {}, 50)
    assert _pages("list_sent_items", {}, 50)[0] == []  # not until the stream posts them
    posted(aws["table"])
    sent, _ = _pages("list_sent_items", {}, 50)
    assert [i["id"] for i in active] == [items[1].id, items[4].id, items[5].id]
    assert active[0]["state"] == "errored"
    # Newest first: the item done last comes first.
    assert [i["id"] for i in sent] == [items[3].id, items[2].id, items[0].id]
    assert {i["state"] for i in sent} == {"succeeded", "cancelled"}


def test_sent_items_page_newest_first_across_shards(aws, runtime, clock):
    items = _queue(runtime, clock, 13)
    for item in items:
        clock.advance(1)
        succeed(runtime, item.id)
    posted(aws["table"])
    got, pages = _pages("list_sent_items", {}, 3)
    assert [i["id"] for i in got] == [i.id for i in reversed(items)]
    assert pages >= 5


def test_filters_by_method_and_state_page_without_losing_items(aws, runtime, clock):
    texts = _queue(runtime, clock, 9)
    mails = []
    for i in range(7):
        mails += email(runtime, f"r{i}@example.org")
        clock.advance(1)
    for item in texts[:4]:
        move(runtime, item.id, "send", "error")
    got, _ = _pages("list_queue_items", {"method": "email"}, 2)
    assert [i["id"] for i in got] == [m.id for m in mails]
    got, _ = _pages("list_queue_items", {"method": "sms", "state": "errored"}, 3)
    assert [i["id"] for i in got] == [t.id for t in texts[:4]]
    got, _ = _pages("list_queue_items", {"state": "queued", "method": "sms"}, 50)
    assert [i["id"] for i in got] == [t.id for t in texts[4:]]


def test_a_filtered_page_may_be_short_but_carries_a_cursor_to_go_on(aws, runtime, clock):
    _queue(runtime, clock, 30)
    [late] = email(runtime, "late@example.org")
    answer = call("list_queue_items", query={"method": "email", "limit": "2"})
    assert answer.status == 200
    # Rounds are bounded: 4 rounds of 2 candidates cannot reach the email behind 30 SMS.
    assert answer.body["items"] == [] and answer.body["cursor"]
    got, _ = _pages("list_queue_items", {"method": "email"}, 2)
    assert [i["id"] for i in got] == [late.id]


@pytest.mark.parametrize("name", ["list_queue_items", "list_sent_items"])
def test_a_tampered_or_foreign_cursor_is_a_400(aws, runtime, clock, name):
    items = _queue(runtime, clock, 4)
    for item in items:
        succeed(runtime, item.id) if name == "list_sent_items" else None
    posted(aws["table"])
    cursor = call(name, query={"limit": "1"}).body["cursor"]
    assert cursor
    broken = cursor[:-3] + ("AAA" if not cursor.endswith("AAA") else "BBB")
    for bad in (broken, cursor + "x"):
        answer = call(name, query={"limit": "1", "cursor": bad})
        assert answer.status == 400 and answer.code == "bad_request", answer.body
    # Not even of a cursor's form: a 422, as the document says of the parameter.
    answer = call(name, query={"limit": "1", "cursor": "garbage"})
    assert answer.status == 422 and answer.body["error"]["details"]["field"] == "cursor"
    other = "list_sent_items" if name == "list_queue_items" else "list_queue_items"
    assert call(other, query={"cursor": cursor}).status == 400  # a cursor of the other list
    assert call(name, query={"cursor": cursor, "method": "sms"}).status == 400  # other filter


@pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "101"}, {"method": "fax"},
                                   {"state": "cancelled"}, {"unknown": "1"}])  # fmt: skip
def test_bad_list_parameters_are_a_422_naming_the_field(aws, runtime, query):
    answer = call("list_queue_items", query=query)
    assert answer.status == 422 and answer.body["error"]["details"]["field"] == next(iter(query))


@pytest.mark.parametrize("name", ["list_queue_items", "list_sent_items"])
def test_listing_needs_list_permission_and_an_identity(aws, runtime, name):
    assert call(name, query={}, groups=["vdq-senders"]).status == 403
    assert call(name, query={}, anonymous=True).status == 401
    assert call(name, query={}, groups=["vdq-viewers"]).status == 200


def test_a_page_of_50_costs_one_query_per_shard_and_one_batch_read(
    aws, runtime, clock, monkeypatch
):
    _queue(runtime, clock, 60, step=0.01)
    with dynamodb_requests(monkeypatch) as counts:
        answer = call("list_queue_items", query={"limit": "50"})
    assert len(answer.body["items"]) == 50 and answer.body["cursor"]
    assert counts == {"Query": runtime.settings.index_shards, "BatchGetItem": 1}
