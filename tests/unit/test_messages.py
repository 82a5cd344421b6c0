"""Enqueue input validation: each bad field is named, and good input parses whole."""

from __future__ import annotations

import base64

import pytest

from vdq.core.errors import ValidationError
from vdq.intake import messages


def email_body(**changes):
    body = {
        "sender": {"email": "shop@example.com", "name": "Shop"},
        "to": [{"email": "a@example.org"}, {"email": "b@example.org"}],
        "cc": [{"email": "c@example.org"}, {"email": "A@example.org"}],
        "bcc": [{"email": "d@example.org"}],
        "reply_to": [{"email": "help@example.com"}],
        "subject": "Hello",
        "text": "Line one\nLine two",
    }
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def sms_body(**changes):
    body = {"sender": {"cell": "+15005550006"}, "to": [{"cell": "+14155550100"}], "body": "hi"}
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def test_one_receiver_per_distinct_address_across_to_cc_and_bcc():
    email = messages.parse_email(email_body())
    assert [r.email for r in email.receivers()] == [
        "a@example.org", "b@example.org", "c@example.org", "d@example.org",
    ]  # fmt: skip
    assert email.content()["reply_to"] == [{"email": "help@example.com"}]
    assert "bcc" not in email.content()  # bcc receivers are never shown to others


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"subject": None}, "subject"),
        ({"subject": "  "}, "subject"),
        ({"text": None}, "text"),
        ({"subject": "Hi\r\nBcc: victim@example.org"}, "subject"),
        ({"sender": {"email": "not-an-address"}}, "sender.email"),
        ({"sender": {"email": "a@example.com\r\nBcc: x@example.org"}}, "sender.email"),
        ({"sender": {"email": "a@example.com", "name": "Evil\nBcc: x@y.org"}}, "sender.name"),
        ({"to": []}, "to"),
        ({"to": "a@example.org"}, "to"),
        ({"to": [{"email": "a@example.org"}, {"email": "b@@example.org"}]}, "to[1].email"),
        ({"cc": [{"email": "x@localhost"}]}, "cc[0].email"),
        ({"to": [{"email": "a@example.org", "nick": "x"}]}, "to[0].nick"),
        ({"priority": "urgent"}, "priority"),
        ({"origin": {"type": "order"}}, "origin.id"),
        ({"origin": {"type": "order", "id": "1", "extra": 1}}, "origin.extra"),
        ({"origin": "order:1"}, "origin"),
        ({"attachments": [{"filename": "a.txt", "content_type": "text/plain",
                           "content_base64": "!!"}]}, "attachments[0].content_base64"),
        ({"attachments": [{"filename": "../a.txt", "content_type": "text/plain",
                           "content_base64": "aGk="}]}, "attachments[0].filename"),
        ({"attachments": [{"filename": "a.txt", "content_type": "text",
                           "content_base64": "aGk="}]}, "attachments[0].content_type"),
    ],
)
def test_bad_email_input_names_the_field(changes, field):
    with pytest.raises(ValidationError) as err:
        messages.parse_email(email_body(**changes))
    assert err.value.field == field
    assert field in str(err.value)


def test_attachments_over_the_size_limit_are_refused():
    data = base64.b64encode(b"x" * 2000).decode()
    att = {"filename": "a.bin", "content_type": "application/octet-stream", "content_base64": data}
    with pytest.raises(ValidationError) as err:
        messages.parse_email(email_body(attachments=[att]), max_attachment_bytes=1000)
    assert err.value.field == "attachments"


def test_inline_attachments_keep_their_content_id():
    att = {"filename": "logo.png", "content_type": "image/png", "content_base64": "iVBORw==",
           "inline": True, "content_id": "logo@shop"}  # fmt: skip
    email = messages.parse_email(email_body(attachments=[att]))
    assert email.attachments[0].content_id == "logo@shop" and email.attachments[0].inline


def test_origin_is_a_string_pair_of_any_key_type():
    email = messages.parse_email(email_body(origin={"type": "order", "id": 99999999}))
    assert email.origin == messages.Origin("order", "99999999")


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"sender": {"cell": "5005550006"}}, "sender.cell"),
        ({"to": [{"cell": "+1 415 555 0100"}]}, "to[0].cell"),
        ({"to": [{"cell": "+0123"}]}, "to[0].cell"),
        ({"body": "x" * 1601}, "body"),
        ({"body": ""}, "body"),
        ({"media_urls": ["http://example.com/a.png"]}, "media_urls[0]"),
        ({"to": []}, "to"),
    ],
)
def test_bad_sms_input_names_the_field(changes, field):
    with pytest.raises(ValidationError) as err:
        messages.parse_sms(sms_body(**changes))
    assert err.value.field == field


PICTURE = "https://cdn.example.com/a.png"


@pytest.mark.parametrize("body", [None, "", " \n\t"])
def test_an_mms_of_media_alone_needs_no_body_and_a_blank_one_is_no_body(body):
    # Twilio takes MediaUrl without Body: pictures alone are an MMS.
    data = {k: v for k, v in sms_body(media_urls=[PICTURE]).items() if k != "body"}
    if body is not None:
        data["body"] = body
    sms = messages.parse_sms(data)
    assert (sms.body, sms.media_urls) == (None, (PICTURE,))
    assert sms.content() == {"body": None, "media_urls": [PICTURE]}


@pytest.mark.parametrize("body,media,message", [
    (None, None, "is required when there are no media_urls"),
    (None, [], "is required when there are no media_urls"),
    ("  ", [], "must not be empty when there are no media_urls"),
])  # fmt: skip
def test_an_sms_with_neither_body_nor_media_names_body(body, media, message):
    data = {k: v for k, v in sms_body().items() if k != "body"}
    data.update({"body": body, "media_urls": media})
    with pytest.raises(ValidationError) as err:
        messages.parse_sms(data)
    assert (err.value.field, err.value.status) == ("body", 422)
    assert message in str(err.value)


SERVICE = "MG" + "0123456789abcdef" * 2


def test_an_sms_may_be_sent_from_a_messaging_service():
    # Twilio's pool then picks the number (sticky sender, its opt-out handling, its scale).
    sms = messages.parse_sms(sms_body(sender={"messaging_service_sid": SERVICE}))
    assert sms.sender == SERVICE


@pytest.mark.parametrize(("sender", "field", "words"), [
    ({"cell": SERVICE}, "sender.cell", "give it as sender.messaging_service_sid"),
    ({"messaging_service_sid": "MG123"}, "sender.messaging_service_sid", "MG and 32"),
    ({"messaging_service_sid": "PN" + SERVICE[2:]}, "sender.messaging_service_sid", "MG and 32"),
    ({"messaging_service_sid": SERVICE, "cell": "+15005550006"}, "sender.cell", "not both"),
])  # fmt: skip
def test_a_sender_that_is_not_one_number_nor_one_service_names_the_field(sender, field, words):
    with pytest.raises(ValidationError) as err:
        messages.parse_sms(sms_body(sender=sender))
    assert err.value.field == field and words in err.value.message


def test_an_sms_body_of_1600_characters_is_accepted_when_the_segment_limit_allows_it():
    # 1600 GSM-7 characters are 11 segments: over the default limit of 10 (a 400), within 11.
    assert len(messages.parse_sms(sms_body(body="x" * 1600), max_segments=11).body) == 1600


def test_an_attachment_may_name_an_upload_instead_of_carrying_its_bytes():
    upload_id = "01JD3Q4P8S2V6X0Z4C8G2K6N0R"
    email = messages.parse_email(email_body(attachments=[
        {"upload_id": upload_id},
        {"upload_id": upload_id, "filename": "cat.pdf", "inline": True, "content_id": "c1"},
    ]), max_attachment_bytes=1)  # fmt: skip
    bare, named = email.attachments
    assert (bare.upload_id, bare.filename, bare.content) == (upload_id, "", b"")
    assert (named.filename, named.inline, named.content_id) == ("cat.pdf", True, "c1")
    for wrong, field in [({"upload_id": 7}, "upload_id"), ({"upload_id": "x"}, "upload_id"),
                         ({"upload_id": upload_id, "content_type": "a/b"}, "content_type"),
                         ({"upload_id": upload_id, "size": 3}, "size"),
                         ({"upload_id": upload_id, "content_id": "c"}, "content_id")]:
        with pytest.raises(ValidationError) as err:
            messages.parse_email(email_body(attachments=[wrong]))
        assert err.value.field == f"attachments[0].{field}", wrong
