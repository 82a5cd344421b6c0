"""GET /search and GET /stats on moto through the operator function: each key served by an
index or a key read (never a Scan), newest first, paged by cursor, bounded per request, and a
422 naming the field for bad input."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import vdq
from tests.support.operator import call, dynamodb_requests, email, move, sms, succeed
from tests.support.stream import Stream
from vdq.core import ids
from vdq.operations import search

EVENTS = Path(__file__).resolve().parents[2] / "events"


def ids_of(answer):
    assert answer.status == 200, answer.body
    return [i["id"] for i in answer.body["items"]]


def pages(query, limit):
    seen, cursor, n = [], None, 0
    while True:
        answer = call("search", query={**query, "limit": str(limit),
                                       **({"cursor": cursor} if cursor else {})})  # fmt: skip
        seen += ids_of(answer)
        cursor, n = answer.body["cursor"], n + 1
        if cursor is None:
            return seen, n
        assert n < 50


def test_a_receiver_finds_its_active_and_sent_items_newest_first_in_any_case(aws, runtime,
                                                                             clock):  # fmt: skip
    mine = []
    for n in range(5):
        [item] = email(runtime, "Ada.Lovelace@Example.org" if n % 2 else "ada.lovelace@example.org")
        mine.append(item)
        clock.advance(1)
    email(runtime, "grace@example.org")
    succeed(runtime, mine[0].id)
    move(runtime, mine[1].id, "send", "error")
    found = ids_of(call("search", query={"receiver": "ADA.LOVELACE@example.ORG"}))
    assert found == [i.id for i in reversed(mine)]  # newest first, done and active alike
    states = Counter(i["state"] for i in call("search", query={
        "receiver": "ada.lovelace@example.org"}).body["items"])
    assert states == {"queued": 3, "succeeded": 1, "errored": 1}
    assert ids_of(call("search", query={"receiver": "ada.lovelace@example.org",
                                        "state": "succeeded"})) == [mine[0].id]  # fmt: skip


def test_a_receiver_pages_through_more_than_one_page_without_loss_or_repeat(aws, runtime, clock):
    items = []
    for _ in range(7):
        items += sms(runtime, "+14155550100")
        clock.advance(0.5)
    got, n = pages({"receiver": "+14155550100"}, 3)
    assert got == [i.id for i in reversed(items)] and n == 3


def test_a_receiver_search_is_one_index_query_and_one_batch_read(aws, runtime, monkeypatch):
    email(runtime, "ada@example.org")
    with dynamodb_requests(monkeypatch) as counts:
        assert len(ids_of(call("search", query={"receiver": "ada@example.org"}))) == 1
    assert counts == {"Query": 1, "BatchGetItem": 1}


def test_an_origin_finds_the_items_of_every_request_that_named_it(aws, runtime, clock):
    first = email(runtime, "a@example.org", "b@example.org")  # one request, two receivers
    clock.advance(1)
    vdq.add_sms("+15005550006", ["+14155550101"], "hi", origin=("shop.order", "8"),
                runtime=runtime)  # another origin
    second = email(runtime, "c@example.org")
    wanted = [second[0].id, *sorted((i.id for i in first), reverse=True)]
    got, n = pages({"origin_type": "shop.order", "origin_id": "7"}, 2)
    assert got == wanted and n == 2
    assert ids_of(call("search", query={"origin_type": "shop.order", "origin_id": "8"})) != []


def test_an_origin_of_the_longest_type_and_id_pages_by_its_cursor(aws, runtime, clock):
    # Each part may take 256 characters, any of them outside ASCII: the search's cursor must
    # still fit the 2,048 characters a cursor may take, or the origin's second page is a 422.
    origin = ("é" * 256, "\U0001f4e6" * 256)
    items = []
    for n in range(3):
        items += vdq.add_email("shop@example.com", [f"r{n}@example.org"], "Hi", "Text",
                               origin=origin, runtime=runtime)  # fmt: skip
        clock.advance(1)
    got, n = pages({"origin_type": origin[0], "origin_id": origin[1]}, 1)
    assert got == [i.id for i in reversed(items)] and n == 3


def test_a_provider_id_is_found_by_its_mapping_or_by_the_postings(aws, runtime):
    [text] = sms(runtime)
    move(runtime, text.id, "send")
    move(runtime, text.id, "await", provider_id="SM" + "1" * 32)
    assert ids_of(call("search", query={"provider_id": "SM" + "1" * 32})) == [text.id]
    # A tagged email's ID has no mapping (its events name the item): the postings find it.
    [mail] = email(runtime, "ada@example.org")
    move(runtime, mail.id, "send")
    move(runtime, mail.id, "await", provider_id="0100019a-test-1", map_provider_id=False)
    assert runtime.store.find_by_provider_id("0100019a-test-1") is None
    assert ids_of(call("search", query={"provider_id": "0100019a-test-1"})) == []  # not yet
    Stream(aws["table"]).window()
    assert ids_of(call("search", query={"provider_id": "0100019a-test-1"})) == [mail.id]
    assert ids_of(call("search", query={"provider_id": "0100019a-other"})) == []


def test_a_provider_id_pasted_with_spaces_or_in_other_case_finds_its_item(aws, runtime):
    # Copied from a log line or a provider's console: a line end comes along, or the hex is
    # upper-cased. Twilio's SIDs and SES's IDs are written in lower-case hex.
    [text] = sms(runtime)
    move(runtime, text.id, "send")
    sid = "SM" + "ab" * 16
    move(runtime, text.id, "await", provider_id=sid)
    for typed in (f" {sid}", f"{sid}\n", sid.upper(), sid.lower()):
        assert ids_of(call("search", query={"provider_id": typed})) == [text.id], typed
    ses = "0100019a2b3c4d5e-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d-000000"
    [mail] = email(runtime, "ada@example.org")
    move(runtime, mail.id, "send")
    move(runtime, mail.id, "await", provider_id=ses)
    assert ids_of(call("search", query={"provider_id": f"{ses.upper()} "})) == [mail.id]


def test_a_sender_and_a_time_window_read_the_postings_of_the_window(aws, runtime, clock):
    early = email(runtime, "a@example.org")
    clock.advance(3600)
    middle = vdq.add_sms("+15005550006", ["+14155550101"], "hi", runtime=runtime)
    clock.advance(3600)
    late = email(runtime, "b@example.org")
    assert ids_of(call("search", query={"sender": "Shop@Example.com"})) == []  # not posted yet
    Stream(aws["table"]).window()
    assert ids_of(call("search", query={"sender": "Shop@Example.com"})) == [late[0].id,
                                                                          early[0].id]
    start = early[0].queued_at[:19] + "Z"
    assert ids_of(call("search", query={"since": start})) == [
        late[0].id, middle[0].id, early[0].id]
    assert ids_of(call("search", query={"since": start, "method": "sms"})) == [middle[0].id]
    until = middle[0].queued_at[:19] + "Z"
    assert ids_of(call("search", query={"since": start, "until": until})) == [
        middle[0].id, early[0].id]
    assert ids_of(call("search", query={"receiver": "b@example.org", "until": until})) == []
    # RFC 3339 lets the T and the Z be written in lower case (as send_at takes them).
    lower = {"since": start.replace("T", "t").lower(), "until": until.replace("T", "t").lower()}
    assert ids_of(call("search", query=lower)) == [middle[0].id, early[0].id]


def test_a_time_with_nanoseconds_or_surrounding_spaces_is_read_as_send_at_reads_it(aws, runtime):
    # RFC 3339 takes any number of fraction digits (Go and `date --rfc-3339=ns` write nine).
    [item] = email(runtime, "ada@example.org")
    start = item.queued_at[:19]
    for since in (f"{start}.000000000Z", f" {start}Z ", f"{start}.0000001+00:00"):
        assert ids_of(call("search", query={"since": since})) == [], since  # not posted yet
        assert ids_of(call("search", query={"receiver": "ada@example.org",
                                            "since": since})) == [item.id], since  # fmt: skip
    later = f"{start}.999999999Z"
    assert ids_of(call("search", query={"receiver": "ada@example.org", "since": later})) == []


def test_an_offset_whose_plus_a_query_string_decoded_is_a_422_saying_how_to_write_it(aws,
                                                                                     runtime):
    answer = call("search", query={"since": "2026-12-07T09:00:00 02:00"})
    assert answer.status == 422 and answer.body["error"]["details"]["field"] == "since"
    assert "%2B" in answer.body["error"]["message"]


@pytest.mark.parametrize("typed", ["MG" + "ab" * 16, " mg" + "ab" * 16, "MG" + "AB" * 16])
def test_a_messaging_service_sender_is_found_in_any_case(aws, runtime, typed):
    # A SID is copied from Twilio's console or a config file, its hex in either case.
    [text] = vdq.add_sms("MG" + "ab" * 16, ["+14155550100"], "hi", runtime=runtime)
    Stream(aws["table"]).window()
    assert ids_of(call("search", query={"sender": typed})) == [text.id]


def test_an_id_is_a_search_of_one(aws, runtime):
    [item] = email(runtime, "ada@example.org")
    assert ids_of(call("search", query={"id": item.id})) == [item.id]
    assert ids_of(call("search", query={"id": "0" * 26})) == []


def test_an_id_typed_in_lower_case_or_with_spaces_is_found(aws, runtime):
    [item] = email(runtime, "ada@example.org")
    for typed in (item.id.lower(), f" {item.id} ", f"{item.id.lower()}\n"):
        assert ids_of(call("search", query={"id": typed})) == [item.id], typed


def test_work_is_bounded_and_a_page_may_come_back_short_with_a_cursor(aws, runtime, clock,
                                                                     monkeypatch):  # fmt: skip
    for _ in range(12):
        email(runtime, "ada@example.org")
        clock.advance(0.1)
    monkeypatch.setattr(search, "MAX_ROUNDS", 2)
    with dynamodb_requests(monkeypatch) as counts:
        answer = call("search", query={"receiver": "ada@example.org", "state": "succeeded",
                                       "limit": "3"})  # fmt: skip
    assert ids_of(answer) == [] and answer.body["cursor"] is not None
    assert counts == {"Query": 2, "BatchGetItem": 2}


@pytest.mark.parametrize(("query", "field"), [
    ({}, "since"),
    ({"receiver": "not an address"}, "receiver"),
    ({"receiver": "ada@example.org", "sender": "shop@example.com"}, "sender"),
    ({"origin_type": "shop.order"}, "origin_id"),
    ({"origin_id": "7"}, "origin_type"),
    ({"id": "nope"}, "id"),
    ({"since": "yesterday"}, "since"),
    ({"since": "2026-12-03T08:00:00"}, "since"),  # no offset
    ({"since": "2026-12-05", "until": "2026-12-01"}, "until"),
    ({"receiver": "ada@example.org", "state": "lost"}, "state"),
    ({"receiver": "ada@example.org", "limit": "0"}, "limit"),
    ({"receiver": "ada@example.org", "colour": "red"}, "colour"),
    ({"provider_id": "x" * 300}, "provider_id"),
    # Times no item can have been queued at (an id holds 1970 to the year 10889), and some
    # that datetime cannot even take to UTC.
    ({"receiver": "ada@example.org", "since": "1960-01-01"}, "since"),
    ({"since": "0001-01-01T00:00:00+01:00"}, "since"),
    ({"since": "2026-12-01", "until": "9999-12-31T23:59:59-12:00"}, "until"),
    ({"origin_type": "shop.order", "origin_id": "7", "until": "1969-12-31T23:59:59Z"},
     "until"),
])  # fmt: skip
def test_bad_input_is_a_422_naming_the_field(aws, runtime, query, field):
    answer = call("search", query=query)
    assert answer.status == 422, answer.body
    assert answer.body["error"]["details"]["field"] == field


def test_a_cursor_of_another_search_is_a_400(aws, runtime, clock):
    for _ in range(3):
        email(runtime, "ada@example.org")
        clock.advance(1)
    cursor = call("search", query={"receiver": "ada@example.org", "limit": "1"}).body["cursor"]
    answer = call("search", query={"receiver": "grace@example.org", "cursor": cursor})
    assert answer.status == 400 and answer.body["error"]["details"]["field"] == "cursor"


def test_searching_and_counting_need_the_list_permission(aws, runtime):
    email(runtime, "ada@example.org")
    for name, query in (("search", {"receiver": "ada@example.org"}), ("stats", {})):
        answer = call(name, query=query, groups=["vdq-senders"])
        assert answer.status == 403 and answer.code == "forbidden"
        assert call(name, query=query, groups=["vdq-viewers"]).status == 200


def test_stats_count_each_hour_and_each_day_with_a_reputation_breakdown(aws, runtime, clock):
    [a, b] = email(runtime, "a@example.org", "b@example.org")
    succeed(runtime, a.id)
    move(runtime, b.id, "send", "error")
    clock.advance(3 * 3600)
    sms(runtime)
    Stream(aws["table"]).window()
    hours = call("stats", query={}).body
    assert len(hours["buckets"]) == 24 and hours["lag_seconds"] == 70
    assert hours["totals"]["email"]["queued"] == 2 and hours["totals"]["sms"]["queued"] == 1
    assert hours["totals"]["email"]["delivered"] == 1
    assert hours["totals"]["email"]["errored"] == 1
    by_hour = [b["email"]["queued"] for b in hours["buckets"]]
    assert by_hour[-4] == 2 and by_hour[-1] == 0  # three hours ago, none since
    days = call("stats", query={"period": "days", "method": "sms"}).body
    assert len(days["buckets"]) == 30 and "email" not in days["totals"]
    assert days["buckets"][-1]["sms"]["queued"] == 1
    rep = call("stats", query={"breakdown": "identity"}).body["breakdown"]
    assert rep == [{"name": "shop@example.com", "sent": 0, "delivered": 1, "bounced": 0,
                    "complained": 0, "rejected": 0}]  # the SMS sender has nothing to tell yet
    answer = call("stats", query={"period": "days", "breakdown": "producer"})
    assert answer.status == 422 and answer.body["error"]["details"]["field"] == "breakdown"


def test_a_count_is_of_entries_into_a_state_so_a_retried_item_counts_twice(aws, runtime):
    # As the documents say: the errored list shows the item once, its count is two.
    [item] = sms(runtime)
    move(runtime, item.id, "send", "error")
    assert call("transition", params={"id": item.id, "name": "retry"}, query={}).status == 200
    move(runtime, item.id, "send", "error")
    Stream(aws["table"]).window()
    totals = call("stats", query={}).body["totals"]["sms"]
    assert totals["queued"] == 1 and totals["errored"] == 2
    listed = call("list_queue_items", query={"state": "errored"}).body["items"]
    assert [i["id"] for i in listed] == [item.id]


@pytest.mark.parametrize("unread", [2, 1000])
def test_counters_dynamodb_leaves_unread_are_asked_again_never_read_as_zero(aws, runtime,
                                                                           monkeypatch, unread):
    # Under throttling BatchGetItem answers some keys as UnprocessedKeys; a counter record
    # missing from the sum would show an hour with nothing in it. Asked again with back-off;
    # one DynamoDB keeps leaving unread is a 503, never a count of 0.
    import boto3

    from vdq.store import tx

    email(runtime, "a@example.org")
    Stream(aws["table"]).window()
    client = boto3.client("dynamodb")
    monkeypatch.setattr(tx.time, "sleep", lambda s: None)
    left = {"n": unread}

    def leave_unread(params, **_):
        if left["n"] > 0:
            left["n"] -= 1
            (table, request), = params["RequestItems"].items()
            params["RequestItems"] = {table: {**request, "Keys": request["Keys"][:1]}}
            leave_unread.rest = {table: {**request, "Keys": request["Keys"][1:]}}

    def answer_unread(parsed, **_):
        if getattr(leave_unread, "rest", None):
            parsed["UnprocessedKeys"], leave_unread.rest = leave_unread.rest, None

    client.meta.events.register("provide-client-params.dynamodb.BatchGetItem", leave_unread)
    client.meta.events.register("after-call.dynamodb.BatchGetItem", answer_unread)
    monkeypatch.setattr(runtime, "client", lambda name: client if name == "dynamodb" else
                        boto3.client(name))  # fmt: skip
    answer = call("stats", query={})
    if unread > 100:
        assert answer.status == 503 and answer.body["error"]["code"] == "contention"
    else:
        assert answer.status == 200 and answer.body["totals"]["email"]["queued"] == 1


@pytest.mark.parametrize("conflicts", [0, 2])
def test_items_queued_before_the_receiver_index_are_found_after_the_backfill(aws, runtime,
                                                                            monkeypatch,
                                                                            conflicts):
    # ``conflicts``: the backfill runs beside live traffic, and DynamoDB refuses its write of
    # an item that is in a transaction's write meanwhile; it tries again.
    import boto3

    from tests.support.aws import conflicting
    from vdq.results.suppression import normalize
    from vdq.store.search import backfill

    [old] = email(runtime, "Ada@Example.org")
    client = boto3.client("dynamodb")
    key = {"pk": {"S": f"QI#{old.id}"}, "sk": {"S": "STATE"}}
    client.update_item(TableName=aws["table"], Key=key, UpdateExpression="REMOVE rx")
    assert ids_of(call("search", query={"receiver": "ada@example.org"})) == []  # as written
    left = conflicting(client, "UpdateItem", conflicts, monkeypatch)
    assert sum(backfill(client, aws["table"], normalize, page=1)) == 1
    assert left["n"] == 0
    assert ids_of(call("search", query={"receiver": "ada@example.org"})) == [old.id]
    assert sum(backfill(client, aws["table"], normalize)) == 0  # run again: nothing to do


@pytest.mark.parametrize("query", [
    {"receiver": "ada@example.org"},
    {"origin_type": "shop.order", "origin_id": "7"},
    {"sender": "shop@example.com"},
    {"since": "2026-12-01"},
])  # fmt: skip
@pytest.mark.parametrize("position", ["!", "zz:zz", "01KDVDNA00W0K7FSHK3EK68SE2:x", ":", "ÄÖ"])
def test_a_cursor_signed_but_not_one_the_search_wrote_is_a_400(aws, runtime, query, position):
    # The cursor's key derives from the table's name (an integrity check, not a secret): a
    # caller who knows it can sign any position, which must never reach a read.
    from vdq.operations import cursor as cursors

    email(runtime, "ada@example.org")
    key = search.parse(dict(query), runtime.clock.now()).key()
    forged = cursors.encode([position], key, aws["table"])
    answer = call("search", query={**query, "cursor": forged})
    assert answer.status == 400, answer.body
    assert answer.body["error"]["details"]["field"] == "cursor"


@pytest.mark.parametrize("typed", ["+1 415 555 0100", "+1 (415) 555-0100", "+1.415.555.0100",
                                   "+1\u00a0415\u00a0555\u00a00100"])  # copied from a page
def test_a_number_typed_with_spaces_or_dashes_finds_its_items(aws, runtime, typed):
    # Numbers are stored in E.164; people type them as they are printed.
    [text] = sms(runtime, "+14155550100")
    assert ids_of(call("search", query={"receiver": typed})) == [text.id]
    assert ids_of(call("search", query={"receiver": typed, "state": "queued"})) == [text.id]


def test_a_number_without_its_country_code_is_a_422_saying_so(aws, runtime):
    sms(runtime, "+14155550100")
    answer = call("search", query={"receiver": "415 555 0100"})
    assert answer.status == 422 and answer.body["error"]["details"]["field"] == "receiver"
    assert "E.164" in answer.body["error"]["message"]
    assert "country code" in answer.body["error"]["message"]


def test_a_number_written_with_its_trunk_zero_in_brackets_finds_its_items(aws, runtime):
    # +44 (0)7700 900123 is how British numbers are printed: the (0) is dialled at home only.
    # Read as +4407700900123 it is another number, and the answer "no items" a wrong one.
    [text] = sms(runtime, "+447700900123")
    for typed in ("+44 (0)7700 900123", "+44 (0) 7700 900123", "+44(0)7700900123"):
        assert ids_of(call("search", query={"receiver": typed})) == [text.id], typed


def test_a_number_typed_with_the_international_prefix_00_finds_its_items(aws, runtime):
    # Most of the world dials abroad with 00 and prints numbers so: 0044 7700 900123 is
    # +447700900123 (no number of any plan begins with 00 once its country code is given).
    [uk, us] = sms(runtime, "+447700900123", "+14155550100")
    for typed, item in (("0044 7700 900123", uk), ("0044 (0)7700 900123", uk),
                        ("00447700900123", uk), ("001 415 555 0100", us),
                        ("001-415-555-0100", us)):  # fmt: skip
        assert ids_of(call("search", query={"receiver": typed})) == [item.id], typed


def test_a_number_typed_in_brackets_without_its_country_code_is_told_what_is_missing(aws,
                                                                                    runtime):
    answer = call("search", query={"receiver": "(415) 555-0100"})
    assert answer.status == 422 and answer.body["error"]["details"]["field"] == "receiver"
    assert "country code" in answer.body["error"]["message"], answer.body


@pytest.mark.parametrize("typed", [" ada@example.org", "ada@example.org ", "\tAda@Example.org\n",
                                   "Ada Lovelace <Ada@Example.org>", "<ada@example.org>",
                                   '"Lovelace, Ada" <ada@example.org>'])
def test_an_address_as_copied_with_spaces_or_its_name_finds_its_items(aws, runtime, typed):
    # Pasted from a mail client's To: line or a spreadsheet cell. A number may carry spaces;
    # an address may too, and its display name says nothing about whom it went to.
    [mail] = email(runtime, "ada@example.org")
    assert ids_of(call("search", query={"receiver": typed})) == [mail.id]
    sender = typed.replace("ada", "shop").replace("example.org", "example.com")
    assert call("search", query={"sender": sender}).status == 200  # compared as a receiver is


@pytest.mark.parametrize("typed", ["ada@example.org.", "ADA@Example.ORG. ",
                                   "Ada <ada@example.org.>"])
def test_an_address_with_its_domain_written_fully_qualified_finds_its_items(aws, runtime, typed):
    # A domain's trailing dot names the same domain (the DNS root), and a sentence's full stop
    # comes with an address copied from it.
    [mail] = email(runtime, "ada@example.org")
    assert ids_of(call("search", query={"receiver": typed})) == [mail.id]


def test_an_address_whose_plus_a_query_string_decoded_is_a_422_saying_how_to_write_it(aws,
                                                                                      runtime):
    # ?receiver=ada+news@example.org arrives as "ada news@example.org".
    answer = call("search", query={"receiver": "ada news@example.org"})
    assert answer.status == 422 and answer.body["error"]["details"]["field"] == "receiver"
    assert "%2B" in answer.body["error"]["message"], answer.body


@pytest.mark.parametrize("typed", ["ada@bücher.example", "ADA@BÜCHER.EXAMPLE",
                                   "ada@xn--bcher-kva.example"])
def test_an_internationalised_domain_is_found_as_typed_or_in_punycode(aws, runtime, typed):
    # Receivers are stored as SES takes them: the domain in its ASCII (punycode) form. An
    # operator types the domain as people read it.
    [mail] = email(runtime, "ada@xn--bcher-kva.example")
    assert ids_of(call("search", query={"receiver": typed})) == [mail.id]


def test_a_plus_a_query_string_decoded_as_a_space_is_a_422_saying_how_to_write_it(aws, runtime):
    # Found in use: ?receiver=+14155550100 arrives as " 14155550100".
    answer = call("search", query={"receiver": " 14155550100"})
    assert answer.status == 422 and answer.body["error"]["details"]["field"] == "receiver"
    assert "%2B" in answer.body["error"]["message"], answer.body


@pytest.mark.parametrize("limit", [1, 4, 7])
def test_an_origin_of_requests_of_many_receivers_pages_without_loss(aws, runtime, clock,
                                                                     limit):  # fmt: skip
    # A page may end inside a request's receivers, or just after its last: the cursor goes on
    # from either, under a state filter too.
    requests = []
    for n, tag in ((7, "a"), (1, "b"), (5, "c")):
        requests.append(vdq.add_email({"email": "shop@example.com"},
                                      [f"{tag}{k}@example.org" for k in range(n)], "Hi", "Text",
                                      origin=("shop.order", "many"), runtime=runtime))
        clock.advance(1)
    newest = [i.id for items in reversed(requests)
              for i in sorted(items, key=lambda i: i.id, reverse=True)]  # fmt: skip
    query = {"origin_type": "shop.order", "origin_id": "many"}
    assert pages(query, limit)[0] == newest
    errored = set(newest[::3])
    for item_id in errored:
        move(runtime, item_id, "send", "error")
    got, _ = pages({**query, "state": "errored"}, limit)
    assert got == [i for i in newest if i in errored]


def test_an_origins_requests_spread_over_its_shards_and_older_ones_are_still_found(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    # One origin can be a whole campaign sent at the provider's rate: its contents go to
    # ORIGIN_SHARDS partitions. Contents written before the shards (one partition an origin)
    # are read beside them.
    from vdq.intake import enqueue
    from vdq.store.models import ORIGIN_MARK, ORIGIN_SHARDS, content_key, origin_key

    def unsharded(ulid, origin_type, origin_id):
        return f"{ulid}{ORIGIN_MARK}{origin_key(origin_type, origin_id)}"

    requests = []
    with monkeypatch.context() as before_the_shards:
        before_the_shards.setattr(enqueue, "origin_content_id", unsharded)
        for n in range(3):
            requests.append(vdq.add_email({"email": "shop@example.com"}, [f"old{n}@example.org"],
                                          "Hi", "Text", origin=("campaign", "winter"),
                                          runtime=runtime))  # fmt: skip
            clock.advance(1)
    for n in range(40):
        requests.append(vdq.add_email({"email": "shop@example.com"}, [f"new{n}@example.org"],
                                      "Hi", "Text", origin=("campaign", "winter"),
                                      runtime=runtime))  # fmt: skip
        clock.advance(1)
    partitions = {content_key(items[0].content_id)[0] for items in requests}
    assert len(partitions) > ORIGIN_SHARDS // 2  # spread, not one hot partition
    unsharded_pk = f"CO#{origin_key('campaign', 'winter')}"
    assert unsharded_pk in partitions
    newest = [items[0].id for items in reversed(requests)]
    for limit in (1, 7, 50):
        assert pages({"origin_type": "campaign", "origin_id": "winter"}, limit)[0] == newest
    window = {"origin_type": "campaign", "origin_id": "winter",
              "since": requests[1][0].queued_at[:19] + "Z",
              "until": requests[5][0].queued_at[:19] + "Z"}
    assert pages(window, 2)[0] == newest[-6:-1]


def test_an_origin_search_reads_each_of_its_partitions_once_a_page(aws, runtime, monkeypatch):
    from vdq.store.models import ORIGIN_SHARDS

    email(runtime, "ada@example.org")
    with dynamodb_requests(monkeypatch) as counts:
        assert len(ids_of(call("search", query={"origin_type": "shop.order",
                                                "origin_id": "7"}))) == 1  # fmt: skip
    assert counts == {"Query": ORIGIN_SHARDS + 1, "BatchGetItem": 1}


def _twilio_knows(runtime, sid, to, created):
    """Twilio configured (a fake HTTP client behind the real client), answering a fetch of
    ``sid`` with its documented Message resource: sent to ``to``, created at ``created``."""
    from dataclasses import replace
    from email.utils import format_datetime

    from tests.support.fake_twilio import ACCOUNT_SID, AUTH_TOKEN, fake_twilio

    runtime.settings = replace(runtime.settings, twilio_account_sid=ACCOUNT_SID,
                               twilio_auth_token=AUTH_TOKEN)  # fmt: skip
    http = fake_twilio(runtime)
    body = json.loads((EVENTS / "twilio_message_failed_opt_out.json").read_text())
    stamp = format_datetime(created.astimezone(UTC))
    http.answer(200, {**body, "sid": sid, "to": to, "status": "delivered", "error_code": None,
                      "error_message": None, "date_created": stamp, "date_sent": stamp})
    return http


def _queued(item):
    return datetime.fromtimestamp(ids.time_ms(item.id) / 1000, UTC)


def _sms_with_sid(runtime, sid, cell="+14155550100"):
    """An SMS whose SID is stored the way it is now (its check, or its first callback: no
    provider-ID mapping)."""
    from vdq.results import checks

    [text] = sms(runtime, cell)
    move(runtime, text.id, "send")
    item = runtime.store.get_item(text.id)
    assert checks.decide(item, checks.Sent(text.id, 1, sid, item.claimed_at), runtime,
                         strong=True)  # fmt: skip
    assert runtime.store.get_item(text.id).provider_id == sid
    return text


def test_an_sms_is_found_by_its_sid_days_after_its_check_recorded_it(aws, runtime, clock):
    # An operator pastes a SID from Twilio's console days later, without a window: Twilio says
    # whom it went to and when, and that receiver's items of before then hold it.
    sid = "SM" + "3" * 32
    text = _sms_with_sid(runtime, sid)
    for n in range(3):  # the receiver's later messages come first in its index
        clock.advance(3600)
        _sms_with_sid(runtime, f"SM{n:032x}")
    Stream(aws["table"]).window()
    clock.advance(2 * 86_400)
    http = _twilio_knows(runtime, sid, "+14155550100", _queued(text) + timedelta(seconds=2))
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]
    assert [r.method for r in http.requests] == ["GET"] and sid in http.requests[0].url
    # A search's filters apply to the item Twilio's answer found.
    _twilio_knows(runtime, sid, "+14155550100", _queued(text))
    assert ids_of(call("search", query={"provider_id": sid, "state": "errored"})) == []


def test_a_sid_of_a_message_scheduled_days_ahead_is_found_from_its_send_day(aws, runtime, clock):
    sid = "SM" + "4" * 32
    text = _sms_with_sid(runtime, sid)
    clock.advance(10 * 86_400)  # queued ten days before Twilio created it
    _twilio_knows(runtime, sid, "+1 (415) 555-0100", clock.now())
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]


def test_a_sid_twilio_sent_to_none_of_our_receivers_finds_nothing(aws, runtime, clock):
    sid = "SM" + "5" * 32
    _sms_with_sid(runtime, "SM" + "6" * 32)
    _twilio_knows(runtime, sid, "+14155550199", clock.now())
    assert ids_of(call("search", query={"provider_id": sid})) == []


def test_without_twilio_a_sid_search_reads_the_postings_of_the_day(aws, runtime, clock):
    import requests

    sid = "SM" + "7" * 32
    text = _sms_with_sid(runtime, sid)
    Stream(aws["table"]).window()
    http = _twilio_knows(runtime, sid, "+14155550100", clock.now())
    http.answers[:] = [requests.ConnectionError("Twilio is unreachable")]
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]  # the postings
    assert len(http.requests) == 1


def test_a_window_or_an_ses_id_never_asks_twilio(aws, runtime, clock):
    sid = "SM" + "8" * 32
    text = _sms_with_sid(runtime, sid)
    Stream(aws["table"]).window()
    http = _twilio_knows(runtime, sid, "+14155550100", clock.now())
    since = _queued(text).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert ids_of(call("search", query={"provider_id": sid, "since": since})) == [text.id]
    ses_id = "0100018c2f6c4a1e-6d2a9b3c-1f2e-4d5c-8b7a-9e8d7c6b5a4f-000000"
    assert ids_of(call("search", query={"provider_id": ses_id})) == []
    assert http.requests == []


def _ses_id(at):
    """An SES message ID as SES makes them: its send time in milliseconds after "0100"."""
    return f"0100{int(at.timestamp() * 1000):012x}-6d2a9b3c-1f2e-4d5c-8b7a-9e8d7c6b5a4f-000000"


def _email_with_id(runtime, message_id):
    """An email whose SES message ID its check stored (a tagged email: no mapping)."""
    from vdq.results import checks

    [mail] = email(runtime, "ada@example.org")
    move(runtime, mail.id, "send")
    item = runtime.store.get_item(mail.id)
    assert checks.decide(item, checks.Sent(mail.id, 1, message_id, item.claimed_at), runtime,
                         strong=True)  # fmt: skip
    assert runtime.store.find_by_provider_id(message_id) is None
    return mail


def _hours_read(monkeypatch):
    """The hours whose postings a search reads, in order."""
    from vdq.store.postings import Tallies

    hours, original = [], Tallies.postings

    def recording(self, hour, **kwargs):
        hours.append(hour)
        return original(self, hour, **kwargs)

    monkeypatch.setattr(Tallies, "postings", recording)
    return hours


def test_an_ses_id_is_found_days_later_from_the_hours_its_send_time_says(aws, runtime, clock,
                                                                        monkeypatch):  # fmt: skip
    sent = clock.now()
    message_id = _ses_id(sent)
    mail = _email_with_id(runtime, message_id)
    Stream(aws["table"]).window()
    clock.advance(5 * 86_400)
    hours = _hours_read(monkeypatch)
    assert ids_of(call("search", query={"provider_id": message_id})) == [mail.id]
    # From two hours after the send back to its hour, stopping at the hour that holds it.
    span = [(sent + timedelta(hours=h)).strftime("%Y-%m-%dT%H") for h in (2, 1, 0)]
    assert hours == span[: span.index(sent.strftime("%Y-%m-%dT%H")) + 1]


def test_an_ses_id_stored_long_after_its_send_time_is_found_in_the_last_day(aws, runtime,
                                                                           clock):  # fmt: skip
    message_id = _ses_id(clock.now() - timedelta(days=3))  # its hint misleads
    mail = _email_with_id(runtime, message_id)
    Stream(aws["table"]).window()
    assert ids_of(call("search", query={"provider_id": message_id})) == [mail.id]


def test_an_ses_id_from_the_future_reads_the_last_day_only(aws, runtime, clock, monkeypatch):
    message_id = _ses_id(clock.now() + timedelta(days=2))
    hours = _hours_read(monkeypatch)
    assert ids_of(call("search", query={"provider_id": message_id})) == []
    assert len(hours) == 25 and hours[0] == clock.now().strftime("%Y-%m-%dT%H")


def _dynamodb_refuses_a_reversed_between(monkeypatch):
    """DynamoDB answers a key condition ``BETWEEN :low AND :high`` whose low sorts after its
    high with a ValidationException; moto answers it with nothing."""
    import re

    from botocore.exceptions import ClientError
    from pynamodb.connection.base import Connection

    original = Connection._make_api_call

    def strict(self, operation_name, operation_kwargs):
        condition = operation_kwargs.get("KeyConditionExpression") or ""
        between = re.search(r"BETWEEN (:\w+) AND (:\w+)", condition)
        if operation_name == "Query" and between:
            values = operation_kwargs["ExpressionAttributeValues"]
            low, high = (values[name]["S"] for name in between.groups())
            if low > high:
                raise ClientError({"Error": {"Code": "ValidationException", "Message": (
                    "Invalid KeyConditionExpression: The BETWEEN operator requires upper "
                    "bound to be greater than or equal to lower bound")}}, operation_name)
        return original(self, operation_name, operation_kwargs)

    monkeypatch.setattr(Connection, "_make_api_call", strict)


def test_a_sid_older_than_the_postings_is_found_on_a_table_that_checks_its_bounds(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    # Twilio keeps a message far longer than VDQ's postings (30 days and 3): a SID an operator
    # pastes 40 days on is asked of the receiver index, not refused by DynamoDB as a 500.
    _dynamodb_refuses_a_reversed_between(monkeypatch)
    sid = "SM" + "9" * 32
    text = _sms_with_sid(runtime, sid)  # still awaiting: no done time, no expiration
    clock.advance(40 * 86_400)
    _twilio_knows(runtime, sid, "+14155550100", _queued(text) + timedelta(seconds=2))
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]


def test_a_sid_is_found_at_any_age_when_items_are_kept_forever(aws, runtime, clock):
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, retention_days=0)  # 0: keep forever
    sid = "SM" + "a" * 32
    text = _sms_with_sid(runtime, sid)
    clock.advance(90 * 86_400)
    _twilio_knows(runtime, sid, "+14155550100", _queued(text) + timedelta(seconds=2))
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]


def test_a_sid_sent_yesterday_is_found_however_long_ago_its_item_was_queued(aws, runtime, clock):
    # A send_at may be VDQ_MAX_SCHEDULE_DAYS ahead, more than the postings' 33 days: the item
    # was queued long before the horizon, and its first result posted its SID yesterday.
    sid = "SM" + "b" * 32
    text = _sms_with_sid(runtime, sid)
    clock.advance(45 * 86_400)
    _twilio_knows(runtime, sid, "+14155550100", clock.now() - timedelta(days=1))
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]


def test_a_creation_time_past_what_a_date_holds_is_no_500(aws, runtime, clock):
    # Twilio's clock, or whatever answers for it, names a time at the end of the calendar: the
    # search reads the receiver's items queued until now, and does not overflow.
    sid = "SM" + "c" * 32
    text = _sms_with_sid(runtime, sid)
    _twilio_knows(runtime, sid, "+14155550100", datetime(9999, 12, 31, 23, 55, tzinfo=UTC))
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]


@pytest.mark.parametrize("answer", [[], {"sid": "SM" + "d" * 32, "to": "+14155550100",
                                         "status": "sent", "date_created": 1_733_400_000}])
def test_an_answer_not_shaped_as_a_message_falls_back_to_the_postings(aws, runtime, clock,
                                                                      answer):  # fmt: skip
    sid = "SM" + "d" * 32
    text = _sms_with_sid(runtime, sid)
    Stream(aws["table"]).window()
    http = _twilio_knows(runtime, sid, "+14155550100", clock.now())
    http.answers[:] = []
    http.answer(200, answer)
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]  # the postings
    assert len(http.requests) == 1


def test_a_sid_searched_among_emails_never_asks_twilio(aws, runtime, clock):
    # An SMS's SID names no email: Twilio's answer could not change what the search finds.
    sid = "SM" + "e" * 32
    _sms_with_sid(runtime, sid)
    Stream(aws["table"]).window()
    http = _twilio_knows(runtime, sid, "+14155550100", clock.now())
    assert ids_of(call("search", query={"provider_id": sid, "method": "email"})) == []
    assert http.requests == []


def test_a_receiver_with_more_items_than_a_request_reads_falls_back_to_the_postings(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    monkeypatch.setattr(search, "MAX_ROUNDS", 1)  # a round of 100 items: 101 newer run past it
    sid = "SM" + "f" * 32
    text = _sms_with_sid(runtime, sid)
    for _ in range(101):
        clock.advance(1)
        sms(runtime)
    Stream(aws["table"]).window()
    http = _twilio_knows(runtime, sid, "+14155550100", clock.now())
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]  # the postings
    assert len(http.requests) == 1


def test_a_twilio_that_does_not_answer_leaves_a_search_time_for_the_postings(
        aws, runtime, clock, monkeypatch):  # fmt: skip
    from dataclasses import replace

    import requests
    from tests.support.fake_twilio import ACCOUNT_SID, AUTH_TOKEN
    from vdq.core.resources import API_FUNCTION_TIMEOUT_SECONDS
    from vdq.providers import TWILIO_REQUEST_TIMEOUT
    from vdq.providers.twilio import BaseUrlHttpClient, get_twilio

    given = []

    def silent(self, method, url, *args, timeout=None, **kwargs):  # the real client's, no network
        given.append(timeout or self.timeout)
        raise requests.ReadTimeout("Twilio took the connection and said nothing")

    monkeypatch.setattr(BaseUrlHttpClient, "request", silent)
    sid = "SM" + "0" * 31 + "1"
    text = _sms_with_sid(runtime, sid)
    Stream(aws["table"]).window()
    runtime.settings = replace(runtime.settings, twilio_account_sid=ACCOUNT_SID,
                               twilio_auth_token=AUTH_TOKEN)  # fmt: skip
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]  # the postings
    # requests gives the connect and the read the timeout each: the look-up takes at most
    # half the operator's request (API Gateway's 29 s), the rest is the postings'.
    assert len(given) == 1 and 2 * given[0] <= API_FUNCTION_TIMEOUT_SECONDS / 2
    with get_twilio(runtime).client() as client:  # a send in the same process keeps its own
        assert client.http_client.timeout == TWILIO_REQUEST_TIMEOUT


def test_a_sid_twilio_does_not_know_or_a_secret_it_cannot_read_falls_back_to_the_postings(
        aws, runtime, clock):  # fmt: skip
    # Another account's SID, or one Twilio deleted: its 404 (code 20404) is no 500. Nor is a
    # deploy's secret that is not there (Powertools' GetParameterError).
    from dataclasses import replace

    sid = "MM" + "1" * 32
    text = _sms_with_sid(runtime, sid)
    Stream(aws["table"]).window()
    http = _twilio_knows(runtime, sid, "+14155550100", clock.now())
    http.answers[:] = []
    http.answer(404, {"code": 20404, "message": f"The requested resource /Messages/{sid}.json "
                                                "was not found", "status": 404})  # fmt: skip
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]  # the postings
    assert len(http.requests) == 1
    runtime.overrides.pop("twilio")
    runtime.settings = replace(runtime.settings, twilio_account_sid=None, twilio_auth_token=None,
                               twilio_secret_name="vdq/twilio-missing")  # fmt: skip
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]


def test_a_sid_whose_twilio_time_is_before_its_item_is_still_found_the_same_day(aws, runtime,
                                                                               clock):  # fmt: skip
    # Twilio's clock behind VDQ's by more than the skew allowed (or a receiver Twilio prints in
    # a form the item does not hold): the receiver's items miss it, and the postings of the day
    # find it as they did before Twilio was asked.
    sid = "SM" + "2" * 32
    text = _sms_with_sid(runtime, sid)
    Stream(aws["table"]).window()
    _twilio_knows(runtime, sid, "+14155550100", _queued(text) - timedelta(minutes=15))
    assert ids_of(call("search", query={"provider_id": sid})) == [text.id]
