"""Schemathesis against the OpenAPI document, on a local stack, with every check it has.

Requests valid by the document (positive mode, after the document's own examples) must be
accepted as it declares: never a 400 or 422 (the document promises exactly what the server
takes), never a 5xx, and every answer's status, headers and body as declared. Invalid requests
(negative mode) must be refused with a declared 4xx, never a 5xx; anonymous callers get a 401.
The examples are sent as the document gives them (their cursors are signed for the local
stack's table, their email sendable as it is). Inputs that cannot be drawn at random and still
be valid are made as a client would for the drawn cases: a list ``cursor`` is the one a previous
page returned (a made-up one is a 400 by design), an ``upload_id`` names an upload made first,
a ``send_at`` lies within VDQ_MAX_SCHEDULE_DAYS (the limit its description states: past it is
a 422), an Idempotency-Key is used for one request only, and a Twilio callback is signed with
the stack's auth token. Some cases are pointed at items that exist, so reads and actions run on
real data, not only on 404s.

Cost: VDQ_SCHEMATHESIS_EXAMPLES (default 30) cases per operation and mode, about 2,000 requests
in all; docs/reference/rest.md gives the time it takes.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
import schemathesis
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.config import SchemathesisConfig

import requests
from tests.e2e.conftest import REPO, TWILIO_TOKEN, Stack, patient
from vdq.intake.rest import MAX_IDEMPOTENCY_KEY

DOCUMENT = str(REPO / "shared" / "vdq" / "openapi.json")
# Per operation and mode; VDQ_SCHEMATHESIS_COVERAGE=1 adds Schemathesis' boundary values (the
# longest strings, the largest lists: minutes, not for every run).
EXAMPLES = int(os.environ.get("VDQ_SCHEMATHESIS_EXAMPLES", "30"))
# Anonymous calls only see 401s: Schemathesis' ignored_auth check also sends each valid case
# without its token, so these few more are enough.
ANONYMOUS_EXAMPLES = 10
COVERAGE = os.environ.get("VDQ_SCHEMATHESIS_COVERAGE") == "1"
# Valid data may still find nothing (404), an item in another state (409) or an attachment of
# no item (403); it must never be refused as invalid (400, 413, 422).
ACCEPTED = ["2xx", "3xx", "403", "404", "409"]
# Invalid data must be refused: Schemathesis' list of refusals, and 413, the answer to a body
# over Lambda's 6 MiB for a synchronous call, which the front door gives before any field is
# read (found when a drawn body of 7 MB was refused so).
REJECTED = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429",
            "5xx"]  # fmt: skip


def _config(mode: str, examples: int = EXAMPLES) -> SchemathesisConfig:
    """Every check Schemathesis has (the default: none is turned off), the examples phase
    before the drawn cases, ``examples`` drawn cases per operation. Hypothesis' too_slow health
    check is off: it times the generator on a shared machine, not the server."""
    return SchemathesisConfig.from_dict({
        "suppress-health-check": ["too_slow"],
        "generation": {"mode": mode, "max-examples": examples},
        "phases": {"examples": {"enabled": mode == "positive"}, "coverage": {"enabled": COVERAGE},
                   "stateful": {"enabled": False}},
        "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED},
                   "negative_data_rejection": {"expected-statuses": REJECTED}},
    })  # fmt: skip


VALID = schemathesis.openapi.from_path(DOCUMENT, config=_config("positive"))
INVALID = schemathesis.openapi.from_path(DOCUMENT, config=_config("negative"))
ANONYMOUS = schemathesis.openapi.from_path(DOCUMENT,
                                           config=_config("positive", ANONYMOUS_EXAMPLES))
TALLY: Counter[str] = Counter()
_TURN = itertools.count()


class Fuzz:
    """The stack, an admin token, and what exists: an active item, a sent one and its file."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.token = stack.token("vdq-admins")
        file = {"filename": "a.txt", "content_type": "text/plain", "content_base64": "aGk="}
        self.sent = stack.send_emails("success@simulator.amazonses.com",
                                      attachments=[file])[0]["id"]  # fmt: skip
        self.file = stack.wait(self.sent, "succeeded")["attachments"][0]["id"]
        sms = stack.send_sms("+15005550012")[0]["id"]  # never final: stays active
        self.active = stack.wait(sms, "awaiting")["id"]

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def cursor(self, path: str, query: dict[str, Any]) -> str | None:
        """A cursor of the list ``path`` with the case's filters, as a client gets one."""
        filters = {k: v for k, v in query.items()
                   if k in ("method", "state", "priority", "scheduled", "origin_id", "since",
                            "until", *SEARCH_KEYS)}  # fmt: skip
        page = requests.get(self.stack.url + path, params={**filters, "limit": 1},
                            headers=self.auth(), timeout=patient(30))  # fmt: skip
        assert page.status_code == 200, page.text
        return page.json()["cursor"]

    def realistic(self, case: Any) -> None:
        """Make the inputs valid data cannot be drawn for; point some cases at real items. The
        document's examples go as they are (a Twilio callback signed, as Twilio signs it)."""
        if case.path in ("/search", "/stats"):
            case.query = one_question(case.path, dict(case.query or {}))
        if case.meta is None or case.meta.phase.name.value != "examples":
            self.drawn(case)
        key = (case.headers or {}).get("Idempotency-Key")
        if key is not None:
            # A client uses a key for one request: the same key with another body is a 422
            # by design (tests/integration/test_enqueue.py pins it), not a refused valid input,
            # and the examples phase combines one key with several example bodies.
            unique = f"-{uuid.uuid4().hex}"
            case.headers["Idempotency-Key"] = key[: MAX_IDEMPOTENCY_KEY - len(unique)] + unique
            upload = case.path == "/attachments/uploads" and isinstance(case.body, dict)
            if upload and case.body.get("sha256") is None:
                # An upload's key needs the file's digest, as the key's description says (a
                # rule between a header and the body no schema declares): a client sends it.
                # tests/integration/test_uploads.py pins the 422 without it.
                case.body["sha256"] = "LCa0a2j/xo/5m0U8HTBBNBNCLXBkg7+g+YpeiGJm564="
        if case.path == "/twilio/status-callback":
            self.sign(case)

    def drawn(self, case: Any) -> None:
        """A drawn case made valid where random data cannot be, and pointed at real items."""
        history = case.path == "/queue-items/{id}/history"
        if history and "cursor" in (case.query or {}):
            # A history cursor is signed for its item: the case reads the sent item's history,
            # whose cursor comes from a first page of one entry.
            case.path_parameters = {**(case.path_parameters or {}), "id": self.sent}
        if "cursor" in (case.query or {}):
            found = self.cursor(case.path.replace("{id}", self.sent), case.query)
            if found is None:
                del case.query["cursor"]  # the list has one page: there is no next one
            else:
                case.query["cursor"] = found
        keep = history and "cursor" in (case.query or {})
        if "id" in (case.path_parameters or {}) and not keep and next(_TURN) % 2 == 0:
            real = self.sent if case.path.startswith("/sent-items") else self.active
            case.path_parameters["id"] = self.file if case.path.startswith("/attach") else real
        resend = case.path == "/sent-items/resend" and isinstance(case.body, dict)
        if resend and next(_TURN) % 2 == 0:
            case.body["ids"] = [self.sent]
        scheduled = isinstance(case.body, dict) and isinstance(case.body.get("send_at"), str)
        if case.path in ("/emails", "/sms") and scheduled:
            # At most VDQ_MAX_SCHEDULE_DAYS ahead of the server's clock (the document says so in
            # words): a drawn time is kept as a time an hour from now.
            soon = datetime.now(UTC) + timedelta(hours=1)
            case.body["send_at"] = soon.isoformat(timespec="seconds")
        if case.path == "/emails" and isinstance(case.body, dict):
            # An upload_id names a file PUT beforehand; one that names nothing is a 422 (like a
            # cursor, valid data cannot be drawn for it): each reference gets a real upload.
            for attachment in case.body.get("attachments") or []:
                if isinstance(attachment, dict) and "upload_id" in attachment:
                    attachment["upload_id"] = self.upload()

    def upload(self) -> str:
        """A small file uploaded as a client uploads one: its upload_id."""
        made = requests.post(self.stack.url + "/attachments/uploads", headers=self.auth(),
                             json={"filename": "u.txt", "content_type": "text/plain",
                                   "size": 2}, timeout=patient(30))  # fmt: skip
        assert made.status_code == 201, made.text
        upload = made.json()
        put = requests.put(upload["url"], data=b"hi", headers=upload["headers"],
                           timeout=patient(30))  # fmt: skip
        assert put.status_code == 200, put.text
        return upload["upload_id"]

    def sign(self, case: Any) -> None:
        from twilio.request_validator import RequestValidator

        url = f"{self.stack.url}/twilio/status-callback"
        if case.query:
            url += "?" + urlencode(case.query)
        form = {k: str(v) for k, v in (case.body or {}).items()}
        signature = RequestValidator(TWILIO_TOKEN).compute_signature(url, form)
        case.headers = {**(case.headers or {}), "X-Twilio-Signature": signature}


SEARCH_KEYS = ("receiver", "origin_type", "provider_id", "sender", "id")


def one_question(path: str, query: dict[str, Any]) -> dict[str, Any]:
    """Ask what a client asks: the rules between parameters that a query string's schema
    cannot declare, and the descriptions state in words. A search names one key (the first
    drawn is kept; `origin_id` goes with `origin_type`), a window's `since` is not after its
    `until`, and a stats `breakdown` is of the last 24 hours (`period=hours`). Every other
    parameter stays as drawn: the refusals themselves are pinned by
    tests/integration/test_search.py."""
    if path == "/stats":
        if query.get("period") == "days":
            query.pop("breakdown", None)
        return query
    keys = [k for k in SEARCH_KEYS if k in query]
    for extra in keys[1:]:
        del query[extra]
    if "origin_type" in query and "origin_id" not in query:
        query["origin_id"] = "1042"
    if "origin_id" in query and "origin_type" not in query:
        del query["origin_id"]
    if not keys and "since" not in query:
        query["since"] = (datetime.now(UTC) - timedelta(days=1)).isoformat(timespec="seconds")
    since, until = query.get("since"), query.get("until")
    if isinstance(since, str) and isinstance(until, str):
        from vdq.core.errors import ValidationError
        from vdq.operations.search import parse_time

        try:
            if parse_time(since, "since") > parse_time(until, "until", end=True):
                query["since"], query["until"] = until, since
        except ValidationError:  # not a time: the check then reports the server's 422
            pass
    return query


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzz]:
    s = Stack(tmp_path_factory.mktemp("schemathesis") / "vdq-local.log")
    yield Fuzz(s)
    s.stop()
    print(f"\nschemathesis: {dict(sorted(TALLY.items()))}")


def _call(case: Any, fuzz: Fuzz, headers: dict[str, str], **checks: Any) -> Any:
    return case.call_and_validate(base_url=fuzz.stack.url, headers=headers,
                                  allow_redirects=False, timeout=patient(30), **checks)  # fmt: skip


@VALID.parametrize()
def test_valid_requests_are_accepted_and_answered_as_declared(case, fuzz):
    fuzz.realistic(case)
    response = _call(case, fuzz, fuzz.auth())
    refused = f" {case.operation.label}" if response.status_code == 403 else ""
    TALLY[f"valid {response.status_code}{refused}"] += 1


@INVALID.parametrize()
def test_invalid_requests_never_get_a_server_error(case, fuzz):
    response = _call(case, fuzz, fuzz.auth())
    TALLY[f"invalid {response.status_code}"] += 1


def test_every_check_schemathesis_has_is_on():
    # The stateful ones (use_after_free, ensure_resource_availability,
    # object_level_authorization) need the stateful phase's recorder and pass without it.
    load_all_checks()
    for schema in (VALID, INVALID):
        operation = next(iter(schema.get_all_operations())).ok()
        config = schema.config.checks_config_for(operation=operation, phase="fuzzing")
        off = [f.__name__ for f in CHECKS.get_all()
               if not config.get_by_name(name=f.__name__).enabled]  # fmt: skip
        assert off == [], off


@ANONYMOUS.parametrize()
def test_anonymous_callers_are_refused_before_anything_runs(case, fuzz):
    response = case.call(base_url=fuzz.stack.url, allow_redirects=False, timeout=patient(30))
    TALLY[f"anonymous {response.status_code}"] += 1
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.text}"
    if case.operation.definition.raw.get("security") != []:
        assert response.status_code == 401, f"{case.method} {case.path} -> {response.text}"
        assert response.json()["error"]["code"] == "unauthorized"
