"""The REST API reference page, rendered from the OpenAPI document as Markdown at build time: no
script and nothing fetched from elsewhere when the page is read (the site works offline).

One section per tag, one per operation (its permissions, parameters, request body, answers and
examples), then every schema with its fields. A ``$ref`` becomes a link to its schema's section.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from docsite.reference import GENERATED, cell

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
SHORT_PATTERN = 40  # longer patterns (the body checks' character classes) stay in the document


def _text(text: str | None) -> str:
    """Prose of the document: ``<`` and ``>`` outside code spans shown as text, not read as
    HTML (``<token>``)."""
    parts = re.split(r"(`[^`]*`)", text or "")
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;")
                   for p in parts)  # fmt: skip


def _one_line(text: str | None) -> str:
    return cell(_text(text).replace("\n\n", "<br><br>").replace("\n", " "))


def _anchor(name: str) -> str:
    return f"schema-{name.lower()}"


def _ref(ref: str) -> str:
    name = ref.rsplit("/", 1)[1]
    return f"[{name}](#{_anchor(name)})"


def type_of(schema: Mapping[str, Any]) -> str:
    """A schema's type in a few words: ``string``, ``array of [Address](#...)``, ``A or null``."""
    if "$ref" in schema:
        return _ref(schema["$ref"])
    for key in ("anyOf", "oneOf"):
        if key in schema and "type" not in schema:  # beside a type, an anyOf only narrows it
            kinds = list(dict.fromkeys(type_of(s) for s in schema[key]))
            return " or ".join(kinds)
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return f"array of {type_of(schema.get('items') or {})}"
    if "format" in schema:
        return f"{kind} ({schema['format']})"
    return str(kind)


def limits_of(schema: Mapping[str, Any]) -> str:
    """The schema's constraints in words (enum, default, lengths, counts, bounds); of an
    optional value (a value or null), the value's."""
    branches = schema.get("anyOf") or []
    if len(branches) == 2 and branches[1] == {"type": "null"} and "type" in branches[0]:
        schema = {**branches[0], **{k: v for k, v in schema.items() if k != "anyOf"}}
    found = []
    if "enum" in schema:
        found.append("one of " + ", ".join(f"`{v}`" for v in schema["enum"]))
    for low, high, unit in (("minLength", "maxLength", " characters"),
                            ("minItems", "maxItems", " items"), ("minimum", "maximum", "")):
        if low in schema and high in schema:
            found.append(f"{schema[low]} to {schema[high]}{unit}")
        elif low in schema:
            found.append(f"at least {schema[low]}{unit}")
        elif high in schema:
            found.append(f"at most {schema[high]}{unit}")
    for key, word in (("exclusiveMinimum", "above {}"), ("exclusiveMaximum", "below {}")):
        if key in schema:
            found.append(word.format(schema[key]))
    pattern = schema.get("pattern")
    if pattern and len(pattern) <= SHORT_PATTERN:
        found.append(f"pattern `{pattern}`")
    elif pattern:
        found.append("a pattern (in the document)")
    if "default" in schema and schema["default"] not in (None, [], {}):
        found.append(f"default `{json.dumps(schema['default'])}`")
    return "; ".join(found)


def _fields(schema: Mapping[str, Any]) -> list[str]:
    """A table of an object schema's properties (nothing for another kind of schema)."""
    properties = schema.get("properties") or {}
    if not properties:
        return []
    required = set(schema.get("required") or [])
    rows = ["| field | type | required | limits | description |", "|---|---|---|---|---|"]
    for name, field in properties.items():
        rows.append(f"| `{name}` | {cell(type_of(field))} | {'yes' if name in required else ''} "
                    f"| {cell(limits_of(field))} | {_one_line(field.get('description'))} |")
    return rows


def _example(value: Any) -> list[str]:
    return ["```json", json.dumps(value, indent=2, ensure_ascii=False), "```"]


def _parameters(operation: Mapping[str, Any], shared: Iterable[Mapping[str, Any]]) -> list[str]:
    parameters = [*shared, *(operation.get("parameters") or [])]
    if not parameters:
        return []
    rows = ["**Parameters**", "", "| name | in | type | required | limits | description |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for p in parameters:
        schema = p.get("schema") or {}
        rows.append(f"| `{p['name']}` | {p['in']} | {cell(type_of(schema))} | "
                    f"{'yes' if p.get('required') else ''} | {cell(limits_of(schema))} | "
                    f"{_one_line(p.get('description'))} |")
    return [*rows, ""]


def _body(operation: Mapping[str, Any]) -> list[str]:
    body = operation.get("requestBody")
    if not body:
        return []
    lines = ["**Request body**", ""]
    if body.get("description"):
        lines += [_text(body["description"]), ""]
    for media, content in (body.get("content") or {}).items():
        lines += [f"`{media}`: {type_of(content.get('schema') or {})}", ""]
        if "example" in content:
            lines += ["Example:", "", *_example(content["example"]), ""]
    return lines


def _answers(operation: Mapping[str, Any], document: Mapping[str, Any]) -> list[str]:
    shared = (document.get("components") or {}).get("responses") or {}
    rows = ["**Answers**", "", "| status | body | meaning |", "|---|---|---|"]
    examples: list[str] = []
    for status, answer in (operation.get("responses") or {}).items():
        if "$ref" in answer:
            answer = shared[answer["$ref"].rsplit("/", 1)[1]]
        bodies = []
        for media, content in (answer.get("content") or {}).items():
            bodies.append(type_of(content.get("schema") or {}) if media == "application/json"
                          else f"`{media}`")  # fmt: skip
            if "example" in content and str(status).startswith("2"):
                examples += [f"Example of a {status} answer:", "",
                             *_example(content["example"]), ""]  # fmt: skip
        rows.append(f"| {status} | {cell(', '.join(bodies))} | "
                    f"{_one_line(answer.get('description'))} |")
    return [*rows, "", *examples]


def _operation(path: str, method: str, operation: Mapping[str, Any],
               shared: Iterable[Mapping[str, Any]],
               document: Mapping[str, Any]) -> list[str]:  # fmt: skip
    lines = [f"### {method.upper()} `{path}` {{#{operation['operationId'].lower()}}}", ""]
    if operation.get("summary"):
        lines += [f"**{_text(operation['summary'])}**", ""]
    security = operation.get("security", document.get("security"))
    if security == []:
        lines += ["No token.", ""]
    else:  # the description names the permissions; the scopes a machine client needs are here
        scopes = [s for requirement in security or [] for s in requirement.get("oauth2", [])]
        if scopes:
            lines += ["A user's bearer token, or a machine client's with one of the scopes "
                      + ", ".join(f"`{s}`" for s in scopes) + ".", ""]
    if operation.get("description"):
        lines += [_text(operation["description"]), ""]
    return [*lines, *_parameters(operation, shared), *_body(operation),
            *_answers(operation, document)]  # fmt: skip


def api_page(document: Mapping[str, Any]) -> str:
    info = document.get("info") or {}
    lines = [
        "# REST API reference",
        "",
        GENERATED,
        "",
        f"{_text(info.get('summary'))} OpenAPI {document.get('openapi')}, version "
        f"{info.get('version')}: this page is `shared/vdq/openapi.json` as Markdown. A stack "
        "serves the same document at `GET /openapi.json`.",
        "",
        _text(info.get("description")),
        "",
        "## Servers",
        "",
        "| URL | what |",
        "|---|---|",
        *(f"| `{s['url']}` | {_one_line(s.get('description'))} |"
          for s in document.get("servers") or []),
        "",
        "## Authentication",
        "",
    ]  # fmt: skip
    schemes = (document.get("components") or {}).get("securitySchemes") or {}
    for name, scheme in schemes.items():
        lines += [f"**{name}** ({scheme.get('type')}): {_text(scheme.get('description'))}", ""]
        for flow, details in (scheme.get("flows") or {}).items():
            lines += [f"Flow `{flow}`, token URL `{details.get('tokenUrl')}`. Scopes:", "",
                      "| scope | grants |", "|---|---|",
                      *(f"| `{s}` | {_one_line(d)} |" for s, d in details["scopes"].items()),
                      ""]  # fmt: skip
    operations: dict[str, list[tuple[str, str, Mapping[str, Any], list[Any]]]] = {}
    for path, item in (document.get("paths") or {}).items():
        for method in METHODS:
            if method in item:
                operation = item[method]
                tag = (operation.get("tags") or ["other"])[0]
                operations.setdefault(tag, []).append(
                    (path, method, operation, item.get("parameters") or []))
    tags = [t["name"] for t in document.get("tags") or []]
    tags += [t for t in operations if t not in tags]
    descriptions = {t["name"]: t.get("description") for t in document.get("tags") or []}
    lines += ["## Operations", "", "| method | path | does |", "|---|---|---|"]
    for tag in tags:
        for path, method, operation, _ in operations.get(tag, []):
            lines.append(f"| {method.upper()} | [`{path}`](#{operation['operationId'].lower()}) "
                         f"| {_one_line(operation.get('summary'))} |")
    lines.append("")
    for tag in tags:
        if tag not in operations:
            continue
        lines += [f"## {tag}", "", _text(descriptions.get(tag)), ""]
        for path, method, operation, shared in operations[tag]:
            lines += _operation(path, method, operation, shared, document)
    lines += ["## Schemas", ""]
    for name, schema in ((document.get("components") or {}).get("schemas") or {}).items():
        lines += [f"### {name} {{#{_anchor(name)}}}", ""]
        if schema.get("description"):
            lines += [_text(schema["description"]), ""]
        rows = _fields(schema)
        if rows:
            lines += [*rows, ""]
        else:
            kind = type_of(schema)
            limits = limits_of(schema)
            lines += [f"Type: {kind}" + (f"; {limits}" if limits else "") + ".", ""]
    return "\n".join(lines)
