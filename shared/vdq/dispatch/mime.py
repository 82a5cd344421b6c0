"""The MIME message of one email queue item.

The headers show the request as its author wrote it (To and Cc list every addressee; Bcc is
never written); the envelope, set by the SES call, names only the item's receiver. Text and
HTML are alternatives; inline files (images referenced by ``cid:``) sit beside the HTML in a
related part; other files are attachments. Output is 7-bit ASCII with CRLF line ends.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.header import Header
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime
from typing import Any

POLICY = SMTP.clone(cte_type="7bit")
CRLF = "\r\n"


class Unsendable(ValueError):
    """The content cannot be written as a safe message: a header field holds an encoded word
    that decodes to a line break, or a name one that decodes to address syntax. Enqueue refuses
    such fields (vdq.intake.validation); this guards content stored before that rule."""


@dataclass(frozen=True)
class File:
    filename: str
    content_type: str
    data: bytes
    inline: bool = False
    content_id: str | None = None


def _address(value: Mapping[str, Any]) -> Address:
    return Address(display_name=value.get("name") or "", addr_spec=value["email"])


def _addresses(values: Sequence[Mapping[str, Any]] | None) -> list[Address]:
    return [_address(v) for v in values or ()]


def _check_fields(content: Mapping[str, Any], sender_name: str | None,
                  files: Sequence[File]) -> None:  # fmt: skip
    """The header fields the email package decodes encoded words in (vdq.intake.encoded_words)."""
    from vdq.core.errors import ValidationError
    from vdq.intake import encoded_words

    names = [("sender.name", sender_name or "")] + [
        (f"{key}[{i}].name", value.get("name") or "")
        for key in ("to", "cc", "reply_to") for i, value in enumerate(content.get(key) or ())
    ]  # fmt: skip
    lines = [(content.get("subject") or "", "subject"),
             *((f.filename, f"the file name {f.filename!r}") for f in files)]
    try:
        encoded_words.check_fields(lines, [(name, path) for path, name in names])
    except ValidationError as exc:
        raise Unsendable(f"cannot be sent safely: {exc}") from None


def build_email(
    *,
    sender: str,
    sender_name: str | None,
    content: Mapping[str, Any],
    files: Sequence[File] = (),
    date: datetime | None = None,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """The raw message for ``content`` (as enqueue stores it) and its files; ``headers`` are
    added as given (List-Unsubscribe: vdq.results.unsubscribe)."""
    _check_fields(content, sender_name, files)
    msg = EmailMessage(policy=POLICY)
    msg["Subject"] = content.get("subject") or ""
    fields = [_address_field("From", [Address(display_name=sender_name or "",
                                               addr_spec=sender)])]  # fmt: skip
    for header, key in (("To", "to"), ("Cc", "cc"), ("Reply-To", "reply_to")):
        addresses = _addresses(content.get(key))
        if addresses:
            fields.append(_address_field(header, addresses))
    if date is not None:
        msg["Date"] = format_datetime(date)
    msg.set_content(content.get("text") or "")
    html = content.get("html")
    if html:
        msg.add_alternative(html, subtype="html")
    inline = [f for f in files if f.inline]
    for f in inline:
        maintype, subtype = _part_type(f.content_type)
        cid = f"<{f.content_id}>" if f.content_id else None
        if html:
            # Beside the HTML part, which refers to it as cid:<content_id>.
            html_part = msg.get_payload()[1]  # type: ignore[index]
            html_part.add_related(  # type: ignore[union-attr]
                f.data, maintype, subtype, cid=cid, filename=f.filename, disposition="inline"
            )
        else:
            msg.add_attachment(
                f.data, maintype, subtype, cid=cid, filename=f.filename, disposition="inline"
            )
    if html and inline:
        # RFC 2387 3.1: a related part names its root's type (the email package leaves it out).
        msg.get_payload()[1].set_param("type", "text/html")  # type: ignore[index,union-attr]
    for f in files:
        if not f.inline:
            maintype, subtype = _part_type(f.content_type)
            msg.add_attachment(f.data, maintype, subtype, filename=f.filename)
    return _raw_headers(headers) + b"".join(fields) + msg.as_bytes(policy=POLICY)


def _part_type(content_type: str) -> tuple[str, str]:
    """The type a file's part is written with: its own, but a composite one (multipart/*,
    message/*) as application/octet-stream. Those bodies may not be base64 (RFC 2045 6.4,
    RFC 2046 5.2.1), and as declared a reader would take the file's bytes for MIME structure
    (a multipart without a boundary, a message's headers); its name still says what it is."""
    maintype, _, subtype = content_type.partition("/")
    if maintype.lower() in ("multipart", "message"):
        return "application", "octet-stream"
    return maintype, subtype


# Text a display name may hold unquoted: atoms (RFC 5322 atext) and single spaces between them.
_PHRASE = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?: [A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*")


def _mailbox(address: Address) -> str:
    """One address as a header writes it: a name of plain words as is, another ASCII name (or
    one that looks like an encoded word) as a quoted-string, a name with other characters as
    RFC 2047 encoded words (each at most 75 characters, on lines of their own)."""
    name, addr = address.display_name, address.addr_spec
    if not name:
        return addr
    if not name.isascii():
        # maxlinelen 75: Header counts no leading space, so its first word may be 76 long.
        return f"{Header(name, 'utf-8').encode(linesep=CRLF, maxlinelen=75)} <{addr}>"
    if not _PHRASE.fullmatch(name) or "=?" in name:  # quoted, no reader decodes a word in it
        name = '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{name} <{addr}>"


def _address_field(header: str, addresses: Sequence[Address]) -> bytes:
    """An address header written here, each address on a line of its own, never folded inside
    one. The email package (before Python 3.12.9 and 3.13.2) folds a quoted name too long for
    a 78-character line and drops its quotes: its commas then separate addresses, and a name
    such as ``Billing, billing@attacker.example, ...`` adds one to Reply-To. A line stays
    within RFC 5322's 998 characters: a name is at most 256 characters, an address 254."""
    body = ("," + CRLF + " ").join(_mailbox(a) for a in addresses)
    return f"{header}: {body}{CRLF}".encode("ascii")


def _raw_headers(headers: Mapping[str, str] | None) -> bytes:
    """Header lines written as given, unfolded: a long List-Unsubscribe URL must stay one
    ``<...>`` (the email package would fold it into encoded words, which clients do not
    read). Each must be printable ASCII on one line, within RFC 5322's 998 characters."""
    lines = []
    for name, value in (headers or {}).items():
        line = f"{name}: {value}"
        if not line.isascii() or not line.isprintable() or len(line) > 998:
            raise ValueError(f"header {name} cannot be written as one ASCII line")
        lines.append(line.encode() + b"\r\n")
    return b"".join(lines)
