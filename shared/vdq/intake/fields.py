"""The request bodies of the REST API as data: each field's name, kind, bounds and description.

One declaration per body serves two readers: the handlers check a request against it
(vdq.intake.validation) and the OpenAPI generator writes it as JSON Schema (vdq.operations.bodies),
so the document states exactly the limits the server enforces. A field's ``kind`` names what its
value is (a line of text, an email address, a list, an object, ...); each reader has one
entry per kind, and the formats both readers share (patterns, lengths) are here. Pure data:
importing it costs nothing at cold start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

MAX_FILENAME = 255
MAX_EMAIL = 254  # RFC 5321 path length
MAX_CELL = 16  # "+" and 15 digits (E.164)
MAX_MESSAGING_SERVICE_SID = 34  # "MG" and 32 hex digits
MIME_TYPE = r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$"
# A mailing list's name (what one-click unsubscribe leaves): lower case, no `#` (it is part of
# a suppression's key), as SES's topic names and Postmark's stream ids are plain tokens.
LIST_NAME = r"^[a-z0-9][a-z0-9._-]{0,63}$"
CONTENT_ID_CHARS = "A-Za-z0-9!#$%&'*+/=?^_`{|}~.@-"
# The file name extensions SES refuses in an attachment (the SES Developer Guide, "Amazon SES
# unsupported attachment types"): a message holding one is refused at send.
SES_REFUSED_EXTENSIONS = frozenset({
    "ade", "adp", "app", "asp", "bas", "bat", "cer", "chm", "cmd", "com", "cpl", "crt", "csh",
    "der", "exe", "fxp", "gadget", "hlp", "hta", "inf", "ins", "isp", "its", "js", "jse", "ksh",
    "lib", "lnk", "mad", "maf", "mag", "mam", "maq", "mar", "mas", "mat", "mau", "mav", "maw",
    "mda", "mdb", "mde", "mdt", "mdw", "mdz", "msc", "msh", "msh1", "msh2", "mshxml", "msh1xml",
    "msh2xml", "msi", "msp", "mst", "ops", "pcd", "pif", "plg", "prf", "prg", "reg", "scf", "scr",
    "sct", "shb", "shs", "sys", "ps1", "ps1xml", "ps2", "ps2xml", "psc1", "psc2", "tmp", "url",
    "vb", "vbe", "vbs", "vps", "vsmacros", "vss", "vst", "vsw", "vxd", "ws", "wsc", "wsf", "wsh",
    "xnk",
})  # fmt: skip


class Field(NamedTuple):
    """One field of a body (or the entry of a list, with no name)."""

    name: str
    kind: str  # what the value is: a key of vdq.intake.validation.KINDS
    # For the document. ``{setting}`` or ``{setting:,}`` stands for a setting's default (the
    # generator writes it in), e.g. ``{max_receivers}``.
    description: str = ""
    required: bool = False
    min_length: int | None = None  # characters
    max_length: int | None = None
    max_items: int | str | None = None  # a list's entries; a str names a limit (a setting)
    minimum: int | None = None  # an integer's bounds; a str names a limit (a setting)
    maximum: int | str | None = None
    of: Any = None  # a list's entry (a Field); an object's Body or OneOf
    message: str | None = None  # the one error for any value out of type or bounds
    # Given only when another field has a value: (that field, its value, the error otherwise).
    requires: tuple[str, Any, str] | None = None
    # Required (not blank) only when this other field, a list, is left out or empty; beside
    # entries of it, a blank value reads as null. An MMS's body and its media_urls.
    required_without: str | None = None
    default: Any = None  # what an absent field reads as (a null reads as null)
    example: Any = None  # for the document
    unit: str = ""  # what an integer counts, for its errors ("bytes")


class Body(NamedTuple):
    """A JSON object: its fields, in the document's order (and the order they are checked)."""

    name: str  # the schema's name in the document
    description: str
    fields: tuple[Field, ...]
    # What the checked values make (a dataclass); None: the dict of the values by name.
    build: Callable[[dict[str, Any]], Any] | None = None
    first: tuple[str, ...] = ()  # fields checked before the others (their errors are a 400)

    def names(self) -> set[str]:
        return {f.name for f in self.fields}


class OneOf(NamedTuple):
    """One of two bodies, chosen by whether ``key`` is given (and not null)."""

    key: str
    with_key: Body
    without_key: Body
    conflict: str  # the error for a field of ``without_key`` only, given beside ``key``
    description: str = ""


Limits = dict[str, Any]  # the limits a check reads, by the name a Field gives (settings, now)
