"""Presigned attachment uploads (POST /attachments/uploads) and emails that name them, on moto.

moto does not check a presigned URL's signature, so the URL is checked for what it binds (its
signed headers and expiry) and the upload is made with the same parameters the URL signs.
"""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from functions.enqueue import handler as enqueue_handler

from tests.support.aws import drain
from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from vdq import store as st
from vdq.core.clock import iso
from vdq.core.resources import UPLOADS_PREFIX
from vdq.intake.uploads import upload_key

SUBJECT = "7d8c2f10-1b2a-4c5d-9e8f-0a1b2c3d4e5f"  # the sample events' caller
PDF = b"%PDF-1.7\n" + bytes(range(256)) * 40


def post(name, body, groups=("vdq-senders",), subject=None):
    event = api_event(name, body=body, groups=list(groups))
    if subject is not None:
        event["requestContext"]["authorizer"]["claims"]["sub"] = subject
    response = enqueue_handler.handler(event, LambdaContext())
    return response["statusCode"], json.loads(response["body"]) if response["body"] else None


def new_upload(filename="catalogue.pdf", content_type="application/pdf", size=None, **kw):
    size = len(PDF) if size is None else size
    body = {"filename": filename, "content_type": content_type, "size": size}
    return post("apigw_post_attachment_upload", body, **kw)


def put(aws, answer, data=PDF, key=None):
    """The PUT the URL allows: its key, with the headers the answer lists."""
    s3 = __import__("boto3").client("s3")
    headers = answer["headers"]
    path = urlsplit(answer["url"]).path.lstrip("/").removeprefix(aws["bucket"] + "/")
    s3.put_object(Bucket=aws["bucket"], Key=key or path,
                  Body=data, ContentType=headers["Content-Type"],
                  Metadata={"filename": headers["x-amz-meta-filename"],
                            "size": headers["x-amz-meta-size"]})  # fmt: skip


def email(*attachments):
    return {"sender": {"email": "shop@example.com"}, "to": [{"email": "ada@example.org"}],
            "subject": "Catalogue", "text": "attached", "attachments": list(attachments)}


def objects(aws, prefix=""):
    s3 = __import__("boto3").client("s3")
    listed = s3.list_objects_v2(Bucket=aws["bucket"], Prefix=prefix)
    return [o["Key"] for o in listed.get("Contents", [])]


def test_the_upload_url_binds_type_length_and_metadata_and_expires_with_the_setting(
    aws, runtime, clock
):
    status, answer = new_upload(filename="Katalog für 2027.pdf")
    assert status == 201, answer
    assert answer["method"] == "PUT"
    url = urlsplit(answer["url"])
    query = parse_qs(url.query)
    signed = query["X-Amz-SignedHeaders"][0].split(";")
    assert {"content-type", "content-length", "x-amz-meta-filename", "x-amz-meta-size"} <= set(
        signed
    ), "S3 refuses a PUT whose type, length or metadata differ from the signed ones"
    assert query["X-Amz-Expires"] == [str(runtime.settings.upload_url_seconds)]
    assert answer["expires_at"] == iso(
        clock.now() + timedelta(seconds=runtime.settings.upload_url_seconds)
    )
    assert url.path.endswith("/" + upload_key(SUBJECT, answer["upload_id"]))
    assert upload_key(SUBJECT, answer["upload_id"]).startswith(UPLOADS_PREFIX)
    assert SUBJECT not in answer["url"], "the key holds a hash of the caller, not the caller"
    assert answer["headers"] == {
        "Content-Type": "application/pdf", "Content-Length": str(len(PDF)),
        "x-amz-meta-filename": "Katalog%20f%C3%BCr%202027.pdf",
        "x-amz-meta-size": str(len(PDF)),
    }  # fmt: skip


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"size": 0}, "size"),
        ({"size": 7_000_001}, "size"),
        ({"size": True}, "size"),
        ({"size": "12"}, "size"),
        ({"size": 12.5}, "size"),
        ({"filename": "../etc/passwd"}, "filename"),
        ({"filename": "a\nb.pdf"}, "filename"),
        ({"content_type": "pdf"}, "content_type"),
        ({"sha256": "not a digest"}, "sha256"),
        ({"sha256": base64.b64encode(b"x" * 31).decode()}, "sha256"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_bad_declaration_is_a_422_naming_the_field_and_signs_nothing(aws, runtime, changes,
                                                                       field):  # fmt: skip
    body = {"filename": "a.pdf", "content_type": "application/pdf", "size": 10, **changes}
    status, answer = post("apigw_post_attachment_upload", body)
    assert status == 422, answer
    assert answer["error"]["details"]["field"] == field


def test_an_upload_needs_the_add_permission(aws, runtime):
    status, _ = new_upload(groups=("vdq-readers",))
    assert status == 403


def test_an_email_naming_an_upload_stores_it_like_an_inline_file_and_consumes_it(aws, runtime):
    _, answer = new_upload(filename="Katalog für 2027.pdf")
    put(aws, answer)
    inline = {"filename": "logo.png", "content_type": "image/png",
              "content_base64": base64.b64encode(b"\x89PNG").decode()}  # fmt: skip
    status, body = post("apigw_post_emails", email(inline, {"upload_id": answer["upload_id"]}))
    assert status == 201, body
    item = runtime.store.get_item(body["items"][0]["id"])
    content = runtime.store.get_content(item.content_id)
    records = {r.id: r for r in runtime.store.get_attachments(content["attachments"])}
    logo, catalogue = (records[i] for i in content["attachments"])  # in the email's order
    assert (catalogue.filename, catalogue.content_type, catalogue.size) == (
        "Katalog für 2027.pdf", "application/pdf", len(PDF))
    assert catalogue.s3_key.startswith(f"files/{item.content_id}/")
    assert runtime.files.get(catalogue.s3_key) == PDF, "the send worker reads it as any file"
    assert logo.filename == "logo.png"
    assert item.has_files and runtime.store.get_refs(item.content_id).open_items == 1
    assert objects(aws, UPLOADS_PREFIX) == [], "the upload is taken: copied, then deleted"
    assert len(drain(aws)) == 1
    status, again = post("apigw_post_emails", email({"upload_id": answer["upload_id"]}))
    assert status == 422 and again["error"]["details"]["field"] == "attachments[0].upload_id"


def test_a_file_name_given_with_the_upload_id_replaces_the_declared_one(aws, runtime):
    _, answer = new_upload()
    put(aws, answer)
    status, body = post("apigw_post_emails", email(
        {"upload_id": answer["upload_id"], "filename": "renamed.pdf"}))
    assert status == 201, body
    content = runtime.store.get_content(runtime.store.get_item(body["items"][0]["id"]).content_id)
    [record] = runtime.store.get_attachments(content["attachments"])
    assert record.filename == "renamed.pdf"


def _refused(aws, body, field, subject=None):
    before = objects(aws)
    status, answer = post("apigw_post_emails", body, subject=subject)
    assert status == 422, answer
    assert answer["error"]["details"]["field"] == field, answer
    assert objects(aws) == before, "nothing stored, nothing deleted"
    assert drain(aws) == [] and list(st.QueueItemRecord.active_index.query("A#0")) == []
    return answer["error"]["message"]


def test_another_callers_upload_is_refused_like_a_missing_one(aws, runtime):
    _, answer = new_upload(subject="someone-else")
    put(aws, answer)
    message = _refused(aws, email({"upload_id": answer["upload_id"]}), "attachments[0].upload_id")
    assert "of this caller" in message
    never = "01JD3Q4P8S2V6X0Z4C8G2K6N0R"
    _refused(aws, email({"upload_id": never}), "attachments[0].upload_id")


def test_an_upload_url_that_was_never_used_is_refused(aws, runtime):
    _, answer = new_upload()
    _refused(aws, email({"upload_id": answer["upload_id"]}), "attachments[0].upload_id")


def test_an_upload_holding_another_size_than_declared_is_refused(aws, runtime):
    _, answer = new_upload()
    put(aws, answer, data=PDF + b"more")
    message = _refused(aws, email({"upload_id": answer["upload_id"]}), "attachments[0].upload_id")
    assert f"holds {len(PDF) + 4} bytes" in message


def test_uploaded_and_inline_files_together_stay_within_the_limit(aws, runtime):
    limit = runtime.settings.max_attachment_bytes
    big = b"x" * (limit - 10)
    _, answer = new_upload(size=len(big))
    put(aws, answer, data=big)
    inline = {"filename": "a.txt", "content_type": "text/plain",
              "content_base64": base64.b64encode(b"y" * 11).decode()}  # fmt: skip
    _refused(aws, email({"upload_id": answer["upload_id"]}, inline), "attachments")
    status, body = post("apigw_post_emails", email({"upload_id": answer["upload_id"]}))
    assert status == 201, body


@pytest.mark.parametrize(
    "attachment,field",
    [
        ({"upload_id": "not-an-id"}, "attachments[0].upload_id"),
        ({"upload_id": "01JD3Q4P8S2V6X0Z4C8G2K6N0R", "content_type": "a/b"},
         "attachments[0].content_type"),
        ({"upload_id": "01JD3Q4P8S2V6X0Z4C8G2K6N0R", "content_base64": ""},
         "attachments[0].content_base64"),
        ({"upload_id": "01JD3Q4P8S2V6X0Z4C8G2K6N0R", "filename": "a/b"},
         "attachments[0].filename"),
    ],
)
def test_a_malformed_upload_reference_is_a_422_before_any_lookup(aws, runtime, attachment,
                                                                  field):  # fmt: skip
    _refused(aws, email(attachment), field)


def test_a_request_that_stores_nothing_keeps_its_upload_for_a_retry(aws, runtime, monkeypatch):
    _, answer = new_upload()
    put(aws, answer)
    from vdq.store import WriteFailed

    def refuse(records):
        raise WriteFailed([], "the store refused the write: throttled")

    monkeypatch.setattr(runtime.store, "put_new", refuse)
    status, body = post("apigw_post_emails", email({"upload_id": answer["upload_id"]}))
    assert status == 503, body
    assert objects(aws, "files/") == [], "the copy is removed with the refused request"
    assert objects(aws, UPLOADS_PREFIX) == [upload_key(SUBJECT, answer["upload_id"])]
    monkeypatch.undo()
    status, body = post("apigw_post_emails", email({"upload_id": answer["upload_id"]}))
    assert status == 201, body


def test_a_repeat_under_its_idempotency_key_answers_as_the_first_after_the_upload_is_taken(
    aws, runtime
):
    _, answer = new_upload()
    put(aws, answer)
    body = email({"upload_id": answer["upload_id"]})
    key = {"Idempotency-Key": "catalogue-2027"}

    def send():
        event = api_event("apigw_post_emails", body=body, groups=["vdq-senders"], headers=key)
        response = enqueue_handler.handler(event, LambdaContext())
        return response["statusCode"], json.loads(response["body"])

    first, again = send(), send()
    assert first[0] == 201 and again == first, "the upload is gone; the first answer stands"
    assert len(drain(aws)) == 1


S3_METADATA_LIMIT = 2000  # "2 KB": the UTF-8 bytes of each user metadata key and value, summed


@pytest.mark.parametrize("name", ["😀" * 255, "東京" * 125 + ".pdf", "a%b" * 85,
                                  "=?UTF-8?B?Zm9v?="])
def test_a_long_non_ascii_file_name_fits_s3s_metadata_limit_and_comes_back_whole(
    aws, runtime, name
):
    assert len(name) <= 255, "a name the declaration takes"
    status, answer = new_upload(filename=name)
    assert status == 201, answer
    metadata = {k.removeprefix("x-amz-meta-"): v for k, v in answer["headers"].items()
                if k.startswith("x-amz-meta-")}  # fmt: skip
    assert all(v.isascii() for v in metadata.values()), "S3 metadata headers are ASCII"
    used = sum(len(k.encode()) + len(v.encode()) for k, v in metadata.items())
    assert used <= S3_METADATA_LIMIT, f"S3 refuses every PUT of this URL: {used} bytes"
    put(aws, answer)
    status, body = post("apigw_post_emails", email({"upload_id": answer["upload_id"]}))
    assert status == 201, body
    content = runtime.store.get_content(runtime.store.get_item(body["items"][0]["id"]).content_id)
    [record] = runtime.store.get_attachments(content["attachments"])
    assert record.filename == name


def test_an_upload_taken_between_its_check_and_its_copy_is_a_422_not_a_retry(
    aws, runtime, monkeypatch
):
    # Another email of the caller took it (copied, deleted) after this one read its size.
    _, answer = new_upload()
    put(aws, answer)
    copy = runtime.files.copy

    def taken_first(source, key):
        runtime.files.delete([source])
        copy(source, key)

    monkeypatch.setattr(runtime.files, "copy", taken_first)
    status, body = post("apigw_post_emails", email({"upload_id": answer["upload_id"]}))
    assert status == 422, body
    assert body["error"]["details"]["field"] == "attachments[0].upload_id"
    assert "already taken" in body["error"]["message"]
    assert objects(aws, "files/") == [] and drain(aws) == []


class Died(BaseException):
    """The enqueue Lambda died here (a timeout, out of memory): no handler code runs after."""


@pytest.mark.parametrize("dies_at", ["second copy", "records"])
def test_an_enqueue_that_dies_after_copying_leaves_no_copy_for_ever(
    aws, runtime, clock, monkeypatch, dies_at
):
    from dataclasses import replace

    from vdq.schedules import sweeps as schedules

    runtime.settings = replace(runtime.settings, max_files_age_seconds=0)
    first, second = new_upload()[1], new_upload()[1]
    put(aws, first)
    put(aws, second)
    copies = []
    copy, put_new = runtime.files.copy, runtime.store.put_new

    def copy_then_die(source, key):
        if copies and dies_at == "second copy":
            raise Died()
        copy(source, key)
        copies.append(key)

    def die_at_the_records(records):
        if dies_at == "records":
            raise Died()
        return put_new(records)

    monkeypatch.setattr(runtime.files, "copy", copy_then_die)
    monkeypatch.setattr(runtime.store, "put_new", die_at_the_records)
    body = email({"upload_id": first["upload_id"]}, {"upload_id": second["upload_id"]})
    with pytest.raises(Died):
        post("apigw_post_emails", body)
    monkeypatch.undo()
    assert drain(aws) == [], "nothing was accepted"
    assert len(objects(aws, UPLOADS_PREFIX)) == 2, "the uploads stay for the client's retry"
    for _ in range(2):  # the daily purge, days later
        clock.advance(86_400)
        schedules.run(["purge"], runtime)
    assert objects(aws, "files/") == [], "a copy no record names is kept for ever"


def test_the_rejected_receivers_of_a_partial_enqueue_are_sent_again_with_the_same_upload(
    aws, runtime, monkeypatch
):
    # The answer says "send the rejected receivers again": the upload must still be there.
    from vdq.store import WriteFailed

    _, answer = new_upload()
    put(aws, answer)
    put_new, calls = runtime.store.put_new, []

    def half_the_items(records):
        calls.append(records)
        if len(calls) == 2:  # the items: the first is stored, then the store fails
            put_new(records[:1])
            raise WriteFailed(records[:1], "the store refused the write: throttled")
        return put_new(records)

    monkeypatch.setattr(runtime.store, "put_new", half_the_items)
    body = {**email({"upload_id": answer["upload_id"]}),
            "to": [{"email": "ada@example.org"}, {"email": "bob@example.org"}]}  # fmt: skip
    status, partial = post("apigw_post_emails", body)
    assert partial["error"]["code"] == "partially_enqueued", partial
    assert partial["error"]["details"]["rejected"] == ["bob@example.org"]
    monkeypatch.undo()
    status, again = post("apigw_post_emails", {**body, "to": [{"email": "bob@example.org"}]})
    assert status == 201, again
    assert len(drain(aws)) == 2, "ada's item and bob's, each once"


def sha256_of(data):
    return base64.b64encode(__import__("hashlib").sha256(data).digest()).decode()


def test_a_declared_digest_is_a_signed_header_s3_checks_the_bytes_against(aws, runtime):
    body = {"filename": "catalogue.pdf", "content_type": "application/pdf", "size": len(PDF),
            "sha256": sha256_of(PDF)}  # fmt: skip
    status, answer = post("apigw_post_attachment_upload", body)
    assert status == 201, answer
    query = parse_qs(urlsplit(answer["url"]).query)
    assert "x-amz-checksum-sha256" in query["X-Amz-SignedHeaders"][0].split(";")
    assert answer["headers"]["x-amz-checksum-sha256"] == sha256_of(PDF)


def _upload_under(key, filename="catalogue.pdf", subject=None, data=PDF):
    body = {"filename": filename, "content_type": "application/pdf", "size": len(data),
            "sha256": sha256_of(data)}  # fmt: skip
    event = api_event("apigw_post_attachment_upload", body=body, groups=["vdq-senders"],
                      headers={"Idempotency-Key": key} if key is not None else {})  # fmt: skip
    if subject is not None:
        event["requestContext"]["authorizer"]["claims"]["sub"] = subject
    response = enqueue_handler.handler(event, LambdaContext())
    return response["statusCode"], json.loads(response["body"])


def test_an_upload_under_an_idempotency_key_keeps_its_upload_id_and_signs_a_new_url(
    aws, runtime, clock
):
    status, first = _upload_under("catalogue-2027/0")
    assert status == 201, first
    clock.advance(60)
    status, again = _upload_under("catalogue-2027/0")
    assert status == 201 and again["upload_id"] == first["upload_id"]
    assert again["expires_at"] > first["expires_at"], "a repeat gets a URL of its own"
    other_file = _upload_under("catalogue-2027/0", filename="price-list.pdf")[1]
    other_bytes = _upload_under("catalogue-2027/0", data=PDF[::-1])[1]
    other_key = _upload_under("catalogue-2027/1")[1]
    other_caller = _upload_under("catalogue-2027/0", subject="another-producer")[1]
    no_key = [_upload_under(None)[1]["upload_id"] for _ in range(2)]
    ids = {first["upload_id"], other_file["upload_id"], other_bytes["upload_id"],
           other_key["upload_id"], other_caller["upload_id"], *no_key}  # fmt: skip
    assert len(ids) == 7, "another declaration, digest, key or caller, or no key: a new upload"


def test_an_upload_idempotency_key_needs_the_files_digest(aws, runtime):
    """Without the digest, a key used again for another file of the same name, type and size
    would name the same upload, and its PUT would replace what an unsent email names."""
    body = {"filename": "catalogue.pdf", "content_type": "application/pdf", "size": len(PDF)}
    event = api_event("apigw_post_attachment_upload", body=body, groups=["vdq-senders"],
                      headers={"Idempotency-Key": "catalogue-2027/0"})  # fmt: skip
    response = enqueue_handler.handler(event, LambdaContext())
    answer = json.loads(response["body"])
    assert response["statusCode"] == 422 and answer["error"]["details"]["field"] == "sha256"
    assert objects(aws, UPLOADS_PREFIX) == []


def test_a_malformed_upload_idempotency_key_is_a_400_naming_the_header(aws, runtime):
    status, body = _upload_under(" padded ")
    assert status == 400 and body["error"]["details"]["field"] == "Idempotency-Key"
    assert objects(aws, UPLOADS_PREFIX) == []


def test_an_email_repeated_with_its_uploads_repeated_under_their_keys_is_sent_once(
    aws, runtime
):
    """A client that runs again from the start (upload, PUT, email) with the same keys: the
    upload's id is the first one's, so the email's body is the same and its key answers as the
    first time, though the email took the first upload."""

    def run():
        _, upload = _upload_under("order-42/catalogue")
        put(aws, upload)
        body = email({"upload_id": upload["upload_id"]})
        event = api_event("apigw_post_emails", body=body, groups=["vdq-senders"],
                          headers={"Idempotency-Key": "order-42"})  # fmt: skip
        response = enqueue_handler.handler(event, LambdaContext())
        return response["statusCode"], json.loads(response["body"])

    first, again = run(), run()
    assert first[0] == 201 and again == first
    assert len(drain(aws)) == 1
