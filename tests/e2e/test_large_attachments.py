"""Attachments over what a request can carry: a presigned upload to the local S3, then an email
that names it, sent with the file; and the 413 the front answers for a request Lambda refuses."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest

import requests
from tests.e2e.conftest import patient, requires

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator")]

SIM = "simulator.amazonses.com"
SEVEN_MB = 7 * 1000 * 1000 - 4096  # within the default VDQ_MAX_ATTACHMENT_BYTES (7,000,000)


def _upload(stack, data: bytes, filename: str = "catalogue.pdf") -> str:
    answer = stack.api("POST", "/attachments/uploads", groups=("vdq-senders",), json={
        "filename": filename, "content_type": "application/pdf", "size": len(data)})
    assert answer.status_code == 201, answer.text
    upload = answer.json()
    assert upload["method"] == "PUT" and "Authorization" not in upload["headers"]
    put = requests.put(upload["url"], data=data, headers=upload["headers"], timeout=patient(60))
    assert put.status_code == 200, put.text[:300]
    return upload["upload_id"]


def test_a_7_mb_file_uploaded_through_a_presigned_url_is_sent_with_the_email(stack):
    data = os.urandom(SEVEN_MB)
    upload_id = _upload(stack, data)
    [item] = stack.send_emails(f"success@{SIM}", attachments=[{"upload_id": upload_id}])
    final = stack.wait(item["id"], "succeeded", timeout=patient(60))
    [attachment] = final["attachments"]
    assert (attachment["filename"], attachment["size"]) == ("catalogue.pdf", len(data))
    [sent] = [m for m in stack.sandbox("ses")["emails"] if m["message_id"] == final["provider_id"]]
    assert sent["attachments"] == ["catalogue.pdf"]
    assert sent["attachment_sha256"] == [hashlib.sha256(data).hexdigest()]
    again = stack.api("POST", "/emails", groups=("vdq-senders",), json={
        "sender": {"email": "shop@example.com"}, "to": [{"email": f"success@{SIM}"}],
        "subject": "again", "text": "t", "attachments": [{"upload_id": upload_id}]})
    assert again.status_code == 422, "an upload is taken by one email"
    assert again.json()["error"]["details"]["field"] == "attachments[0].upload_id"


def test_another_callers_upload_is_a_422(stack):
    upload_id = _upload(stack, b"%PDF small")
    from tests.e2e.conftest import SECRET
    from vdq.local.front import make_token

    other = make_token(SECRET, ["vdq-senders"], subject="another-producer")
    answer = stack.api("POST", "/emails", token=other, json={
        "sender": {"email": "shop@example.com"}, "to": [{"email": f"success@{SIM}"}],
        "subject": "s", "text": "t", "attachments": [{"upload_id": upload_id}]})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["details"]["field"] == "attachments[0].upload_id"


def test_a_request_over_lambdas_6_mb_is_a_413_before_the_function(stack):
    """API Gateway takes 10 MB, but Lambda refuses an event over 6 MiB: 5 MB of inline files
    (6.7 MB of base64) never reach the function."""
    inline = base64.b64encode(b"\0" * 5_000_000).decode()
    answer = stack.api("POST", "/emails", groups=("vdq-senders",), json={
        "sender": {"email": "shop@example.com"}, "to": [{"email": f"success@{SIM}"}],
        "subject": "s", "text": "t", "attachments": [
            {"filename": "big.bin", "content_type": "application/octet-stream",
             "content_base64": inline}]})  # fmt: skip
    assert answer.status_code == 413, answer.text[:300]
    error = answer.json()["error"]
    assert error["code"] == "too_large" and "/attachments/uploads" in error["message"]


def test_inline_files_up_to_the_documented_4_5_mb_still_fit_in_a_request(stack):
    """4,400,000 bytes are 5,866,668 of base64: with the rest of the body and the event's
    context the request stays under Lambda's 6,291,456 bytes."""
    data = os.urandom(4_400_000)
    [item] = stack.send_emails(f"success@{SIM}", attachments=[
        {"filename": "scan.pdf", "content_type": "application/pdf",
         "content_base64": base64.b64encode(data).decode()}])  # fmt: skip
    final = stack.wait(item["id"], "succeeded", timeout=patient(60))
    [sent] = [m for m in stack.sandbox("ses")["emails"] if m["message_id"] == final["provider_id"]]
    assert sent["attachment_sha256"] == [hashlib.sha256(data).hexdigest()]


def test_the_cli_sends_a_large_file_through_an_upload(stack, tmp_path):
    catalogue = tmp_path / "catalogue.pdf"
    data = os.urandom(5_000_000)  # over what fits inline
    catalogue.write_bytes(data)
    small = tmp_path / "note.txt"
    small.write_bytes(b"see the catalogue")
    done = stack.cli("send-email", "--json", "--from", "shop@example.com", "--to",
                     f"success@{SIM}", "--subject", "Catalogue", "--text", "attached",
                     "--attach", str(small), "--attach-large", str(catalogue),
                     check=True)  # fmt: skip
    import json

    [item] = json.loads(done.stdout)["items"]
    final = stack.wait(item["id"], "succeeded", timeout=patient(60))
    assert [(a["filename"], a["content_type"], a["size"]) for a in final["attachments"]] == [
        ("note.txt", "text/plain", 17), ("catalogue.pdf", "application/pdf", len(data))]
    [sent] = [m for m in stack.sandbox("ses")["emails"] if m["message_id"] == final["provider_id"]]
    assert sent["attachment_sha256"][1] == hashlib.sha256(data).hexdigest()
    missing = stack.cli("send-email", "--from", "shop@example.com", "--to", f"success@{SIM}",
                        "--subject", "s", "--text", "t", "--attach-large", "/no/such/file")
    assert missing.returncode != 0 and "--attach-large /no/such/file" in missing.stderr


def test_the_cli_run_again_with_its_idempotency_key_sends_its_large_file_once(stack, tmp_path):
    catalogue = tmp_path / "catalogue.pdf"
    catalogue.write_bytes(os.urandom(300_000))
    key = f"catalogue-{os.urandom(4).hex()}"
    argv = ("send-email", "--json", "--from", "shop@example.com", "--to", f"success@{SIM}",
            "--subject", "Catalogue", "--text", "attached", "--attach-large", str(catalogue),
            "--idempotency-key", key)  # fmt: skip
    import json

    first = json.loads(stack.cli(*argv, check=True).stdout)
    again = json.loads(stack.cli(*argv, check=True).stdout)
    assert again == first, "the same uploads, the same email: the first answer"
    [item] = first["items"]
    stack.wait(item["id"], "succeeded", timeout=patient(60))
    catalogue.write_bytes(os.urandom(300_000))
    changed = stack.cli(*argv)
    assert changed.returncode != 0 and "Idempotency-Key" in changed.stderr, changed.stderr
