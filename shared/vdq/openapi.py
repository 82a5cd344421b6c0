"""The OpenAPI document of the REST API: generated at build time, served as committed.

``python -m vdq.openapi`` writes ``openapi.json`` beside this module from the operation table
(vdq.operations.spec) and the body models (vdq.operations.schemas, pydantic). The operator
function serves the committed file, so it never imports pydantic at run time; a test rebuilds
the document and fails when the committed one differs, or when the routes do.
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

DOCUMENT = Path(__file__).with_name("openapi.json")
TITLE = "VDQ"
VERSION = "1.0.0"
_REF = "#/components/schemas/{model}"

_ERROR_TEXT = {
    400: "bad request (a malformed body, or a cursor of another list)",
    401: "no valid bearer token",
    403: "not allowed (a missing permission, a server transition, a bad Twilio signature)",
    404: "unknown item, attachment or transition (or, for sent items, an item not done)",
    409: "not possible now (the item's state is no source, or the files were cleaned up)",
    410: "the attachment's file was deleted by cleanup",
    422: "invalid input; details.field names the field",
    503: "contention or a partial failure; try again",
}


@lru_cache(maxsize=1)
def document_text() -> str:
    """The committed document, as served by ``GET /openapi.json``."""
    return DOCUMENT.read_text()


def _schema(param: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": param.type}
    if param.enum:
        schema["enum"] = list(param.enum)
    if param.minimum is not None:
        schema["minimum"] = param.minimum
    if param.maximum is not None:
        schema["maximum"] = param.maximum
    if param.default is not None:
        schema["default"] = param.default
    return schema


def _operation(op: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operationId": op.id,
        "summary": op.summary,
        "description": f"Permission: {op.permission}. Served by the {op.function} function.",
        "tags": [op.function],
    }
    if op.params:
        out["parameters"] = [
            {"name": p.name, "in": p.where, "required": p.required or p.where == "path",
             "description": p.description, "schema": _schema(p)}
            for p in op.params
        ]  # fmt: skip
    if op.body:
        media = ("application/x-www-form-urlencoded" if op.function == "webhook"
                 else "application/json")  # fmt: skip
        out["requestBody"] = {
            "required": True,
            "content": {media: {"schema": {"$ref": _REF.format(model=op.body)}}},
        }
    ok: dict[str, Any] = {"description": op.summary}
    if op.answer:
        ok["content"] = {"application/json": {"schema": {"$ref": _REF.format(model=op.answer)}}}
    if op.status == 302:
        ok["description"] = "redirect to a presigned download URL that expires within minutes"
        ok["headers"] = {"Location": {"schema": {"type": "string", "format": "uri"},
                                      "description": "the presigned URL"}}  # fmt: skip
    responses = {str(op.status): ok}
    for status in op.errors:
        responses[str(status)] = {
            "description": _ERROR_TEXT[status],
            "content": {"application/json": {"schema": {"$ref": _REF.format(model="Error")}}},
        }
    out["responses"] = responses
    out["security"] = [] if op.public else [{"bearer": []}]
    return out


def build() -> dict[str, Any]:
    """The document, from the operation table and the body models (imports pydantic)."""
    from pydantic.json_schema import models_json_schema

    from vdq.operations import schemas, spec

    _, definitions = models_json_schema(
        [(m, "validation") for m in schemas.MODELS], ref_template=_REF
    )
    paths: dict[str, dict[str, Any]] = {}
    for op in spec.OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": TITLE,
            "version": VERSION,
            "description": "Outbound email (Amazon SES) and SMS (Twilio) dispatch queue. Errors "
            'are {"error": {"code", "message", "details"?}}.',
        },
        "paths": paths,
        "components": {
            "schemas": dict(sorted(definitions.get("$defs", {}).items())),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "a Cognito token; its cognito:groups claim maps to "
                    "permissions through VDQ_GROUP_PERMISSIONS",
                }
            },
        },
        "security": [{"bearer": []}],
    }


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the document (``--check``: exit 1 when the committed one is out of date)."""
    args = sys.argv[1:] if argv is None else argv
    text = render(build())
    if "--check" in args:
        if DOCUMENT.read_text() != text:
            print(f"{DOCUMENT} is out of date: run python -m vdq.openapi", file=sys.stderr)
            return 1
        return 0
    DOCUMENT.write_text(text)
    print(f"wrote {DOCUMENT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
