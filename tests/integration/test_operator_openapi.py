"""The OpenAPI document: valid OpenAPI 3, up to date, and the routes the handlers serve."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from functions.operator import handler
from openapi_spec_validator import validate

from tests.support.operator import call
from vdq import openapi
from vdq.operations import spec

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_document_is_what_the_generator_builds_now():
    assert openapi.DOCUMENT.read_text() == openapi.render(openapi.build()), (
        "shared/vdq/openapi.json is out of date: run python -m vdq.openapi"
    )


def test_the_document_validates_as_openapi_3():
    document = json.loads(openapi.DOCUMENT.read_text())
    validate(document)
    assert document["openapi"].startswith("3.")
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_the_document_has_every_path_of_the_contract_with_parameters_and_bodies():
    paths = json.loads(openapi.DOCUMENT.read_text())["paths"]
    documented = {(m.upper(), p) for p, ops in paths.items() for m in ops}
    assert documented == {(op.method, op.path) for op in spec.OPERATIONS}
    listing = paths["/queue-items"]["get"]
    assert {p["name"] for p in listing["parameters"]} == {"method", "state", "priority",
                                                          "scheduled", "limit", "cursor"}
    assert paths["/emails"]["post"]["requestBody"]["content"]["application/json"]
    assert paths["/sent-items/resend"]["post"]["requestBody"]
    assert paths["/attachments/{id}"]["get"]["responses"]["302"]["headers"]["Location"]
    assert paths["/health"]["get"]["security"] == []
    assert paths["/queue-items/{id}/transitions/{name}"]["post"]["security"] == [
        {"bearer": []}, {"oauth2": ["vdq/vdq-operators", "vdq/vdq-admins"]}]


def test_the_operator_function_serves_exactly_its_operations():
    served = {(r.method.upper(), r.path) for r in handler.app._static_routes
              + handler.app._dynamic_routes}  # fmt: skip
    wanted = {(op.method, op.rule) for op in spec.OPERATIONS if op.function == "operator"}
    assert served == wanted


def test_the_document_is_served_without_a_token(aws, runtime):
    answer = call("openapi")
    assert answer.status == 200
    assert answer.body == json.loads(openapi.DOCUMENT.read_text())


def _token_url(document):
    return document["components"]["securitySchemes"]["oauth2"]["flows"]["clientCredentials"][
        "tokenUrl"]


def test_every_url_of_the_committed_document_is_a_uri_with_no_placeholder():
    # A strict client reads tokenUrl as a URI: the committed document gives one of the form a
    # deployment has, and a deployment serves its own (below).
    document = json.loads(openapi.DOCUMENT.read_text())
    url = _token_url(document)
    assert "{" not in url and "}" not in url
    parts = urlsplit(url)
    assert parts.scheme == "https" and parts.netloc.endswith(".amazoncognito.com")
    assert parts.path == "/oauth2/token"


def test_a_deployment_serves_its_own_token_url(aws, runtime):
    from dataclasses import replace

    domain = "https://vdq-210987654321.auth.eu-west-1.amazoncognito.com"
    runtime.settings = replace(runtime.settings, console_auth_url=domain)
    served = call("openapi").body
    assert _token_url(served) == f"{domain}/oauth2/token"
    committed = json.loads(openapi.DOCUMENT.read_text())
    served["components"]["securitySchemes"]["oauth2"]["flows"]["clientCredentials"][
        "tokenUrl"] = _token_url(committed)
    served["components"]["securitySchemes"]["oauth2"]["description"] = committed[
        "components"]["securitySchemes"]["oauth2"]["description"]
    assert served == committed  # nothing else differs


def test_the_operator_function_does_not_import_pydantic():
    code = ("import sys; import functions.operator.handler; "
            "print('pydantic' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert out.stdout.strip() == "False"


def test_the_introduction_names_every_operation_that_takes_no_token():
    """A client reads the introduction to know where to send a token: every public operation
    (no permissions) is named there, and only those are."""
    intro = json.loads((ROOT / "shared/vdq/openapi.json").read_text())["info"]["description"]
    said = intro.split("**Authentication**", 1)[1].split("\n\n", 1)[0]
    for operation in spec.OPERATIONS:
        named = operation.path in said
        assert named == (not operation.permissions), (operation.id, operation.path)
