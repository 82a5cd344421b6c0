"""The stack itself: the banner a newcomer reads, its copy-paste commands, readiness, the local
front's authorizer and a clean stop on Ctrl-C."""

from __future__ import annotations

import socket
import subprocess

import pytest

import requests
from tests.e2e.conftest import Stack, requires

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator")]


def test_the_banner_commands_work_and_ctrl_c_stops_everything(tmp_path):
    stack = Stack(tmp_path / "vdq-local.log")
    try:
        assert requests.get(f"{stack.url}/health", timeout=5).status_code == 200
        banner = stack.log.read_text()
        for group in ("vdq-senders", "vdq-viewers", "vdq-operators", "vdq-admins"):
            assert group in banner
        commands = [line.strip() for line in banner.splitlines()
                    if line.strip().startswith("VDQ_API_URL=")]  # fmt: skip
        assert [c.split()[3] for c in commands] == ["send-email", "send-sms", "list"]
        for command in commands:
            done = subprocess.run(command, shell=True, capture_output=True, text=True,
                                  timeout=60)  # fmt: skip
            assert done.returncode == 0, (command, done.stderr)
        assert "success@simulator.amazonses.com" in subprocess.run(
            commands[0], shell=True, capture_output=True, text=True, timeout=60).stdout
    finally:
        code = stack.stop()
    assert code == 0
    assert "stopped" in stack.log.read_text()
    with socket.socket() as s:  # nothing listens on the port any more
        assert s.connect_ex(("127.0.0.1", stack.port)) != 0


def test_the_front_refuses_a_missing_bad_or_foreign_token(stack):
    body = {"sender": {"cell": "+15005550006"}, "to": [{"cell": "+14155550100"}], "body": "x"}
    assert requests.post(f"{stack.url}/sms", json=body, timeout=10).status_code == 401
    assert stack.api("POST", "/sms", json=body, token="nope").status_code == 401
    import jwt

    foreign = jwt.encode({"sub": "x", "cognito:groups": ["vdq-admins"], "iss": "vdq-local",
                          "exp": 9999999999}, "another-secret-" + "y" * 32, algorithm="HS256")
    assert stack.api("POST", "/sms", json=body, token=foreign).status_code == 401
    assert stack.api("POST", "/sms", json=body, groups=("vdq-viewers",)).status_code == 403


def test_health_and_openapi_are_public(stack):
    assert requests.get(f"{stack.url}/health", timeout=10).status_code == 200
    spec = requests.get(f"{stack.url}/openapi.json", timeout=10)
    assert spec.status_code == 200 and "/emails" in spec.json()["paths"]
    status = stack.status()
    assert status["ready"] and set(status["functions"].values()) == {"ready"}
