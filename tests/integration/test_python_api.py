"""The Python API as a producer's door, against moto: its requests name their producer and meet
the REST API's rules (quota, reputation guard, suppression flags, Idempotency-Key) through the
same enqueue."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest

import vdq
from tests.support.aws import GUARDED_SENDER, drain
from vdq import python_api
from vdq.api import Caller
from vdq.core import resources
from vdq.core.errors import BadRequest, PartiallyEnqueued, ValidationError
from vdq.core.settings import QuotaLimits
from vdq.dispatch import send
from vdq.intake import rest
from vdq.intake.enqueue import PENDING_SECONDS
from vdq.intake.quotas import OverQuota, QuotaExceeded
from vdq.results import judging, suppression
from vdq.store.postings import Tallies

SENDER = GUARDED_SENDER  # the address the guarded runtime verified
SENDERS = ("vdq.add_queueitem",)


@pytest.fixture
def rt(guarded):
    return guarded


def email(rt, *receivers, **kwargs):
    return vdq.add_email(SENDER, list(receivers), "Hi", "Hello", runtime=rt, **kwargs)


def hold(rt, producer):
    """Hold ``producer``: 5 bounces in 20 sends this hour, as the stream would count them."""
    tallies = Tallies(rt.client("dynamodb"), rt.settings.table_name)
    hour = rt.clock.now().strftime("%Y-%m-%dT%H")
    assert tallies.add_counts(hour, f"p#{producer}#0", "test", "1", "2",
                              {"sent": 20, "bounce": 5}, 2**40)  # fmt: skip
    (level,) = judging.evaluate(rt, [producer])
    assert level.level == "hold"


def test_each_item_names_the_producer_given_or_the_documented_default(aws, rt):
    [named] = email(rt, "ada@example.org", producer="shop-service")
    [unnamed] = vdq.add_sms("+15005550006", "+14155550100", "Code", runtime=rt)
    assert rt.store.get_item(named.id).created_by == "shop-service"
    assert rt.store.get_item(unnamed.id).created_by == python_api.DEFAULT_PRODUCER == "python-api"


@pytest.mark.parametrize("producer", ["", "group:shop", "*", "-", "shop service", "a" * 129,
                                      "shop\n", 42])  # fmt: skip
def test_a_producer_no_client_could_be_is_refused_naming_it(aws, rt, producer):
    # "group:<name>" names a group's shared counters: a producer of that name would be charged
    # to them; "*" and "-" are the default quota's and the items of no producer.
    with pytest.raises(ValidationError) as err:
        email(rt, "ada@example.org", producer=producer)
    assert err.value.field == "producer"
    assert drain(aws) == []


def test_a_request_over_its_producers_quota_is_refused_whole(aws, rt):
    rt.settings = replace(rt.settings, producer_quotas={"shop": QuotaLimits(per_minute=3)})
    assert len(email(rt, "ada@example.org", "bob@example.org", producer="shop")) == 2
    assert len(drain(aws)) == 2
    with pytest.raises(QuotaExceeded) as err:
        email(rt, "cy@example.org", "dee@example.org", producer="shop")
    assert err.value.details["producer"] == "shop" and err.value.details["used"] == 2
    assert drain(aws) == []  # nothing of it stored
    # Another producer has counters of its own (no entry, no quota).
    assert len(email(rt, "cy@example.org", "dee@example.org", producer="news")) == 2


def test_a_request_larger_than_a_limit_names_the_list_that_passes_it(aws, rt):
    rt.settings = replace(rt.settings, producer_quotas={"*": QuotaLimits(per_second=2)})
    with pytest.raises(OverQuota) as err:
        email(rt, "ada@example.org", "bob@example.org", cc="cy@example.org")
    assert err.value.field == "cc" and "split the request" in err.value.message
    assert drain(aws) == []


def test_both_doors_charge_one_producers_counters(aws, rt):
    rt.settings = replace(rt.settings, producer_quotas={"shop": QuotaLimits(per_minute=3)})
    email(rt, "ada@example.org", "bob@example.org", producer="shop")
    body = {"sender": {"email": SENDER}, "to": [{"email": "cy@example.org"},
            {"email": "dee@example.org"}], "subject": "Hi", "text": "Hello"}  # fmt: skip
    with pytest.raises(QuotaExceeded):
        rest.submit("email", body, Caller("shop", (), frozenset(SENDERS)), rt)


def test_a_producers_groups_share_the_groups_quota_with_its_rest_callers(aws, rt):
    # A producer named in no quota entry but in a group that has one is charged to the
    # group's counters, as a REST caller of that group (its token's cognito:groups) is.
    rt.settings = replace(rt.settings, producer_quotas={"shops": QuotaLimits(per_minute=3)})
    email(rt, "ada@example.org", "bob@example.org", producer="shop-a", groups=["shops"])
    body = {"sender": {"email": SENDER}, "to": [{"email": "cy@example.org"},
            {"email": "dee@example.org"}], "subject": "Hi", "text": "Hello"}  # fmt: skip
    with pytest.raises(QuotaExceeded) as err:
        rest.submit("email", body, Caller("shop-b", ("shops",), frozenset(SENDERS)), rt)
    assert err.value.details["producer"] == "group:shops" and err.value.details["used"] == 2
    # One group given alone is that group, not a group per letter.
    with pytest.raises(QuotaExceeded):
        email(rt, "cy@example.org", "dee@example.org", producer="shop-c", groups="shops")
    assert len(drain(aws)) == 2


@pytest.mark.parametrize("groups", [[""], ["a b"], ["a,b"], [42], ["x" * 129], [None], 42,
                                    ["[a]"]])  # fmt: skip
def test_a_group_no_token_could_carry_is_refused_naming_it(aws, rt, groups):
    with pytest.raises(ValidationError) as err:
        email(rt, "ada@example.org", producer="shop", groups=groups)
    assert err.value.field == "groups"
    assert drain(aws) == []


@pytest.mark.parametrize("groups", [{"shops", "news"}, frozenset({"shops"}), {"shops": 1}, 0,
                                    False])  # fmt: skip
def test_groups_without_an_order_or_not_names_at_all_are_refused(aws, rt, groups):
    # The first group with a quota is charged: a set's order changes from one process to the
    # next (string hashing), so one producer's requests would be charged to either group's
    # counters. A dict's values, and a falsy number, would be dropped without a word.
    rt.settings = replace(rt.settings, producer_quotas={"shops": QuotaLimits(per_minute=3),
                                                        "news": QuotaLimits(per_minute=3)})
    with pytest.raises(ValidationError) as err:
        email(rt, "ada@example.org", producer="shop", groups=groups)
    assert err.value.field == "groups"
    assert drain(aws) == []


def test_groups_in_order_from_any_iterable_are_taken(aws, rt):
    rt.settings = replace(rt.settings, producer_quotas={"shops": QuotaLimits(per_minute=1)})
    email(rt, "ada@example.org", producer="shop-a", groups=(g for g in ["news", "shops"]))
    with pytest.raises(QuotaExceeded) as err:
        email(rt, "bob@example.org", producer="shop-b", groups=("shops",))
    assert err.value.details["producer"] == "group:shops"
    assert len(email(rt, "cy@example.org", producer="shop-c", groups=None)) == 1


def test_a_held_producers_email_is_told_so_and_parked(aws, rt):
    hold(rt, "shop")
    items = email(rt, "ada@example.org", producer="shop")
    assert items.held["producer"] == "shop" and "bounce rate" in items.held["reason"]
    (message,) = drain(aws)
    assert send.process_body(json.dumps(message), rt) == send.HELD
    other = email(rt, "ada@example.org", producer="news")
    assert other.held is None
    assert send.process_body(json.dumps(drain(aws)[0]), rt) == send.ACCEPTED


def test_suppressed_receivers_are_named_and_still_queued(aws, rt):
    suppression.suppress("bob@example.org", "complaint", actor="ses", text=None, runtime=rt)
    items = email(rt, "ada@example.org", "Bob@Example.org")
    assert [i.receiver for i in items] == ["ada@example.org", "Bob@Example.org"]
    assert items.suppressed == [{"receiver": "bob@example.org", "reason": "complaint",
                                 "since": "2026-01-01T00:00:00.000000Z", "list": None}]
    assert len(drain(aws)) == 2  # nothing accepted is lost
    suppression.suppress("+14155550100", "sms_opt_out", actor="twilio", text=None, runtime=rt)
    sms = vdq.add_sms("+15005550006", ["+14155550100", "+14155550101"], "Code", runtime=rt)
    assert len(sms) == 2 and [s["receiver"] for s in sms.suppressed] == ["+14155550100"]
    assert vdq.add_sms("+15005550006", "+14155550101", "Code", runtime=rt).suppressed == []


# ---- safe to repeat --------------------------------------------------------------------------


def test_a_repeat_with_its_key_returns_the_first_items_and_queues_nothing(aws, rt):
    suppression.suppress("bob@example.org", "complaint", actor="ses", text=None, runtime=rt)
    first = email(rt, "ada@example.org", "bob@example.org", idempotency_key="order-1042")
    again = email(rt, "ada@example.org", "bob@example.org", idempotency_key="order-1042")
    assert [i.id for i in again] == [i.id for i in first]
    assert [i.receiver for i in again] == ["ada@example.org", "bob@example.org"]
    assert again.suppressed == first.suppressed and len(first.suppressed) == 1
    assert len(drain(aws)) == 2  # the repeat stored and published nothing
    # Another key, or none, is another request.
    assert len(email(rt, "ada@example.org", idempotency_key="order-1043")) == 1
    assert len(drain(aws)) == 1


def test_a_repeat_with_other_groups_is_a_repeat_as_docs_sending_says(aws, rt):
    # The key compares the request, as the REST API's does (a token's groups are not part of
    # it): the repeat is charged nothing, whatever groups it names.
    rt.settings = replace(rt.settings, producer_quotas={"shops": QuotaLimits(per_minute=1)})
    first = email(rt, "ada@example.org", producer="shop", groups=["shops"],
                  idempotency_key="order-1042")  # fmt: skip
    again = email(rt, "ada@example.org", producer="shop", groups=["news"],
                  idempotency_key="order-1042")  # fmt: skip
    assert [i.id for i in again] == [i.id for i in first] and len(drain(aws)) == 1
    text = (Path(__file__).resolve().parents[2] / "docs" / "sending.md").read_text()
    assert "other arguments under the key (but `groups`" in " ".join(text.split())


def test_a_key_used_with_other_arguments_is_refused_naming_it(aws, rt):
    email(rt, "ada@example.org", idempotency_key="order-1042")
    drain(aws)
    with pytest.raises(ValidationError) as err:
        email(rt, "bob@example.org", idempotency_key="order-1042")
    # Named as the caller wrote it: the argument, not the REST API's header.
    assert err.value.field == "idempotency_key"
    assert err.value.message == "idempotency_key: was already used with different arguments"
    assert drain(aws) == []


@pytest.mark.parametrize("key", ["", " order", "order ", "ü", "k" * 256, 42])
def test_a_key_not_as_the_header_takes_it_is_refused_and_stores_nothing(aws, rt, key):
    with pytest.raises(BadRequest) as err:
        email(rt, "ada@example.org", idempotency_key=key)
    assert err.value.details == {"field": "idempotency_key"}
    assert err.value.message.startswith("idempotency_key must be 1 to 255 printable ASCII")
    assert drain(aws) == []


def test_a_key_belongs_to_its_producer(aws, rt):
    shop = email(rt, "ada@example.org", producer="shop", idempotency_key="order-1042")
    news = email(rt, "ada@example.org", producer="news", idempotency_key="order-1042")
    assert shop[0].id != news[0].id and len(drain(aws)) == 2


def test_bad_input_does_not_take_the_key(aws, rt):
    with pytest.raises(ValidationError):
        vdq.add_sms("+15005550006", "555-0101", "Code", idempotency_key="otp-7", runtime=rt)
    (item,) = vdq.add_sms("+15005550006", "+14155550100", "Code", idempotency_key="otp-7",
                          runtime=rt)  # fmt: skip
    assert [m["id"] for m in drain(aws)] == [item.id]


def test_a_repeat_of_a_partial_enqueue_raises_it_again_and_stores_nothing(aws, rt, monkeypatch):
    calls = []

    def partly(email, runtime, **kwargs):
        calls.append(email)
        raise PartiallyEnqueued("stored 1 of 2 items", details={
            "accepted": ["01KDVDNA00NG7BG17T2CA55R75"], "rejected": ["bob@example.org"]})

    monkeypatch.setattr(rest, "enqueue_email", partly)
    for _ in range(2):
        with pytest.raises(PartiallyEnqueued) as err:
            email(rt, "ada@example.org", "bob@example.org", idempotency_key="order-1044")
        assert err.value.details["rejected"] == ["bob@example.org"]
    assert len(calls) == 1


def test_a_repeat_while_the_first_runs_is_told_when_to_come_back(aws, rt, monkeypatch):
    enqueue_email, meanwhile = rest.enqueue_email, []

    def slow(*args, **kwargs):
        with pytest.raises(rest.InProgress) as err:
            email(rt, "ada@example.org", idempotency_key="order-1045")
        meanwhile.append(err.value.headers["Retry-After"])
        # Named as the caller wrote it, as the key's other refusals: not the REST API's header.
        assert err.value.message.startswith("a request with this idempotency_key is still in "
                                            "progress")  # fmt: skip
        return enqueue_email(*args, **kwargs)

    monkeypatch.setattr(rest, "enqueue_email", slow)
    first = email(rt, "ada@example.org", idempotency_key="order-1045")
    assert meanwhile == ["2"]
    again = email(rt, "ada@example.org", idempotency_key="order-1045")
    assert [i.id for i in again] == [i.id for i in first]


class Killed(BaseException):
    """A producer's process stopped mid-request: no except clause runs."""


def test_a_key_a_dead_process_left_in_progress_frees_in_minutes_not_a_day(aws, rt, monkeypatch):
    # Outside the enqueue function no Lambda context tells the key's record a deadline: without
    # one it answered "in progress" to every repeat for VDQ_IDEMPOTENCY_SECONDS (24 h).
    rest.idempotency_config.cache_clear()
    rest._idempotent.cache_clear()

    def killed(*args, **kwargs):
        raise Killed

    with monkeypatch.context() as patch, pytest.raises(Killed):
        patch.setattr(rest, "enqueue_email", killed)
        email(rt, "ada@example.org", idempotency_key="order-1046")
    [record] = [r for r in boto3.client("dynamodb").scan(TableName=aws["table"])["Items"]
                if r["pk"]["S"].startswith("idempotency#")]  # fmt: skip
    assert record["status"]["S"] == "INPROGRESS"
    left = int(record["in_progress_expiration"]["N"]) / 1000 - time.time()
    assert 0 < left <= PENDING_SECONDS
    rest.idempotency_config.cache_clear()
    rest._idempotent.cache_clear()


def test_the_sending_pages_python_example_runs_as_pasted(aws, rt, clock, capsys):
    """The example of docs/sending.md, run as a newcomer pastes it (with the deployment's
    runtime as the default one): it queues what it says."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "sending.md").read_text()
    [example] = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "vdq.add_" in b]
    clock.advance((datetime(2026, 12, 20, tzinfo=UTC) - clock.now()).total_seconds())
    exec(compile(example, "docs/sending.md", "exec"), {})
    assert "[]" in capsys.readouterr().out  # nothing suppressed
    messages = drain(aws) + drain(aws, resources.SEND_QUEUES["high"])
    queued = {m["id"] for m in messages}
    assert len(queued) == 4  # the newsletter waits for its send_at
    # The MMS of a picture alone: no body.
    sms = [m["content"] for m in messages if "media_urls" in m["content"]]
    assert [c["media_urls"] for c in sms if c["body"] is None] == [
        ["https://cdn.example.com/map.png"]]
    producers = {rt.store.get_item(i).created_by for i in queued}
    assert producers == {"shop-service", "auth-service"}
