"""GET /sent-items at its edges: items done in one millisecond, at midnight, between pages;
windows given again or written early; retention; crafted cursors; long empty histories."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import boto3
import pytest

from tests.support.operator import call, email, move, pages, sms, succeed
from tests.support.stream import Stream, posted
from vdq.operations import cursor as cursors
from vdq.schedules import postings as schedule_postings
from vdq.store.postings import Tallies


def _pages(query, page_size):
    """The ids of the sent list, page by page: (ids, pages)."""
    items, count = pages("list_sent_items", query, page_size)
    return [i["id"] for i in items], count


def _at(clock, when: datetime) -> None:
    clock.advance((when - clock.now()).total_seconds())


def _done_order(runtime, ids):
    items = [runtime.store.get_item(i) for i in ids]
    return [i.id for i in sorted(items, key=lambda i: (i.done_at[:23], i.id), reverse=True)]


# ---- paging ------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_same_ms_and_midnight_and_hour_boundaries_page_without_loss(aws, runtime, clock, limit):
    ids = [i.id for i in sms(runtime, *[f"+1415555{i:04d}" for i in range(4)])]
    ids += [i.id for i in email(runtime, *[f"r{i}@example.org" for i in range(3)])]
    for item_id in ids:
        move(runtime, item_id, "send")
    groups = {datetime(2026, 1, 1, 22, 59, 59, 999000, tzinfo=UTC): ids[0:3],
              datetime(2026, 1, 1, 23, 0, 0, 0, tzinfo=UTC): [ids[3], ids[4]],
              datetime(2026, 1, 2, 0, 0, 0, 0, tzinfo=UTC): ids[5:]}
    for when, group in groups.items():
        for item_id in group:
            _at(clock, when)  # every item of the group done in the same millisecond
            move(runtime, item_id, "succeed")
    assert len({runtime.store.get_item(i).done_at[:23] for i in ids}) == 3
    posted(aws["table"])
    order = _done_order(runtime, ids)
    assert _pages({}, limit)[0] == order
    assert _pages({"method": "email"}, limit)[0] == [i for i in order if i in ids[4:]]
    assert _pages({"priority": "normal", "state": "succeeded"}, limit)[0] == order
    assert _pages({"state": "cancelled"}, limit)[0] == []


def test_minute_day_boundaries_each_page_ends_on_the_last_entry(aws, runtime, clock):
    _at(clock, datetime(2026, 1, 1, 23, 58, 59, 999000, tzinfo=UTC))
    items = sms(runtime, *[f"+1415555{i:04d}" for i in range(6)])
    for item in items:  # 23:58:59.9xx, 23:59:00.0xx, ..., 00:00:0x next day
        succeed(runtime, item.id)
        clock.advance(30)
    posted(aws["table"])
    for limit in (1, 2, 3, 6):
        assert _pages({}, limit)[0] == [i.id for i in reversed(items)]


def test_cursor_is_stable_when_items_are_done_between_pages(aws, runtime, clock):
    items = sms(runtime, *[f"+1415555{i:04d}" for i in range(8)])
    for item in items[:5]:
        succeed(runtime, item.id)
        clock.advance(20)
    posted(aws["table"])
    first = call("list_sent_items", query={"limit": "2"}).body
    for item in items[5:]:  # newer: above the cursor, not on the pages that follow
        succeed(runtime, item.id)
    Stream(aws["table"]).window()
    got, cursor = [i["id"] for i in first["items"]], first["cursor"]
    while cursor:
        page = call("list_sent_items", query={"limit": "2", "cursor": cursor}).body
        got += [i["id"] for i in page["items"]]
        cursor = page["cursor"]
    assert got == [i.id for i in reversed(items[:5])]


# ---- windows -----------------------------------------------------------------------------


def test_a_window_given_again_shardless_and_ended_early_neither_loses_nor_repeats(
    aws, runtime, clock, monkeypatch
):
    items = sms(runtime, *[f"+1415555{i:04d}" for i in range(12)])
    for item in items:
        succeed(runtime, item.id)
        clock.advance(0.5)
    monkeypatch.setattr(schedule_postings, "MAX_STATE_BYTES", 300)  # written early, often
    stream = Stream(aws["table"])
    records = stream.new_records()
    state: dict = {}
    for start in range(0, len(records), 3):
        state = stream.invoke(records[start : start + 3], state, final=False)["state"]
    stream.invoke([], state, final=True)
    # The same records again: the shard's next window, and a replay by hand without a shard.
    stream.invoke(records, {}, final=True)
    event = {"Records": records, "state": {}}
    from functions.schedule import handler as schedule

    from tests.support.results import LambdaContext

    schedule.handler(event, LambdaContext())
    for limit in (1, 5, 100):
        assert _pages({}, limit)[0] == [i.id for i in reversed(items)]


# ---- retention ---------------------------------------------------------------------------


def test_expired_and_deleted_records_are_left_out(aws, runtime, clock):
    items = sms(runtime, *[f"+1415555{i:04d}" for i in range(3)])
    for item in items:
        succeed(runtime, item.id)
    posted(aws["table"])
    boto3.client("dynamodb").delete_item(TableName=aws["table"],
                                          Key={"pk": {"S": f"QI#{items[0].id}"},
                                               "sk": {"S": "STATE"}})  # fmt: skip
    assert _pages({}, 1)[0] == [items[2].id, items[1].id]
    clock.advance((runtime.settings.retention_days + 1) * 86400)
    assert _pages({}, 1)[0] == []


def test_keep_forever_retention_still_lists_items_done_days_ago(aws, runtime, clock):
    runtime.settings = replace(runtime.settings, retention_days=0)  # 0: kept forever
    [item] = sms(runtime)
    succeed(runtime, item.id)
    posted(aws["table"])
    assert _pages({}, 10)[0] == [item.id]
    clock.advance(3 * 86400)
    assert runtime.store.get_item(item.id) is not None  # the item is still there
    assert _pages({}, 10)[0] == [item.id]


# ---- hostile cursors ---------------------------------------------------------------------


def _forged(runtime, position):
    key = cursors.ListKey("done", (None, None), 1)
    return cursors.encode([position], key, runtime.settings.table_name)


@pytest.mark.parametrize("position", [
    "2026-13-45T00:00:00.000#01HZZZZZZZZZZZZZZZZZZZZZZZ",
    "2026-02-30T10:00:00.000#01HZZZZZZZZZZZZZZZZZZZZZZZ",
    "0000-01-01T00:00:00.000#01HZZZZZZZZZZZZZZZZZZZZZZZ",
    "0001-01-01T00:00:00.000#01HZZZZZZZZZZZZZZZZZZZZZZZ",
    "2026-01-01T99:99:99.999#01HZZZZZZZZZZZZZZZZZZZZZZZ",
    "nonsense", "",
])
def test_a_signed_cursor_with_a_crafted_position_is_a_400_or_an_end(aws, runtime, position):
    answer = call("list_sent_items", query={"cursor": _forged(runtime, position)})
    assert answer.status in (200, 400), answer.body
    assert answer.status == 400 or answer.body["cursor"] is None


def test_a_far_future_cursor_does_not_walk_millions_of_months(aws, runtime, monkeypatch):
    calls = []
    original = Tallies.done_minutes

    def counting(self, day, **kw):
        calls.append(day)
        if len(calls) > 200:
            raise AssertionError("more than 200 months read for one page")
        return original(self, day, **kw)

    monkeypatch.setattr(Tallies, "done_minutes", counting)
    cursor = _forged(runtime, "9999-12-31T23:59:59.999#01HZZZZZZZZZZZZZZZZZZZZZZZ")
    answer = call("list_sent_items", query={"cursor": cursor})
    assert answer.status in (200, 400)


# ---- budget ------------------------------------------------------------------------------


def test_an_empty_long_history_costs_a_bounded_number_of_queries_per_page(
    aws, runtime, clock, monkeypatch
):
    runtime.settings = replace(runtime.settings, retention_days=3650)
    [item] = sms(runtime)
    succeed(runtime, item.id)
    posted(aws["table"])
    days = []
    original = Tallies.done_minutes
    monkeypatch.setattr(Tallies, "done_minutes",
                        lambda self, day, **kw: (days.append(day), original(self, day, **kw))[1])
    got, pages = _pages({"method": "email"}, 10)  # nothing matches: the whole history
    assert got == []
    # Months, not days, a Query, and at most MAX_MONTHS a request (API Gateway ends at 29 s).
    assert len(days) / pages <= 100, (len(days), pages)


def test_a_tiny_read_budget_still_pages_every_item_once_and_ends(aws, runtime, clock, monkeypatch):
    from vdq.operations import done_list

    items = sms(runtime, *[f"+1415555{i:04d}" for i in range(9)])
    for n, item in enumerate(items):
        succeed(runtime, item.id)
        clock.advance(0.2 if n % 3 else 61)  # three per minute, over three minutes
    posted(aws["table"])
    monkeypatch.setattr(done_list, "MAX_BYTES", 1)  # stops after each minute read
    for limit in (1, 2, 4, 100):
        got, pages = _pages({}, limit)
        assert got == [i.id for i in reversed(items)]
    got, pages = _pages({"method": "email"}, 100)  # nothing matches: one minute a page
    assert got == [] and pages <= 5  # four minutes, then an empty last page


def test_old_or_unknown_lane_items_are_still_listed(aws, runtime, clock):
    [plain, odd] = sms(runtime, "+14155550100", "+14155550101")
    client = boto3.client("dynamodb")
    client.update_item(TableName=aws["table"], Key={"pk": {"S": f"QI#{plain.id}"},
                                                     "sk": {"S": "STATE"}},
                       UpdateExpression="REMOVE priority")  # an item stored before lanes
    client.update_item(TableName=aws["table"], Key={"pk": {"S": f"QI#{odd.id}"},
                                                     "sk": {"S": "STATE"}},
                       UpdateExpression="SET priority = :p",
                       ExpressionAttributeValues={":p": {"S": "urgent"}})  # fmt: skip
    for item in (plain, odd):
        succeed(runtime, item.id)
    posted(aws["table"])
    # A lane this release does not know is placed as normal: the page reads the item itself.
    assert _pages({}, 10)[0] == [odd.id, plain.id]


def test_an_entry_minutes_ahead_of_the_reader_across_midnight_is_listed(aws, runtime, clock):
    [early, ahead] = sms(runtime, "+14155550100", "+14155550101")
    _at(clock, datetime(2026, 1, 1, 23, 50, tzinfo=UTC))
    succeed(runtime, early.id)
    _at(clock, datetime(2026, 1, 2, 0, 1, tzinfo=UTC))  # a writer whose clock is ahead
    succeed(runtime, ahead.id)
    posted(aws["table"])
    _at(clock, datetime(2026, 1, 1, 23, 58, tzinfo=UTC))  # the reader, 3 minutes behind
    for limit in (1, 10):
        assert _pages({}, limit)[0] == [ahead.id, early.id]


# ---- upgrade -----------------------------------------------------------------------------


def _as_an_older_release_did(aws, items):
    """Items done by a release that listed them from the sent index: its keys on the item, and
    no done posting."""
    client = boto3.client("dynamodb")
    for item in items:
        client.update_item(TableName=aws["table"],
                           Key={"pk": {"S": f"QI#{item.id}"}, "sk": {"S": "STATE"}},
                           UpdateExpression="SET sent_pk = :p, sent_sk = :s",
                           ExpressionAttributeValues={":p": {"S": "S#0"},
                                                      ":s": {"S": f"x#{item.id}"}})  # fmt: skip
    for row in client.scan(TableName=aws["table"])["Items"]:
        if row["pk"]["S"].startswith("DN#"):
            client.delete_item(TableName=aws["table"], Key={"pk": row["pk"], "sk": row["sk"]})


def test_items_done_before_the_upgrade_are_listed_after_the_backfill(aws, runtime, clock,
                                                                      monkeypatch):  # fmt: skip
    from vdq.store import done_backfill

    old = sms(runtime, *[f"+1415555{i:04d}" for i in range(5)])
    for item in old:
        succeed(runtime, item.id)
        clock.advance(40)
    call("transition", params={"id": (cancelled := email(runtime, "c@example.org")[0]).id,
                               "name": "cancel"}, query={})  # fmt: skip
    [errored] = email(runtime, "e@example.org")
    move(runtime, errored.id, "send", "error")
    posted(aws["table"])
    _as_an_older_release_did(aws, [*old, cancelled, errored])
    [new] = email(runtime, "new@example.org")  # done by this release: posted by the stream
    succeed(runtime, new.id)
    posted(aws["table"])
    assert _pages({}, 3)[0] == [new.id]
    client = boto3.client("dynamodb")
    # A run that crashes after its postings, before it removed the old keys of its items:
    real = client.update_item
    monkeypatch.setattr(client, "update_item", lambda **kw: (_ for _ in ()).throw(
        RuntimeError("crashed")))  # fmt: skip
    with pytest.raises(RuntimeError):
        list(done_backfill.backfill(client, aws["table"], page=3))
    monkeypatch.setattr(client, "update_item", real)
    # Run again (twice), beside live traffic whose transactions hold two of the items a while:
    # what the crash left is posted again, nothing is lost or shown twice.
    from tests.support.aws import conflicting

    left = conflicting(client, "UpdateItem", 2, monkeypatch)
    assert sum(done_backfill.backfill(client, aws["table"], page=3)) >= len(old) + 1
    assert left["n"] == 0
    assert sum(done_backfill.backfill(client, aws["table"], page=3)) == 0
    wanted = [new.id, cancelled.id, *(i.id for i in reversed(old))]
    for limit in (1, 2, 7):
        assert _pages({}, limit)[0] == wanted
    assert _pages({"state": "cancelled"}, 5)[0] == [cancelled.id]


def test_a_minute_split_over_many_records_and_query_pages_pages_whole(aws, runtime, clock,
                                                                     monkeypatch):  # fmt: skip
    from vdq.store import postings as store_postings

    items = sms(runtime, *[f"+1415555{i:04d}" for i in range(10)])
    for n, item in enumerate(items):
        succeed(runtime, item.id)
        clock.advance(0.3 if n % 4 else 50)
    monkeypatch.setattr(schedule_postings, "MAX_STATE_BYTES", 300)  # a record every few items
    stream = Stream(aws["table"])
    state: dict = {}
    records = stream.new_records()
    for start in range(0, len(records), 2):
        state = stream.invoke(records[start : start + 2], state, final=False)["state"]
    stream.invoke([], state, final=True)
    monkeypatch.setattr(store_postings, "DONE_QUERY_RECORDS", 1)  # a Query page a record
    for limit in (1, 3, 10):
        assert _pages({}, limit)[0] == [i.id for i in reversed(items)]
