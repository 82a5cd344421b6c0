"""The OpenAPI schema of an SMS body's segment limit (generator-only, like vdq.operations.bodies).

JSON Schema cannot count segments, so the document declares, per kind of body, the length under
which any body of that kind fits in VDQ_SMS_MAX_SEGMENTS at its default: a body valid by the
document is never refused for its segments. Each length is the longest run of the kind's widest
character (vdq.intake.segments.longest), which the segment counting itself decides.
"""

from __future__ import annotations

from typing import Any

from vdq.intake import messages, segments


def _char_class(chars: frozenset[str]) -> str:
    """A regex character class of ``chars`` as \\u escapes and ranges (read the same by
    ECMA-262 and Python)."""
    runs: list[list[int]] = []
    for point in sorted(map(ord, chars)):
        if runs and point == runs[-1][1] + 1:
            runs[-1][1] = point
        else:
            runs.append([point, point])
    return "".join(f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in runs)


GSM7_BASIC_ONLY = f"^[{_char_class(segments.GSM7_BASIC)}]*$"
GSM7_ONLY = f"^[{_char_class(segments.GSM7_BASIC | segments.GSM7_EXTENSION)}]*$"
BMP_ONLY = "^[\\u0000-\\uffff]*$"
# Each kind of body with its widest character: a body of that kind no longer than the longest
# run of it that fits takes no more segments, whatever its characters.
KINDS = (
    ("any character", None, "\U0001f600"),  # outside the BMP: a surrogate pair, 2 code units
    ("the Basic Multilingual Plane only", BMP_ONLY, "\u0436"),  # UCS-2, 1 code unit
    ("GSM-7 only", GSM7_ONLY, "{"),  # an extension character, 2 septets
    ("the GSM-7 default alphabet only", GSM7_BASIC_ONLY, "a"),  # 1 septet
)


def limits(max_segments: int) -> list[Any]:
    """The body's anyOf: per kind, the longest body that always fits in ``max_segments``."""
    out = []
    for name, pattern, widest in KINDS:
        branch: dict[str, Any] = {"description": f"A body of {name}."}
        if pattern:
            branch["pattern"] = pattern
        branch["maxLength"] = segments.longest(widest, max_segments, messages.MAX_SMS_BODY)
        out.append(branch)
    return out
