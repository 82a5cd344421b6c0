"""The console's files and settings as the operator function serves them, and the local issuer's
authorization-code flow with PKCE (the browser runs both in tests/e2e/test_console.py)."""

from __future__ import annotations

import json
import secrets

import jwt
import pytest

from vdq import console
from vdq.core.settings import Settings
from vdq.local import oauth
from vdq.local.front import ISSUER

SECRET = "unit-secret-" + "y" * 32
CONSOLE = "http://127.0.0.1:9999/console/"


def _event(path: str, file: str | None = None) -> dict:
    return {"resource": "/console/{file}" if file else "/console", "httpMethod": "GET",
            "path": path, "pathParameters": {"file": file} if file else None}  # fmt: skip


def _settings(**env: str) -> Settings:
    return Settings.from_env(env)


def test_console_page_and_files_carry_a_strict_policy_and_no_sniffing():
    settings = _settings(VDQ_CONSOLE_AUTH_URL="https://vdq-1.auth.eu-west-1.amazoncognito.com",
                         VDQ_CONSOLE_CLIENT_ID="abc")  # fmt: skip
    for event, kind in ((_event("/console/"), "text/html"),
                        (_event("/console/console.js", "console.js"), "text/javascript"),
                        (_event("/console/console.css", "console.css"), "text/css")):  # fmt: skip
        answer = console.answer(event, settings)
        headers = {k: v[0] for k, v in answer["multiValueHeaders"].items()}
        assert answer["statusCode"] == 200 and headers["Content-Type"].startswith(kind)
        policy = headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert "connect-src 'self' https://vdq-1.auth.eu-west-1.amazoncognito.com" in policy
        assert "frame-ancestors 'none'" in policy and "unsafe" not in policy
        assert headers["X-Content-Type-Options"] == "nosniff"


def test_console_without_a_slash_redirects_so_relative_urls_resolve_under_it():
    answer = console.answer(_event("/console"), _settings())
    assert answer["statusCode"] == 302
    assert answer["multiValueHeaders"]["Location"] == ["console/"]


def test_console_serves_only_its_own_files():
    for name in ("nope.js", "..%2F__init__.py", "__init__.py"):
        answer = console.answer(_event(f"/console/{name}", name), _settings())
        assert answer["statusCode"] == 404, name
        assert json.loads(answer["body"])["error"]["code"] == "not_found"


def test_config_names_the_sign_in_endpoints_and_what_each_group_may_do():
    groups = json.dumps({"support": ["vdq.list_queueitem", "vdq.read_queueitem"]})
    settings = _settings(VDQ_CONSOLE_AUTH_URL="https://pool.auth.example.com/",
                         VDQ_CONSOLE_CLIENT_ID="client-1", VDQ_GROUP_PERMISSIONS=groups)
    answer = console.answer(_event("/console/config.json", "config.json"), settings)
    found = json.loads(answer["body"])
    assert found["authorize_url"] == "https://pool.auth.example.com/oauth2/authorize"
    assert found["token_url"] == "https://pool.auth.example.com/oauth2/token"
    assert found["client_id"] == "client-1"
    assert found["logout_url"] == "https://pool.auth.example.com/logout"
    assert found["permissions"] == {"support": ["vdq.list_queueitem", "vdq.read_queueitem"]}
    assert found["needs"]["retry"] == ["vdq.list_queueitem", "vdq.read_queueitem",
                                       "vdq.read_workflow", "vdq.can_retry"]  # fmt: skip
    assert found["needs"]["resend"] == ["vdq.can_resend", "vdq.read_queueitem"]
    assert "errored" in found["states"]["queue"] and "succeeded" in found["states"]["sent"]


def test_config_says_from_which_states_each_operator_transition_goes():
    """The item's page offers Retry and Cancel only where the API takes them: a Retry on a
    queued or awaiting item was answered 409."""
    found = console.config(_settings())
    assert found["transitions"] == {"retry": ["delayed", "errored"],
                                    "cancel": ["queued", "delayed", "errored"]}  # fmt: skip


# ---- the local issuer -------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _issuer(clock: Clock | None = None) -> oauth.Issuer:
    return oauth.Issuer(SECRET, CONSOLE, ("vdq-viewers", "vdq-operators"), clock or Clock())


def _request(verifier: str, **extra: str) -> dict[str, str]:
    return {"client_id": oauth.CLIENT_ID, "redirect_uri": CONSOLE, "response_type": "code",
            "code_challenge": oauth.challenge_of(verifier), "code_challenge_method": "S256",
            "state": "s-1", "username": "ada", **extra}  # fmt: skip


def _code(issuer: oauth.Issuer, verifier: str, groups: list[str]) -> str:
    where = issuer.authorize(_request(verifier), groups)
    assert where.startswith(CONSOLE + "?") and "state=s-1" in where
    return where.split("code=")[1].split("&")[0]


def _exchange(issuer: oauth.Issuer, code: str, verifier: str, **extra: str) -> dict:
    return issuer.exchange({"grant_type": "authorization_code", "client_id": oauth.CLIENT_ID,
                            "code": code, "redirect_uri": CONSOLE, "code_verifier": verifier,
                            **extra})  # fmt: skip


def test_the_code_and_its_verifier_give_a_token_with_the_chosen_groups():
    issuer, verifier = _issuer(), secrets.token_urlsafe(48)
    tokens = _exchange(issuer, _code(issuer, verifier, ["vdq-operators"]), verifier)
    claims = jwt.decode(tokens["access_token"], SECRET, algorithms=["HS256"], issuer=ISSUER)
    assert claims["sub"] == "ada" and claims["cognito:groups"] == ["vdq-operators"]
    assert tokens["token_type"] == "Bearer"


def test_a_wrong_verifier_gets_nothing_and_spends_the_code():
    issuer, verifier = _issuer(), secrets.token_urlsafe(48)
    code = _code(issuer, verifier, ["vdq-viewers"])
    with pytest.raises(oauth.OAuthError) as wrong:
        _exchange(issuer, code, secrets.token_urlsafe(48))
    assert wrong.value.error == "invalid_grant" and "code_verifier" in wrong.value.description
    with pytest.raises(oauth.OAuthError) as again:
        _exchange(issuer, code, verifier)
    assert again.value.error == "invalid_grant"


def test_a_code_is_good_once_and_for_five_minutes():
    clock = Clock()
    issuer, verifier = _issuer(clock), secrets.token_urlsafe(48)
    code = _code(issuer, verifier, [])
    _exchange(issuer, code, verifier)
    with pytest.raises(oauth.OAuthError, match="unknown, used or expired"):
        _exchange(issuer, code, verifier)
    late = _code(issuer, verifier, [])
    clock.now += oauth.CODE_SECONDS
    with pytest.raises(oauth.OAuthError, match="unknown, used or expired"):
        _exchange(issuer, late, verifier)


def test_the_code_is_bound_to_its_redirect_uri():
    issuer, verifier = _issuer(), secrets.token_urlsafe(48)
    code = _code(issuer, verifier, [])
    with pytest.raises(oauth.OAuthError, match="redirect_uri"):
        _exchange(issuer, code, verifier, redirect_uri="http://127.0.0.1:9999/other/")


@pytest.mark.parametrize(("change", "error"), [
    ({"client_id": "someone"}, "invalid_client"),
    ({"redirect_uri": "https://evil.example/console/"}, "invalid_request"),
    ({"response_type": "token"}, "unsupported_response_type"),
    ({"code_challenge_method": "plain"}, "invalid_request"),
    ({"code_challenge": "short"}, "invalid_request"),
    ({"username": "<script>"}, "invalid_request"),
])  # fmt: skip
def test_an_authorize_request_off_the_rules_is_refused_without_a_redirect(change, error):
    request = {**_request(secrets.token_urlsafe(48)), **change}
    with pytest.raises(oauth.OAuthError) as refused:
        _issuer().authorize(request, [])
    assert refused.value.error == error


def test_unknown_groups_are_refused():
    with pytest.raises(oauth.OAuthError, match="unknown groups: vdq-root"):
        _issuer().authorize(_request(secrets.token_urlsafe(48)), ["vdq-root"])


def test_the_sign_in_page_escapes_what_the_request_carries():
    page = _issuer().sign_in_page({**_request("v" * 43), "state": '"><script>x()</script>'})
    assert "<script>" not in page and "&quot;&gt;&lt;script&gt;" in page


class FakeRequest:
    """What oauth.serve reads of an http.server request, and what it answers."""

    def __init__(self, method: str, path: str, host: str) -> None:
        self.command, self.path, self.headers = method, path, {"Host": host}
        self.server = type("S", (), {"server_port": 9999})()
        self.answered: tuple = ()

    def answer(self, status: int, body: object = b"", headers: dict | None = None) -> None:
        self.answered = (status, body, headers or {})


def test_the_local_sign_in_answers_only_at_a_loopback_host():
    verifier = secrets.token_urlsafe(48)
    query = "&".join(f"{k}={v}" for k, v in _request(verifier).items() if k != "username")
    path = f"{oauth.PREFIX}/authorize?{query.replace(':', '%3A').replace('/', '%2F')}"
    for host in ("127.0.0.1:9999", "localhost:9999", "[::1]:9999"):
        request = FakeRequest("GET", path, host)
        oauth.serve(_issuer(), request, f"{oauth.PREFIX}/authorize", b"")
        assert request.answered[0] == 200, (host, request.answered)
        assert "frame-ancestors 'none'" in request.answered[2]["Content-Security-Policy"]
    for host in ("attacker.example:9999", "127.0.0.1.attacker.example", ""):
        request = FakeRequest("GET", path, host)
        oauth.serve(_issuer(), request, f"{oauth.PREFIX}/authorize", b"")
        assert request.answered[0] == 403 and request.answered[1]["error"] == "access_denied"


def test_a_web_page_elsewhere_cannot_post_the_sign_in_form():
    """A cross-site form POST reaches the loopback issuer with its Host (it is a navigation), so
    the Host check lets it in: the Origin must be the issuer's own, or no code is minted."""
    verifier = secrets.token_urlsafe(48)
    body = "&".join(f"{k}={v}" for k, v in _request(verifier).items()).encode()
    path = f"{oauth.PREFIX}/authorize"
    for origin in ("https://attacker.example", "null", None):
        issuer, request = _issuer(), FakeRequest("POST", path, "127.0.0.1:9999")
        if origin is not None:
            request.headers["Origin"] = origin
        oauth.serve(issuer, request, path, body)
        assert request.answered[0] == 403, (origin, request.answered)
        assert "Location" not in request.answered[2] and not issuer._codes
    issuer, request = _issuer(), FakeRequest("POST", path, "127.0.0.1:9999")
    request.headers["Origin"] = "http://127.0.0.1:9999"
    oauth.serve(issuer, request, path, body)
    assert request.answered[0] == 302 and len(issuer._codes) == 1
    # The form's page sends its origin with the POST (no-referrer would make it "null").
    assert oauth.PAGE_HEADERS["Referrer-Policy"] == "same-origin"


@pytest.mark.parametrize("name", [
    "..%2F__init__.py", "../__init__.py", "..%252F__init__.py", "%2e%2e%2fsettings.py",
    "/etc/passwd", "static/console.js", "console.js%00.png", "console.js/", "Console.JS",
    ".console.js", ".git", "console.css.map", "index.html~", "x" * 5000, "",
])  # fmt: skip
def test_no_name_reaches_past_the_three_files_and_every_answer_carries_the_policy(name):
    answer = console.answer(_event(f"/console/{name}", name or None), _settings())
    headers = {k: v[0] for k, v in answer["multiValueHeaders"].items()}
    if name:
        assert answer["statusCode"] == 404, name
        assert headers["Content-Type"] == "application/json"
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"


def test_the_settings_and_the_redirect_carry_the_policy_too():
    for event in (_event("/console/config.json", "config.json"), _event("/console")):
        headers = {k: v[0] for k, v in console.answer(event, _settings())["multiValueHeaders"]
                   .items()}  # fmt: skip
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert headers["Referrer-Policy"] == "no-referrer"


@pytest.mark.parametrize("verifier", [
    "a" * 42, "a" * 129, "a" * 42 + "+", "a" * 42 + "/", "a" * 42 + "=", "a" * 42 + "é", "",
])  # fmt: skip
def test_a_verifier_off_rfc_7636_is_refused_even_when_its_hash_is_the_challenge(verifier):
    issuer = _issuer()
    code = _code(issuer, verifier if verifier.isascii() else "a" * 43, [])
    grant = issuer._codes[code]
    if verifier.isascii():
        assert grant.challenge == oauth.challenge_of(verifier)
    with pytest.raises(oauth.OAuthError, match="code_verifier must be 43 to 128"):
        _exchange(issuer, code, verifier)


def test_an_authorize_request_without_a_challenge_is_refused():
    request = _request("a" * 43)
    del request["code_challenge"], request["code_challenge_method"]
    with pytest.raises(oauth.OAuthError, match="code_challenge_method must be S256"):
        _issuer().authorize(request, [])
    request["code_challenge_method"] = "S256"
    with pytest.raises(oauth.OAuthError, match="code_challenge must be"):
        _issuer().authorize(request, [])
