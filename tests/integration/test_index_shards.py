"""The sparse indexes' shard count only grows (vdq.store.shards): a function whose
VDQ_INDEX_SHARDS is below the count the table's indexes have used runs with that count, so an
entry written in a higher shard is still read by the lists and the schedules."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import replace

import boto3
import pytest

import vdq
from vdq.operations import listing
from vdq.runtime import Runtime
from vdq.store import shard
from vdq.store.shards import Shards


def with_shards(settings, clock, shards: int) -> Runtime:
    runtime = Runtime(settings=replace(settings, index_shards=shards), clock=clock)
    runtime.keep_index_shards()
    return runtime


def test_a_count_is_stored_when_raised_and_kept_when_a_setting_is_lower(aws, settings, clock,
                                                                        caplog):  # fmt: skip
    assert with_shards(settings, clock, 8).settings.index_shards == 8
    lowered = with_shards(settings, clock, 4)
    assert lowered.settings.index_shards == 8
    assert "VDQ_INDEX_SHARDS is 4" in caplog.text
    assert with_shards(settings, clock, 16).settings.index_shards == 16
    assert with_shards(settings, clock, 8).settings.index_shards == 16


def test_a_raise_that_loses_to_a_higher_one_runs_with_the_higher(aws, settings, clock,
                                                                 monkeypatch):  # fmt: skip
    with_shards(settings, clock, 16)
    reads = iter([4])  # this function's read came before another stored 16
    original = Shards._stored_shards
    monkeypatch.setattr(Shards, "_stored_shards",
                        staticmethod(lambda: next(reads, None) or original()))  # fmt: skip
    assert with_shards(settings, clock, 8).settings.index_shards == 16


def test_an_item_written_in_a_higher_shard_stays_in_the_list_after_a_lower_deploy(
        aws, settings, clock):  # fmt: skip
    wide = with_shards(settings, clock, 8)
    items = vdq.add_sms("+15005550006", [f"+1415555{n:04d}" for n in range(20)], "hi",
                        runtime=wide)  # fmt: skip
    high = [i.id for i in items if shard(i.id, 8) >= 4]
    assert high  # some of twenty land in shards 4 to 7
    narrow = with_shards(settings, clock, 4)
    listed = listing.list_items(listing.ACTIVE, narrow, limit=50)
    assert {i["id"] for i in listed["items"]} == {i.id for i in items}


def test_a_handlers_runtime_takes_the_tables_count(aws, settings, clock, monkeypatch):
    with_shards(settings, clock, 8)
    monkeypatch.setenv("VDQ_TABLE_NAME", settings.table_name)
    monkeypatch.setenv("VDQ_INDEX_SHARDS", "4")
    from vdq.core.settings import get_settings

    get_settings.cache_clear()
    Runtime.reset_default()
    try:
        assert get_settings().index_shards == 4
        assert Runtime.default().settings.index_shards == 8
    finally:
        Runtime.reset_default()
        get_settings.cache_clear()


def test_the_count_is_one_record_that_never_expires(aws, settings, clock):
    with_shards(settings, clock, 8)
    with_shards(settings, clock, 4)
    item = boto3.client("dynamodb").get_item(TableName=settings.table_name, ConsistentRead=True,
                                    Key={"pk": {"S": "CFG#shards"}, "sk": {"S": "CFG"}})["Item"]
    assert item == {"pk": {"S": "CFG#shards"}, "sk": {"S": "CFG"}, "shards": {"N": "8"}}


def test_a_first_use_from_two_threads_at_once_makes_one_runtime(aws, settings, monkeypatch):
    # The local stack's pollers and front, or a producer's threads calling the Python API, all
    # ask for the default at start; the count's read is a round trip, so they overlap in it.
    monkeypatch.setenv("VDQ_TABLE_NAME", settings.table_name)
    from vdq.core.settings import get_settings

    both = threading.Barrier(2, timeout=1)
    original = Shards.kept_index_shards

    def slow(self, configured: int) -> int:
        # The other thread is in its read too; or, when it waits for this one's runtime, no
        # other thread comes and the barrier breaks.
        with contextlib.suppress(threading.BrokenBarrierError):
            both.wait()
        return original(self, configured)

    monkeypatch.setattr(Shards, "kept_index_shards", slow)
    get_settings.cache_clear()
    Runtime.reset_default()
    try:
        made: list[Runtime] = []
        threads = [threading.Thread(target=lambda: made.append(Runtime.default()))
                   for _ in range(2)]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert len(made) == 2 and made[0] is made[1] is Runtime.default()
    finally:
        Runtime.reset_default()
        get_settings.cache_clear()


@pytest.mark.xfail(strict=True, reason=(
    "a table written before the count was kept holds no CFG#shards: the first function stores "
    "its own setting, so a deploy that upgrades and lowers VDQ_INDEX_SHARDS at once leaves "
    "the entries above it unread (docs/limits.md: upgrade at the same rate first)"))  # fmt: skip
def test_an_upgrade_that_also_lowers_the_count_keeps_the_entries_of_before(aws, settings,
                                                                           clock):  # fmt: skip
    before = Runtime(settings=replace(settings, index_shards=8), clock=clock)  # no count kept
    items = vdq.add_sms("+15005550006", [f"+1415555{n:04d}" for n in range(20)], "hi",
                        runtime=before)  # fmt: skip
    assert [i.id for i in items if shard(i.id, 8) >= 4]
    upgraded = with_shards(settings, clock, 4)
    listed = listing.list_items(listing.ACTIVE, upgraded, limit=50)
    assert {i["id"] for i in listed["items"]} == {i.id for i in items}


@pytest.mark.xfail(strict=True, reason=(
    "a function reads the count once, at its cold start: one that stored a lower count just "
    "before another raised it reads too few shards until its container is recycled (a delay "
    "of the other's entries in its lists and sweeps, not a loss)"))  # fmt: skip
def test_a_container_that_raised_first_reads_the_shards_of_a_later_raise(aws, settings,
                                                                         clock):  # fmt: skip
    first = with_shards(settings, clock, 8)  # its raise from nothing won
    later = with_shards(settings, clock, 16)  # a raise after it, as both cold-start
    items = vdq.add_sms("+15005550006", [f"+1415555{n:04d}" for n in range(30)], "hi",
                        runtime=later)  # fmt: skip
    assert [i.id for i in items if shard(i.id, 16) >= 8]
    listed = listing.list_items(listing.ACTIVE, first, limit=50)
    assert {i["id"] for i in listed["items"]} == {i.id for i in items}
