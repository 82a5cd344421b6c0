"""Priority and send_at of a request: parsing, limits, and the errors that name them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vdq.core.errors import BadValue, ValidationError
from vdq.core.settings import Settings
from vdq.intake import messages, scheduling
from vdq.workflow import stateevents
from vdq.workflow.lanes import lane_urls, parse_priority
from vdq.workflow.sendqueue import SendMessage, SendQueue

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


def email_body(**changes):
    body = {"sender": {"email": "shop@example.com"}, "to": [{"email": "ada@example.org"}],
            "subject": "Hi", "text": "Hello"}  # fmt: skip
    body.update(changes)
    return body


@pytest.mark.parametrize("value", ["urgent", "HIGH", "", 1, ["high"], {"lane": "high"}])
def test_a_priority_other_than_high_normal_bulk_is_a_400_naming_priority(value):
    with pytest.raises(BadValue) as err:
        messages.parse_email(email_body(priority=value), now=NOW)
    assert err.value.status == 400 and err.value.field == "priority"
    assert "high, normal, bulk" in str(err.value)


def test_priority_defaults_to_normal_and_each_lane_is_kept():
    assert messages.parse_email(email_body(), now=NOW).priority == "normal"
    assert parse_priority(None) == "normal"
    for lane in ("high", "normal", "bulk"):
        sms = messages.parse_sms({"sender": {"cell": "+15005550006"},
                                  "to": [{"cell": "+14155550100"}], "body": "x",
                                  "priority": lane}, now=NOW)  # fmt: skip
        assert sms.priority == lane


@pytest.mark.parametrize("value,stored", [
    ("2026-12-03T09:00:00Z", "2026-12-03T09:00:00.000000Z"),
    ("2026-12-03T10:00:00+01:00", "2026-12-03T09:00:00.000000Z"),
    ("2026-12-03t04:00:00.5-05:00", "2026-12-03T09:00:00.500000Z"),
    ("2026-12-03T09:00:00.123456789Z", "2026-12-03T09:00:00.123456Z"),
    # RFC 3339's fraction has any number of digits: read to the microsecond.
    ("2026-12-03T09:00:00.123456789012345Z", "2026-12-03T09:00:00.123456Z"),
    ("2026-12-03T09:00:00-00:00", "2026-12-03T09:00:00.000000Z"),
    ("2026-12-03T23:00:00+14:00", "2026-12-03T09:00:00.000000Z"),
    ("2026-12-02T21:00:00-12:00", "2026-12-03T09:00:00.000000Z"),
    ("2026-12-03T09:59:00+00:59", "2026-12-03T09:00:00.000000Z"),
])  # fmt: skip
def test_send_at_with_an_offset_is_stored_in_utc(value, stored):
    assert messages.parse_email(email_body(send_at=value), now=NOW).send_at == stored


@pytest.mark.parametrize("value,why", [
    ("2026-12-03T09:00:00", "needs a UTC offset"),
    ("2026-12-03 09:00:00Z", "not an RFC 3339 timestamp"),
    ("2026-12-03", "not an RFC 3339 timestamp"),
    ("tomorrow", "not an RFC 3339 timestamp"),
    ("2026-02-30T09:00:00Z", "not a valid time"),
    # An offset's minutes run to 59 and its hours to 23: +00:60 is not an hour ahead.
    ("2026-12-03T10:00:00+00:60", "offset"),
    ("2026-12-03T10:00:00+01:75", "offset"),
    ("2026-12-03T10:00:00+24:00", "offset"),
    ("2026-12-03T09:00:00Z\n", "not an RFC 3339 timestamp"),
    ("\u0662\u0660\u0662\u0666-12-03T09:00:00Z", "not an RFC 3339 timestamp"),  # Arabic digits
    (1764748800, "must be an RFC 3339 timestamp"),
])  # fmt: skip
def test_a_send_at_that_is_not_rfc_3339_with_an_offset_is_a_400_naming_send_at(value, why):
    with pytest.raises(BadValue) as err:
        messages.parse_sms({"sender": {"cell": "+15005550006"}, "to": [{"cell": "+14155550100"}],
                            "body": "x", "send_at": value}, now=NOW)  # fmt: skip
    assert err.value.status == 400 and err.value.field == "send_at"
    assert why in str(err.value)


def test_send_at_at_most_the_schedule_days_ahead():
    at_limit = (NOW + timedelta(days=30)).isoformat()
    assert messages.parse_email(email_body(send_at=at_limit), now=NOW).send_at is not None
    beyond = (NOW + timedelta(days=30, seconds=1)).isoformat()
    with pytest.raises(ValidationError) as err:
        messages.parse_email(email_body(send_at=beyond), now=NOW)
    assert err.value.field == "send_at" and "30 days" in str(err.value)
    assert err.value.status == 422  # valid by the schema, past the limit it states in words
    with pytest.raises(ValidationError):
        messages.parse_email(email_body(send_at=(NOW + timedelta(days=3)).isoformat()), now=NOW,
                             max_schedule_days=2)  # fmt: skip


def test_a_send_at_in_the_past_or_now_means_now():
    for moment in (NOW - timedelta(days=400), NOW):
        assert messages.parse_email(email_body(send_at=moment.isoformat()), now=NOW).send_at is None


def test_short_waits_are_sqs_delays_and_long_ones_go_to_buckets():
    soon = scheduling.iso(NOW + timedelta(seconds=899.2))
    assert scheduling.delay_for(soon, NOW) == 900 and not scheduling.is_long(soon, NOW)
    later = scheduling.iso(NOW + timedelta(seconds=901))
    assert scheduling.is_long(later, NOW) and scheduling.delay_for(later, NOW) == 900
    assert scheduling.delay_for(None, NOW) == 0
    assert scheduling.delay_for(scheduling.iso(NOW - timedelta(seconds=5)), NOW) == 0


def test_an_unset_lane_url_shares_the_normal_queue():
    s = Settings(send_queue_url="normal-url", bulk_send_queue_url="bulk-url")
    assert lane_urls(s) == {"high": "normal-url", "normal": "normal-url", "bulk": "bulk-url"}


class _Sqs:
    def __init__(self):
        self.requests = []

    def send_message_batch(self, QueueUrl, Entries):
        self.requests.append((QueueUrl, [e["Id"] for e in Entries]))
        self.sizes = [*getattr(self, "sizes", []),
                      sum(len(e["MessageBody"].encode()) for e in Entries)]  # fmt: skip
        return {"Successful": [], "Failed": []}


def test_the_send_queue_routes_each_message_to_its_lane_ten_to_a_request():
    sqs = _Sqs()
    queue = SendQueue(sqs, "normal", {"high": "high", "bulk": "bulk"})
    messages_ = [SendMessage(f"b{i}", 1, priority="bulk") for i in range(12)]
    messages_ += [SendMessage("h", 1, priority="high"), SendMessage("n", 1)]
    assert queue.publish(messages_) == {}
    assert [(url, len(ids)) for url, ids in sqs.requests] == [("bulk", 10), ("bulk", 2),
                                                               ("high", 1), ("normal", 1)]


def test_a_batch_of_messages_carrying_the_largest_inline_content_stays_within_sqss_limit():
    # A content just within MAX_INLINE_CONTENT rides in each receiver's message: ten of them
    # are 480 KB, and SQS refuses a batch over 256 KiB in all (BatchRequestTooLong), so no
    # item of the request was published until its re-publish, which batched them the same.
    from vdq.workflow.sendqueue import MAX_BATCH_BYTES, MAX_INLINE_CONTENT

    sqs = _Sqs()
    content = {"subject": "s", "text": "x" * (MAX_INLINE_CONTENT - 100)}
    messages_ = [SendMessage(f"i{n}", 1, content=content) for n in range(12)]
    assert all('"content"' in m.body() for m in messages_)
    assert SendQueue(sqs, "normal").publish(messages_) == {}
    assert sum(len(ids) for _, ids in sqs.requests) == 12
    assert max(sqs.sizes) <= MAX_BATCH_BYTES == 262_144


def test_state_events_carry_the_priority():
    image = {"sk": {"S": "STATE"}, "id": {"S": "X"}, "method": {"S": "sms"},
             "attempt": {"N": "1"}, "updated_at": {"S": "t"}}  # fmt: skip
    record = {"eventName": "MODIFY", "dynamodb": {
        "OldImage": {**image, "state": {"S": "sending"}},
        "NewImage": {**image, "state": {"S": "errored"}, "priority": {"S": "high"}}}}
    assert stateevents.detail_of(record, "errored")["priority"] == "high"
    del record["dynamodb"]["NewImage"]["priority"]  # stored before lanes: normal
    assert stateevents.detail_of(record, "errored")["priority"] == "normal"
