"""The request bodies as JSON Schema, written from their declarations (vdq.intake.fields).

Generator-only, like vdq.operations.schemas: the handlers check the same declarations with
vdq.intake.validation, so a limit, a required field or a description is written once. Each kind of
field has one entry in ``_KINDS`` here, as it has one check there; a limit that is a setting is
written at its default. Keys are sorted as pydantic sorts them, so the document reads the same
whether a schema comes from a declaration or from a response model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from vdq.core import ids
from vdq.core.settings import Settings
from vdq.intake import messages, uploads, validation
from vdq.intake.fields import SES_REFUSED_EXTENSIONS, Body, Field, OneOf
from vdq.operations import smsbody, spec, suppressions
from vdq.workflow.lanes import DEFAULT_PRIORITY, PRIORITIES

# Every body a request takes, by the operation's body name (vdq.operations.spec).
REQUESTS: tuple[Body, ...] = (messages.EMAIL, messages.SMS, spec.RESEND,
                              suppressions.SUPPRESSION, uploads.UPLOAD)  # fmt: skip
_DEFAULTS = Settings()
_REF = "#/components/schemas/{name}"
_C = validation.CONTROL_CHARS
_SPACE = spec.BLANK
# The document's patterns of text fields live beside the query parameters that use them too.
SINGLE_LINE, SINGLE_LINE_REQUIRED = spec.SINGLE_LINE, spec.SINGLE_LINE_REQUIRED
MULTI_LINE, MULTI_LINE_REQUIRED = spec.MULTI_LINE, spec.MULTI_LINE_REQUIRED
BASE64 = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
FILENAME = f"^[^/\\\\{_C}]*[^{_SPACE}/\\\\{_C}][^/\\\\{_C}]*$"
# Months, days, hours, minutes and seconds in range (no leap second: Python has none); a day
# past its month's end (02-30) is the one thing only the server refuses.
SEND_AT = (r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:[0-5]\d"
           r"(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$")  # fmt: skip
HTTPS_URL = validation.HTTPS_URL
# A name SES refuses (vdq.intake.fields.SES_REFUSED_EXTENSIONS), in any case, with any trailing dots
# and spaces (a pattern has no flag for case: each letter is a class).
SES_REFUSED_NAME = "\\.(?:{})[. ]*$".format("|".join(
    "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in ext)
    for ext in sorted(SES_REFUSED_EXTENSIONS)))  # fmt: skip
_INT64 = {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}
_SETTING = re.compile(r"\{(\w+)(:,)?\}")


def text(description: str) -> str:
    """A description with each ``{setting}`` written as the setting's default."""

    def default(match: re.Match[str]) -> str:
        if not hasattr(_DEFAULTS, match.group(1)):
            return match.group(0)
        value = getattr(_DEFAULTS, match.group(1))
        return f"{value:,}" if match.group(2) else str(value)

    return _SETTING.sub(default, description)


def at_default(value: int | str | None) -> int | None:
    """A declared bound, or the default of the setting it names."""
    return getattr(_DEFAULTS, value) if isinstance(value, str) else value


def _string(f: Field, pattern: str | None, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string", **more}
    if pattern:
        out["pattern"] = pattern
    if f.min_length is not None:
        out["minLength"] = f.min_length
    if f.max_length is not None:
        out["maxLength"] = f.max_length
    return out


def _line(f: Field) -> dict[str, Any]:
    return _string(f, SINGLE_LINE_REQUIRED if f.required else SINGLE_LINE)


def _text(f: Field) -> dict[str, Any]:
    return _string(f, MULTI_LINE_REQUIRED if f.required else MULTI_LINE)


def _sms_body(f: Field) -> dict[str, Any]:
    return {**_text(f), "anyOf": smsbody.limits(_DEFAULTS.sms_max_segments)}


def _object(f: Field) -> dict[str, Any]:
    if isinstance(f.of, OneOf):
        return {"anyOf": [{"$ref": _REF.format(name=b.name)}
                          for b in (f.of.without_key, f.of.with_key)]}  # fmt: skip
    return {"$ref": _REF.format(name=f.of.name)}


def _list(f: Field) -> dict[str, Any]:
    entry = property_schema(f.of)
    out: dict[str, Any] = {"type": "array", "items": entry}
    if f.required:
        out["minItems"] = 1
    if f.max_items is not None:
        out["maxItems"] = at_default(f.max_items)
    return out


# Each kind's schema (of a value that is not null): what vdq.intake.validation.KINDS checks.
_KINDS: dict[str, Callable[[Field], dict[str, Any]]] = {
    "line": _line,
    "display_name": _line,
    "text": _text,
    "sms_body": _sms_body,
    "email": lambda f: _string(f, None, format="email"),
    "cell": lambda f: _string(f, validation.E164),
    "messaging_service": lambda f: _string(f, validation.MESSAGING_SERVICE_SID),
    "receiver": lambda f: _string(f, spec.RECEIVER_PATTERN),
    "filename": lambda f: _string(f, FILENAME),
    "mime": lambda f: _string(f, validation.MIME_TYPE),
    "base64": lambda f: {"type": "string", "pattern": BASE64, "contentEncoding": "base64"},
    "bool": lambda f: {"type": "boolean"},
    "content_id": lambda f: {"type": "string", "pattern":
                             f"^[{validation.CONTENT_ID_CHARS}]{{1,{f.max_length}}}$"},
    "upload_id": lambda f: {"type": "string", "pattern": ids.PATTERN},
    "sha256": lambda f: {"type": "string", "pattern": validation.SHA256_BASE64},
    "item_id": lambda f: _string(f, ids.PATTERN),
    # Any whole number the JSON of a 64-bit integer holds (stored as its text).
    "origin_id": lambda f: {"anyOf": [_line(f), _INT64]},
    "https_url": lambda f: _string(f, HTTPS_URL),
    "priority": lambda f: {"type": "string", "enum": list(PRIORITIES)},
    "list_name": lambda f: _string(f, validation.LIST_NAME),
    "send_at": lambda f: {"type": "string"},
    "integer": lambda f: {"type": "integer", "minimum": at_default(f.minimum),
                          "maximum": at_default(f.maximum)},
    "list": _list,
    "object": _object,
}
# Keywords that describe the whole field, beside a null (not only its non-null value).
_OUTER = {"send_at": {"format": "date-time", "pattern": SEND_AT}}
# A field left out reads as this (and a null, where the kind allows one, as null).
_DEFAULTS_OF = {"bool": False, "list": [], "priority": DEFAULT_PRIORITY}


def property_schema(f: Field) -> dict[str, Any]:
    """The schema of one field: its value's, or (optional) that or null, with its default."""
    value = _KINDS[f.kind](f)
    if f.kind == "filename":
        value["not"] = {"anyOf": [{"enum": [".", ".."]},
                                  {"type": "string", "pattern": SES_REFUSED_NAME}]}
    outer: dict[str, Any] = dict(_OUTER.get(f.kind, {}))
    if not f.required and f.kind not in _DEFAULTS_OF:  # an optional value may be null
        nots = {"not": value.pop("not")} if "not" in value else {}
        out = {"anyOf": [value, {"type": "null"}], "default": None, **nots}
    else:
        out = value
        if not f.required and f.kind in _DEFAULTS_OF:
            out["default"] = _DEFAULTS_OF[f.kind]
    if f.kind == "object" and isinstance(f.of, OneOf) and f.of.description:
        out["description"] = text(f.of.description)
    if f.description:
        out["description"] = text(f.description)
    if f.example is not None:
        out["examples"] = [f.example]
    return {**out, **outer}


def body_schema(body: Body) -> dict[str, Any]:
    """A body's object schema: its properties, which are required, and none besides."""
    out: dict[str, Any] = {
        "type": "object",
        "description": text(body.description),
        "additionalProperties": False,
        "properties": {f.name: property_schema(f) for f in body.fields},
    }
    required = [f.name for f in body.fields if f.required]
    if required:
        out["required"] = required
    for f in body.fields:
        if f.required_without is not None:  # not blank, or the other list has an entry
            given = _KINDS[f.kind](f._replace(required=True))
            out["anyOf"] = [
                {"description": f"With `{f.name}`.", "required": [f.name], "properties": {
                    f.name: {"type": given["type"], "pattern": given["pattern"]}}},
                {"description": f"With `{f.required_without}`.",
                 "required": [f.required_without],
                 "properties": {f.required_without: {"type": "array", "minItems": 1}}},
            ]
        if f.requires is not None:  # given only beside another field's value
            other, wanted, _ = f.requires
            out["if"] = {"required": [f.name], "properties": {f.name: {"type": "string"}}}
            out["then"] = {"required": [other], "properties": {other: {"const": wanted}}}
    return _sorted(out)


def _sorted(value: Any, parent: str | None = None) -> Any:
    """Keys in alphabetical order but a schema's properties and defaults (pydantic's order)."""
    if isinstance(value, dict):
        keys = list(value) if parent in ("properties", "default") else sorted(value)
        return {key: _sorted(value[key], key) for key in keys}
    if isinstance(value, list):
        return [_sorted(v, parent) for v in value]
    return value


def nested(body: Body) -> list[Body]:
    """``body`` and every body its fields hold, each once."""
    found = [body]
    for f in body.fields:
        entry = f.of if f.kind == "list" else f
        if entry is not None and entry.kind == "object":
            parts = ((entry.of.without_key, entry.of.with_key) if isinstance(entry.of, OneOf)
                     else (entry.of,))  # fmt: skip
            for part in parts:
                found += [b for b in nested(part) if b not in found]
    return found


def schemas() -> dict[str, dict[str, Any]]:
    """Every request body's schema, and those of the objects they hold, by name."""
    out: dict[str, dict[str, Any]] = {}
    for body in REQUESTS:
        for part in nested(body):
            out.setdefault(part.name, body_schema(part))
    return out

