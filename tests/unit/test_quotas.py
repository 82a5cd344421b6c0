"""Producer quotas, offline: who a quota applies to, its fixed windows, and its settings."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from vdq.core.errors import SettingsError
from vdq.core.settings import QuotaLimits, Settings
from vdq.intake.quotas import producer_of, windows

QUOTAS = {
    "client-a": QuotaLimits(per_minute=10),
    "vdq-bulk": QuotaLimits(per_second=5, per_day=1000),
    "*": QuotaLimits(per_day=100),
}


def test_a_named_client_first_then_its_group_then_the_default_each_with_own_counters():
    assert producer_of("client-a", ("vdq-bulk",), QUOTAS) == ("client-a", QUOTAS["client-a"])
    # A group's members share the group's counters.
    assert producer_of("client-b", ("vdq-senders", "vdq-bulk"), QUOTAS) == (
        "group:vdq-bulk", QUOTAS["vdq-bulk"])
    # The default gives every other producer counters of its own.
    assert producer_of("client-c", ("vdq-senders",), QUOTAS) == ("client-c", QUOTAS["*"])
    assert producer_of("client-c", (), {"client-a": QUOTAS["client-a"]}) is None


def test_windows_are_the_current_second_minute_and_utc_day():
    now = datetime(2026, 12, 3, 23, 59, 59, 500_000, tzinfo=UTC)
    second, minute, day = windows(QuotaLimits(per_second=1, per_minute=2, per_day=3), now)
    epoch = int(now.timestamp())
    assert (second.name, second.limit, second.ends_at) == ("per_second", 1, epoch + 1)
    assert (minute.name, minute.ends_at) == ("per_minute", (epoch // 60 + 1) * 60)
    assert (day.name, day.sk) == ("per_day", "d#2026-12-03")
    assert day.ends_at == int(datetime(2026, 12, 4, tzinfo=UTC).timestamp())
    # Half a second later it is another day, minute and second: new counters.
    later = windows(QuotaLimits(per_second=1, per_minute=2, per_day=3),
                    datetime(2026, 12, 4, 0, 0, 0, tzinfo=UTC))  # fmt: skip
    assert {w.sk for w in later}.isdisjoint({second.sk, minute.sk, day.sk})
    assert later[2].sk == "d#2026-12-04"


def test_only_the_limits_set_have_windows():
    assert [w.name for w in windows(QuotaLimits(per_day=5), datetime.now(UTC))] == ["per_day"]


def test_quotas_are_read_from_json_and_bad_ones_name_the_setting():
    s = Settings.from_env({"VDQ_PRODUCER_QUOTAS": '{"c1": {"per_minute": 60}, '
                                                  '"*": {"per_day": 1000, "per_second": 2}}'})
    assert s.producer_quotas == {"c1": QuotaLimits(per_minute=60),
                                 "*": QuotaLimits(per_second=2, per_day=1000)}  # fmt: skip
    assert Settings.from_env({}).producer_quotas == {}
    for bad in ('[1]', '{"c1": {"per_hour": 5}}', '{"c1": {"per_day": 0}}', '{"c1": {}}',
                '{"c1": {"per_day": "5"}}', '{" ": {"per_day": 5}}'):
        with pytest.raises(SettingsError) as err:
            Settings.from_env({"VDQ_PRODUCER_QUOTAS": bad})
        assert "VDQ_PRODUCER_QUOTAS" in str(err.value)


def test_quota_shards_are_one_to_sixteen_and_bad_ones_name_the_setting():
    assert Settings.from_env({}).quota_shards == 1
    assert Settings.from_env({"VDQ_QUOTA_SHARDS": "4"}).quota_shards == 4
    for bad in ("0", "17", "-1", "four", "2.5"):
        with pytest.raises(SettingsError) as err:
            Settings.from_env({"VDQ_QUOTA_SHARDS": bad})
        assert "VDQ_QUOTA_SHARDS" in str(err.value)


class _PartialReads:
    """A DynamoDB client whose BatchGetItem answers only the first key of a request and
    returns the rest as UnprocessedKeys (what DynamoDB does under throttling, which botocore
    does not retry)."""

    def __init__(self, rows: dict[tuple[str, str], dict]) -> None:
        self.rows = rows
        self.requests = 0

    def batch_get_item(self, RequestItems):  # boto3's name
        self.requests += 1
        [(table, request)] = RequestItems.items()
        keys = request["Keys"]
        first, rest = keys[:1], keys[1:]
        found = [self.rows[(k["pk"]["S"], k["sk"]["S"])] for k in first
                 if (k["pk"]["S"], k["sk"]["S"]) in self.rows]  # fmt: skip
        answer = {"Responses": {table: found}}
        if rest:
            answer["UnprocessedKeys"] = {table: {**request, "Keys": rest}}
        return answer

    def get_item(self, TableName, Key, ConsistentRead):  # boto3's names
        self.requests += 1
        row = self.rows.get((Key["pk"]["S"], Key["sk"]["S"]))
        return {} if row is None else {"Item": row}


def _record(producer: str, current, counts, members=()) -> dict:
    """A producer's counters record holding ``current`` windows with ``counts``."""
    from vdq.store.quota_records import member_digest

    item = {"pk": {"S": f"QUOTA#{producer}"}, "sk": {"S": "Q"}}
    for w, n in zip(current, counts, strict=True):
        item[f"{w.kind}w"] = {"S": w.sk}
        item[f"{w.kind}n"] = {"N": str(n)}
    if members:  # named in the longest window
        item[f"{current[-1].kind}c"] = {"SS": [member_digest(m) for m in members]}
    return item


def test_counters_read_one_record_and_every_key_dynamodb_leaves_unprocessed():
    from vdq.store.counters import Counters

    now = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
    current = windows(QuotaLimits(per_second=5, per_minute=50, per_day=500), now)
    earlier = windows(QuotaLimits(per_second=5, per_minute=50, per_day=500),
                      datetime(2026, 12, 3, 11, 59, 59, tzinfo=UTC))  # fmt: skip
    # The record holds the second before: it counts nothing now; the minute and day go on.
    rows = {("QUOTA#group:vdq-bulk", "Q"): _record("group:vdq-bulk", (earlier[0], *current[1:]),
                                                   (4, 7, 42), members=("client-b",))}  # fmt: skip
    client = _PartialReads(rows)
    counters = Counters(client, "vdq-test")
    assert counters.used("group:vdq-bulk", current) == {
        "per_second": 0, "per_minute": 7, "per_day": 42}
    assert client.requests == 1  # one record, one GetItem, whatever the limits
    # The group is found past a candidate left unprocessed, from a window it still holds.
    found = counters.charged_as("client-b", [("group:vdq-other", current),
                                             ("group:vdq-bulk", current)])  # fmt: skip
    assert found == "group:vdq-bulk"
    assert counters.charged_as("client-c", [("group:vdq-bulk", current)]) is None
    # A member of a window the record no longer holds is not charged to it now.
    later = windows(QuotaLimits(per_day=500), datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC))
    assert counters.charged_as("client-b", [("group:vdq-bulk", later)]) is None


def test_a_producer_without_a_record_reads_what_an_earlier_release_counted():
    from vdq.store.counters import Counters

    now = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
    current = windows(QuotaLimits(per_second=5, per_minute=50, per_day=500), now)
    # One record a window, as releases before the one-record counters wrote them.
    rows = {("QUOTA#p1", w.sk): {"pk": {"S": "QUOTA#p1"}, "sk": {"S": w.sk},
                                 "used": {"N": str(n)}}
            for n, w in zip((1, 7, 42), current, strict=True)}  # fmt: skip
    counters = Counters(_PartialReads(rows), "vdq-test")
    assert counters.used("p1", current) == {"per_second": 1, "per_minute": 7, "per_day": 42}
