"""GET /sent-items from the stream's done postings: order across minutes and days, filters read
from the entries, what a page costs, and the lag the list has behind the table."""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from datetime import UTC, datetime

from tests.support.operator import call, email, move, pages, sms, succeed
from tests.support.stream import Stream, posted
from vdq.operations import cursor as cursors
from vdq.operations import done_list


def _pages(query, page_size):
    """The ids of the sent list, page by page: (ids, pages)."""
    items, count = pages("list_sent_items", query, page_size)
    return [i["id"] for i in items], count


@contextmanager
def requests(runtime):
    """Every DynamoDB call of the block, PynamoDB's and the postings' client's, by name."""
    from pynamodb.connection.base import Connection

    counts: Counter[str] = Counter()
    original = Connection._make_api_call

    def counting(self, name, kwargs):
        counts[name] += 1
        return original(self, name, kwargs)

    def on_call(event_name, **_):
        counts[event_name.split(".")[-1]] += 1

    client = runtime.client("dynamodb")
    Connection._make_api_call = counting
    client.meta.events.register("before-call.dynamodb.*", on_call)
    try:
        yield counts
    finally:
        Connection._make_api_call = original
        client.meta.events.unregister("before-call.dynamodb.*", on_call)


def test_the_list_pages_newest_first_across_minutes_hours_and_midnight(aws, runtime, clock):
    clock.advance((datetime(2026, 3, 1, 23, 58, 30, tzinfo=UTC) - clock.now()).total_seconds())
    items = [i for n in range(9) for i in email(runtime, f"r{n}@example.org")]
    for item in items:
        succeed(runtime, item.id)
        clock.advance(20)  # nine items over three minutes, two days
    posted(aws["table"])
    days = {runtime.store.get_item(i.id).done_at[:10] for i in items}
    assert days == {"2026-03-01", "2026-03-02"}
    for size in (1, 2, 4, 9, 10):
        got, pages = _pages({}, size)
        assert got == [i.id for i in reversed(items)], size
        assert pages == -(-len(items) // size)  # the last page says there is no next one


def test_filters_apply_to_the_entries_and_only_the_page_is_read(aws, runtime, clock):
    texts = [i for n in range(6) for i in sms(runtime, f"+1415555{n:04d}")]
    mails = [i for n in range(6) for i in email(runtime, f"m{n}@example.org")]
    for item in texts + mails:
        clock.advance(1)
        succeed(runtime, item.id)
    call("transition", params={"id": (extra := email(runtime, "c@example.org")[0]).id,
                               "name": "cancel"}, query={})  # fmt: skip
    posted(aws["table"])
    assert _pages({"method": "sms"}, 4)[0] == [t.id for t in reversed(texts)]
    assert _pages({"state": "cancelled"}, 4)[0] == [extra.id]
    assert _pages({"method": "sms", "state": "cancelled"}, 4)[0] == []
    assert _pages({"method": "email"}, 50)[0] == [extra.id, *(m.id for m in reversed(mails))]
    with requests(runtime) as counts:
        answer = call("list_sent_items", query={"state": "cancelled", "limit": "5"})
    assert [i["id"] for i in answer.body["items"]] == [extra.id]
    # This month's postings (one Query), then the month before, which the retention reaches
    # back into, and one batch read of the one item the filter kept.
    assert runtime.clock.now().day < 30  # the retention reaches back into one month only
    assert counts == {"Query": 2, "BatchGetItem": 1}, counts


def test_a_full_page_costs_one_query_and_one_batch_read(aws, runtime, clock):
    items = [i for n in range(60) for i in email(runtime, f"p{n}@example.org")]
    for item in items:
        clock.advance(0.5)
        succeed(runtime, item.id)
    posted(aws["table"])
    with requests(runtime) as counts:
        answer = call("list_sent_items", query={"limit": "50"})
    assert len(answer.body["items"]) == 50 and answer.body["cursor"]
    assert counts == {"Query": 1, "BatchGetItem": 1}, counts


def test_an_item_is_listed_once_its_window_is_written_and_once_only(aws, runtime, clock):
    [item] = email(runtime, "ada@example.org")
    succeed(runtime, item.id)
    assert _pages({}, 10)[0] == []  # the stream has not posted it yet: the item reads at once
    assert call("get_sent_item", params={"id": item.id}).status == 200
    stream = Stream(aws["table"])
    records = stream.new_records()
    state = stream.invoke(records, {}, final=False)["state"]
    stream.invoke([], state, final=True)
    stream.invoke([], state, final=True)  # the last call given again: the same posting
    again = Stream(aws["table"])  # the records handed on again in a later window: skipped
    again.invoke([], again.invoke(again.new_records(), {}, final=False)["state"], final=True)
    posted(aws["table"])
    assert _pages({}, 1)[0] == [item.id]


def test_an_expired_item_is_left_out_though_its_entry_outlives_it(aws, runtime, clock):
    [old] = email(runtime, "old@example.org")
    succeed(runtime, old.id)
    clock.advance(3 * 86_400)
    [new] = email(runtime, "new@example.org")
    succeed(runtime, new.id)
    posted(aws["table"])
    assert _pages({}, 1)[0] == [new.id, old.id]
    clock.advance(runtime.settings.retention_days * 86_400 - 86_400)
    assert _pages({}, 1)[0] == [new.id]


def test_a_signed_cursor_with_a_position_no_page_writes_is_a_400(aws, runtime):
    key = cursors.ListKey(done_list.LIST_NAME, (None, None), 1)
    zeros = "0" * 26
    for position in ("garbage", f"2026-13-45T99:00:00.000#{zeros}", "x" * 200,
                     f"2026-02-30T10:00:00.000#{zeros}", f"2026-03-01T10:00:00.000#{zeros[1:]}!"):
        forged = cursors.encode([position], key, runtime.settings.table_name)
        answer = call("list_sent_items", query={"cursor": forged})
        assert answer.status == 400 and answer.body["error"]["details"]["field"] == "cursor", \
            (position, answer.body)  # fmt: skip
    # A position the list could have written goes on from there.
    forged = cursors.encode(["2026-03-01T10:00:00.000#" + "0" * 26], key,
                            runtime.settings.table_name)  # fmt: skip
    assert call("list_sent_items", query={"cursor": forged}).status == 200


def test_an_errored_item_is_not_done_and_not_listed(aws, runtime, clock):
    [item] = email(runtime, "err@example.org")
    move(runtime, item.id, "send", "error")
    posted(aws["table"])
    assert _pages({}, 5)[0] == []
