"""Producer quotas through the enqueue and operator handlers, against moto (fake clock)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from functions.enqueue import handler as enqueue_handler

from tests.support.aws import drain
from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from tests.support.operator import call
from vdq.core.settings import QuotaLimits

CLIENT = "7d8c2f10-1b2a-4c5d-9e8f-0a1b2c3d4e5f"  # the sample events' subject


def post(name, receivers, groups=("vdq-senders",)):
    body = json.loads(api_event(name)["body"])
    if name == "apigw_post_emails":
        body.pop("cc", None)
        body["to"] = [{"email": f"r{i}@example.org"} for i in range(receivers)]
    else:
        body["to"] = [{"cell": f"+1415555{i:04d}"} for i in range(receivers)]
    event = api_event(name, body=body, groups=list(groups))
    answer = enqueue_handler.handler(event, LambdaContext())
    return answer["statusCode"], answer["headers"], json.loads(answer["body"])


@pytest.fixture
def quotas(aws, runtime):
    def set_quotas(table):
        runtime.settings = replace(runtime.settings, producer_quotas=table)

    return set_quotas


def test_a_request_over_the_minute_limit_is_a_429_naming_it_and_stores_nothing(
        aws, runtime, clock, quotas):  # fmt: skip
    quotas({CLIENT: QuotaLimits(per_minute=5)})
    status, _, body = post("apigw_post_emails", 3)
    assert status == 201 and len(body["items"]) == 3
    assert len(drain(aws)) == 3
    status, headers, body = post("apigw_post_emails", 3)  # 3 + 3 > 5: refused whole
    assert status == 429
    assert body["error"]["code"] == "quota_exceeded"
    assert "per_minute" in body["error"]["message"] and "5" in body["error"]["message"]
    assert body["error"]["details"] == {"producer": CLIENT, "limit": "per_minute", "quota": 5,
                                        "used": 3, "requested": 3,
                                        "retry_after": int(headers["Retry-After"])}  # fmt: skip
    assert 1 <= int(headers["Retry-After"]) <= 60
    assert drain(aws) == []  # nothing published, nothing stored
    assert call("producer_usage", params={"producer": CLIENT}).body["limits"][0]["used"] == 3
    status, _, _ = post("apigw_post_emails", 2)  # what is left of the minute fits
    assert status == 201
    clock.advance(60)  # a new minute
    status, _, _ = post("apigw_post_sms", 5)
    assert status == 201


def test_the_day_limit_counts_every_receiver_and_names_the_day(aws, runtime, clock, quotas):
    quotas({"*": QuotaLimits(per_second=100, per_day=4)})
    assert post("apigw_post_sms", 4)[0] == 201
    clock.advance(3600)
    status, headers, body = post("apigw_post_sms", 1)
    assert status == 429 and body["error"]["details"]["limit"] == "per_day"
    assert "a day (UTC)" in body["error"]["message"]
    # Until midnight UTC, never more than a day.
    assert 1 <= int(headers["Retry-After"]) <= 86_400


def test_a_request_larger_than_the_limit_is_a_422_saying_to_split_it(aws, runtime, quotas):
    """Found in use: it was a 429 with a Retry-After, which a client that honours it obeys for
    ever: no wait makes three receivers fit a limit of two a second."""
    quotas({CLIENT: QuotaLimits(per_second=2)})
    for name in ("apigw_post_emails", "apigw_post_sms"):
        status, headers, body = post(name, 3)
        assert status == 422 and "split the request" in body["error"]["message"], body
        assert "Retry-After" not in headers
        assert body["error"]["code"] == "invalid" and body["error"]["details"] == {
            "field": "to", "producer": CLIENT, "limit": "per_second", "quota": 2,
            "requested": 3}
    assert post("apigw_post_emails", 2)[0] == 201, "nothing was counted for the refusals"


def test_a_group_quota_is_shared_by_its_members_and_operators_read_it(aws, runtime, quotas):
    quotas({"vdq-bulk": QuotaLimits(per_minute=4)})
    assert post("apigw_post_emails", 4, groups=("vdq-senders", "vdq-bulk"))[0] == 201
    assert post("apigw_post_emails", 1, groups=("vdq-senders", "vdq-bulk"))[0] == 429
    assert post("apigw_post_emails", 1, groups=("vdq-senders",))[0] == 201  # no quota applies
    answer = call("producer_usage", params={"producer": "group:vdq-bulk"})
    assert answer.status == 200
    [minute] = answer.body["limits"]
    assert (minute["limit"], minute["quota"], minute["used"], minute["remaining"]) == (
        "per_minute", 4, 4, 0)
    assert call("producer_usage", params={"producer": "someone-else"}).status == 404
    assert call("producer_usage", params={"producer": "group:vdq-bulk"},
                groups=("vdq-senders",)).status == 403  # fmt: skip


def test_without_quotas_nothing_is_counted(aws, runtime):
    assert post("apigw_post_emails", 3)[0] == 201
    assert call("producer_usage", params={"producer": CLIENT}).status == 404


def upload(groups=("vdq-senders",)):
    event = api_event("apigw_post_attachment_upload", groups=list(groups))
    answer = enqueue_handler.handler(event, LambdaContext())
    return answer["statusCode"], json.loads(answer["body"])


def test_an_upload_counts_one_against_the_callers_quota(aws, runtime, quotas):
    # An upload is a request that makes S3 take a file: it counts as one queue item, so a
    # producer over its quota cannot go on filling the bucket.
    quotas({CLIENT: QuotaLimits(per_minute=3)})
    assert upload()[0] == 201
    assert post("apigw_post_emails", 2)[0] == 201
    status, body = upload()
    assert status == 429 and body["error"]["code"] == "quota_exceeded"
    assert (body["error"]["details"]["used"], body["error"]["details"]["requested"]) == (3, 1)


def test_a_resend_counts_its_copies_against_the_operators_quota(aws, runtime, quotas):
    from tests.support.operator import email, succeed

    originals = email(runtime, "a@example.org", "b@example.org", "c@example.org")
    for item in originals:
        succeed(runtime, item.id)
    drain(aws)
    quotas({"vdq-operators": QuotaLimits(per_minute=2)})
    first = call("bulk_resend", body={"ids": [originals[0].id, originals[1].id]})
    assert first.status == 201 and len(first.body["items"]) == 2
    again = call("resend", params={"id": originals[2].id})
    assert again.status == 429 and again.code == "quota_exceeded"
    assert again.body["error"]["details"]["producer"] == "group:vdq-operators"
    # As every quota's 429 says when to try again: in the header a client's back-off reads.
    assert again.headers["Retry-After"] == str(again.body["error"]["details"]["retry_after"])
    assert len(drain(aws)) == 2  # the refused copy was neither stored nor sent
    usage = call("producer_usage", params={"producer": "group:vdq-operators"})
    assert usage.body["limits"][0]["used"] == 2
    # More copies than the limit ever takes: a 422 naming the ids, not a wait.
    never = call("bulk_resend", body={"ids": [o.id for o in originals]})
    assert never.status == 422 and never.body["error"]["details"]["field"] == "ids", never.body
    from vdq.openapi import build

    [op] = [o for path in build()["paths"].values() for o in path.values()
            if isinstance(o, dict) and o.get("operationId") == "resendSentItems"]  # fmt: skip
    assert "details.field `ids`" in op["responses"]["422"]["description"], "documented"


def test_a_refused_resend_takes_its_charge_back(aws, runtime, quotas):
    from tests.support.operator import email, succeed

    [original] = email(runtime, "a@example.org")
    succeed(runtime, original.id)
    quotas({"vdq-operators": QuotaLimits(per_minute=5)})
    # Unknown ids: a 404, nothing stored, nothing counted.
    assert call("bulk_resend", body={"ids": [original.id, "01JD3Q5W0K8Y2C6N4F7R9T1VXB"]}
                ).status == 404  # fmt: skip
    usage = call("producer_usage", params={"producer": "group:vdq-operators"})
    assert usage.body["limits"][0]["used"] == 0


def test_a_clients_usage_shows_the_group_counters_its_requests_are_charged_to(
        aws, runtime, quotas):  # fmt: skip
    quotas({"vdq-bulk": QuotaLimits(per_minute=4), "*": QuotaLimits(per_minute=100)})
    assert post("apigw_post_emails", 3, groups=("vdq-senders", "vdq-bulk"))[0] == 201
    answer = call("producer_usage", params={"producer": CLIENT})
    assert answer.status == 200
    assert answer.body["producer"] == CLIENT and answer.body["counters"] == "group:vdq-bulk"
    [minute] = answer.body["limits"]
    assert (minute["quota"], minute["used"], minute["remaining"]) == (4, 3, 1)
    # Without a default, the same: its group's quota applies to it.
    quotas({"vdq-bulk": QuotaLimits(per_minute=4)})
    assert call("producer_usage", params={"producer": CLIENT}).body["counters"] == \
        "group:vdq-bulk"  # fmt: skip
    # A client of its own is shown with its own counters.
    quotas({CLIENT: QuotaLimits(per_minute=9), "vdq-bulk": QuotaLimits(per_minute=4)})
    own = call("producer_usage", params={"producer": CLIENT}).body
    assert own["counters"] == CLIENT and own["limits"][0]["quota"] == 9


def test_a_producers_usage_is_found_by_its_name_as_a_client_encodes_it(aws, runtime, quotas):
    # API Gateway passes a path segment undecoded: a client sends a name's + and = (and may
    # send its : and @) percent-encoded.
    name = "svc+mail=1@example.org"
    quotas({name: QuotaLimits(per_minute=5)})
    answer = call("producer_usage", params={"producer": "svc%2Bmail%3D1%40example.org"})
    assert answer.status == 200 and answer.body["producer"] == name


@pytest.mark.parametrize("to,cc,bcc,field", [(3, 0, 0, "to"), (1, 2, 0, "cc"), (1, 0, 2, "bcc"),
                                             (1, 1, 1, "bcc"), (2, 1, 0, "cc")])
def test_a_request_larger_than_the_limit_names_the_list_whose_receivers_pass_it(
        aws, runtime, quotas, to, cc, bcc, field):  # fmt: skip
    """Found in use: the 422 named `to` for a message of one `to` and two `cc`, so the
    producer looked for a problem in a list of one. It names the list at which the count of
    distinct receivers, to then cc then bcc, passes the limit."""
    quotas({CLIENT: QuotaLimits(per_minute=2)})
    body = json.loads(api_event("apigw_post_emails")["body"])
    n = iter(range(10))
    for name, count in (("to", to), ("cc", cc), ("bcc", bcc)):
        body[name] = [{"email": f"r{next(n)}@example.org"} for _ in range(count)]
    answer = enqueue_handler.handler(api_event("apigw_post_emails", body=body), LambdaContext())
    error = json.loads(answer["body"])["error"]
    assert answer["statusCode"] == 422 and error["details"]["field"] == field, error
    assert "its limit per_minute of 2 queue items a minute" in error["message"], error
