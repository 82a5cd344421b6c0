"""GET /attachments/{id} and the cleanup rules of attachment files."""

from __future__ import annotations

import base64
import time
from dataclasses import replace
from urllib.parse import parse_qs, urlparse

import pytest

from tests.support.operator import call, email, succeed
from vdq.schedules import sweeps as schedules
from vdq.store import FILE_SK, AttachmentRecord, attachment_pk
from vdq.workflow import attachments

PDF = {"filename": "report 1.pdf", "content_type": "application/pdf",
       "content_base64": base64.b64encode(b"%PDF-1.4 data").decode()}  # fmt: skip


def _files(runtime, item):
    content = runtime.store.get_content(item.content_id)
    return runtime.store.get_attachments(content["attachments"])


def _exists(runtime, record):
    try:
        runtime.files.get(record.s3_key)
    except Exception:
        return False
    return True


def _cleanup(runtime, seconds):
    runtime.settings = replace(runtime.settings, max_files_age_seconds=seconds)


def test_a_reader_is_redirected_to_a_short_lived_presigned_url(aws, runtime):
    [item, _] = email(runtime, attachments=[PDF])
    [record] = _files(runtime, item)
    answer = call("attachment", params={"id": record.id}, groups=["vdq-viewers"])
    assert answer.status == 302
    url = urlparse(answer.headers["Location"])
    query = parse_qs(url.query)
    assert record.s3_key in url.path
    if "X-Amz-Expires" in query:  # SigV4
        assert int(query["X-Amz-Expires"][0]) == runtime.settings.attachment_url_seconds
    else:  # SigV2: an absolute expiry
        assert int(query["Expires"][0]) - time.time() <= runtime.settings.attachment_url_seconds
    assert "report%201.pdf" in query["response-content-disposition"][0]


def test_redirect_false_gives_a_page_the_presigned_url_in_the_body(aws, runtime):
    [item, _] = email(runtime, attachments=[PDF])
    [record] = _files(runtime, item)
    answer = call("attachment", params={"id": record.id}, groups=["vdq-viewers"],
                  query={"redirect": "false"})  # fmt: skip
    assert answer.status == 200 and answer.headers["Cache-Control"] == "no-store"
    url = urlparse(answer.body["url"])
    assert record.s3_key in url.path
    assert "report%201.pdf" in parse_qs(url.query)["response-content-disposition"][0]
    for redirect in ("true", "1"):
        assert call("attachment", params={"id": record.id},
                    query={"redirect": redirect}).status == 302  # fmt: skip
    refused = call("attachment", params={"id": record.id}, groups=["vdq-senders"],
                   query={"redirect": "false"})  # fmt: skip
    assert refused.status == 403
    bad = call("attachment", params={"id": record.id}, query={"redirect": "maybe"})
    assert bad.status == 422 and bad.body["error"]["details"]["field"] == "redirect"


def test_the_document_names_the_way_a_page_gets_the_url_and_no_other(aws, runtime):
    """getAttachment's description is what a console or client author reads: what it says
    gives the URL in the body must give it; a JSON Accept header alone still redirects."""
    from vdq.operations.spec import OPERATIONS

    [operation] = [o for o in OPERATIONS if o.id == "getAttachment"]
    [item, _] = email(runtime, attachments=[PDF])
    [record] = _files(runtime, item)
    accept = call("attachment", params={"id": record.id}, groups=["vdq-viewers"],
                  headers={"Accept": "application/json"})  # fmt: skip
    assert accept.status == 302
    assert "Accept" not in operation.description
    assert "`redirect=false`" in operation.description


def test_attachment_access_needs_read_permission_and_a_known_id(aws, runtime):
    [item, _] = email(runtime, attachments=[PDF])
    [record] = _files(runtime, item)
    assert call("attachment", params={"id": record.id}, groups=["vdq-senders"]).status == 403
    assert call("attachment", params={"id": record.id}, anonymous=True).status == 401
    assert call("attachment", params={"id": "01JDQ5V7X3K9Q2M4N6P8R0S2T4"}).status == 404
    assert call("attachment", params={"id": "1"}).status == 404


def test_an_attachment_that_belongs_to_no_queue_item_is_refused(aws, runtime):
    stray_id, content_id = "01JDQ5V7X3K9Q2M4N6P8R0S2T9", "01JDQ5V7X3K9Q2M4N6P8R0S2T8"
    stray = AttachmentRecord(attachment_pk(stray_id), FILE_SK, id=stray_id, content_id=content_id,
                             filename="x.txt", content_type="text/plain", size=1, s3_key="k")
    stray.save()
    answer = call("attachment", params={"id": stray.id}, groups=["vdq-admins"])
    assert answer.status == 403 and "no queue item" in answer.body["error"]["message"]


def test_with_immediate_cleanup_files_go_when_the_last_linked_item_is_done(aws, runtime):
    _cleanup(runtime, 0)
    [first, second] = email(runtime, attachments=[PDF])
    [record] = _files(runtime, first)
    succeed(runtime, first.id)
    assert _exists(runtime, record)  # the other receiver still needs it
    assert call("attachment", params={"id": record.id}).status == 302
    call("transition", params={"id": second.id, "name": "cancel"}, query={})
    assert not _exists(runtime, record)
    [after] = _files(runtime, first)
    assert after.purged_at is not None  # the record stays, marked purged
    answer = call("attachment", params={"id": record.id})
    assert answer.status == 410 and answer.code == "purged"
    detail = call("get_sent_item", params={"id": first.id}).body
    assert detail["attachments"][0]["purged"] is True


def test_a_dry_run_cancel_deletes_nothing(aws, runtime):
    _cleanup(runtime, 0)
    [item] = email(runtime, "solo@example.org", attachments=[PDF])
    [record] = _files(runtime, item)
    answer = call("transition", params={"id": item.id, "name": "cancel"},
                  query={"dry_run": "true"})  # fmt: skip
    assert answer.status == 200 and answer.body["dry_run"] is True
    assert _exists(runtime, record)
    assert runtime.store.get_refs(item.content_id).open_items == 1


@pytest.mark.parametrize("seconds", [None, 3600])
def test_other_settings_keep_the_files_when_items_are_done(aws, runtime, seconds):
    _cleanup(runtime, seconds)
    [a, b] = email(runtime, attachments=[PDF])
    [record] = _files(runtime, a)
    succeed(runtime, a.id)
    succeed(runtime, b.id)
    assert _exists(runtime, record)
    assert call("attachment", params={"id": record.id}).status == 302


def test_the_daily_purge_deletes_files_idle_longer_than_the_age(aws, runtime, clock):
    _cleanup(runtime, 3600)
    [a, b] = email(runtime, attachments=[PDF])
    [open_one] = email(runtime, "open@example.org", attachments=[PDF])
    [record] = _files(runtime, a)
    [kept] = _files(runtime, open_one)
    succeed(runtime, a.id)
    succeed(runtime, b.id)
    clock.advance(1800)
    assert attachments.purge_idle(runtime) == 0  # idle, but not long enough
    clock.advance(1801)
    assert attachments.purge_idle(runtime) == 1
    assert not _exists(runtime, record) and _exists(runtime, kept)
    assert attachments.purge_idle(runtime) == 0  # nothing left to do
    # A resend of the purged email is now refused.
    assert call("resend", params={"id": a.id}).status == 409


def test_a_resend_before_the_purge_keeps_the_files(aws, runtime, clock):
    _cleanup(runtime, 60)
    [a, b] = email(runtime, attachments=[PDF])
    [record] = _files(runtime, a)
    succeed(runtime, a.id)
    succeed(runtime, b.id)
    assert call("resend", params={"id": a.id}).status == 201
    clock.advance(120)
    assert attachments.purge_idle(runtime) == 0
    assert _exists(runtime, record)


def test_the_purge_does_nothing_with_cleanup_unset_and_retention_off(aws, runtime, clock):
    _cleanup(runtime, None)
    runtime.settings = replace(runtime.settings, retention_days=0)
    [a, b] = email(runtime, attachments=[PDF])
    succeed(runtime, a.id)
    succeed(runtime, b.id)
    clock.advance(10**7)
    assert attachments.purge_idle(runtime) == 0


def test_a_failed_purge_keeps_the_transition_and_the_next_purge_run_deletes(aws, runtime,
                                                                            monkeypatch):
    # The release is written with the transition; only the purge that follows can fail (or
    # the function die before it), and the content waits in the purge index for the next run.
    _cleanup(runtime, 0)
    [item] = email(runtime, "solo@example.org", attachments=[PDF])
    [record] = _files(runtime, item)

    def failing(*args, **kwargs):
        raise RuntimeError("DynamoDB is unavailable")

    with monkeypatch.context() as patch:
        patch.setattr(runtime.store, "mark_purged", failing)
        answer = call("transition", params={"id": item.id, "name": "cancel"}, query={})
    assert answer.status == 200
    assert runtime.store.get_item(item.id).state == "cancelled"
    assert _exists(runtime, record)
    assert runtime.store.get_refs(item.content_id).open_items == 0
    runtime.clock.advance(60)
    assert schedules.run(["purge"], runtime)["files_purged"] == 1
    assert not _exists(runtime, record)


def _s3_refuses_deletes(runtime, monkeypatch, refused):
    """DeleteObjects as S3 answers when it may not delete some keys: 200, and each such key in
    ``Errors`` (Quiet mode leaves out only the deleted ones)."""
    s3 = runtime.files._s3
    original = s3.delete_objects

    def delete_objects(**kwargs):
        keys = [o["Key"] for o in kwargs["Delete"]["Objects"]]
        kept = [k for k in keys if refused(k)]
        rest = [{"Key": k} for k in keys if not refused(k)]
        answer = original(**{**kwargs, "Delete": {**kwargs["Delete"], "Objects": rest}}) \
            if rest else {}  # fmt: skip
        errors = [{"Key": k, "Code": "AccessDenied", "Message": "Access Denied"} for k in kept]
        return {**answer, "Errors": errors} if errors else answer

    monkeypatch.setattr(s3, "delete_objects", delete_objects)


def test_files_s3_did_not_delete_are_not_marked_purged_and_the_next_run_deletes_them(
    aws, runtime, monkeypatch
):
    _cleanup(runtime, 0)
    [item] = email(runtime, "solo@example.org", attachments=[PDF])
    [record] = _files(runtime, item)
    with monkeypatch.context() as patch:
        _s3_refuses_deletes(runtime, patch, lambda key: True)
        assert call("transition", params={"id": item.id, "name": "cancel"}, query={}).status == 200
    assert _exists(runtime, record)
    assert runtime.store.get_attachment(record.id).purged_at is None, "its file is there"
    runtime.clock.advance(60)
    assert schedules.run(["purge"], runtime)["files_purged"] == 1
    assert not _exists(runtime, record)
    assert call("attachment", params={"id": record.id}).status == 410


def test_one_content_whose_files_s3_keeps_refusing_does_not_stop_the_purge_of_others(
    aws, runtime, clock, monkeypatch
):
    _cleanup(runtime, 60)
    [stuck] = email(runtime, "stuck@example.org", attachments=[PDF])
    [other] = email(runtime, "other@example.org", attachments=[PDF])
    [stuck_file], [other_file] = _files(runtime, stuck), _files(runtime, other)
    succeed(runtime, stuck.id)
    succeed(runtime, other.id)
    clock.advance(120)
    _s3_refuses_deletes(runtime, monkeypatch, lambda key: key == stuck_file.s3_key)
    assert attachments.purge_idle(runtime) == 1
    assert not _exists(runtime, other_file) and _exists(runtime, stuck_file)
