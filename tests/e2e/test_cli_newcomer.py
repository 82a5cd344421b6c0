"""The CLI against the real local stack: paging by the cursor the API really returns, the
state filter, and ``vdq local`` on a port that is taken."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from tests.e2e.conftest import REPO, requires

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator")]


def test_list_pages_by_the_cursor_the_api_returns(stack):
    sent = stack.send_emails(*[f"success+{n}@simulator.amazonses.com" for n in range(3)])
    for item in sent:
        stack.wait(item["id"], "succeeded")
    stack.listed(*(item["id"] for item in sent))  # the sent list follows the stream
    first = json.loads(stack.cli("list", "--sent", "--json", "--limit", "1", check=True).stdout)
    assert len(first["items"]) == 1 and first["cursor"]
    second = json.loads(stack.cli("list", "--sent", "--json", "--limit", "1", "--cursor",
                                  first["cursor"], check=True).stdout)  # fmt: skip
    assert len(second["items"]) == 1 and second["items"][0]["id"] != first["items"][0]["id"]
    human = stack.cli("list", "--sent", "--limit", "1", check=True)
    assert "--cursor " in human.stderr
    everything = json.loads(stack.cli("list", "--sent", "--json", "--limit", "2", "--all",
                                      check=True).stdout)  # fmt: skip
    ids = [i["id"] for i in everything["items"]]
    assert {i["id"] for i in sent} <= set(ids) and len(set(ids)) == len(ids)
    assert everything["cursor"] is None


def test_the_state_filter_takes_the_enum_and_the_api_applies_it(stack):
    [item] = stack.send_sms("+15005550012")
    stack.wait(item["id"], "awaiting")
    listed = json.loads(stack.cli("--json", "list", "--state", "awaiting", "--limit", "100",
                                  check=True).stdout)  # fmt: skip
    assert item["id"] in [i["id"] for i in listed["items"]]
    assert {i["state"] for i in listed["items"]} == {"awaiting"}
    assert stack.cli("list", "--state", "waiting").returncode == 2


def test_vdq_local_on_a_busy_port_names_the_port_and_the_flag(stack):
    done = subprocess.run([sys.executable, "-m", "vdq.cli", "local", "--port", str(stack.port)],
                          env=stack.env, cwd=REPO, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 3
    assert f"port {stack.port} is in use" in done.stderr and "--port" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    with socket.create_connection(("127.0.0.1", stack.port), timeout=5):
        pass  # the running stack was not disturbed
