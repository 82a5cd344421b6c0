"""Query strings are validated against the operation table, with defaults and bounds."""

from __future__ import annotations

import re

import pytest

from vdq.core.errors import ValidationError
from vdq.operations import params, spec


def test_defaults_apply_when_a_parameter_is_absent():
    assert params.query("listQueueItems", None) == {
        "method": None, "state": None, "priority": None, "scheduled": None,
        "limit": spec.DEFAULT_LIMIT, "cursor": None
    }  # fmt: skip
    assert params.query("runTransition", {"dry_run": "true"}) == {"dry_run": True}


@pytest.mark.parametrize(
    "raw,field",
    [
        ({"limit": "0"}, "limit"),
        ({"limit": str(spec.MAX_LIMIT + 1)}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"method": "fax"}, "method"),
        ({"state": "succeeded"}, "state"),  # a done state is not in the active list
        ({"sort": "desc"}, "sort"),
    ],
)
def test_bad_query_values_name_the_parameter(raw, field):
    with pytest.raises(ValidationError) as err:
        params.query("listQueueItems", raw)
    assert err.value.field == field and err.value.status == 422


@pytest.mark.parametrize("limit", ["1_0", "\u0665", "\uff15", " 5", "5 ", "+5", "5.0", "1e2",
                                   "9" * 5000, "-1", ""])
def test_a_limit_is_ascii_digits_as_the_contract_says_not_whatever_int_reads(limit):
    """int() reads "1_0" as 10 and Arabic-Indic or full-width digits as numbers; the contract
    says an integer, and a client that sent one of these has a bug to learn about."""
    for operation in ("listQueueItems", "getItemHistory"):
        with pytest.raises(ValidationError) as err:
            params.query(operation, {"limit": limit})
        assert err.value.field == "limit" and err.value.status == 422
    assert params.query("getItemHistory", {"limit": "05"})["limit"] == 5


@pytest.mark.parametrize("every", [{"state": ["queued", "delayed"]},
                                   {"state": ["queued", "queued"]},
                                   {"limit": ["5"], "state": ["queued", "delayed"]}])
def test_a_parameter_given_more_than_once_is_refused_naming_it(every):
    last = {name: values[-1] for name, values in every.items()}  # as API Gateway passes them
    with pytest.raises(ValidationError) as err:
        params.query("listQueueItems", last, every)
    assert err.value.field == "state" and err.value.status == 422
    assert params.query("listQueueItems", {"state": "queued"}, {"state": ["queued"]})[
        "state"] == "queued"


def test_the_sent_list_takes_only_done_states():
    assert params.query("listSentItems", {"state": "cancelled"})["state"] == "cancelled"
    with pytest.raises(ValidationError):
        params.query("listSentItems", {"state": "queued"})


def test_every_operation_of_the_contract_is_listed_once():
    paths = {(op.method, op.path) for op in spec.OPERATIONS}
    assert len(paths) == len(spec.OPERATIONS) == len(spec.BY_ID)
    assert {("POST", "/emails"), ("POST", "/sms"), ("POST", "/twilio/status-callback"),
            ("GET", "/health"), ("GET", "/openapi.json")} <= paths  # fmt: skip


def test_the_published_time_pattern_takes_every_calendar_day_the_server_takes():
    """A client that checks its values against the document (a generated client does) must be
    able to ask for the 31st of a month and a leap day: the pattern once stopped at the 28th."""
    import re
    from datetime import date, timedelta

    from vdq.operations import search

    day = date(1980, 1, 1)
    while day.year < 3000:
        assert re.fullmatch(spec.TIME_PATTERN, day.isoformat()), day
        day += timedelta(days=1)
    for refused in ("2026-02-29", "2100-02-29", "2026-04-31", "2026-13-01", "2026-00-10"):
        assert not re.fullmatch(spec.TIME_PATTERN, refused), refused
    for value in ("2026-12-31", "2028-02-29", "2000-02-29", "2026-01-31T23:59:59.5-13:00",
                  "2999-12-31T00:00:00Z"):  # fmt: skip
        assert re.fullmatch(spec.TIME_PATTERN, value)
        search.parse_time(value, "since")


@pytest.mark.parametrize("address", ["first.middle.last@example.org", "o'brien@example.ie",
                                     "ada@shop.photography", "ada@xn--80ak6aa92e.xn--p1ai",
                                     "ada@mail.eu.corp.example.com", "+447700900123"])
def test_the_published_receiver_pattern_takes_the_addresses_people_have(address):
    """Suppressions are added, listed and removed by receiver, and a generated client checks
    the receiver against the document first: it once refused an address of two dots."""
    import re

    from vdq.operations import suppressions

    assert re.fullmatch(spec.RECEIVER_PATTERN, address)
    assert suppressions.receiver(address) == address.lower()


def test_every_receiver_the_published_pattern_takes_the_server_takes():
    import re

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from vdq.operations import suppressions

    @settings(max_examples=400, deadline=None)
    @given(st.from_regex(spec.RECEIVER_PATTERN, fullmatch=True))
    def accepted(value: str) -> None:
        assert len(value) <= 254
        assert suppressions.receiver(value) and suppressions.typed_receiver(value, "receiver")

    accepted()
    assert not re.fullmatch(spec.RECEIVER_PATTERN, "ada@x.123")


def test_the_status_callback_declares_each_query_parameter_the_worker_puts_in_its_url():
    # Whoever routes Twilio's callbacks (a proxy, a custom domain) keeps what the contract
    # names: the attempt a status belongs to is in the signed URL beside the queue item.
    from urllib.parse import parse_qsl, urlsplit

    from vdq.dispatch.outbound import status_callback_url

    url = status_callback_url("https://sms.example.com/twilio/status-callback",
                              "01JD3Q4P8S2V6X0Z4C8G2K6N0R", 2)  # fmt: skip
    declared = {p.name: p for p in spec.BY_ID["twilioStatusCallback"].params
                if p.where == "query"}  # fmt: skip
    given = dict(parse_qsl(urlsplit(url).query))
    assert set(given) == set(declared)
    for name, value in given.items():
        assert declared[name].pattern is not None
        assert re.fullmatch(declared[name].pattern, value), name
