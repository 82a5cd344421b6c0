"""Schemathesis against the OpenAPI document: generated requests to every operation of a local
stack, with an admin token and without one, never get a 5xx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from tests.e2e.conftest import REPO, Stack

SCHEMA = schemathesis.openapi.from_path(str(REPO / "shared" / "vdq" / "openapi.json"))
TRIED = {"requests": 0}


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("schemathesis") / "vdq-local.log")
    yield s
    s.stop()
    print(f"\nschemathesis: {TRIED['requests']} generated requests, none answered 5xx")


@SCHEMA.parametrize()
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_generated_request_gets_a_server_error(case, fuzz_stack):
    for headers in ({"Authorization": f"Bearer {fuzz_stack.token('vdq-admins')}"}, {}):
        response = case.call(base_url=fuzz_stack.url, headers=headers, allow_redirects=False,
                             timeout=30)  # fmt: skip
        TRIED["requests"] += 1
        assert response.status_code < 500, (
            f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}"
        )
        if not headers and case.path not in ("/health", "/openapi.json",
                                              "/twilio/status-callback"):  # fmt: skip
            # 401 from the authorizer, or 404/405 for a route or method that does not exist.
            assert response.status_code in (401, 404, 405), (
                f"{case.method} {case.path} -> {response.status_code} for an anonymous caller"
            )
