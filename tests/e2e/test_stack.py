"""The stack itself: the banner a newcomer reads, its copy-paste commands, readiness, the local
front's authorizer and a clean stop on Ctrl-C."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

import requests
from tests.e2e.conftest import Stack, requires

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator")]


def test_the_banner_commands_work_in_a_new_shell_and_ctrl_c_stops_everything(tmp_path):
    stack = Stack(tmp_path / "vdq-local.log")
    try:
        assert requests.get(f"{stack.url}/health", timeout=5).status_code == 200
        banner = stack.log.read_text()
        for group in ("vdq-senders", "vdq-viewers", "vdq-operators", "vdq-admins"):
            assert group in banner
        lines = [line.strip() for line in banner.splitlines()]
        [export] = [line for line in lines if line.startswith("export VDQ_API_URL=")]
        commands = [line.split("  ")[0] for line in lines if line.startswith("vdq ")]
        assert [c.split()[1] for c in commands] == ["send-email", "send-sms", "find", "show"]
        # A new shell: no VDQ_* variables, no venv, and no vdq anywhere on its PATH.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AWS_", "VDQ_", "TWILIO_")) and k != "VIRTUAL_ENV"}
        env["PATH"] = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                      if d and not (Path(d) / "vdq").exists())  # fmt: skip
        assert subprocess.run(["bash", "-c", "command -v vdq"], env=env).returncode != 0

        def in_new_shell(command: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run(["bash", "-c", f"{export}\n{command}"], env=env,
                                  capture_output=True, text=True, timeout=60)  # fmt: skip
            assert done.returncode == 0, (command, done.stderr)
            return done

        sent = in_new_shell(commands[0])
        assert "success@simulator.amazonses.com" in sent.stdout
        in_new_shell(commands[1])
        [item_id] = re.findall(r"\b[0-9A-HJKMNP-TV-Z]{26}\b", sent.stdout)
        # "Did it go out?": the search by receiver finds the email at once, with its state.
        assert item_id in in_new_shell(commands[2]).stdout
        assert item_id in in_new_shell(commands[3].replace("ID", item_id)).stdout
    finally:
        code = stack.stop()
    assert code == 0, stack.log.read_text()[-6000:]  # past its budget, the stop prints its threads
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
