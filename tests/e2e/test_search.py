"""Finding items and counting them against the local stack, as a client does over HTTP: by
receiver across the active queue and the sent items, by origin, provider ID, sender and time
window, paging through more than one page, and refused without the list permission."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.e2e.conftest import STREAM_SECONDS, patient, requires

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator", "schedule")]

SIM = "simulator.amazonses.com"


def found(stack, **query):
    answer = stack.api("GET", "/search", params=query, groups=("vdq-viewers",))
    assert answer.status_code == 200, answer.text
    return answer.json()


def ids(stack, **query):
    return [i["id"] for i in found(stack, **query)["items"]]


def eventually(check, timeout=20.0):
    """The stream's postings and counts follow a change by its window: wait for them."""
    deadline = time.monotonic() + patient(timeout)
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(STREAM_SECONDS / 2)


def test_a_receiver_finds_its_errored_item_and_its_cancelled_one_newest_first(stack):
    receiver = f"bounce+{uuid.uuid4().hex[:10]}@{SIM}"
    [first] = stack.send_emails(receiver)
    stack.wait(first["id"], "errored")  # the bounce suppresses the address ...
    [second] = stack.send_emails(receiver.upper())
    stack.wait(second["id"], "cancelled")  # ... so the next is cancelled, unsent
    items = found(stack, receiver=receiver.upper())["items"]
    assert [i["id"] for i in items] == [second["id"], first["id"]]
    assert [i["state"] for i in items] == ["cancelled", "errored"]  # a done and an active one
    assert "bounce" in items[1]["signals"] and "suppressed" in items[0]["signals"]


def test_a_receiver_pages_through_more_than_one_page(stack):
    receiver = f"pages-{uuid.uuid4().hex[:10]}@example.org"
    sent = [stack.send_emails(receiver)[0]["id"] for _ in range(5)]
    seen, cursor, pages = [], None, 0
    while True:
        page = found(stack, receiver=receiver, limit=2, **({"cursor": cursor} if cursor else {}))
        seen += [i["id"] for i in page["items"]]
        cursor, pages = page["cursor"], pages + 1
        if cursor is None:
            break
    assert seen == list(reversed(sent)) and pages == 3


def test_an_origin_finds_the_items_of_each_request_that_named_it(stack):
    origin = {"type": "shop.order", "id": uuid.uuid4().hex[:12]}
    first = stack.send_emails("a@example.org", "b@example.org", origin=origin)
    second = stack.send_emails("c@example.org", origin=origin)
    stack.send_emails("d@example.org", origin={"type": "shop.order", "id": "other"})
    got = ids(stack, origin_type=origin["type"], origin_id=origin["id"])
    assert got[0] == second[0]["id"] and set(got[1:]) == {i["id"] for i in first}


def test_a_provider_id_and_a_sender_are_found_once_the_stream_posted_them(stack):
    sender = f"shop-{uuid.uuid4().hex[:8]}@example.com"
    [item] = stack.send_emails(f"success@{SIM}", sender={"email": sender})
    done = stack.wait(item["id"], "succeeded")
    assert done["provider_id"]
    assert eventually(lambda: ids(stack, provider_id=done["provider_id"])) == [item["id"]]
    assert eventually(lambda: ids(stack, sender=sender.upper())) == [item["id"]]


def test_a_time_window_alone_finds_what_was_queued_in_it(stack):
    [before] = stack.send_emails(f"success@{SIM}")
    time.sleep(1.1)
    start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    [inside] = stack.send_emails(f"success@{SIM}")
    got = eventually(lambda: inside["id"] in ids(stack, since=start, limit=100))
    assert got and before["id"] not in ids(stack, since=start, limit=100)
    assert ids(stack, receiver=f"success@{SIM}", since=start, limit=100)[0] == inside["id"]


def test_searching_and_counting_are_refused_without_the_list_permission(stack):
    for path, query in (("/search", {"receiver": "ada@example.org"}), ("/stats", {})):
        answer = stack.api("GET", path, params=query, groups=("vdq-senders",))
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden"


def test_bad_search_input_is_a_422_naming_the_field(stack):
    answer = stack.api("GET", "/search", params={"origin_type": "shop.order"})
    assert answer.status_code == 422
    assert answer.json()["error"]["details"]["field"] == "origin_id"


def test_the_counts_of_the_last_hours_include_what_was_just_delivered(stack):
    before = stack.api("GET", "/stats").json()["totals"]["email"]["delivered"]
    [item] = stack.send_emails(f"success@{SIM}")
    stack.wait(item["id"], "succeeded")
    assert eventually(lambda: stack.api("GET", "/stats").json()["totals"]["email"][
        "delivered"] > before)
