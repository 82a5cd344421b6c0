"""RFC 2047 encoded words in header fields (=?charset?Q|B?text?=): mail readers, and the email
package that builds the message (vdq.dispatch.mime), decode them wherever a header holds text, so a
field's checks (vdq.intake.validation) apply to what they decode to as well as to what was written.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator

from vdq.core.errors import ValidationError
from vdq.core.text import CONTROL_CHARS

_WORD = re.compile(r"=\?([^?\s]*)\?([QqBb])\?([^?\s]*)\?=")
_CONTROL = re.compile(f"[{CONTROL_CHARS}]")
_CONTROL_BYTES = re.compile(rb"[\x00-\x1f\x7f]")
_ADDRESS_SYNTAX = re.compile(r'[,;:<>@"()\[\]\\]')


def _words(value: str) -> Iterator[tuple[re.Match[str], str, bytes]]:
    """Each RFC 2047 encoded word of ``value``: the word, its text as a mail reader shows it
    (its charset read with replacement; "" for an unknown one) and its bytes. A word that does
    not decode is no encoded word to a reader: it shows it as written."""
    import quopri

    for word in _WORD.finditer(value):
        charset, encoding, text = word.groups()
        try:
            data = (base64.b64decode(text + "=" * (-len(text) % 4)) if encoding in "Bb"
                    else quopri.decodestring(text.encode(), header=True))  # fmt: skip
        except (binascii.Error, ValueError):
            continue
        try:
            shown = data.decode(charset.partition("*")[0], "replace")
        except LookupError:
            shown = ""
        yield word, shown, data


def check_line(value: str, path: str) -> None:
    """A single line as a mail reader shows it: no encoded word may decode to a line break or
    a control character (``=?UTF-8?Q?a=0D=0ABcc:...?=`` would be a header line of its own)."""
    for word, shown, data in _words(value):
        # The bytes themselves too: CR, LF and NUL are those bytes in any ASCII charset.
        if _CONTROL.search(shown) or _CONTROL_BYTES.search(data):
            raise ValidationError(
                path, f"must not contain line breaks or control characters, also not in an "
                      f"encoded word ({word.group()[:60]!r} at {word.start()})")  # fmt: skip


def check_fields(lines: list[tuple[str, str]], names: list[tuple[str, str]]) -> None:
    """``check_line`` of each (value, path) of ``lines`` and of ``names``, and ``check_name``
    of each of ``names``: a message's header fields in one call."""
    for value, path in [*lines, *names]:
        check_line(value, path)
    for value, path in names:
        check_name(value, path)


def check_name(value: str, path: str) -> None:
    """A display name as a mail reader shows it: the email package writes what an encoded word
    in a name decodes to unquoted, so address syntax there would change the header's
    addresses (``=?UTF-8?Q?x_<evil@example.net>?=``)."""
    for word, shown, data in _words(value):
        if _ADDRESS_SYNTAX.search(shown) or _ADDRESS_SYNTAX.search(data.decode("latin-1")):
            raise ValidationError(path, (
                f"must not hold address syntax (, ; : < > @ \" ( ) [ ] \\) in an encoded word "
                f"({word.group()[:60]!r} at {word.start()}): write the name as text"))  # fmt: skip
