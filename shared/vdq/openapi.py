"""The OpenAPI document of the REST API: generated at build time, served as committed.

``python -m vdq.openapi`` writes ``openapi.json`` beside this module from the operation table
(vdq.operations.spec), the request bodies' declarations (vdq.operations.bodies over
vdq.intake.fields), the response models (vdq.operations.schemas, pydantic), the examples
(vdq.operations.examples) and the prose (vdq.operations.docs). The operator function serves the
committed file, so it never imports pydantic at run time; a test rebuilds the document and fails
when the committed one differs, or when the routes do.
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
_JSON = "application/json"
_FORM = "application/x-www-form-urlencoded"
_HTML = "text/html"
# Bodies taken in more than one form: RFC 8058 lets a mail client send either.
_BODY_MEDIA = {"OneClickUnsubscribe": (_FORM, "multipart/form-data")}


@lru_cache(maxsize=1)
def document_text() -> str:
    """The committed document, as served by ``GET /openapi.json``."""
    return DOCUMENT.read_text()


def _schema_ref(model: str) -> dict[str, Any]:
    return {"$ref": _REF.format(model=model)}


def _param_schema(param: Any) -> dict[str, Any]:
    from vdq.operations import docs

    if param.name == docs.IDEMPOTENCY_HEADER:
        return dict(docs.IDEMPOTENCY_KEY_SCHEMA)
    schema: dict[str, Any] = {"type": param.type}
    for key, value in (("enum", list(param.enum) or None), ("minimum", param.minimum),
                       ("maximum", param.maximum), ("default", param.default),
                       ("pattern", param.pattern), ("maxLength", param.max_length)):
        if value is not None:
            schema[key] = value
    if param.type == "string" and param.where != "path" and not param.enum:
        schema["minLength"] = 1
    return schema  # fmt: skip


def _parameter(op: Any, param: Any) -> dict[str, Any]:
    from vdq.operations import docs, examples

    description = param.description
    if param.name == docs.IDEMPOTENCY_HEADER and op.idempotent:
        description = f"{description} {docs.IDEMPOTENCY_RULES}"
    out = {"name": param.name, "in": param.where, "required": param.required or param.where
           == "path", "description": description, "schema": _param_schema(param)}  # fmt: skip
    example = examples.PARAMETERS.get(op.id, {}).get(param.name)
    if example is not None:
        out["example"] = example
    return out


def _error(description: str, model: str = "Error") -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": _schema_ref(model)}}}


def _responses(op: Any) -> dict[str, Any]:
    from vdq.operations import docs, examples

    ok: dict[str, Any] = {"description": docs.SUCCESS[op.id]}
    if op.media:
        ok["content"] = {op.media: {"schema": {"type": "string"},
                                    "example": examples.RESPONSES[op.id]}}  # fmt: skip
    elif op.answer:
        ok["content"] = {_JSON: {"schema": _schema_ref(op.answer),
                                 "example": examples.RESPONSES[op.id]}}  # fmt: skip
    if op.status == 302:
        ok["headers"] = {
            "Location": {"description": "The presigned URL of the file.",
                         "schema": {"type": "string", "format": "uri"},
                         "example": examples.RESPONSES[op.id]},
            "Cache-Control": {"description": "`no-store`: the URL is for this request only.",
                              "schema": {"type": "string", "const": "no-store"}},
        }  # fmt: skip
    statuses = {op.status: ok}
    if op.status == 302:  # redirect=false: the URL in a body instead, for a web page
        statuses[200] = {
            "description": "With `redirect=false`: the presigned URL of the file, which a web "
                           "page cannot read from a redirect.",
            "headers": {"Cache-Control": ok["headers"]["Cache-Control"]},
            "content": {_JSON: {
                "schema": {"type": "object", "required": ["url"], "additionalProperties": False,
                           "properties": {"url": {"type": "string", "format": "uri"}}},
                "example": {"url": examples.RESPONSES[op.id]}}},
        }  # fmt: skip
    for status in op.errors:
        if op.id == "health" and status == 503:
            statuses[503] = {"description": docs.STATUS_TEXT[503]["health"],
                             "content": {_JSON: {"schema": _schema_ref("Health")}}}
        elif status == 503 and op.function == "enqueue" and op.answer == "Items":
            # Partly stored (its own shape), or nothing stored (any error's).
            statuses[503] = {"description": docs.STATUS_TEXT[503]["enqueue"],
                             "content": {_JSON: {"schema": {"anyOf": [
                                 _schema_ref("PartiallyEnqueued"), _schema_ref("Error")]}}}}
        elif op.media == _HTML:  # a page for the reader, not an Error
            statuses[status] = {"description": docs.status_text(status, op),
                                "content": {_HTML: {"schema": {"type": "string"}}}}
        else:
            statuses[status] = _error(docs.status_text(status, op))
        if status == 503 and op.media == _HTML:
            statuses[503]["headers"] = {"Retry-After": {
                "description": "Seconds to wait before trying again.",
                "schema": {"type": "integer", "minimum": 1}}}
        if status == 429:  # a quota's 429 carries Retry-After as API Gateway's does
            statuses[429]["headers"] = docs.gateway_responses()["Throttled"]["headers"]
        if status == 409 and op.idempotent:  # a repeat while the first still runs
            statuses[409]["headers"] = {"Retry-After": {
                "description": "With a request under its Idempotency-Key still in progress: "
                               "seconds to wait before repeating it for its answer.",
                "schema": {"type": "integer", "minimum": 1}}}  # fmt: skip
    refs = docs.gateway_statuses(op)
    for status in refs:
        statuses.setdefault(status, {"$ref": f"#/components/responses/{refs[status]}"})
    return {str(s): statuses[s] for s in sorted(statuses)}


def _operation(op: Any) -> dict[str, Any]:
    from vdq.operations import docs, examples

    out: dict[str, Any] = {
        "operationId": op.id,
        "summary": op.summary,
        "description": f"{op.description}\n\n{docs.permission_text(op)}",
        "tags": [op.tag],
        "x-vdq-permissions": list(op.permissions),
    }
    if op.id == "runTransition":
        out["x-vdq-transition-permissions"] = docs.transition_permissions()
    if op.params:
        out["parameters"] = [_parameter(op, p) for p in op.params]
    if op.body:
        medias = _BODY_MEDIA.get(op.body) or ((_FORM,) if op.function == "webhook" else (_JSON,))
        out["requestBody"] = {
            "required": True,
            "description": docs.BODIES[op.body],
            "content": {media: {"schema": _schema_ref(op.body),
                                "example": examples.REQUESTS[op.id]} for media in medias},
        }  # fmt: skip
    out["responses"] = _responses(op)
    out["security"] = [] if op.public else docs.security(op)
    return out


def _components_schemas() -> dict[str, Any]:
    from pydantic.json_schema import models_json_schema

    from vdq.operations import bodies, docs, schemas, schemas_counts, schemas_suppressions

    models = (*schemas.MODELS, *schemas_counts.MODELS, *schemas_suppressions.MODELS)
    _, definitions = models_json_schema([(m, "validation") for m in models], ref_template=_REF)
    found = definitions.get("$defs", {})
    requests = bodies.schemas()
    assert not set(requests) & set(found), "a request body is declared, not a model"
    found.update(requests)
    for schema in found.values():
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
    found["State"]["description"] = docs.STATE_TEXT
    code = found["ErrorDetail"]["properties"]["code"]
    code["enum"] = sorted(docs.error_codes())
    code["description"] = docs.error_code_text()
    return dict(sorted(found.items()))


def build() -> dict[str, Any]:
    """The document, from the operation table and the body models (imports pydantic)."""
    from vdq.operations import docs, spec

    paths: dict[str, dict[str, Any]] = {}
    for op in spec.OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": TITLE,
            "version": VERSION,
            "summary": "Outbound email (Amazon SES) and SMS (Twilio) dispatch queue.",
            "description": docs.overview(),
            "contact": docs.CONTACT,
            "license": docs.LICENSE,
        },
        "servers": docs.servers(),
        "tags": docs.TAGS,
        "paths": paths,
        "components": {
            "schemas": _components_schemas(),
            "responses": docs.gateway_responses(),
            "securitySchemes": docs.security_schemes(),
        },
        "security": [{"bearer": []}, {"oauth2": []}],
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
