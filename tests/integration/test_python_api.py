"""The Python API as a producer's door, against moto: its requests name their producer and meet
the REST API's rules (quota, reputation guard, suppression flags) through the same enqueue."""

from __future__ import annotations

import json
from dataclasses import replace

import boto3
import pytest

import vdq
from tests.support.aws import drain
from vdq import python_api
from vdq.api import Caller
from vdq.core.errors import ValidationError
from vdq.core.settings import QuotaLimits
from vdq.dispatch import send
from vdq.intake import rest
from vdq.intake.quotas import OverQuota, QuotaExceeded
from vdq.results import guard, judging, suppression
from vdq.store.postings import Tallies

SENDER = "shop@example.com"
SENDERS = ("vdq.add_queueitem",)


@pytest.fixture
def rt(aws, runtime):
    boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
    runtime.settings = replace(runtime.settings, reputation_min_sent=10)
    guard._cache.clear()
    yield runtime
    guard._cache.clear()


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
