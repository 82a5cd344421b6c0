"""The MIME message of an email item: headers, alternatives, files, encoding."""

from __future__ import annotations

import email
import re
from datetime import UTC, datetime
from email import policy
from email.header import decode_header, make_header

import pytest

from vdq.dispatch.mime import File, Unsendable, build_email

CONTENT = {
    "subject": "Grüße aus Zürich",
    "text": "Hallo Jürgen",
    "html": "<p>Hallo <b>Jürgen</b> <img src='cid:logo@shop'></p>",
    "to": [{"email": "juergen@example.org", "name": "Jürgen Müller"},
           {"email": "ada@example.org"}],
    "cc": [{"email": "grace@example.org", "name": "Grace"}],
    "reply_to": [{"email": "help@example.com", "name": "Help"}],
}  # fmt: skip


def parse(raw: bytes) -> email.message.EmailMessage:
    return email.message_from_bytes(raw, policy=policy.default)


def test_the_message_is_7bit_ascii_with_crlf_line_ends_and_decodes_back():
    raw = build_email(sender="shop@example.com", sender_name="Shöp", content=CONTENT,
                      date=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))  # fmt: skip
    raw.decode("ascii")
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")
    message = parse(raw)
    assert message["Subject"] == "Grüße aus Zürich"
    assert message["From"] == "Shöp <shop@example.com>"
    assert message["To"] == "Jürgen Müller <juergen@example.org>, ada@example.org"
    assert message["Cc"] == "Grace <grace@example.org>"
    assert message["Reply-To"] == "Help <help@example.com>"
    assert message["Date"] == "Fri, 02 Jan 2026 03:04:05 +0000"
    assert message.get_body(("plain",)).get_content().strip() == "Hallo Jürgen"
    assert "<b>Jürgen</b>" in message.get_body(("html",)).get_content()
    assert message.get_content_type() == "multipart/alternative"


def test_text_only_email_is_a_single_part():
    content = {**CONTENT, "html": None}
    message = parse(build_email(sender="shop@example.com", sender_name=None, content=content))
    assert message.get_content_type() == "text/plain"
    assert message["From"] == "shop@example.com"


def test_inline_images_sit_beside_the_html_and_files_are_attachments():
    files = [File("logo.png", "image/png", b"\x89PNG", inline=True, content_id="logo@shop"),
             File("Rechnung März.pdf", "application/pdf", b"%PDF")]  # fmt: skip
    message = parse(build_email(sender="shop@example.com", sender_name=None, content=CONTENT,
                                files=files))  # fmt: skip
    assert message.get_content_type() == "multipart/mixed"
    tree = [p.get_content_type() for p in message.walk()]
    assert tree == ["multipart/mixed", "multipart/alternative", "text/plain",
                    "multipart/related", "text/html", "image/png", "application/pdf"]  # fmt: skip
    logo = next(p for p in message.walk() if p.get_content_type() == "image/png")
    assert logo["Content-ID"] == "<logo@shop>" and logo.get_content_disposition() == "inline"
    pdf = next(p for p in message.walk() if p.get_content_type() == "application/pdf")
    assert pdf.get_filename() == "Rechnung März.pdf" and pdf.get_content() == b"%PDF"


def test_inline_files_of_a_text_only_email_are_inline_parts():
    files = [File("logo.png", "image/png", b"\x89PNG", inline=True, content_id="logo@shop")]
    content = {**CONTENT, "html": None}
    message = parse(build_email(sender="shop@example.com", sender_name=None, content=content,
                                files=files))  # fmt: skip
    logo = next(p for p in message.walk() if p.get_content_type() == "image/png")
    assert logo.get_content_disposition() == "inline" and logo["Content-ID"] == "<logo@shop>"


def test_no_bcc_header_is_ever_written():
    content = {**CONTENT, "bcc": [{"email": "hidden@example.org"}]}
    raw = build_email(sender="shop@example.com", sender_name=None, content=content)
    assert b"hidden@example.org" not in raw and b"Bcc" not in raw


INJECTION = "=?UTF-8?Q?Hi=0D=0ABcc:_victim@example.net?="
SPOOF = "=?UTF-8?Q?x_<evil@example.net>?="


@pytest.mark.parametrize(("where", "change"), [
    ("subject", lambda c, f: c.update(subject=INJECTION)),
    ("to[0].name", lambda c, f: c.update(to=[{"email": "a@example.org", "name": SPOOF}])),
    ("reply_to[0].name",
     lambda c, f: c.update(reply_to=[{"email": "a@example.org", "name": INJECTION}])),
    ("the file name", lambda c, f: f.append(File(INJECTION + ".pdf", "application/pdf", b"%"))),
])  # fmt: skip
def test_a_header_field_whose_encoded_word_injects_is_not_written(where, change):
    """Enqueue refuses these fields (vdq.intake.validation); content stored before that rule, or by
    another path, must still never become a Bcc line or another From address."""
    content, files = dict(CONTENT), []
    change(content, files)
    with pytest.raises(Unsendable, match=re.escape(where)):
        build_email(sender="shop@example.com", sender_name=None, content=content, files=files)


def test_a_sender_name_with_an_encoded_address_is_not_written():
    with pytest.raises(Unsendable, match=re.escape("sender.name")):
        build_email(sender="shop@example.com", sender_name=SPOOF, content=CONTENT)


# Names that need quoting (a comma, parentheses, quotes) and are too long for one 78-character
# line: the email package of Python before 3.12.9 folds such a quoted-string and drops its
# quotes, so its comma separates addresses and a name can smuggle one in.
LONG_NAMES = [
    "Smith, John - Department of Internal Medicine and Cardiovascular Surgery, Hospital",
    "Support Team, Contoso-Worldwide-Customer-Success-Organisation-International-Division",
    "Billing, billing@attacker.example, " + "X" * 80,
    'Doe, "JD" \\ John (' + "N" * 90 + ")",
    "Müller, Hans-Peter (Geschäftsführer der Internationalen Versicherungsgesellschaft) "
    + "ü" * 120,
]


@pytest.mark.parametrize("name", LONG_NAMES, ids=range(len(LONG_NAMES)))
def test_a_long_display_name_stays_one_address_in_every_address_header(name):
    content = {**CONTENT, "to": [{"email": "a@example.org", "name": name},
                                 {"email": "b@example.org", "name": name}],
               "cc": [{"email": "c@example.org", "name": name}],
               "reply_to": [{"email": "r@example.org", "name": name}]}  # fmt: skip
    raw = build_email(sender="shop@example.com", sender_name=name, content=content)
    raw.decode("ascii")
    assert max(len(line) for line in raw.split(b"\r\n")) <= 998
    message, as_written = parse(raw), email.message_from_bytes(raw, policy=policy.compat32)
    for header, expected in (("From", ["shop@example.com"]),
                             ("To", ["a@example.org", "b@example.org"]),
                             ("Cc", ["c@example.org"]), ("Reply-To", ["r@example.org"])):
        addresses = message[header].addresses
        assert [a.addr_spec for a in addresses] == expected, header
        if name.isascii():
            assert all(a.display_name == name for a in addresses), header
        else:  # the email package's parser puts a space between adjacent encoded words, which
            # RFC 2047 joins: the name as a mail reader shows it
            shown = str(make_header(decode_header(as_written[header])))
            assert shown.count(name) == len(expected), header


@pytest.mark.parametrize("content_type", ["multipart/mixed", "multipart/related",
                                          "message/rfc822", "message/partial"])
def test_a_file_of_a_composite_type_arrives_as_the_bytes_it_holds(content_type):
    """A multipart or message body may not be base64 (RFC 2045 6.4, RFC 2046 5.2): a file
    declared so would be a multipart part without a boundary, or a message part a reader parses
    as headers; its bytes go as application/octet-stream, under its own name."""
    data = b"--x\r\nnot a MIME body \xff"
    files = [File("forwarded.eml", content_type, data)]
    message = parse(build_email(sender="shop@example.com", sender_name=None, content=CONTENT,
                                files=files))  # fmt: skip
    assert all(not part.defects for part in message.walk())
    attachment = next(message.iter_attachments())
    assert attachment.get_filename() == "forwarded.eml"
    assert attachment.get_content() == data


def test_the_related_part_names_its_root_s_type():
    """RFC 2387 3.1: a multipart/related must carry ``type``, the root part's type (the HTML)."""
    files = [File("logo.png", "image/png", b"\x89PNG", inline=True, content_id="logo@shop")]
    message = parse(build_email(sender="shop@example.com", sender_name=None, content=CONTENT,
                                files=files))  # fmt: skip
    related = next(p for p in message.walk() if p.get_content_type() == "multipart/related")
    assert related.get_param("type") == "text/html"


@pytest.mark.parametrize("name", ["0000" + "\u0800" * 14, "é" * 40, "🙂" * 30])
def test_every_encoded_word_of_a_name_is_at_most_75_characters(name):
    """RFC 2047 2: an encoded word is at most 75 characters (the email package's Header makes
    one of 76 at the start of its first line)."""
    content = {**CONTENT, "to": [{"email": "a@example.org", "name": name}]}
    raw = build_email(sender="shop@example.com", sender_name=name, content=content)
    words = re.findall(rb"=\?[^?]*\?[QqBb]\?[^?]*\?=", raw.split(b"\r\n\r\n")[0])
    assert words and max(len(w) for w in words) <= 75, words
    as_written = email.message_from_bytes(raw, policy=policy.compat32)
    assert str(make_header(decode_header(as_written["To"]))) == f"{name} <a@example.org>"
