"""What the OpenAPI document promises a third party, checked against the code that keeps it:
every status with the error shape, the error codes the server really uses, where the API is and
how to get a token, the permission of each operation (by calling it), the limits (by sending
one character too many), the examples (valid by their own schemas) and a description on every
operation, parameter, schema and property."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from functions.enqueue import handler as enqueue_handler
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.support.events import api_event
from tests.support.lambda_context import LambdaContext
from tests.support.operator import allow_any_permission_set, call, groups_for
from vdq import api, openapi
from vdq.core import ids, resources
from vdq.core.errors import VdqError
from vdq.core.settings import ALL_PERMISSIONS, DEFAULT_GROUP_PERMISSIONS
from vdq.intake import messages
from vdq.operations import docs, spec
from vdq.workflow.views import HISTORY_KINDS, HISTORY_SOURCES

ROOT = Path(__file__).resolve().parents[2]
DOC = json.loads(openapi.DOCUMENT.read_text())
OPS = {(op.method.lower(), op.path): op for op in spec.OPERATIONS}
REGISTRY = Registry().with_resource("urn:vdq", Resource.from_contents(
    {"$schema": "https://json-schema.org/draft/2020-12/schema", "components": DOC["components"]}
))  # fmt: skip


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [(m, p, o) for p, ops in DOC["paths"].items() for m, o in ops.items()]


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    text = json.dumps(schema).replace('"#/components/', '"urn:vdq#/components/')
    return Draft202012Validator(json.loads(text), registry=REGISTRY,
                                format_checker=Draft202012Validator.FORMAT_CHECKER)  # fmt: skip


def _resolve(response: dict[str, Any]) -> dict[str, Any]:
    ref = response.get("$ref")
    return DOC["components"]["responses"][ref.rsplit("/", 1)[1]] if ref else response


# ---- every status, with the error shape ------------------------------------------------------


@pytest.mark.parametrize("method,path,operation", _operations(), ids=lambda v: str(v)[:40])
def test_every_error_status_has_the_error_shape_and_the_gateways_are_declared(method, path,
                                                                             operation):
    responses = {int(s): _resolve(r) for s, r in operation["responses"].items()}
    op = OPS[(method, path)]
    expected = {429, 500, 502, 504} | ({401, 403} if not op.public else set())
    expected |= {413} if op.body else set()
    expected |= {200} if op.status == 302 else set()  # the download's redirect=false
    assert expected | set(op.errors) | {op.status} == set(responses)
    for status, response in responses.items():
        if status < 400 or (op.id == "health" and status == 503):
            continue
        if op.media == "text/html" and status in (400, 404, 503):
            # The unsubscribe link's own answers are pages for a reader (a mail client reads
            # only the status, and Retry-After), a link cut short included.
            assert list(response["content"]) == ["text/html"], (status, op.id)
            if status == 503:
                assert response["headers"]["Retry-After"]["schema"]["type"] == "integer"
            continue
        schema = response["content"]["application/json"]["schema"]
        # An enqueue's 503: partly stored, or nothing stored (any error's shape).
        refs = [s["$ref"] for s in schema.get("anyOf", [schema])]
        assert all(r.endswith(("/Error", "/PartiallyEnqueued")) for r in refs), (status, refs)
        assert refs[-1].endswith("/Error"), (status, refs)
    retry = responses[429]["headers"]["Retry-After"]
    assert retry["schema"]["type"] == "integer"


def test_a_partial_enqueue_declares_which_items_were_stored_and_which_receivers_were_not():
    for path in ("/emails", "/sms"):
        ref = DOC["paths"][path]["post"]["responses"]["503"]["content"]["application/json"]
        assert ref["schema"]["anyOf"][0]["$ref"].endswith("/PartiallyEnqueued")
    partial = _validator({"$ref": "#/components/schemas/PartiallyEnqueued"})
    body = api.error_body("partially_enqueued", "stored 1 of 2",
                          {"accepted": [ids.new_id()], "rejected": ["b@example.org"]})
    assert not list(partial.iter_errors(body))
    assert list(partial.iter_errors(api.error_body("partially_enqueued", "m", {"accepted": []})))


class _Contended:
    """The quota counters' DynamoDB under a storm of one producer's requests: every charge and
    every read of its record refused for throughput, every batch read leaving its keys
    unprocessed."""

    @staticmethod
    def _refuse(operation: str) -> None:
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException",
                                     "Message": "x"}}, operation)  # fmt: skip

    def update_item(self, **kwargs: Any) -> None:
        self._refuse("UpdateItem")

    def get_item(self, **kwargs: Any) -> None:
        self._refuse("GetItem")

    def batch_get_item(self, RequestItems: Any) -> dict[str, Any]:  # boto3's name
        return {"Responses": {}, "UnprocessedKeys": RequestItems}


def test_the_503_of_counters_that_keep_refusing_is_declared_with_its_shape(aws, runtime,
                                                                          monkeypatch):
    # A charge DynamoDB keeps refusing, and a usage read it keeps refusing, answer
    # 503 contention with nothing counted: each operation that charges or reads the counters
    # declares that answer, in a schema it matches.
    from dataclasses import replace

    from vdq.core.settings import QuotaLimits
    from vdq.store import tx
    from vdq.store.counters import Counters

    monkeypatch.setattr(tx.time, "sleep", lambda s: None)
    subject = api_event("apigw_post_emails")["requestContext"]["authorizer"]["claims"]["sub"]
    runtime.settings = replace(runtime.settings,
                               producer_quotas={subject: QuotaLimits(per_minute=3)})
    runtime.overrides["counters"] = Counters(_Contended(), runtime.settings.table_name)

    def enqueue(sample: str) -> tuple[int, Any]:
        answer = enqueue_handler.handler(api_event(sample), LambdaContext())
        return answer["statusCode"], json.loads(answer["body"])

    usage = call("producer_usage", params={"producer": subject})
    answers = {("post", "/emails"): enqueue("apigw_post_emails"),
               ("post", "/attachments/uploads"): enqueue("apigw_post_attachment_upload"),
               ("get", "/producers/{producer}/usage"): (usage.status, usage.body)}
    for (method, path), (status, body) in answers.items():
        assert (status, body["error"]["code"]) == (503, "contention"), path
        declared = DOC["paths"][path][method]["responses"]
        assert "503" in declared, path
        schema = _resolve(declared["503"])["content"]["application/json"]["schema"]
        assert not list(_validator(schema).iter_errors(body)), path


def _error_body_literals() -> set[str]:
    """Codes the handlers and the local front write without a VdqError."""
    found = set()
    for path in [*ROOT.joinpath("functions").rglob("*.py"), ROOT / "shared/vdq/local/front.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id",
                None)) == "error_body" and node.args and isinstance(node.args[0], ast.Constant)):
                found.add(node.args[0].value)
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if (isinstance(key, ast.Constant) and key.value == "code"
                            and isinstance(value, ast.Constant)):
                        found.add(value.value)
    return found  # fmt: skip


def test_error_code_is_the_enum_of_every_code_the_server_and_the_gateway_use():
    # their VdqError subclasses

    enum = set(DOC["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["enum"])
    raised, todo = set(), [VdqError]
    while todo:
        kind = todo.pop()
        raised.add(kind.code)
        todo.extend(kind.__subclasses__())
    assert raised - set(docs.INTERNAL_CODES) <= enum
    assert {g.code for g in api.GATEWAY_ERRORS} <= enum
    literals = _error_body_literals()
    assert {"method_not_allowed", "internal_error", "not_found"} <= literals
    assert literals <= enum
    assert not enum & set(docs.INTERNAL_CODES)
    for code in enum:  # each explained
        assert f"`{code}`:" in DOC["components"]["schemas"]["ErrorDetail"]["properties"]["code"][
            "description"]


# ---- where and how ---------------------------------------------------------------------------


def test_servers_are_the_deployed_stage_and_the_local_stack_with_variables():
    from vdq.local.stack import DEFAULT_PORT

    deployed, local = DOC["servers"]
    assert deployed["url"] == "https://{restApiId}.execute-api.{region}.amazonaws.com/{stage}"
    assert deployed["variables"]["stage"]["enum"] == [resources.API_STAGE]
    assert set(deployed["variables"]) == {"restApiId", "region", "stage"}
    assert local["url"] == "http://127.0.0.1:{port}"
    assert local["variables"]["port"]["default"] == str(DEFAULT_PORT)


def test_client_credentials_flow_offers_a_scope_per_group_of_the_resource_server():
    flow = DOC["components"]["securitySchemes"]["oauth2"]["flows"]["clientCredentials"]
    assert flow["tokenUrl"].endswith(".amazoncognito.com/oauth2/token")
    assert flow["tokenUrl"].startswith(f"https://{resources.API_DOMAIN_PREFIX}-")
    assert set(flow["scopes"]) == {f"{resources.API_RESOURCE_SERVER}/{g}"
                                   for g in DEFAULT_GROUP_PERMISSIONS}  # fmt: skip
    adds = DOC["paths"]["/emails"]["post"]["security"]
    assert adds == [{"bearer": []}, {"oauth2": ["vdq/vdq-senders", "vdq/vdq-admins"]}]


_SAMPLES = {"getQueueItem": "get_queue_item", "getItemHistory": "get_item_history",
            "getSentItem": "get_sent_item",
            "listQueueItems": "list_queue_items", "listSentItems": "list_sent_items",
            "runTransition": "transition", "resendSentItem": "resend",
            "resendSentItems": "bulk_resend", "getAttachment": "attachment",
            "listSuppressions": "list_suppressions", "addSuppression": "add_suppression",
            "removeSuppression": "remove_suppression",
            "getSuppressionHistory": "suppression_history",
            "getProducerUsage": "producer_usage", "searchItems": "search",
            "getStats": "stats", "listProducers": "producers",
            "listHeldItems": "held_items", "releaseHold": "release_hold",
            "cancelHeldItems": "cancel_held"}  # fmt: skip


def _call_with(op_id: str, permissions: set[str]) -> int:
    groups = groups_for(permissions) or ["nobody"]
    if spec.BY_ID[op_id].function == "enqueue":
        sample = {"postEmails": "apigw_post_emails",
                  "postAttachmentUpload": "apigw_post_attachment_upload"}.get(op_id,
                                                                             "apigw_post_sms")
        event = api_event(sample, groups=groups)
        return enqueue_handler.handler(event, LambdaContext())["statusCode"]
    body = {"ids": [ids.new_id()]} if op_id == "resendSentItems" else (
        {"receiver": "ada@example.org"} if op_id == "addSuppression" else None)
    return call(_SAMPLES[op_id], groups=groups, body=body).status


@pytest.mark.parametrize("op", [o for o in spec.OPERATIONS if o.permissions and not o.public],
                         ids=lambda o: o.id)  # fmt: skip
def test_each_operation_needs_exactly_the_permissions_it_declares(aws, runtime, op):
    allow_any_permission_set(runtime)
    declared = DOC["paths"][op.path][op.method.lower()]["x-vdq-permissions"]
    own = set(DOC["paths"][op.path][op.method.lower()].get("x-vdq-transition-permissions",
                                                               {}).values())  # fmt: skip
    needed = set(declared) | ({"vdq.can_retry"} if own else set())
    assert _call_with(op.id, needed) != 403, "the declared permissions are enough"
    for permission in needed:
        assert _call_with(op.id, needed - {permission}) == 403, f"{permission} is needed"
    for permission in ALL_PERMISSIONS - needed - own:
        assert _call_with(op.id, needed | {permission}) == _call_with(op.id, needed)
    assert op.id in DOC["paths"][op.path][op.method.lower()]["operationId"]
    text = DOC["paths"][op.path][op.method.lower()]["description"]
    assert all(p in text for p in declared), "and the prose says so"


# ---- limits and formats ----------------------------------------------------------------------


def _schema(name: str) -> dict[str, Any]:
    return DOC["components"]["schemas"][name]


def _sms_body() -> dict[str, Any]:
    """The SMS body's schema when given: optional (null) beside media_urls."""
    [given, null] = _schema("SmsRequest")["properties"]["body"]["anyOf"]
    assert null == {"type": "null"}
    return given


def test_limits_are_the_servers_own():
    email = _schema("EmailRequest")["properties"]
    assert email["subject"]["maxLength"] == messages.MAX_SUBJECT
    assert email["text"]["maxLength"] == email["html"]["anyOf"][0]["maxLength"] == \
        messages.MAX_TEXT  # fmt: skip
    assert email["reply_to"]["maxItems"] == messages.MAX_REPLY_TO
    assert _sms_body()["maxLength"] == messages.MAX_SMS_BODY
    assert _schema("ResendRequest")["properties"]["ids"]["maxItems"] == spec.MAX_RESEND_IDS
    assert _schema("Address")["properties"]["email"]["format"] == "email"
    key = DOC["paths"]["/emails"]["post"]["parameters"][0]["schema"]
    assert key["maxLength"] == docs.IDEMPOTENCY_KEY_SCHEMA["maxLength"]
    for path in ("/sent-items/{id}/resend", "/sent-items/resend"):
        names = [p["name"] for p in DOC["paths"][path]["post"]["parameters"]]
        assert "Idempotency-Key" in names
    item = _schema("QueueItem")["properties"]
    assert item["id"]["pattern"] == ids.PATTERN
    for name in ("queued_at", "updated_at", "done_since"):
        assert item[name]["format"] == "date-time"
    assert item["done_at"]["anyOf"][0]["format"] == "date-time"
    assert _schema("HistoryEntry")["properties"]["at"]["format"] == "date-time"
    assert set(_schema("HistoryEntry")["properties"]["kind"]["enum"]) == set(HISTORY_KINDS)
    assert set(_schema("HistoryEntry")["properties"]["source"]["enum"]) == set(HISTORY_SOURCES)
    assert _schema("ItemDetail")["properties"]["content"]["anyOf"] == [
        {"$ref": "#/components/schemas/EmailContent"}, {"$ref": "#/components/schemas/SmsContent"}]


def _email(**changes: Any) -> dict[str, Any]:
    body = json.loads(api_event("apigw_post_emails")["body"])
    body.update(changes)
    return body


@pytest.mark.parametrize("field,build,limit", [
    ("subject", lambda n: _email(subject="s" * n), messages.MAX_SUBJECT),
    ("sender.name", lambda n: _email(sender={"email": "a@example.org", "name": "n" * n}),
     messages.MAX_NAME),
    ("origin.type", lambda n: _email(origin={"type": "t" * n, "id": "1"}),
     messages.MAX_ORIGIN_PART),
    ("attachments[0].filename", lambda n: _email(attachments=[
        {"filename": "f" * n, "content_type": "text/plain", "content_base64": "aGk="}]),
     messages.MAX_FILENAME),
])  # fmt: skip
def test_a_field_at_its_declared_limit_is_taken_and_one_over_is_refused(aws, runtime, field,
                                                                         build, limit):
    def status(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        event = api_event("apigw_post_emails", body=body, groups=["vdq-senders"])
        answer = enqueue_handler.handler(event, LambdaContext())
        return answer["statusCode"], json.loads(answer["body"])

    request = _validator({"$ref": "#/components/schemas/EmailRequest"})
    assert not list(request.iter_errors(build(limit)))
    assert status(build(limit))[0] == 201
    assert list(request.iter_errors(build(limit + 1)))
    code, body = status(build(limit + 1))
    assert code == 422 and body["error"]["details"]["field"] == field


@pytest.mark.parametrize("worst", ["\U0001f600", "\u0436", "{", "a"])
def test_an_sms_body_at_its_declared_segment_limit_is_taken_and_one_over_is_refused(aws, runtime,
                                                                                    worst):
    # Per kind of body (anyOf), the longest run of its widest character: valid by the document
    # and 10 segments (201); one more is invalid by the document and 11 segments (400).
    limits = _sms_body()["anyOf"]
    assert [b["maxLength"] for b in limits] == [330, 670, 760, 1530]
    request = _validator({"$ref": "#/components/schemas/SmsRequest"})
    sms = json.loads(api_event("apigw_post_sms")["body"])

    def status(text: str) -> int:
        event = api_event("apigw_post_sms", body={**sms, "body": text}, groups=["vdq-senders"])
        return enqueue_handler.handler(event, LambdaContext())["statusCode"]

    longest = max(b["maxLength"] for b in limits
                  if re.search(b.get("pattern", ""), worst))  # fmt: skip
    assert not list(request.iter_errors({**sms, "body": worst * longest}))
    assert status(worst * longest) == 201
    assert list(request.iter_errors({**sms, "body": worst * (longest + 1)}))
    assert status(worst * (longest + 1)) == 400


@pytest.mark.parametrize("changes,taken", [
    ({"body": None, "media_urls": ["https://cdn.example.com/a.png"]}, True),
    ({"body": " ", "media_urls": ["https://cdn.example.com/a.png"]}, True),
    ({"body": None}, False), ({"body": " "}, False),
    ({"body": None, "media_urls": []}, False),
])  # fmt: skip
def test_an_mms_of_media_alone_is_taken_by_the_document_and_the_server_alike(aws, runtime,
                                                                            changes, taken):
    sms = {k: v for k, v in {**json.loads(api_event("apigw_post_sms")["body"]),
                             **changes}.items() if v is not None}  # fmt: skip
    request = _validator({"$ref": "#/components/schemas/SmsRequest"})
    assert (not list(request.iter_errors(sms))) is taken
    event = api_event("apigw_post_sms", body=sms, groups=["vdq-senders"])
    answer = enqueue_handler.handler(event, LambdaContext())
    if taken:
        assert answer["statusCode"] == 201, answer["body"]
    else:
        assert answer["statusCode"] == 422
        assert json.loads(answer["body"])["error"]["details"]["field"] == "body"


def test_an_origin_id_declared_integer_is_taken_also_as_json_writes_it_with_a_zero_fraction():
    # Schemathesis sent {"id": 108454.0}: an integer to JSON Schema, once refused as no string.
    origin = _schema("Origin")["properties"]["id"]
    assert not list(_validator(origin).iter_errors(108454.0))
    assert messages.origin({"type": "shop.order", "id": 108454.0}) == messages.Origin(
        "shop.order", "108454")
    with pytest.raises(messages.ValidationError):
        messages.origin({"type": "shop.order", "id": 1.5})


def _required_pattern(schema: str, field: str) -> str:
    """The pattern a given value of a required field matches: the SMS body's is in the branch
    of the request's anyOf without media_urls."""
    if (schema, field) == ("SmsRequest", "body"):
        [with_body, _] = _schema(schema)["anyOf"]
        return str(with_body["properties"]["body"]["pattern"])
    return str(_schema(schema)["properties"][field]["pattern"])


@pytest.mark.parametrize("schema,field", [("EmailRequest", "subject"), ("EmailRequest", "text"),
                                          ("SmsRequest", "body")])  # fmt: skip
def test_what_the_server_counts_as_blank_the_document_refuses(schema, field):
    # Schemathesis sent {"body": "\x1c"}: blank to str.strip(), not to every regex's \s.
    text = _required_pattern(schema, field)
    assert "\\s" not in text, "engines differ on \\s (Python's has U+001C, Rust's not)"
    pattern = re.compile(text)
    blank = [c for c in map(chr, range(0x10000)) if c.isspace()]
    assert [c for c in blank if pattern.search(c * 2)] == []
    assert pattern.search(" x ")


def test_history_is_written_only_with_the_declared_sources_and_kinds():
    found: dict[str, set[str]] = {"source": set(), "kind": set()}
    for path in ROOT.joinpath("shared/vdq").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg in found and isinstance(kw.value, ast.Constant):
                        found[kw.arg].add(kw.value.value)
    assert found["source"] and found["source"] <= set(HISTORY_SOURCES)
    assert found["kind"] and found["kind"] <= set(HISTORY_KINDS)


# ---- written for a reader --------------------------------------------------------------------


def _properties(name: str, schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for key, prop in schema.get("properties", {}).items():
        out.append((f"{name}.{key}", prop))
        out += _properties(f"{name}.{key}", prop)
        items = prop.get("items")
        if isinstance(items, dict) and "$ref" not in items:
            out.append((f"{name}.{key}[]", items))
    return out


def test_every_operation_parameter_schema_and_property_has_a_description():
    missing = []
    for method, path, operation in _operations():
        for key in ("summary", "description"):
            if len(operation.get(key, "")) < 10:
                missing.append(f"{method} {path} {key}")
        missing += [f"{path} {p['name']}" for p in operation.get("parameters", [])
                    if len(p.get("description", "")) < 10]  # fmt: skip
        missing += [f"{path} {s}" for s, r in operation["responses"].items()
                    if len(_resolve(r).get("description", "")) < 5]  # fmt: skip
    for name, schema in DOC["components"]["schemas"].items():
        if len(schema.get("description", "")) < 10:
            missing.append(name)
        missing += [p for p, prop in _properties(name, schema)
                    if len(prop.get("description", "")) < 5]  # fmt: skip
    assert missing == []
    tags = {t["name"]: t["description"] for t in DOC["tags"]}
    assert {o["tags"][0] for _, _, o in _operations()} == set(tags)
    assert DOC["info"]["contact"]["name"] and DOC["info"]["license"]["name"]


def test_every_operation_has_an_example_request_and_answer_valid_by_its_schemas():
    for method, path, operation in _operations():
        for param in operation.get("parameters", []):
            assert "example" in param, f"{method} {path} {param['name']}"
            assert not list(_validator(param["schema"]).iter_errors(param["example"]))
        body = operation.get("requestBody")
        if body:
            for content in body["content"].values():  # one-click: urlencoded or multipart
                assert not list(_validator(content["schema"]).iter_errors(content["example"])), \
                    path
        ok = operation["responses"][str(OPS[(method, path)].status)]
        if "content" in ok:
            # JSON, or the one media type an HTML or TwiML answer declares.
            [content] = ok["content"].values()
            errors = list(_validator(content["schema"]).iter_errors(content["example"]))
            assert errors == [], f"{method} {path}: {errors[:1]}"
        for header in ok.get("headers", {}).values():
            assert "example" in header or "const" in header["schema"]


def test_counts_of_what_is_described():
    properties = sum(len(_properties(n, s)) for n, s in DOC["components"]["schemas"].items())
    parameters = sum(len(o.get("parameters", [])) for _, _, o in _operations())
    print(f"\nopenapi: {len(_operations())} operations, {parameters} parameters, "
          f"{len(DOC['components']['schemas'])} schemas, {properties} properties described")
    assert len(_operations()) == len(spec.OPERATIONS)
    assert re.search(r"\d", DOC["info"]["description"])  # the limits are spelled out
