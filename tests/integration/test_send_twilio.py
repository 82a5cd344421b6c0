"""The Twilio provider: credentials (settings or Secrets Manager), base URL, send and fetch."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters

from tests.support.fake_twilio import ACCOUNT_SID, FakeTwilioHttp, fake_twilio
from vdq.core.errors import SettingsError
from vdq.core.settings import Settings
from vdq.providers import RejectedByProvider
from vdq.providers.twilio import TwilioProvider, TwilioStatus, get_twilio
from vdq.runtime import Runtime


@pytest.fixture
def sandbox():
    """A loopback HTTP server that answers as Twilio's Messages API does."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            seen.append(("POST", self.path, form, self.headers.get("Authorization")))
            if form["To"] == ["+15005550001"]:
                self._answer(400, {"code": 21211, "status": 400,
                                   "message": "The 'To' number +15005550001 is not valid."})
            else:
                self._answer(201, {"sid": "SM" + "1" * 32, "status": "queued"})

        def do_GET(self):
            seen.append(("GET", self.path, None, self.headers.get("Authorization")))
            self._answer(200, {"sid": "SM" + "1" * 32, "status": "undelivered",
                               "error_code": 30003,
                               "error_message": "Unreachable destination handset"})

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def settings_for(**changes):
    return replace(Settings(), **changes)


def test_the_client_talks_to_the_configured_base_url(sandbox):
    base, seen = sandbox
    provider = TwilioProvider.from_settings(settings_for(
        twilio_account_sid=ACCOUNT_SID, twilio_auth_token="tok", twilio_api_url=base + "/"))
    sid = provider.send("+15005550006", "+14155550100", "hi", ["https://cdn.example.com/a.png"],
                        "https://hooks.example.com/cb?queue_item=X")  # fmt: skip
    assert sid == "SM" + "1" * 32
    method, path, form, auth = seen[0]
    assert method == "POST"
    assert path == f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json"
    assert form["StatusCallback"] == ["https://hooks.example.com/cb?queue_item=X"]
    assert form["MediaUrl"] == ["https://cdn.example.com/a.png"] and auth.startswith("Basic ")

    status = provider.fetch(sid)
    assert status == TwilioStatus("undelivered", 30003, "Unreachable destination handset")
    assert seen[1][:2] == ("GET", f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/{sid}.json")


def test_an_sms_from_a_messaging_service_names_the_service_not_a_number(sandbox):
    base, seen = sandbox
    provider = TwilioProvider.from_settings(settings_for(
        twilio_account_sid=ACCOUNT_SID, twilio_auth_token="tok", twilio_api_url=base))
    service = "MG" + "0123456789abcdef" * 2
    assert provider.send(service, "+14155550100", "hi") == "SM" + "1" * 32
    form = seen[0][2]
    assert form["MessagingServiceSid"] == [service] and "From" not in form


def test_an_mms_without_text_leaves_body_out_of_the_request():
    # Twilio takes MediaUrl alone: no text is no Body parameter, not an empty one.
    http = FakeTwilioHttp()
    provider = TwilioProvider(lambda: (ACCOUNT_SID, "tok"), http_client=http)
    for text in (None, ""):
        provider.send("+15005550006", "+14155550100", text, ["https://cdn.example.com/a.png"])
    for request in http.requests:
        assert "Body" not in request.data
        assert request.data["MediaUrl"] == ["https://cdn.example.com/a.png"]
    provider.send("+15005550006", "+14155550100", "hi")
    assert http.requests[-1].data["Body"] == "hi"


def test_a_rejection_carries_twilios_code_and_message(sandbox):
    base, _ = sandbox
    provider = TwilioProvider.from_settings(settings_for(
        twilio_account_sid=ACCOUNT_SID, twilio_auth_token="tok", twilio_api_url=base))
    with pytest.raises(RejectedByProvider) as err:
        provider.send("+15005550006", "+15005550001", "hi")
    assert err.value.code == 21211 and "is not valid" in err.value.message


def test_credentials_come_from_the_secrets_manager_secret(aws):
    parameters.clear_caches()
    boto3.client("secretsmanager").create_secret(
        Name="vdq/twilio", SecretString=json.dumps({"account_sid": ACCOUNT_SID,
                                                    "auth_token": "from-secret"}))
    http = FakeTwilioHttp()
    provider = TwilioProvider.from_settings(settings_for(twilio_secret_name="vdq/twilio"),
                                            http_client=http)  # fmt: skip
    provider.send("+15005550006", "+14155550100", "hi")
    assert http.requests[0].auth == (ACCOUNT_SID, "from-secret")
    assert ACCOUNT_SID in http.requests[0].url


def test_a_send_refused_for_a_rotated_token_reads_the_secret_again_and_is_sent(aws,
                                                                                monkeypatch):
    """Found by review: after Twilio's secondary token was promoted and the secret updated, the
    send function kept the old token cached for up to 5 minutes and Twilio answered 401 (20003):
    every SMS of those minutes was errored, an operator's task. A 401 creates nothing, so the
    send reads the secret again (at most every 30 s) and tries once more with the new token."""
    from twilio.http.response import Response

    from vdq.providers import twilio as provider_module

    parameters.clear_caches()
    monkeypatch.setattr(provider_module, "_last_fresh_read", [float("-inf")])
    secrets = boto3.client("secretsmanager")
    secrets.create_secret(Name="vdq/twilio", SecretString=json.dumps(
        {"account_sid": ACCOUNT_SID, "auth_token": "before"}))  # fmt: skip
    http = FakeTwilioHttp()
    provider = TwilioProvider.from_settings(settings_for(twilio_secret_name="vdq/twilio"),
                                            http_client=http)  # fmt: skip
    assert provider.send("+15005550006", "+14155550100", "hi").startswith("SM")  # cached
    secrets.put_secret_value(SecretId="vdq/twilio", SecretString=json.dumps(
        {"account_sid": ACCOUNT_SID, "auth_token": "after"}))  # fmt: skip

    def by_token(request):
        if request.auth == (ACCOUNT_SID, "after"):
            return Response(201, json.dumps({"sid": "SM" + "2" * 32, "status": "queued"}))
        return Response(401, json.dumps({"code": 20003, "message": "Authenticate"}))

    http.answers += [by_token, by_token]
    assert provider.send("+15005550006", "+14155550100", "hi") == "SM" + "2" * 32
    assert [r.auth[1] for r in http.requests] == ["before", "before", "after"]
    # A token still refused after the read (a wrong secret): refused, no read again at once.
    http.answers += [Response(401, json.dumps({"code": 20003, "message": "Authenticate"}))]
    with pytest.raises(RejectedByProvider):
        provider.send("+15005550006", "+14155550100", "hi")
    parameters.clear_caches()


def test_a_secret_without_a_token_is_a_settings_error(aws):
    parameters.clear_caches()
    boto3.client("secretsmanager").create_secret(
        Name="vdq/bad", SecretString=json.dumps({"account_sid": ACCOUNT_SID}))
    provider = TwilioProvider.from_settings(settings_for(twilio_secret_name="vdq/bad"),
                                            http_client=FakeTwilioHttp())  # fmt: skip
    with pytest.raises(SettingsError, match="auth_token"):
        provider.send("+15005550006", "+14155550100", "hi")


def test_no_credentials_at_all_is_a_settings_error():
    with pytest.raises(SettingsError, match="TWILIO_ACCOUNT_SID"):
        TwilioProvider.from_settings(settings_for())


def test_get_twilio_prefers_the_override_and_caches_the_real_provider(settings):
    runtime = Runtime(settings=replace(settings, twilio_account_sid=ACCOUNT_SID,
                                       twilio_auth_token="tok"))  # fmt: skip
    real = get_twilio(runtime)
    assert isinstance(real, TwilioProvider) and get_twilio(runtime) is real
    fake = object()
    other = Runtime(settings=runtime.settings, overrides={"twilio": fake})
    assert get_twilio(other) is fake


def test_sends_from_threads_at_once_use_an_http_client_each_and_get_their_own_sid(monkeypatch):
    """twilio's HTTP client keeps its last answer on itself and returns it from there: two
    threads' requests through one client can each read the other's message SID (the send
    pipeline sends from several threads at once)."""
    from twilio.http.response import Response

    from vdq.providers.twilio import BaseUrlHttpClient

    threads = 4
    together = threading.Barrier(threads, timeout=5)
    users: dict[str, int] = {}

    def request(self, method, url, params=None, data=None, **_):
        users[data["To"]] = id(self)
        together.wait()  # every request is in flight at once
        sid = "SM" + data["To"][-4:] * 8
        return Response(201, json.dumps({"sid": sid, "status": "queued"}), {})

    monkeypatch.setattr(BaseUrlHttpClient, "request", request)
    provider = TwilioProvider(lambda: (ACCOUNT_SID, "tok"))
    receivers = [f"+1415555{n:04d}" for n in range(threads)]
    sids: dict[str, str] = {}

    def send(to):
        sids[to] = provider.send("+15005550006", to, "hi")

    workers = [threading.Thread(target=send, args=(to,)) for to in receivers]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sids == {to: "SM" + to[-4:] * 8 for to in receivers}
    assert len(set(users.values())) == threads  # no client served two requests at once


def test_an_idle_client_is_used_again_and_a_rotated_token_gets_a_new_one(monkeypatch):
    from twilio.http.response import Response

    from vdq.providers.twilio import BaseUrlHttpClient

    used = []

    def request(self, method, url, params=None, data=None, auth=None, **_):
        used.append((id(self), auth))
        return Response(201, json.dumps({"sid": "SM" + "1" * 32, "status": "queued"}), {})

    monkeypatch.setattr(BaseUrlHttpClient, "request", request)
    token = ["first"]
    provider = TwilioProvider(lambda: (ACCOUNT_SID, token[0]))
    for rotate_to in (None, None, "second"):
        token[0] = rotate_to or token[0]
        provider.send("+15005550006", "+14155550100", "hi")
    [(first, auth1), (again, _), (_, auth3)] = used
    assert first == again and auth1 == (ACCOUNT_SID, "first")  # one connection pool kept warm
    assert auth3 == (ACCOUNT_SID, "second")


def test_a_fetch_reads_the_receiver_and_creation_time_of_twilios_message_resource(runtime):
    # Twilio's documented Message resource (events/): its receiver and its creation time, an
    # RFC 2822 date, are what a search by SID narrows the receiver index with.
    from datetime import UTC, datetime
    from pathlib import Path

    http = fake_twilio(runtime)
    body = json.loads((Path(__file__).resolve().parents[2] / "events"
                       / "twilio_message_failed_opt_out.json").read_text())  # fmt: skip
    http.answer(200, body)
    http.answer(200, {**body, "date_created": "yesterday", "to": None})
    status = get_twilio(runtime).fetch(body["sid"])
    assert status.to == "+14155550100"
    assert status.created == datetime(2026, 12, 2, 13, 45, 12, tzinfo=UTC)
    assert (status.status, status.error_code) == ("failed", 21610)
    unreadable = get_twilio(runtime).fetch(body["sid"])  # nothing to narrow by: None
    assert (unreadable.to, unreadable.created) == (None, None)
