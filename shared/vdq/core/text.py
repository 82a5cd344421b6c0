"""What counts as text VDQ can send, and the one phone-number format it knows.

Shared by the request checks (vdq.intake), the REST edge (vdq.api) and the suppression list
(vdq.results.suppression), which must agree on both.
"""

from __future__ import annotations

import re

from vdq.core.errors import ValidationError

# E.164: + and up to 15 digits, the first of the country code 1-9. Country code 1 is the North
# American Numbering Plan's alone: +1 NPA NXX XXXX, the area code (NPA) and the exchange (NXX)
# each starting 2-9; Twilio refuses any other +1 number (21211).
E164 = r"^\+(?:1[2-9][0-9]{2}[2-9][0-9]{6}|[2-9][0-9]{1,14})$"
# Twilio's SID of a Messaging Service: an SMS sender its pool picks the number for.
MESSAGING_SERVICE_SID = r"^MG[0-9a-fA-F]{32}$"
# Any E.164 form, the +1 numbers outside the plan too: what enqueue and the suppression list
# took before, so what a lookup of a stored item or entry must still take.
E164_STORED = r"^\+[1-9][0-9]{1,14}$"
# What may not appear in a single-line field (a header, a name, a filename): C0 and C1 controls
# (CR, LF, VT, FF, NEL U+0085 and the file/group/record separators end a line for Python and
# for mail software) and the Unicode line and paragraph separators U+2028/U+2029. The OpenAPI
# document's patterns use the same class.
CONTROL_CHARS = r"\x00-\x1f\x7f-\x9f\u2028\u2029"
_CONTROL = re.compile(f"[{CONTROL_CHARS}]")
# A lone surrogate is not a character: it cannot be encoded as UTF-8, so it cannot be sent.
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(value: str, path: str, *, single_line: bool) -> None:
    """ValidationError unless ``value`` is text (no lone surrogate, no NUL) and, if asked, one
    line (no control character)."""
    found = _SURROGATE.search(value)
    if found:
        raise ValidationError(
            path,
            f"must not contain a lone surrogate "
            f"(U+{ord(found.group()):04X} at {found.start()}): not text",
        )
    if single_line:
        found = _CONTROL.search(value)
        if found:
            raise ValidationError(
                path,
                f"must not contain line breaks or control characters "
                f"(U+{ord(found.group()):04X} at {found.start()})",
            )
    if "\x00" in value:
        raise ValidationError(path, "must not contain NUL characters")
