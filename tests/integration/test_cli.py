"""The CLI as a newcomer and an operator meet it, against a scripted API on loopback: clear
messages and exit codes for a missing URL or token, an unreachable API and an expired token;
flags anywhere; pages by cursor; errors with their details; producer text that cannot reach the
terminal as control sequences; aligned columns; quiet pipes; shell completion."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest

from vdq.cli import main
from vdq.cli.render import watch_line, width

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\u202eevil\n    state  succeeded\x9b31m\u2028\x00"
GOOD_TOKEN = jwt.encode({"sub": "u", "exp": int(time.time()) + 3600}, "k" * 32)


def item(n: int, **changes: Any) -> dict[str, Any]:
    return {"id": f"01HX{n:022d}", "method": "sms", "state": "awaiting", "attempt": 1,
            "receiver": {"cell": "+14155550100"}, "sender": {"cell": "+15005550006"},
            "updated_at": "2026-12-03T08:00:00Z", "result": None, **changes}  # fmt: skip


class Api:
    """Answers by (method, path): a status and JSON body, or a function of the request."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Any] = {}
        self.requests: list[dict[str, Any]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                request = {"method": self.command, "path": url.path,
                           "query": {k: v[-1] for k, v in parse_qs(url.query).items()},
                           "headers": dict(self.headers),
                           "body": json.loads(self.rfile.read(length)) if length else None}
                api.requests.append(request)
                answer = api.routes.get((self.command, url.path), (404, {"error": {
                    "code": "not_found", "message": "no such route"}}))  # fmt: skip
                status, body = answer(request) if callable(answer) else answer
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    server = Api()
    monkeypatch.setenv("VDQ_API_URL", server.url)
    monkeypatch.setenv("VDQ_TOKEN", GOOD_TOKEN)
    monkeypatch.setenv("NO_COLOR", "1")
    yield server
    server.server.shutdown()
    server.server.server_close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse: usage errors and --help
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_missing_api_url_or_token_is_a_clear_usage_error(capsys, monkeypatch):
    monkeypatch.delenv("VDQ_API_URL", raising=False)
    monkeypatch.delenv("VDQ_TOKEN", raising=False)
    code, _, err = run(capsys, "list")
    assert code == 2 and "no API URL: set VDQ_API_URL or pass --api-url" in err
    code, _, err = run(capsys, "list", "--api-url", "http://127.0.0.1:9")
    assert code == 2 and "no token: set VDQ_TOKEN or pass --token" in err
    assert "0 no_api_url" not in err


def test_an_unreachable_api_is_one_line_naming_the_url(capsys, monkeypatch):
    monkeypatch.setenv("VDQ_TOKEN", GOOD_TOKEN)
    code, _, err = run(capsys, "list", "--api-url", "http://127.0.0.1:9")
    assert code == 3
    assert err == "vdq list: cannot reach the API at http://127.0.0.1:9 (connection refused)\n"


def test_an_expired_token_says_so_and_how_to_get_a_new_one(capsys, api):
    api.routes[("GET", "/queue-items")] = (401, {"message": "Unauthorized"})
    expired = jwt.encode({"sub": "u", "exp": int(time.time()) - 60}, "k" * 32)
    code, _, err = run(capsys, "list", "--token", expired)
    assert code == 4 and "your token expired at" in err and "vdq token" in err
    code, _, err = run(capsys, "list")  # a token that is valid for a while: another 401
    assert code == 4 and "expired" not in err and "check VDQ_TOKEN" in err


def test_a_local_token_of_an_earlier_start_says_to_paste_the_new_banner_line(capsys, api):
    """A local stack started again without VDQ_LOCAL_JWT_SECRET signs with a new secret: the
    shell's token (and vdq token, from the shell's old secret) answer 401 from then on."""
    from vdq.local.front import make_token

    api.routes[("GET", "/queue-items")] = (401, {"error": {
        "code": "unauthorized", "message": "no bearer token, or one that is expired, "
        "malformed or of another user pool"}})  # fmt: skip
    stale = make_token("an earlier start's secret, 32 bytes or more", ["vdq-admins"])
    code, _, err = run(capsys, "list", "--token", stale)
    assert code == 4 and "your token expired" not in err
    assert "a new secret at each start" in err and "export line of its banner" in err
    assert "vdq token" not in err  # it would sign with the shell's old secret again
    code, _, err = run(capsys, "list")  # not a local stack's token: as before
    assert code == 4 and "check VDQ_TOKEN" in err and "banner" not in err


def test_global_flags_work_before_or_after_the_command(capsys, api, monkeypatch):
    api.routes[("GET", "/queue-items")] = (200, {"items": [item(1)], "cursor": None})
    monkeypatch.delenv("VDQ_API_URL")
    for argv in (["--api-url", api.url, "--json", "list"], ["list", "--api-url", api.url, "--json"],
                 ["--json", "list", "--api-url", api.url]):  # fmt: skip
        code, out, _ = run(capsys, *argv)
        assert code == 0 and json.loads(out)["items"][0]["id"] == item(1)["id"], argv
    code, out, _ = run(capsys, "--token", "t1", "list", "--api-url", api.url, "--token", GOOD_TOKEN)
    assert api.requests[-1]["headers"]["Authorization"] == f"Bearer {GOOD_TOKEN}"


@pytest.mark.parametrize("argv,words", [
    (["frobnicate"], "invalid choice"),
    (["list", "--state", "bogus"], "invalid choice"),
    (["list", "--state", "succeeded"], "add --sent"),
    (["list", "--sent", "--state", "queued"], "is not one of succeeded"),
    (["list", "--limit", "0"], "--limit takes 1 to 100"),
    (["send-sms", "--from", "+1", "--to", "+2", "--body", "caf\udce9"],
     "--body is not UTF-8 text"),
    (["send-email", "--from", "a@b.org", "--from-name", "\udcff", "--to", "c@d.org", "--subject",
      "s", "--text", "t"], "--from-name is not UTF-8 text"),
    (["send-sms", "--from", "+1", "--to", "+2", "--body", "x", "--origin", "nocolon"], "TYPE:ID"),
    (["send-email", "--from", "a@b.org", "--to", "c@d.org", "--subject", "s", "--text", "t",
      "--attach", "/no/such/file"], "--attach /no/such/file: cannot read it"),
])  # fmt: skip
def test_usage_errors_exit_2_and_say_what_to_change(capsys, api, argv, words):
    code, _, err = run(capsys, *argv)
    assert code == 2 and words in err, err
    assert not api.requests


def test_help_has_no_restructuredtext_markup(capsys):
    from vdq.cli.main import parser

    top = parser()
    commands = next(a for a in top._actions if hasattr(a, "choices") and a.choices).choices
    for argv in (["--help"], *[[name, "--help"] for name in commands]):
        code, out, _ = run(capsys, *argv)
        assert code == 0 and "``" not in out and "`" not in out and ":func:" not in out, argv


def test_list_json_keeps_the_cursor_and_cursor_pages(capsys, api):
    def page(request: dict[str, Any]) -> tuple[int, Any]:
        if request["query"].get("cursor") == "c1":
            return 200, {"items": [item(2)], "cursor": None}
        return 200, {"items": [item(1)], "cursor": "c1"}

    api.routes[("GET", "/sent-items")] = page
    code, out, err = run(capsys, "list", "--sent", "--json", "--limit", "1")
    assert code == 0 and json.loads(out) == {"items": [item(1)], "cursor": "c1"}
    code, out, _ = run(capsys, "list", "--sent", "--json", "--limit", "1", "--cursor", "c1")
    assert json.loads(out) == {"items": [item(2)], "cursor": None}
    code, out, err = run(capsys, "list", "--sent", "--limit", "1")
    assert item(1)["id"] in out and "--cursor c1" in err
    code, out, _ = run(capsys, "list", "--sent", "--all", "--json", "--limit", "1")
    assert [i["id"] for i in json.loads(out)["items"]] == [item(1)["id"], item(2)["id"]]


def test_json_errors_keep_details(capsys, api):
    api.routes[("POST", "/sms")] = (422, {"error": {"code": "invalid", "message": "to[0].cell: bad",
                                                    "details": {"field": "to[0].cell"}}})
    code, _, err = run(capsys, "send-sms", "--from", "+15005550006", "--to", "x", "--body", "b",
                       "--json")  # fmt: skip
    assert code == 7
    assert json.loads(err) == {"error": {"status": 422, "code": "invalid",
                                         "message": "to[0].cell: bad",
                                         "details": {"field": "to[0].cell"}}}  # fmt: skip


def test_send_sms_takes_an_idempotency_key(capsys, api):
    api.routes[("POST", "/sms")] = (201, {"items": [item(1)]})
    code, _, _ = run(capsys, "send-sms", "--from", "+15005550006", "--to", "+14155550100",
                     "--body", "hi", "--idempotency-key", "order-42")  # fmt: skip
    assert code == 0 and api.requests[-1]["headers"]["Idempotency-Key"] == "order-42"


@pytest.mark.parametrize("command", [
    ("send-sms", "--from", "+15005550006", "--to", "+14155550100", "--body", "hi"),
    ("send-email", "--from", "shop@example.com", "--to", "a@example.org", "--subject", "Hi",
     "--text", "x"),
])  # fmt: skip
def test_an_empty_idempotency_key_is_refused_and_nothing_is_sent(capsys, api, command):
    # `--idempotency-key "$ORDER_ID"` with ORDER_ID unset: dropping the header would queue
    # the message again on every retry the key was meant to make safe.
    api.routes[("POST", "/sms")] = api.routes[("POST", "/emails")] = (201, {"items": [item(1)]})
    code, _, err = run(capsys, *command, "--idempotency-key", "")
    assert code == 2 and "--idempotency-key" in err
    assert api.requests == []


def test_send_email_repeats_its_large_files_uploads_under_keys_of_its_own(
    capsys, api, monkeypatch, tmp_path
):
    """With --idempotency-key, each --attach-large upload carries a key made from it, the
    file's place and its bytes: a run again names the same uploads (the API derives their ids
    from the key), so the email is the first one's; a changed file is another upload, and the
    email's key then refuses it rather than answering with the old file."""
    from vdq.cli.client import Client

    api.routes[("POST", "/attachments/uploads")] = lambda request: (201, {
        "upload_id": "01HX" + "0" * 22, "url": "http://127.0.0.1:9/u", "method": "PUT",
        "headers": {}, "expires_at": "2026-12-03T09:00:00Z"})  # fmt: skip
    api.routes[("POST", "/emails")] = (201, {"items": [item(1, method="email")]})
    monkeypatch.setattr(Client, "put_upload", lambda self, upload, data: None)
    files = [tmp_path / "a.pdf", tmp_path / "b.pdf"]
    for n, f in enumerate(files):
        f.write_bytes(b"%PDF " + bytes([n]) * 100)

    def keys(*more: str) -> list[str | None]:
        start = len(api.requests)
        code, _, err = run(capsys, "send-email", "--from", "shop@example.com", "--to",
                           "ada@example.org", "--subject", "s", "--text", "t",
                           "--attach-large", str(files[0]), "--attach-large", str(files[1]),
                           *more)  # fmt: skip
        assert code == 0, err
        return [r["headers"].get("Idempotency-Key") for r in api.requests[start:]
                if r["path"] == "/attachments/uploads"]  # fmt: skip

    first = keys("--idempotency-key", "order-42")
    import base64
    import hashlib

    declared = [r["body"]["sha256"] for r in api.requests if r["path"] == "/attachments/uploads"]
    assert declared == [base64.b64encode(hashlib.sha256(f.read_bytes()).digest()).decode()
                        for f in files], "each upload declares its bytes' digest"  # fmt: skip
    assert keys("--idempotency-key", "order-42") == first
    assert len(set(first)) == 2 and None not in first and "order-42" not in first
    assert keys() == [None, None], "no key: uploads as before"
    files[1].write_bytes(b"%PDF changed")
    changed = keys("--idempotency-key", "order-42")
    assert changed[0] == first[0] and changed[1] != first[1]
    assert all(len(k) <= 255 for k in first)


def _no_raw_controls(text: str) -> None:
    for bad in ("\x1b", "\x07", "\u202e", "\x9b", "\u2028", "\x00"):
        assert bad not in text, repr(bad)


def test_show_list_and_watch_render_hostile_text_visibly(capsys, api):
    hostile = item(1, result=HOSTILE, receiver={"cell": "+1\x1b[31m"},
                   content={"subject": HOSTILE, "body": HOSTILE},
                   origin={"type": "order\u202e", "id": "1"},
                   attachments=[{"filename": "a\x1b.txt", "content_type": "text/plain"}],
                   history=[{"at": "2026-12-03T08:00:00Z", "name": "send\x1b[1A",
                             "actor": "x\u2066", "source": "provider",
                             "text": HOSTILE}])  # fmt: skip
    api.routes[("GET", f"/queue-items/{hostile['id']}")] = (200, hostile)
    api.routes[("GET", "/queue-items")] = (200, {"items": [hostile], "cursor": None})
    code, out, _ = run(capsys, "show", hostile["id"])
    assert code == 0
    _no_raw_controls(out)
    assert "\\x1b]0;pwned\\x07" in out and "\\u202eevil" in out and "\\x9b31m" in out
    assert "\n    state  succeeded" not in out  # no fake state line
    code, out, _ = run(capsys, "list")
    _no_raw_controls(out)
    assert len(out.splitlines()) == 3  # header, rule, one row: the newline stayed inside
    _no_raw_controls(watch_line("08:00:00", hostile))
    api.routes[("GET", "/queue-items")] = (500, {"error": {"code": "x", "message": HOSTILE}})
    code, _, err = run(capsys, "list")
    assert code == 8
    _no_raw_controls(err)


def test_watch_and_show_align_their_columns(capsys, api):
    lines = [watch_line("08:00:00", item(1, receiver={"cell": "+1415"}, result="ok")),
             watch_line("08:00:01", item(2, receiver={"email": "漢字の名前@example.org"},
                                         state="errored", method="email", result="bounced")),
             watch_line("08:00:02", item(3, receiver={"email": "a" * 80 + "@example.org"},
                                         result="long"))]  # fmt: skip
    starts = {width(line[: line.index(r)]) for line, r in zip(lines, ("ok", "bounced", "long"),
                                                               strict=True)}  # fmt: skip
    assert len(starts) == 1, lines
    assert [line.split()[3] for line in lines] == ["awaiting", "errored", "awaiting"]
    shown = item(1, history=[
        {"at": "2026-12-03T08:00:00.000Z", "name": "send", "from_state": "queued",
         "to_state": "sending", "actor": "vdq", "source": "server"},
        {"at": "2026-12-03T08:00:01.000Z", "name": "delivered", "actor": "twilio",
         "source": "provider"}])  # fmt: skip
    api.routes[("GET", f"/queue-items/{shown['id']}")] = (200, shown)
    _, out, _ = run(capsys, "show", shown["id"])
    history = out.split("history\n")[1].splitlines()
    assert len({line.index(w) for line, w in zip(history, ("vdq", "twilio"), strict=True)}) == 1
    fields = [line for line in out.split("\n\n")[0].splitlines()]
    assert len({line.index("  ", 10) for line in fields}) == 1, fields


def test_a_reader_that_stops_early_ends_the_cli_quietly(api):
    """vdq list | head: the pipe closes under the CLI, which stops without a traceback."""
    rows = [item(n) for n in range(3000)]  # about 300 KB printed: more than a pipe holds
    api.routes[("GET", "/queue-items")] = (200, {"items": rows, "cursor": None})
    env = {"VDQ_API_URL": api.url, "VDQ_TOKEN": GOOD_TOKEN, "PYTHONPATH": str(REPO / "shared"),
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    for _ in range(3):
        done = subprocess.run(f"{sys.executable} -m vdq.cli list --limit 100 --all | head -c 10",
                              shell=True, env=env, capture_output=True, text=True, timeout=60,
                              executable="/bin/bash")  # fmt: skip
        assert done.stderr == "" and len(done.stdout) == 10
    piped = subprocess.run(f"set -o pipefail; {sys.executable} -m vdq.cli list --limit 100 | "
                           "head -1 >/dev/null", shell=True, env=env, capture_output=True,
                           text=True, timeout=60, executable="/bin/bash")  # fmt: skip
    assert piped.returncode == 0 and piped.stderr == ""


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
def test_bash_completion_offers_commands_options_and_choices(capsys):
    code, script, _ = run(capsys, "completion", "bash")
    assert code == 0

    def complete(*words: str) -> list[str]:
        array = " ".join(f"'{w}'" for w in ("vdq", *words))
        probe = (f"{script}\nCOMP_WORDS=({array}); COMP_CWORD={len(words)}; _vdq; "
                 'printf "%s\\n" "${COMPREPLY[@]}"')  # fmt: skip
        done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
        return done.stdout.split()

    assert "send-sms" in complete("se") and "send-email" in complete("se")
    assert complete("--api-url", "http://x", "li") == ["list"]
    assert complete("list", "--st") == ["--state"]
    assert set(complete("list", "--state", "")) >= {"queued", "succeeded"}
    assert "--idempotency-key" in complete("send-sms", "--id")
    code, zsh, _ = run(capsys, "completion", "zsh")
    assert "bashcompinit" in zsh and "complete -F _vdq vdq" in zsh


def test_show_prints_the_segments_of_an_sms_and_none_for_an_email(capsys, api):
    sms = item(1, encoding="UCS-2", segments=3)
    email = item(2, method="email", receiver={"email": "a@example.org"}, encoding=None,
                 segments=None)  # fmt: skip
    for shown in (sms, email):
        api.routes[("GET", f"/queue-items/{shown['id']}")] = (200, shown)
    _, out, _ = run(capsys, "show", sms["id"])
    assert "    segments  3 (UCS-2)" in out.splitlines()
    _, out, _ = run(capsys, "show", email["id"])
    assert "segments" not in out


def test_show_prints_each_media_url_of_an_mms(capsys, api):
    # What went out with the body: the operator reads the pictures an MMS carried.
    urls = ["https://example.com/a.png", "https://example.com/b.jpg?x=1&y=2"]
    mms = item(1, content={"body": "Your receipt", "media_urls": urls})
    api.routes[("GET", f"/queue-items/{mms['id']}")] = (200, mms)
    _, out, _ = run(capsys, "show", mms["id"])
    lines = out.splitlines()
    assert [line for line in lines if line.strip().startswith("media")] == [
        f"       media  {url}" for url in urls]  # fmt: skip
    assert lines.index(f"       media  {urls[0]}") > lines.index("        body  Your receipt")


def test_an_mms_of_media_alone_is_sent_without_body_and_shown_as_one(capsys, api):
    url = "https://example.com/a.png"
    api.routes[("POST", "/sms")] = (201, {"items": [item(1)]})
    code, _, _ = run(capsys, "send-sms", "--from", "+15005550006", "--to", "+14155550100",
                     "--media-url", url)  # fmt: skip
    assert code == 0 and "body" not in api.requests[-1]["body"]
    assert api.requests[-1]["body"]["media_urls"] == [url]
    mms = item(2, encoding=None, segments=0, content={"body": None, "media_urls": [url]})
    api.routes[("GET", f"/queue-items/{mms['id']}")] = (200, mms)
    _, out, _ = run(capsys, "show", mms["id"])
    lines = out.splitlines()
    assert "    segments  0 (no text: one MMS)" in lines and f"       media  {url}" in lines
    assert not [line for line in lines if line.strip().startswith("body")]


def test_send_commands_pass_priority_and_send_at_and_show_prints_them(capsys, api):
    api.routes[("POST", "/sms")] = (201, {"items": [item(1)]})
    api.routes[("POST", "/emails")] = (201, {"items": [item(2)]})
    code, _, _ = run(capsys, "send-sms", "--from", "+15005550006", "--to", "+14155550100",
                     "--body", "Your code", "--priority", "high")  # fmt: skip
    assert code == 0 and api.requests[-1]["body"]["priority"] == "high"
    assert "send_at" not in api.requests[-1]["body"]
    code, _, _ = run(capsys, "send-email", "--from", "shop@example.com", "--to", "a@example.org",
                     "--subject", "News", "--text", "x", "--priority", "bulk",
                     "--send-at", "2026-12-24T09:00:00+01:00")  # fmt: skip
    body = api.requests[-1]["body"]
    assert code == 0 and (body["priority"], body["send_at"]) == ("bulk",
                                                                "2026-12-24T09:00:00+01:00")
    code, _, err = run(capsys, "send-sms", "--from", "+15005550006", "--to", "+14155550100",
                       "--body", "x", "--priority", "urgent")  # fmt: skip
    assert code == 2 and "invalid choice" in err
    api.routes[("GET", f"/queue-items/{item(3)['id']}")] = (200, item(
        3, state="queued", priority="bulk", send_at="2026-12-24T08:00:00.000000Z", history=[]))
    code, out, _ = run(capsys, "show", item(3)["id"])
    assert code == 0 and "bulk" in out and "2026-12-24T08:00:00" in out


def test_send_sms_from_a_messaging_service_and_show_names_it(capsys, api):
    service = "MG" + "0123456789abcdef" * 2
    sent = item(1, sender={"messaging_service_sid": service})
    api.routes[("POST", "/sms")] = (201, {"items": [sent]})
    code, _, _ = run(capsys, "send-sms", "--from", service, "--to", "+14155550100",
                     "--body", "Your code")  # fmt: skip
    assert code == 0 and api.requests[-1]["body"]["sender"] == {"messaging_service_sid": service}
    api.routes[("GET", f"/queue-items/{sent['id']}")] = (200, sent)
    _, out, _ = run(capsys, "show", sent["id"])
    assert f"      sender  {service}" in out.splitlines()


def test_an_empty_send_at_goes_to_the_api_and_is_not_sent_now(capsys, api):
    # `--send-at "$WHEN"` with WHEN unset: dropping it would send a scheduled newsletter now.
    api.routes[("POST", "/emails")] = (400, {"error": {
        "code": "invalid", "message": "send_at: '' is not an RFC 3339 timestamp",
        "details": {"field": "send_at"}}})  # fmt: skip
    code, _, err = run(capsys, "send-email", "--from", "shop@example.com", "--to",
                       "a@example.org", "--subject", "News", "--text", "x", "--send-at", "")
    assert api.requests[-1]["body"]["send_at"] == ""
    assert code == 7 and "send_at" in err


def test_list_filters_by_priority_and_scheduled(capsys, api):
    api.routes[("GET", "/queue-items")] = (200, {"items": [item(1)], "cursor": None})
    code, _, _ = run(capsys, "list", "--priority", "high", "--scheduled", "true")
    assert code == 0
    assert api.requests[-1]["query"] == {"limit": "50", "priority": "high", "scheduled": "true"}
    code, _, err = run(capsys, "list", "--sent", "--scheduled", "true")
    assert code == 2 and "--scheduled" in err


def test_usage_prints_each_window_of_a_producers_quota(capsys, api):
    api.routes[("GET", "/producers/group:vdq-bulk/usage")] = (200, {
        "producer": "group:vdq-bulk", "at": "2026-12-03T08:00:30Z",
        "limits": [{"limit": "per_minute", "quota": 600, "used": 412, "remaining": 188,
                    "resets_at": "2026-12-03T08:01:00Z"}]})  # fmt: skip
    code, out, _ = run(capsys, "usage", "group:vdq-bulk")
    assert code == 0
    assert "producer group:vdq-bulk" in out
    assert out.splitlines()[-1].split() == ["per_minute", "600", "412", "188",
                                            "2026-12-03T08:01:00Z"]  # fmt: skip
    code, _, err = run(capsys, "usage", "nobody")  # the server's 404
    assert code != 0 and err


def test_find_asks_the_search_by_each_key_and_prints_subject_and_signals(capsys, api):
    found = item(1, method="email", state="succeeded", receiver={"email": "ada@example.org"},
                 excerpt="Your order\x1b[2J 1042", signals=["complaint"],
                 queued_at="2026-12-03T08:00:00Z")  # fmt: skip

    def page(request: dict[str, Any]) -> tuple[int, Any]:
        return 200, {"items": [found], "cursor": None}

    api.routes[("GET", "/search")] = page
    code, out, _ = run(capsys, "find", "--to", "Ada@Example.org", "--state", "succeeded")
    assert code == 0 and "complaint" in out and "Your order\\x1b[2J 1042" in out
    _no_raw_controls(out)
    assert api.requests[-1]["query"] == {"receiver": "Ada@Example.org", "state": "succeeded",
                                         "limit": "50"}  # fmt: skip
    for argv, query in ((["--origin", "shop.order:7"], {"origin_type": "shop.order",
                                                        "origin_id": "7"}),
                        (["--provider-id", "SM1"], {"provider_id": "SM1"}),
                        (["--from", "shop@example.com", "--since", "2026-12-01"],
                         {"sender": "shop@example.com", "since": "2026-12-01"}),
                        (["--id", item(1)["id"]], {"id": item(1)["id"]}),
                        (["--since", "2026-12-01", "--until", "2026-12-02"],
                         {"since": "2026-12-01", "until": "2026-12-02"})):  # fmt: skip
        code, out, _ = run(capsys, "find", "--json", *argv)
        assert code == 0 and json.loads(out) == {"items": [found], "cursor": None}
        assert api.requests[-1]["query"] == {**query, "limit": "50"}
    code, _, err = run(capsys, "find", "--to", "a@example.org", "--from", "b@example.org")
    assert code == 2 and "not allowed with" in err
    code, _, err = run(capsys, "find", "--state", "errored")
    assert code == 2 and "say what to find" in err


def test_find_names_an_mms_of_media_alone_where_a_subject_would_be(capsys, api):
    # Its excerpt is null (it has no body): a blank there read as content lost.
    picture = item(1, method="sms", state="succeeded", receiver={"cell": "+14155550100"},
                   excerpt=None, segments=0, queued_at="2026-12-03T08:00:00Z")  # fmt: skip
    api.routes[("GET", "/search")] = lambda request: (200, {"items": [picture], "cursor": None})
    code, out, _ = run(capsys, "find", "--to", "+14155550100")
    assert code == 0 and "(media only)" in out


def test_find_never_reads_a_page_cut_short_by_its_read_limit_as_no_items(capsys, api):
    # "Did it go out?": a search that stopped at its read limit answers an empty page with a
    # cursor. "(no items)" there reads as "nothing was sent to them"; the items may be further.
    api.routes[("GET", "/search")] = lambda request: (200, {"items": [], "cursor": "abc.def"})
    code, out, err = run(capsys, "find", "--to", "ada@example.org", "--state", "succeeded")
    assert code == 0 and "(no items)" not in out, out
    assert "read limit" in out + err and "--cursor abc.def" in err
    api.routes[("GET", "/search")] = lambda request: (200, {"items": [], "cursor": None})
    code, out, _ = run(capsys, "find", "--to", "ada@example.org")
    assert code == 0 and "(no items)" in out


def test_find_sends_an_item_id_as_pasted_in_lower_case_as_the_api_takes_it(capsys, api):
    # Crockford base32 reads either case (the console upper-cases it too); the API's pattern
    # takes upper case only.
    api.routes[("GET", "/search")] = lambda request: (200, {"items": [], "cursor": None})
    code, _, _ = run(capsys, "find", "--id", item(1)["id"].lower())
    assert code == 0 and api.requests[-1]["query"]["id"] == item(1)["id"]


def test_stats_prints_a_table_per_method_and_the_reputation_breakdown(capsys, api):
    tiles = {"queued": 5, "sent": 4, "delivered": 3, "bounced": 1, "complained": 1,
             "rejected": 0, "errored": 1, "unconfirmed": 0, "cancelled": 0}
    answer = {"period": "hours", "as_of": "2026-12-03T08:00:30Z", "lag_seconds": 70,
              "buckets": [{"start": "2026-12-03T08:00:00.000000Z", "email": tiles}],
              "totals": {"email": tiles},
              "breakdown": [{"name": "shop@example.com", "sent": 4, "delivered": 3,
                             "bounced": 1, "complained": 1, "rejected": 0}]}  # fmt: skip
    api.routes[("GET", "/stats")] = (200, answer)
    code, out, _ = run(capsys, "stats", "--by", "identity", "--method", "email")
    assert code == 0 and api.requests[-1]["query"] == {"period": "hours", "method": "email",
                                                       "breakdown": "identity"}  # fmt: skip
    lines = out.splitlines()
    assert lines[0] == "email, per hour (UTC):" and "08:00" in out and "total" in out
    assert "25.00" in out  # 1 bounce of 4 sent
    assert "70 s" in out
    code, out, _ = run(capsys, "stats", "--days", "--json")
    assert json.loads(out) == answer and api.requests[-1]["query"] == {"period": "days"}
    code, _, err = run(capsys, "stats", "--days", "--by", "producer")
    assert code == 2 and "--by counts the last 24 hours" in err


def test_a_retry_dry_run_says_the_receiver_is_suppressed(capsys, api):
    api.routes[("POST", f"/queue-items/{item(1)['id']}/transitions/retry")] = (200, {
        "transition": "retry", "dry_run": True, "from_state": "errored", "to_state": "queued",
        "item": item(1), "suppressed": {"receiver": "+14155550100", "reason": "sms_opt_out",
                                        "since": "2026-12-01T08:00:00Z", "list": None}})
    code, out, _ = run(capsys, "retry", item(1)["id"], "--dry-run")
    assert code == 0 and "suppression list since 2026-12-01T08:00:00Z (sms_opt_out)" in out
    api.routes[("POST", f"/queue-items/{item(1)['id']}/transitions/retry")][1]["suppressed"] = {
        "receiver": "ada@example.org", "reason": "unsubscribe", "since": "2026-12-01T08:00:00Z",
        "list": "news"}  # fmt: skip
    code, out, _ = run(capsys, "retry", item(1)["id"], "--dry-run")
    assert code == 0 and "unsubscribed from the list news since 2026-12-01T08:00:00Z" in out


def test_a_retry_before_send_at_says_the_item_waits_for_it(capsys, api):
    """An errored item retried before its send_at is sent then, not now: the operator is told
    so, as by the dry run first."""
    later = "2999-01-01T09:00:00.000000Z"
    path = ("POST", f"/queue-items/{item(1)['id']}/transitions/retry")
    api.routes[path] = (200, {"transition": "retry", "dry_run": True, "from_state": "errored",
                              "to_state": "queued",
                              "item": item(1, state="errored", send_at=later)})  # fmt: skip
    code, out, _ = run(capsys, "retry", item(1)["id"], "--dry-run")
    assert code == 0 and f"would wait for its send_at {later}" in out, out
    api.routes[path] = (200, {"transition": "retry", "dry_run": False, "from_state": "errored",
                              "to_state": "queued",
                              "item": item(1, state="queued", send_at=later)})  # fmt: skip
    code, out, _ = run(capsys, "retry", item(1)["id"])
    assert code == 0 and f"waits for its send_at {later}: sent then, not now" in out, out
    # Its time passed: the API cleared send_at and the item goes now, said as ever.
    api.routes[path][1]["item"] = item(1, state="queued", send_at=None)
    code, out, _ = run(capsys, "retry", item(1)["id"])
    assert out == f"{item(1)['id']}: retry errored -> queued\n"
    api.routes[path] = (200, {"transition": "retry", "dry_run": True, "from_state": "errored",
                              "to_state": "queued", "item": item(
                                  1, state="errored", send_at="2000-01-01T09:00:00Z")})
    code, out, _ = run(capsys, "retry", item(1)["id"], "--dry-run")
    assert "send_at" not in out, out


def test_retry_and_cancel_take_many_ids_and_say_which_failed(capsys, api):
    """Found in use: after an outage the runbook had to loop over `vdq retry ID` for hundreds
    of errored items. One id answers as before; several report each, and fail like resend."""
    ids = [item(n)["id"] for n in (1, 2, 3)]
    for n, item_id in enumerate(ids[:2], start=1):
        api.routes[("POST", f"/queue-items/{item_id}/transitions/retry")] = (200, {
            "transition": "retry", "dry_run": False, "from_state": "errored",
            "to_state": "queued", "item": item(n, state="queued")})  # fmt: skip
    api.routes[("POST", f"/queue-items/{ids[2]}/transitions/retry")] = (409, {"error": {
        "code": "invalid_transition", "message": "retry is not possible from sending"}})
    code, out, _ = run(capsys, "retry", ids[0])
    assert code == 0 and out == f"{ids[0]}: retry errored -> queued\n"
    code, out, err = run(capsys, "retry", *ids)
    assert code == 9, "some failed: the partial exit code"
    assert out.splitlines() == [f"{i}: retry errored -> queued" for i in ids[:2]]
    assert f"not retried {ids[2]}" in err and "not possible from sending" in err
    code, out, _ = run(capsys, "retry", "--json", *ids)
    data = json.loads(out)
    assert [d["item"]["id"] for d in data["moved"]] == ids[:2]
    assert list(data["failed"]) == [ids[2]] and data["failed"][ids[2]]["status"] == 409
    code, out, _ = run(capsys, "retry", "--json", ids[0])
    assert json.loads(out)["from_state"] == "errored", "one id: the API's answer as before"
    code, _, _ = run(capsys, "cancel", ids[2])
    assert code != 0


def test_producers_prints_rates_against_the_hold_thresholds_and_releases(capsys, api):
    from vdq.operations.examples import RESPONSES

    api.routes[("GET", "/producers")] = (200, RESPONSES["listProducers"])
    code, out, _ = run(capsys, "producers")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "the last 24 hours (guard: hold):"
    assert lines[1].split() == ["PRODUCER", "SENT", "BOUNCED", "COMPLAINED", "BOUNCE", "%", "/",
                                "HOLD", "COMPLAINT", "%", "/", "HOLD", "RATES", "LEVEL", "PARKED"]
    assert "newsletter-svc" in lines[3] and "6.20 / 4.0" in lines[3]
    assert lines[3].split()[-2:] == ["hold", "yes"]
    assert lines[4].startswith("(whole account)") and lines[4].split()[-1] == "-"
    assert "SES's own figures: bounce 0.61%" in out
    assert "newsletter-svc is held since 2026-12-03T07:12:09" in out
    api.routes[("POST", "/producers/newsletter-svc/release")] = (200, RESPONSES["releaseHold"])
    code, out, _ = run(capsys, "producers", "release", "newsletter-svc")
    assert code == 0 and api.requests[-1]["method"] == "POST"
    assert out.strip() == ("newsletter-svc: 312 parked items sent again, 2 had moved on; level "
                           "released")
    api.routes[("GET", "/producers/newsletter-svc/held")] = (200, RESPONSES["listHeldItems"])
    code, out, _ = run(capsys, "producers", "held", "newsletter-svc", "--json")
    assert code == 0 and json.loads(out)["items"][0]["held"].startswith("held since")
    assert api.requests[-1]["query"] == {"limit": "50"}


def test_producers_prints_whether_items_are_parked_whatever_the_level(capsys, api):
    """A release cut short leaves items parked behind a later warning or ok: the listing says
    so, and how to send or cancel them."""
    from vdq.operations.examples import RESPONSES

    body = json.loads(json.dumps(RESPONSES["listProducers"]))
    [held] = body["producers"]
    level = {**held["level"], "level": "warn", "hold_id": None, "since": "2026-12-03T08"}
    body["producers"] = [
        {**held, "producer": "moved-svc", "judged": "warn", "level": level, "parked": True},
        held,
        {**held, "producer": "quiet-svc", "judged": "ok", "level": None, "parked": False},
        {**held, "producer": "unread-svc", "judged": "warn", "level": level, "parked": None},
    ]  # fmt: skip
    api.routes[("GET", "/producers")] = (200, body)
    code, out, _ = run(capsys, "producers")
    assert code == 0
    rows = {line.split()[0]: line.split()[-2:] for line in out.splitlines()[3:7]}
    assert rows == {"moved-svc": ["warn", "yes"], "newsletter-svc": ["hold", "yes"],
                    "quiet-svc": ["-", "no"], "unread-svc": ["warn", "unknown"]}  # fmt: skip
    assert ("moved-svc is at warn with items still parked (a release cut short): `vdq "
            "producers release moved-svc` sends them, `vdq producers cancel-held moved-svc` "
            "cancels them") in out
    assert "newsletter-svc is at hold with items" not in out  # its hold says it
    assert "quiet-svc is" not in out and "unread-svc is" not in out


def test_show_and_list_say_an_item_is_held_and_which_attempt_a_late_entry_is(capsys, api):
    """Found in use: a held producer's items showed only "queued" (the API says why), and a
    late delivery of attempt 1 looked like the current attempt's."""
    why = "held since 2026-12-03T08:00:00Z: bounce rate 80.00%"
    held = item(1, state="queued", held=why, history=[
        {"at": "2026-12-03T08:00:01Z", "actor": "ses", "source": "provider", "kind": "late",
         "name": "Delivery", "from_state": "sending", "to_state": "sending", "attempt": 1},
    ])  # fmt: skip
    api.routes[("GET", f"/queue-items/{held['id']}")] = (200, held)
    api.routes[("GET", "/queue-items")] = (200, {"items": [held], "next_cursor": None})
    _, out, _ = run(capsys, "show", held["id"])
    assert f"        held  {why}" in out.splitlines()
    assert "Delivery (late)  sending -> sending  ses (provider), attempt 1" in out
    _, out, _ = run(capsys, "list")
    assert "queued (held)" in out


def test_list_and_show_mark_a_complained_about_delivery_as_find_does(capsys, api):
    """Found in use: `vdq list --sent` and `vdq show` read a delivery the receiver then
    reported as spam as a plain "succeeded ... SES delivered the message", where `vdq find`
    and the console mark it: the API gives each item's signals for that."""
    done = item(1, method="email", state="succeeded", receiver={"email": "ada@example.org"},
                result="SES delivered the message: 250 Ok", signals=["complaint"])  # fmt: skip
    api.routes[("GET", "/sent-items")] = (200, {"items": [done], "cursor": None})
    _, out, _ = run(capsys, "list", "--sent")
    header, _, row = out.splitlines()
    assert header.split() == ["ID", "METHOD", "STATE", "RECEIVER", "ATTEMPT", "UPDATED",
                              "SIGNALS", "RESULT"]  # fmt: skip
    assert row.split()[6] == "complaint", out
    api.routes[("GET", f"/queue-items/{done['id']}")] = (200, done)
    _, out, _ = run(capsys, "show", done["id"])
    assert "     signals  complaint" in out.splitlines(), out


def test_suppressions_name_what_a_suppression_covers_for_mail_and_sms(capsys, api):
    """Found in use: an SMS opt-out was listed as covering "(all mail)", and a receiver that
    had left one list read "not suppressed" as its whole answer."""
    entries = [{"receiver": "+14155550100", "list": None, "reason": "sms_opt_out",
                "since": "2026-12-01T08:00:00Z", "actor": "twilio", "text": "STOP"},
               {"receiver": "ada@example.org", "list": None, "reason": "bounce",
                "since": "2026-12-01T08:00:00Z", "actor": "ses", "text": None}]  # fmt: skip
    api.routes[("GET", "/suppressions")] = (200, {"suppressions": entries, "cursor": None})
    _, out, _ = run(capsys, "suppressions", "list")
    [sms] = [line for line in out.splitlines() if line.startswith("+14155550100")]
    [mail] = [line for line in out.splitlines() if line.startswith("ada@")]
    assert "(all SMS)" in sms and "(all mail)" in mail
    api.routes[("GET", "/suppressions/reader%40example.org/history")] = (200, {
        "receiver": "reader@example.org", "suppression": None, "history": [],
        "lists": [{"list": "weekly", "since": "2026-12-01T08:00:00Z",
                   "reason": "unsubscribe"}]})  # fmt: skip
    _, out, _ = run(capsys, "suppressions", "show", "reader@example.org")
    assert out.splitlines()[:2] == [
        "reader@example.org: not suppressed from all its mail",
        "  unsubscribed from the list weekly since 2026-12-01T08:00:00Z (unsubscribe)"]


def test_a_scheduled_item_reads_as_scheduled_with_its_time_in_list_find_and_watch(capsys, api):
    """Found in use: an item scheduled days ahead listed as a bare "queued" with no result,
    which an operator reads as stuck; only `vdq show` gave its send time."""
    waiting = item(1, state="queued", send_at="2026-12-24T09:00:00.000000Z", result=None)
    api.routes[("GET", "/queue-items")] = (200, {"items": [waiting], "next_cursor": None})
    api.routes[("GET", "/search")] = (200, {"items": [waiting], "cursor": None})
    for argv in (("list",), ("find", "--to", "+14155550100")):
        _, out, _ = run(capsys, *argv)
        assert "Scheduled: sends at 2026-12-24T09:00:00Z" in out, out
    assert "Scheduled: sends at" in watch_line("08:00:00", waiting)
    retried = item(2, state="queued", send_at=None, result=None)
    assert "Scheduled" not in watch_line("08:00:00", retried)


def test_a_scheduled_item_the_guard_parked_reads_as_held_not_scheduled(capsys, api):
    """A parked item keeps its send_at, which has passed: it is sent when its producer's hold
    is released, not at that time."""
    parked = item(1, state="queued", send_at="2026-12-01T09:00:00.000000Z", result=None,
                  held="held since 2026-12-01T08:00:00.000000Z: bounce rate")  # fmt: skip
    api.routes[("GET", "/queue-items")] = (200, {"items": [parked], "next_cursor": None})
    _, out, _ = run(capsys, "list")
    assert "queued (held)" in out and "Scheduled" not in out, out
    assert "Scheduled" not in watch_line("08:00:00", parked)


def test_a_cancelled_items_result_reads_as_a_cancel_in_show_list_and_watch(capsys, api):
    """Found in use: an operator cancelled a delayed item and `vdq show` still said "retry 1 of
    12 in 16 s", a retry that will never run (the console already read it as a cancel)."""
    failed = "SES (InternalFailure): Internal failure; retry 1 of 12 in 16 s"
    cancelled = item(1, state="cancelled", result=failed)
    api.routes[("GET", f"/queue-items/{cancelled['id']}")] = (200, cancelled)
    api.routes[("GET", "/queue-items")] = (200, {"items": [cancelled], "next_cursor": None})
    _, out, _ = run(capsys, "show", cancelled["id"])
    [line] = [x for x in out.splitlines() if x.strip().startswith("result")]
    assert "Cancelled: not sent again" in line and failed in line, line
    _, out, _ = run(capsys, "list")
    assert "Cancelled" in out
    assert watch_line("08:00:00", cancelled).split("  ")[-1].startswith("Cancelled")
    unsent = item(2, state="cancelled", result=None)
    assert "Cancelled: not sent." in watch_line("08:00:00", unsent)
    stopped = item(3, state="cancelled", result="not sent: on the suppression list")
    line = watch_line("08:00:00", stopped)
    assert "not sent: on the suppression list" in line and "Cancelled" not in line, line


def test_usage_cancel_held_and_a_numbers_list_entry_say_what_they_are(capsys, api):
    """Found in use: `vdq usage local-user` showed its group's counters as the user's own; a
    cancel-held of a producer not held ended "level " with nothing after it; a number's list
    entry read "suppressed from the list promo", though SMS has no lists."""
    api.routes[("GET", "/producers/local-user/usage")] = (200, {
        "producer": "local-user", "counters": "group:vdq-operators", "at": "2026-12-03T08:00:30Z",
        "limits": [{"limit": "per_minute", "quota": 5, "used": 1, "remaining": 4,
                    "resets_at": "2026-12-03T08:01:00Z"}]})  # fmt: skip
    _, out, _ = run(capsys, "usage", "local-user")
    assert "the counters of group:vdq-operators" in out.splitlines()[0], out
    api.routes[("POST", "/producers/quiet-svc/cancel-held")] = (200, {
        "producer": "quiet-svc", "done": 0, "skipped": 0, "more": False, "level": None})
    _, out, _ = run(capsys, "producers", "cancel-held", "quiet-svc")
    assert out.strip() == "quiet-svc: 0 parked items cancelled, 0 had moved on", out
    api.routes[("POST", "/suppressions")] = (201, {"added": True, "suppression": {
        "receiver": "+14155550100", "channel": "sms", "list": "promo", "reason": "operator",
        "text": None, "since": "2026-12-03T08:00:00Z", "actor": "ops"}})  # fmt: skip
    _, out, _ = run(capsys, "suppressions", "add", "+14155550100", "--list", "promo")
    assert "SMS has no lists" in out and "leave --list out" in out, out


def test_a_parked_item_the_guard_cancelled_does_not_read_as_sent_before(capsys, api):
    """`vdq producers cancel-held` cancels parked items, never sent, with VDQ's own result
    "cancelled while its producer 'shop' was held": not a provider's result of an attempt."""
    parked = item(1, state="cancelled", attempt=2,
                  result="cancelled while its producer 'shop' was held")
    line = watch_line("08:00:00", parked)
    assert "not sent again" not in line and "provider result" not in line, line


def test_send_commands_say_which_receivers_are_suppressed_and_that_email_is_held(capsys, api):
    api.routes[("POST", "/sms")] = (201, {"items": [item(1, state="queued")], "suppressed": [
        {"receiver": "+14155550100", "reason": "sms_opt_out", "since": "2026-12-01T08:00:00Z",
         "list": None}]})  # fmt: skip
    code, out, _ = run(capsys, "send-sms", "--from", "+15005550006", "--to", "+14155550100",
                       "--body", "hi")  # fmt: skip
    assert code == 0
    assert ("note: +14155550100 is on the suppression list since 2026-12-01T08:00:00Z "
            "(sms_opt_out): its item will be cancelled, unsent") in out
    email = item(2, method="email", state="queued", receiver={"email": "a@example.org"})
    api.routes[("POST", "/emails")] = (201, {"items": [email], "suppressed": [
        {"receiver": "a@example.org", "reason": "unsubscribe", "since": "2026-12-01T08:00:00Z",
         "list": "news"}], "held": {"producer": "shop", "since": "2026-12-02T08:00:00Z",
                                    "reason": "bounce rate 6.0% >= 4.0%", "text": "held"}})
    code, out, _ = run(capsys, "send-email", "--from", "shop@example.com", "--to",
                       "a@example.org", "--subject", "News", "--text", "x")
    assert code == 0
    assert "note: a@example.org is unsubscribed from the list news since" in out
    assert "note: producer shop's email is held since 2026-12-02T08:00:00Z" in out


def test_resend_says_which_copies_go_to_a_suppressed_receiver(capsys, api):
    # The copy of a message to a number that texted STOP since is queued and then cancelled,
    # unsent: the resend says so, as send-sms does.
    api.routes[("POST", "/sent-items/01ORIGINAL/resend")] = (201, {
        "items": [item(1, state="queued")], "suppressed": [
            {"receiver": "+14155550100", "reason": "sms_opt_out",
             "since": "2026-12-01T08:00:00Z", "list": None}]})  # fmt: skip
    code, out, _ = run(capsys, "resend", "01ORIGINAL")
    assert code == 0
    assert ("note: +14155550100 is on the suppression list since 2026-12-01T08:00:00Z "
            "(sms_opt_out): its item will be cancelled, unsent") in out, out
