"""POST /sent-items/{id}/resend and POST /sent-items/resend: copies, all or nothing."""

from __future__ import annotations

import base64
from dataclasses import replace

import pytest

from tests.support.aws import drain
from tests.support.operator import call, dynamodb_requests, email, move, sms, succeed
from vdq.store import QueueItemRecord, StoreBusy, contents

PDF = {"filename": "a.pdf", "content_type": "application/pdf",
       "content_base64": base64.b64encode(b"%PDF").decode()}  # fmt: skip


def _active_ids(runtime):
    answer = call("list_queue_items", query={"limit": "100"})
    return [i["id"] for i in answer.body["items"]]


def test_a_resent_email_is_a_new_queued_copy_without_origin_sharing_the_content(aws, runtime):
    [item, _cc] = email(runtime, attachments=[PDF])
    succeed(runtime, item.id)
    drain(aws)
    answer = call("resend", params={"id": item.id})
    assert answer.status == 201, answer.body
    [copy] = answer.body["items"]
    stored = runtime.store.get_item(copy["id"])
    original = runtime.store.get_item(item.id)
    assert copy["id"] != item.id and copy["state"] == "queued" and copy["attempt"] == 1
    assert copy["origin"] is None and copy["resent_from"] == item.id
    assert (stored.sender, stored.sender_name, stored.receiver, stored.method) == (
        original.sender, original.sender_name, original.receiver, original.method)
    assert stored.content_id == original.content_id and stored.has_files
    # The send message names the receiver: the worker checks its suppression before claiming.
    assert drain(aws) == [{"id": copy["id"], "attempt": 1, "to": original.receiver,
                            "pace": "ses", "queued": copy["queued_at"]}]
    detail = call("get_queue_item", params={"id": copy["id"]}).body
    assert detail["content"]["cc"] == [{"email": "cc@example.org"}]
    assert detail["content"]["reply_to"] == [{"email": "help@example.com"}]
    assert [a["filename"] for a in detail["attachments"]] == ["a.pdf"]
    assert detail["history"][0]["text"] == f"resent from {item.id}"
    # The files are shared, not copied: the copy counts as one more open item of the content.
    assert runtime.store.get_refs(original.content_id).open_items == 2  # cc + the copy
    last = runtime.store.history(item.id)[-1]
    assert (last.name, last.kind, last.text) == ("resend", "action", f"resent as {copy['id']}")


def test_a_single_resend_refuses_a_body_it_would_ignore(aws, runtime):
    # It takes no body: a send_at there, ignored, would have sent the copy now.
    [item] = email(runtime, "ada@example.org")
    succeed(runtime, item.id)
    drain(aws)
    answer = call("resend", params={"id": item.id}, body={"send_at": "2026-12-24T09:00:00Z"})
    assert answer.status == 422 and answer.body["error"]["details"]["field"] == "send_at"
    assert "not a known field" in answer.body["error"]["message"]
    assert drain(aws) == [] and _active_ids(runtime) == []
    for empty in ("{}", "null", ""):  # what a client sends for "no body" is taken
        assert call("resend", params={"id": item.id}, body=empty).status == 201


def test_bulk_resend_copies_every_item(aws, runtime):
    items = sms(runtime, "+14155550100", "+14155550101") + email(runtime, "x@example.org")
    for item in items:
        succeed(runtime, item.id)
    drain(aws)
    ids = [i.id for i in items]
    answer = call("bulk_resend", body={"ids": [*ids, ids[0]]})  # a repeated id counts once
    assert answer.status == 201
    assert [c["resent_from"] for c in answer.body["items"]] == ids
    assert sorted(m["id"] for m in drain(aws)) == sorted(c["id"] for c in answer.body["items"])


def test_a_resend_reads_an_id_in_lower_case_as_its_item(aws, runtime):
    [one, two] = sms(runtime, "+14155550100", "+14155550101")
    for item in (one, two):
        succeed(runtime, item.id)
    drain(aws)
    answer = call("resend", params={"id": one.id.lower()})
    assert answer.status == 201, answer.body
    assert [c["resent_from"] for c in answer.body["items"]] == [one.id]
    answer = call("bulk_resend", body={"ids": [f" {two.id.lower()} ", two.id]})
    assert answer.status == 201, answer.body
    assert [c["resent_from"] for c in answer.body["items"]] == [two.id]  # one item, once


def test_bulk_resend_checks_every_id_first_and_creates_nothing_on_a_404(aws, runtime):
    [done, active] = sms(runtime, "+14155550100", "+14155550101")
    succeed(runtime, done.id)
    drain(aws)
    unknown = "01JDQ5V7X3K9Q2M4N6P8R0S2T4"
    answer = call("bulk_resend", body={"ids": [done.id, active.id, unknown]})
    assert answer.status == 404
    assert answer.body["error"]["details"]["ids"] == [active.id, unknown]
    assert _active_ids(runtime) == [active.id]  # nothing created
    assert drain(aws) == []
    assert call("resend", params={"id": active.id}).status == 404


def test_an_email_whose_files_were_cleaned_up_is_refused_with_409(aws, runtime):
    runtime.settings = replace(runtime.settings, max_files_age_seconds=0)
    [purged] = email(runtime, "p@example.org", attachments=[PDF])
    [plain] = sms(runtime)
    succeed(runtime, purged.id)
    succeed(runtime, plain.id)
    assert runtime.store.get_refs(purged.content_id).purged_at is not None
    [kept, other] = email(runtime, "k@example.org", "o@example.org", attachments=[PDF])
    succeed(runtime, kept.id)  # other stays open: these files are kept
    drain(aws)
    answer = call("bulk_resend", body={"ids": [plain.id, kept.id, purged.id]})
    assert answer.status == 409
    assert "cleanup" in answer.body["error"]["message"]
    assert answer.body["error"]["details"]["ids"] == [purged.id]
    assert _active_ids(runtime) == [other.id] and drain(aws) == []
    # The count taken for the kept content was given back.
    assert runtime.store.get_refs(kept.content_id).open_items == 1
    assert call("resend", params={"id": purged.id}).status == 409


def test_a_failed_store_leaves_no_count(aws, runtime, monkeypatch):
    """The copies and their count are one transaction: when DynamoDB refuses it, neither is
    written (and nothing has to be given back)."""
    [item, cc] = email(runtime, attachments=[PDF])
    succeed(runtime, item.id)
    succeed(runtime, cc.id)
    assert runtime.store.get_refs(item.content_id).open_items == 0

    def failing(fill, tries=10):
        raise StoreBusy("DynamoDB kept cancelling the write (ThrottlingError)")

    monkeypatch.setattr(contents, "transact", failing)
    answer = call("bulk_resend", body={"ids": [item.id, cc.id]})
    assert answer.status == 503
    assert runtime.store.get_refs(item.content_id).open_items == 0
    monkeypatch.undo()
    assert call("bulk_resend", body={"ids": [item.id, cc.id]}).status == 201


@pytest.mark.parametrize("body,status", [
    ({"ids": []}, 422), ({"ids": "x"}, 422), ({"ids": [1]}, 422), ({"other": 1}, 422),
    ({"ids": ["01JDQ5V7X3K9Q2M4N6P8R0S2T4"] * 101}, 422), ("[1]", 422), ("{bad", 400),
])  # fmt: skip
def test_bad_bulk_bodies_are_refused(aws, runtime, body, status):
    assert call("bulk_resend", body=body).status == status


def test_resend_needs_can_resend(aws, runtime):
    [item] = sms(runtime)
    succeed(runtime, item.id)
    assert call("resend", params={"id": item.id}, groups=["vdq-viewers"]).status == 403
    assert call("bulk_resend", body={"ids": [item.id]}, groups=["vdq-viewers"]).status == 403
    assert call("resend", params={"id": item.id}, anonymous=True).status == 401


def test_resend_request_counts(aws, runtime, monkeypatch):
    [text] = sms(runtime)
    [mail, cc] = email(runtime, attachments=[PDF])
    for item in (text, mail):
        succeed(runtime, item.id)
    with dynamodb_requests(monkeypatch) as counts:
        assert call("resend", params={"id": text.id}).status == 201
    # read the original, then its receiver's suppression (as an enqueue does); write the copy
    # with its count on the content, taking the content's expiration off (one transaction);
    # note the resend on the original
    assert counts == {"BatchGetItem": 2, "TransactWriteItems": 1, "PutItem": 1}
    with dynamodb_requests(monkeypatch) as counts:
        assert call("resend", params={"id": mail.id}).status == 201
    # with files, the content is read for their records (their expiration goes too)
    assert counts == {"BatchGetItem": 2, "GetItem": 1, "TransactWriteItems": 1, "PutItem": 1}
    move(runtime, cc.id, "send", "error")


def test_a_resend_repeated_with_its_idempotency_key_copies_once(aws, runtime):
    [item] = email(runtime, "solo@example.org")
    succeed(runtime, item.id)
    headers = {"Idempotency-Key": "resend-7"}
    first = call("resend", params={"id": item.id}, headers=headers)
    again = call("resend", params={"id": item.id}, headers=headers)
    assert first.status == again.status == 201
    assert first.body["items"] == again.body["items"]
    other = call("bulk_resend", body={"ids": [item.id]}, headers=headers)
    assert other.status == 201  # another operation: its own key space
    copies = [i for i in QueueItemRecord.scan(QueueItemRecord.sk == "STATE")
              if i.resent_from == item.id]  # fmt: skip
    assert len(copies) == 2


def test_a_resend_key_used_for_another_item_says_so_not_another_body(aws, runtime):
    # Found in use: the 422 said the key "was already used with a different request body" to
    # an operator who sent no body at all, only another item's id in the path.
    first, second = email(runtime, "one@example.org", "two@example.org")
    for item in (first, second):
        succeed(runtime, item.id)
    headers = {"Idempotency-Key": "resend-8"}
    assert call("resend", params={"id": first.id}, headers=headers).status == 201
    other = call("resend", params={"id": second.id}, headers=headers)
    assert other.status == 422 and other.body["error"]["details"]["field"] == "Idempotency-Key"
    message = other.body["error"]["message"]
    assert "another item" in message and "body" not in message, message
    assert call("bulk_resend", body={"ids": [first.id]}, headers=headers).status == 201
    other = call("bulk_resend", body={"ids": [second.id]}, headers=headers)
    assert other.status == 422 and "other ids" in other.body["error"]["message"], other.body


def test_a_resend_to_a_suppressed_receiver_says_so_as_an_enqueue_does(aws, runtime):
    # An operator resending a message to a number that texted STOP since, or an address that
    # bounced, was answered 201 with plainly queued copies, which the worker then cancelled.
    from vdq.results import suppression

    stopped, fine = sms(runtime, "+14155550100", "+14155550101")
    for item in (stopped, fine):
        succeed(runtime, item.id)
    suppression.suppress("+14155550100", "sms_opt_out", actor="twilio", text="STOP",
                         runtime=runtime)  # fmt: skip
    drain(aws)
    one = call("resend", params={"id": stopped.id})
    assert one.status == 201, one.body
    [held] = one.body["suppressed"]
    assert (held["receiver"], held["reason"], held["list"]) == ("+14155550100", "sms_opt_out",
                                                                None)  # fmt: skip
    both = call("bulk_resend", body={"ids": [fine.id, stopped.id]})
    assert both.status == 201 and len(both.body["items"]) == 2
    assert [s["receiver"] for s in both.body["suppressed"]] == ["+14155550100"]
    alone = call("resend", params={"id": fine.id})
    assert alone.status == 201 and alone.body["suppressed"] == []
