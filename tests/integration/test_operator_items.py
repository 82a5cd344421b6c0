"""GET /queue-items/{id} and GET /sent-items/{id}: content, attachments, history."""

from __future__ import annotations

import base64
import json

import pytest
from functions.operator import handler as operator_handler

import vdq
from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from tests.support.operator import call, email, move, sms, succeed
from vdq.api import LAMBDA_MAX_PAYLOAD_BYTES

PDF = {"filename": "invoice.pdf", "content_type": "application/pdf",
       "content_base64": base64.b64encode(b"%PDF-1.4 x").decode()}  # fmt: skip


def test_an_item_shows_its_content_attachments_and_history(aws, runtime, clock):
    [item, _cc] = email(runtime, attachments=[PDF])
    clock.advance(2)
    succeed(runtime, item.id)
    answer = call("get_queue_item", params={"id": item.id})
    assert answer.status == 200
    body = answer.body
    assert body["id"] == item.id and body["state"] == "succeeded"
    assert body["origin"] == {"type": "shop.order", "id": "7"}
    assert body["content"]["subject"] == "Hello"
    assert body["content"]["cc"] == [{"email": "cc@example.org"}]
    assert body["content"]["reply_to"] == [{"email": "help@example.com"}]
    [attachment] = body["attachments"]
    assert attachment["filename"] == "invoice.pdf" and attachment["size"] == 10
    assert attachment["content_type"] == "application/pdf" and attachment["purged"] is False
    assert attachment["download_path"] == f"/attachments/{attachment['id']}"
    names = [(h["name"], h["from_state"], h["to_state"]) for h in body["history"]]
    assert names == [("queued", None, "queued"), ("send", "queued", "sending"),
                     ("succeed", "sending", "succeeded")]  # fmt: skip
    assert body["history"][0]["at"] == body["queued_at"]


def test_the_largest_non_ascii_content_a_request_carries_fits_its_items_view(aws, runtime):
    # A body of the longest text and HTML outside ASCII reaches enqueue in UTF-8 within Lambda's
    # 6 MiB; the view answers the same text, and escaped as \uXXXX it took three to six times
    # that: over what Lambda returns, so API Gateway answered the operator a 502.
    text, html = "\U0001f4e6" * 1_000_000, "<p>" + "\u00e9" * 999_993 + "</p>"
    request = {"sender": {"email": "shop@example.com"}, "to": [{"email": "ada@example.org"}],
               "subject": "Hi", "text": text, "html": html}
    assert len(json.dumps(request, ensure_ascii=False).encode()) < LAMBDA_MAX_PAYLOAD_BYTES
    [item] = vdq.add_email("shop@example.com", ["ada@example.org"], "Hi", text, html=html,
                           runtime=runtime)  # fmt: skip
    event = api_event("apigw_operator_get_queue_item", groups=["vdq-operators"])
    event["pathParameters"] = {"id": item.id}
    event["path"] = event["resource"].replace("{id}", item.id)
    event["requestContext"]["path"] = "/prod" + event["path"]
    response = operator_handler.handler(event, LambdaContext())
    assert response["statusCode"] == 200
    # The Python runtime returns a response's text as it is, in UTF-8 (since Python 3.12).
    assert len(json.dumps(response, ensure_ascii=False).encode()) <= LAMBDA_MAX_PAYLOAD_BYTES
    assert json.loads(response["body"])["content"]["text"] == text


def test_a_queue_item_is_shown_in_any_state_a_sent_item_only_when_done(aws, runtime):
    [active, done] = sms(runtime, "+14155550100", "+14155550101")
    succeed(runtime, done.id)
    assert call("get_queue_item", params={"id": active.id}).status == 200
    assert call("get_queue_item", params={"id": done.id}).status == 200
    assert call("get_sent_item", params={"id": done.id}).status == 200
    answer = call("get_sent_item", params={"id": active.id})
    assert answer.status == 404 and "queued" in answer.body["error"]["message"]


@pytest.mark.parametrize("name", ["get_queue_item", "get_sent_item", "get_item_history"])
def test_an_id_in_lower_case_reads_its_item(aws, runtime, name):
    [item] = sms(runtime)
    succeed(runtime, item.id)
    answer = call(name, params={"id": item.id.lower()})
    assert answer.status == 200, answer.body
    assert answer.body.get("id", item.id) == item.id


@pytest.mark.parametrize("name", ["get_queue_item", "get_sent_item"])
def test_unknown_ids_are_404_and_reading_needs_read_permission(aws, runtime, name):
    [item] = sms(runtime)
    succeed(runtime, item.id)
    assert call(name, params={"id": "01JDQ5V7X3K9Q2M4N6P8R0S2T4"}).status == 404
    assert call(name, params={"id": "../etc"}).status == 404
    assert call(name, params={"id": item.id}, groups=["vdq-senders"]).status == 403
    assert call(name, params={"id": item.id}, anonymous=True).status == 401


def test_unknown_routes_are_404_in_the_error_shape(aws, runtime):
    answer = call("health")
    assert answer.status == 200 and answer.body == {"status": "ok"}
    from functions.operator import handler

    from tests.support.events import api_event
    from tests.support.operator import LambdaContext

    event = api_event("apigw_operator_list_queue_items", path="/nowhere")
    response = handler.handler(event, LambdaContext())
    assert response["statusCode"] == 404 and '"not_found"' in response["body"]


def _events(runtime, clock, item_id: str, n: int) -> None:
    """``n`` history entries on the item (provider events, as a flood of opens leaves)."""
    from vdq.workflow.transitions import history_entry

    for start in range(0, n, 25):
        entries = []
        for k in range(start, min(n, start + 25)):
            clock.advance(0.01)  # entries of one instant have no order among themselves
            entries.append(history_entry(item_id, clock.now(), actor="ses", source="provider",
                                         kind="event", name="Open", text=f"open {k}"))
        runtime.store.append_history(entries)


def _texts(entries):
    return [e.get("text") for e in entries if e["name"] == "Open"]


def test_a_long_history_is_paged_every_entry_once_in_order(aws, runtime, clock):
    [item] = sms(runtime)
    succeed(runtime, item.id)
    _events(runtime, clock, item.id, 260)
    view = call("get_queue_item", params={"id": item.id}).body
    assert len(view["history"]) == 100 and view["history"][0]["name"] == "queued"
    seen, cursor, pages = list(view["history"]), view["history_cursor"], 0
    while cursor:
        answer = call("get_item_history", params={"id": item.id},
                      query={"cursor": cursor, "limit": "70"})  # fmt: skip
        assert answer.status == 200, answer.body
        assert len(answer.body["entries"]) <= 70
        seen += answer.body["entries"]
        cursor, pages = answer.body["cursor"], pages + 1
        if pages == 1:  # entries that arrive meanwhile come on later pages
            _events(runtime, clock, item.id, 5)
    assert _texts(seen) == [f"open {k}" for k in range(260)] + [f"open {k}" for k in range(5)]
    names = [e["name"] for e in seen]
    assert names[:3] == ["queued", "send", "succeed"] and len(seen) == 3 + 265
    whole = call("get_item_history", params={"id": item.id}, query={"limit": "500"}).body
    assert whole["cursor"] is None and whole["entries"] == seen


def test_a_short_history_has_no_cursor_and_a_one_entry_page_goes_on(aws, runtime, clock):
    [item] = sms(runtime)
    assert call("get_queue_item", params={"id": item.id}).body["history_cursor"] is None
    first = call("get_item_history", params={"id": item.id}, query={"limit": "1"}).body
    assert [e["name"] for e in first["entries"]] == ["queued"] and first["cursor"] is None
    succeed(runtime, item.id)
    first = call("get_item_history", params={"id": item.id}, query={"limit": "1"}).body
    rest = call("get_item_history", params={"id": item.id},
                query={"cursor": first["cursor"]}).body  # fmt: skip
    assert [e["name"] for e in first["entries"] + rest["entries"]] == ["queued", "send",
                                                                       "succeed"]


def test_a_history_cursor_of_another_item_or_made_up_is_a_400_naming_it(aws, runtime, clock):
    [item, other] = sms(runtime, "+14155550100", "+14155550101")
    for i in (item, other):
        succeed(runtime, i.id)
        _events(runtime, clock, i.id, 120)
    theirs = call("get_queue_item", params={"id": other.id}).body["history_cursor"]
    assert theirs
    for cursor in (theirs, "abc.def", theirs[:-2] + "AA"):
        answer = call("get_item_history", params={"id": item.id}, query={"cursor": cursor})
        assert answer.status == 400, (cursor, answer.body)
        assert answer.body["error"]["details"]["field"] == "cursor"
    for limit in ("0", "501", "ten"):
        answer = call("get_item_history", params={"id": item.id}, query={"limit": limit})
        assert answer.status in (400, 422) and answer.body["error"]["details"]["field"] == "limit"
    assert call("get_item_history", params={"id": "01JDQ5V7X3K9Q2M4N6P8R0S2T4"}).status == 404
    assert call("get_item_history", params={"id": item.id}, groups=["vdq-senders"]).status == 403


def test_an_entry_written_into_the_past_while_a_page_is_read_is_not_skipped(aws, runtime, clock):
    """The claim's ``send`` entry is written with the send's outcome but dated at the claim:
    an event recorded while the item was sending sorts after it. A reader whose page ended at
    that event still meets ``send`` (the view shows it from the claim on), and no entry twice."""
    from tests.support.results import to_sending
    from vdq.workflow.transitions import Step, apply, history_entry, item_now

    [item] = sms(runtime)
    move(runtime, item.id, "send", "error")
    apply(item.id, Step("retry", actor="operator", source="operator"), runtime)
    clock.advance(1)
    sending = to_sending(runtime.store.get_item(item.id), runtime)
    for status in ("delivered", "read"):  # attempt 1's late results, while 2 is being sent
        clock.advance(1)
        runtime.store.append_history([history_entry(
            item.id, item_now(sending, runtime), actor="twilio", source="provider", kind="late",
            name=status, attempt=2, text=f"Twilio reported {status}")])
    first = call("get_item_history", params={"id": item.id}, query={"limit": "500"}).body
    assert first["cursor"] is None and first["entries"][-1]["kind"] == "late"
    size = len(first["entries"])
    page = call("get_item_history", params={"id": item.id},
                query={"limit": str(size - 1)}).body  # fmt: skip
    clock.advance(1)
    # The worker's outcome (its claim wrote the send entry).
    apply(sending, Step("await", actor="worker", provider_id="SM" + "1" * 32), runtime)
    seen = page["entries"]
    cursor = page["cursor"]
    while cursor:
        answer = call("get_item_history", params={"id": item.id}, query={"cursor": cursor}).body
        seen, cursor = seen + answer["entries"], answer["cursor"]
    whole = call("get_item_history", params={"id": item.id}, query={"limit": "500"}).body
    assert [(e["at"], e["name"]) for e in seen] == [(e["at"], e["name"]) for e in whole["entries"]]
    assert [e["name"] for e in whole["entries"]][-4:] == ["send", "delivered", "read", "await"]


def test_a_history_of_exactly_100_entries_has_no_cursor_and_101_pages_one_more(aws, runtime,
                                                                                clock):  # fmt: skip
    [item] = sms(runtime)
    succeed(runtime, item.id)  # queued, send, succeed
    _events(runtime, clock, item.id, 97)
    view = call("get_queue_item", params={"id": item.id}).body
    assert len(view["history"]) == 100 and view["history_cursor"] is None
    _events(runtime, clock, item.id, 1)
    view = call("get_queue_item", params={"id": item.id}).body
    assert len(view["history"]) == 100 and view["history_cursor"]
    rest = call("get_item_history", params={"id": item.id},
                query={"cursor": view["history_cursor"]}).body  # fmt: skip
    assert [e["text"] for e in rest["entries"]] == ["open 0"] and rest["cursor"] is None
    assert [e.get("text") for e in view["history"]][-1] == "open 96"


@pytest.mark.xfail(strict=True, reason=(
    "known limit: an event recorded by a function whose clock is behind another's, committed "
    "after a reader's page ended past its time, sorts before that reader's cursor and is not on "
    "the reader's later pages (a re-read from the start shows it). History is ordered by each "
    "writer's clock and events that change no state do not advance the item; closing this needs "
    "a per-item write sequence or cursors that remember recent keys."))  # fmt: skip
def test_an_event_committed_late_with_a_lagging_clock_is_not_skipped_by_a_reader(
        aws, runtime, clock):  # fmt: skip
    from vdq.workflow.transitions import history_entry

    [item] = sms(runtime)
    succeed(runtime, item.id)
    lagging_at = clock.now()  # function A reads its clock, then is slow to commit
    clock.advance(0.05)
    _events(runtime, clock, item.id, 3)  # function B's events, committed first
    page = call("get_item_history", params={"id": item.id}, query={"limit": "4"}).body
    runtime.store.append_history([history_entry(item.id, lagging_at, actor="ses",
                                                source="provider", kind="event", name="Click",
                                                text="click")])  # fmt: skip
    rest = call("get_item_history", params={"id": item.id},
                query={"cursor": page["cursor"]}).body  # fmt: skip
    seen = [e["name"] for e in page["entries"] + rest["entries"]]
    assert seen.count("Click") == 1


def test_a_sending_item_shows_its_claims_send_entry_once(aws, runtime, clock):
    """Shown from the claim on (the claim writes it), and not again once the outcome is
    written, nor beside one a transition already wrote."""
    from tests.support.results import to_sending
    from vdq.workflow.transitions import Step, apply

    [claimed, moved] = sms(runtime, "+14155550100", "+14155550101")
    sending = to_sending(runtime.store.get_item(claimed.id), runtime)
    move(runtime, moved.id, "send")
    for item_id in (claimed.id, moved.id):
        view = call("get_queue_item", params={"id": item_id}).body
        assert [e["name"] for e in view["history"]] == ["queued", "send"], item_id
    apply(sending, Step("await", actor="worker", provider_id="SM" + "2" * 32), runtime)
    view = call("get_queue_item", params={"id": claimed.id}).body
    assert [e["name"] for e in view["history"]] == ["queued", "send", "await"]


# ---- a view is never older than its own history ------------------------------------------------


def _racing(runtime, write, *, when):
    """The runtime's store, with ``write`` (another function's change to the item) run once
    around the view's reads of the state item: ``when`` (the read count, before or after the
    read) says where. Returns the reads made."""
    from vdq.store import Store

    reads = []

    class Racing(Store):
        def get_item(self, item_id):
            reads.append(item_id)
            if when == ("before", len(reads)):
                write()
            item = super().get_item(item_id)
            if when == ("after", len(reads)):
                write()
            return item

    runtime.overrides["store"] = Racing(runtime.clock)
    runtime.__dict__.pop("store", None)
    return reads


def _other_function(runtime):
    """A runtime of another function (its own plain store) on the same table and clock."""
    from vdq.runtime import Runtime

    return Runtime(settings=runtime.settings, clock=runtime.clock)


def _state_and_last(view):
    return view["state"], [e["to_state"] for e in view["history"]][-1]


WHEN = [("before", 1), ("after", 1)]


@pytest.mark.parametrize("as_record", [False, True], ids=["entry on the item", "record"])
@pytest.mark.parametrize("when", WHEN, ids=[f"{w} read {n}" for w, n in WHEN])
def test_a_change_between_the_views_reads_never_shows_a_state_older_than_its_history(
        aws, runtime, clock, when, as_record):  # fmt: skip
    # Whichever of the view's reads of the item the change comes before or after, the view
    # shows the state its history ends in: before the change or after it, never a mix
    # ("awaiting" above a history that ends "awaiting -> errored"). ``as_record``: the item's
    # own entries are full, so the change's entry is a history record of its own.
    from tests.support.results import new_sms, to_awaiting
    from vdq.store.history import RECENT_LIMIT
    from vdq.workflow.transitions import Step, apply

    other = _other_function(runtime)
    item = to_awaiting(new_sms(runtime), runtime, "SM" + "8" * 32)
    for n in range(RECENT_LIMIT if as_record else 0):  # late results fill the item's entries
        clock.advance(0.01)
        apply(item.id, Step("delay", actor="twilio", source="provider", late="record",
                            expect=frozenset({"sending"}), event_id=f"late-{n}"), runtime)
    if as_record:
        assert len(runtime.store.get_item(item.id).recent) == RECENT_LIMIT

    def undelivered():
        clock.advance(0.01)
        apply(item.id, Step("error", actor="twilio", source="provider",
                            result="Twilio reported undelivered"), other)  # fmt: skip

    reads = _racing(runtime, undelivered, when=when)
    view = call("get_queue_item", params={"id": item.id}).body
    state, last = _state_and_last(view)
    assert state == last and state in ("awaiting", "errored"), reads
    history = call("get_item_history", params={"id": item.id}).body["entries"]
    assert [e["to_state"] for e in history][-1] == "errored"


def test_a_history_that_never_ends_in_the_items_state_is_read_a_bounded_number_of_times(
        aws, runtime, clock):  # fmt: skip
    # An event recorded from a read of the item before a transition, by a function whose clock
    # runs ahead, sorts after the transition's entry: the history then always ends in the state
    # before. The view reads again a bounded number of times, then answers the item as read.
    from tests.support.results import new_sms
    from vdq.operations import detail
    from vdq.store import Store
    from vdq.workflow.transitions import history_entry

    item = new_sms(runtime)
    clock.advance(1)
    runtime.store.append_history([history_entry(
        item.id, clock.now(), actor="twilio", source="provider", kind="event", name="queued",
        from_state="sending", to_state="sending")])  # fmt: skip
    reads = []

    class Counting(Store):
        def get_item(self, item_id):
            reads.append(item_id)
            return super().get_item(item_id)

    runtime.overrides["store"] = Counting(clock)
    runtime.__dict__.pop("store", None)
    answer = call("get_queue_item", params={"id": item.id})
    assert answer.status == 200 and answer.body["state"] == "queued"
    assert len(reads) == detail.HISTORY_READS
