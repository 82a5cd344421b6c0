"""SMS segments: the encoding a body travels in and how many segments it is billed as.

A body whose every character is in the GSM 03.38 default alphabet or its extension table goes
as GSM-7, any other as UCS-2 (UTF-16). One segment is 140 octets: 160 septets, or 70 UTF-16
code units. A longer body is sent concatenated, each segment giving 6 octets to the user data
header that puts the parts together again: 153 septets, or 67 code units, a segment. A character
is never split across two segments: an extension character (an escape septet and its own) and a
character outside the Basic Multilingual Plane (a surrogate pair) move whole to the next one.

This is what Twilio counts and bills (its "What the heck is a segment?" and the glossary pages on
GSM-7 and UCS-2). Twilio's Smart Encoding, which would replace look-alikes such as curly quotes
with GSM-7 characters, is an opt-in setting of a Messaging Service: VDQ sends without one and
does not emulate it, so a curly quote makes the whole body UCS-2, as Twilio sends it.
"""

from __future__ import annotations

from dataclasses import dataclass

from vdq.core.errors import TooManySegments

GSM7 = "GSM-7"
UCS2 = "UCS-2"
ENCODINGS = (GSM7, UCS2)

GSM7_SINGLE, GSM7_PART = 160, 153  # septets: one segment; each segment of a concatenated body
UCS2_SINGLE, UCS2_PART = 70, 67  # UTF-16 code units, likewise

# The default alphabet, one septet each, in table order (0x00 to 0x7F); 0x1B, the escape that
# starts an extension character, is left out.
GSM7_BASIC = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅå"
    "\u0394_\u03a6\u0393\u039b\u03a9\u03a0\u03a8\u03a3\u0398\u039eÆæßÉ"
    " !\"#¤%&'()*+,-./"
    "0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNO"
    "PQRSTUVWXYZÄÖÑÜ§"
    "¿abcdefghijklmno"
    "pqrstuvwxyzäöñüà"
)
# The extension table: the escape and one septet, so two septets each.
GSM7_EXTENSION = frozenset("\f^{}\\[~]|€")


@dataclass(frozen=True)
class SegmentCount:
    encoding: str  # GSM7 or UCS2
    segments: int
    units: int  # septets (GSM-7) or UTF-16 code units (UCS-2) of the whole body

    @property
    def unit_name(self) -> str:
        return "septets" if self.encoding == GSM7 else "UTF-16 code units"


def is_gsm7(text: str) -> bool:
    return all(c in GSM7_BASIC or c in GSM7_EXTENSION for c in text)


def first_non_gsm7(text: str) -> str | None:
    """The first character that makes ``text`` UCS-2, or None."""
    return next((c for c in text if c not in GSM7_BASIC and c not in GSM7_EXTENSION), None)


def count(body: str) -> SegmentCount:
    """The encoding and segments of ``body`` as Twilio sends it (one segment when empty)."""
    if is_gsm7(body):
        widths = [2 if c in GSM7_EXTENSION else 1 for c in body]
        encoding, single, part = GSM7, GSM7_SINGLE, GSM7_PART
    else:
        widths = [2 if ord(c) > 0xFFFF else 1 for c in body]
        encoding, single, part = UCS2, UCS2_SINGLE, UCS2_PART
    total = sum(widths)
    if total <= single:
        return SegmentCount(encoding, 1, total)
    segments, used = 1, 0
    for width in widths:
        if used + width > part:  # the character moves whole to the next segment
            segments, used = segments + 1, 0
        used += width
    return SegmentCount(encoding, segments, total)


def check(body: str, field: str, limit: int) -> SegmentCount:
    """The body's count; TooManySegments (a 400 naming ``field``) over ``limit`` segments."""
    found = count(body)
    if found.segments <= limit:
        return found
    why = ""
    if found.encoding == UCS2:
        why = (f"; {first_non_gsm7(body)!r} is not in the GSM-7 alphabet, so the whole body "
               f"goes as UCS-2, {UCS2_PART} code units a segment")
    raise TooManySegments(
        field,
        f"takes {found.segments} SMS segments ({found.units} {found.unit_name} in "
        f"{found.encoding}) and the limit is {limit} (VDQ_SMS_MAX_SEGMENTS){why}",
        segments=found.segments, limit=limit, encoding=found.encoding,
    )


def longest(sample: str, max_segments: int, max_length: int) -> int:
    """The most repeats of the one character ``sample`` that fit in ``max_segments`` (at most
    ``max_length``): the length under which any body of that character class is taken."""
    low, high = 0, max_length
    while low < high:
        middle = (low + high + 1) // 2
        if count(sample * middle).segments <= max_segments:
            low = middle
        else:
            high = middle - 1
    return low
