"""The local stack as a client sees it: started with ``vdq local`` on a free port, driven over HTTP
and the CLI only. One stack per configuration, started once per session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import requests
from tests.support.calls import python_module

REPO = Path(__file__).resolve().parents[2]
SECRET = "e2e-secret-" + "x" * 32
TWILIO_SID = "AC" + "e2e0" * 8
TWILIO_TOKEN = "e2e-twilio-auth-token-0123456789"
SMS_TIMEOUT_HOURS = 0.004  # 14.4 s: the short window of the SMS timeout test
STREAM_SECONDS = 2  # the stream poller's window: postings and counts follow a change by this
# How much longer than on an idle machine a wait may take before it fails. The stack runs in
# other processes that a busy machine (a second test run, a build) can slow down many times
# over; a wait returns as soon as its condition holds, so patience costs nothing when it passes.
PATIENCE = float(os.environ.get("VDQ_E2E_PATIENCE", "6"))


def patient(seconds: float) -> float:
    return seconds * PATIENCE


FINAL = ("succeeded", "errored", "cancelled", "unconfirmed")

pytestmark = pytest.mark.e2e


def requires(*functions: str) -> Any:
    """Skip (naming the missing module) unless every ``functions/<name>/handler.py`` exists."""
    missing = [f"functions/{f}/handler.py" for f in functions
               if not (REPO / "functions" / f / "handler.py").exists()]  # fmt: skip
    return pytest.mark.skipif(bool(missing), reason=f"missing module: {', '.join(missing)}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    def __init__(self, log: Path, *args: str, **env: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("AWS_", "VDQ_", "TWILIO_"))}  # fmt: skip
        self.env.update(
            VDQ_LOCAL_JWT_SECRET=SECRET, VDQ_SCHEDULE_SECONDS="1",
            VDQ_TWILIO_SMS_TIMEOUT_HOURS=str(SMS_TIMEOUT_HOURS), VDQ_RETRY_BACKOFF_SECONDS="1",
            VDQ_RETRY_BACKOFF_MAX_SECONDS="2", TWILIO_ACCOUNT_SID=TWILIO_SID,
            TWILIO_AUTH_TOKEN=TWILIO_TOKEN, VDQ_LOCAL_STREAM_SECONDS=str(STREAM_SECONDS),
            # The send function's check of the emails SES accepted comes a second later, not
            # five minutes: a run sees it applied and its queue drained.
            VDQ_CHECK_SECONDS="1",
        )  # fmt: skip
        self.env.update(env)
        self._out = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, *python_module("vdq.cli"), "local", "--port", str(self.port),
             "--visibility-seconds", "3", *args],
            stdout=self._out, stderr=subprocess.STDOUT, env=self.env, cwd=REPO,
        )  # fmt: skip
        self._wait_healthy()

    def _wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vdq local exited: {self.log.read_text()[-3000:]}")
            try:
                if requests.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"vdq local not healthy in {timeout}s: {self.log.read_text()[-3000:]}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:  # a wait like the others: a busy machine slows the stack's shutdown too
                self.process.wait(timeout=patient(30))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()
        return self.process.returncode

    # Clients.
    def token(self, *groups: str) -> str:
        return self.cli("token", "--groups", ",".join(groups or ("vdq-admins",))).stdout.strip()

    def api(self, method: str, path: str, *, groups: tuple[str, ...] = ("vdq-admins",),
            token: str | None = None, **kwargs: Any) -> requests.Response:  # fmt: skip
        from vdq.local.front import make_token

        bearer = token if token is not None else make_token(SECRET, list(groups))
        headers = {"Authorization": f"Bearer {bearer}", **kwargs.pop("headers", {})}
        return requests.request(method, self.url + path, headers=headers,
                                timeout=patient(30), **kwargs)  # fmt: skip

    def cli(self, *args: str, token: str | None = None, check: bool = False,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:  # fmt: skip
        timeout = patient(timeout)
        env = {**self.env, "VDQ_API_URL": self.url}
        env["VDQ_TOKEN"] = token if token is not None else _admin_token()
        done = subprocess.run([sys.executable, "-m", "vdq.cli", *args], env=env, cwd=REPO,
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(f"vdq {' '.join(args)} -> {done.returncode}: {done.stderr}")
        return done

    def status(self) -> dict[str, Any]:
        return requests.get(f"{self.url}/_local/status", timeout=patient(10)).json()

    def sandbox(self, name: str) -> Any:
        return requests.get(self._sandbox_url(name), timeout=patient(10)).json()

    def _sandbox_url(self, name: str) -> str:
        banner = self.log.read_text()
        label = {"ses": "SES sandbox", "twilio": "Twilio sandbox"}[name]
        line = next(x for x in banner.splitlines() if x.strip().startswith(label))
        return line.split()[-1]

    def item(self, item_id: str) -> dict[str, Any]:
        answer = self.api("GET", f"/queue-items/{item_id}")
        assert answer.status_code == 200, answer.text
        return answer.json()

    def wait(self, item_id: str, states: tuple[str, ...] | str = FINAL,
             timeout: float = 30) -> dict[str, Any]:  # fmt: skip
        """The item once it is in one of ``states`` (AssertionError after ``timeout``, stretched
        by ``patient``: the wait ends as soon as the state is reached)."""
        states = (states,) if isinstance(states, str) else states
        deadline = time.monotonic() + patient(timeout)
        item: dict[str, Any] = {}
        while time.monotonic() < deadline:
            item = self.item(item_id)
            if item["state"] in states:
                return item
            time.sleep(0.25)
        raise AssertionError(f"{item_id} stayed {item.get('state')} (wanted {states}): {item}")

    def listed(self, *item_ids: str, timeout: float = 30) -> None:
        """Once GET /sent-items lists every one of ``item_ids``: the list follows the stream by
        its window (STREAM_SECONDS here), not the item's state."""
        deadline = time.monotonic() + patient(timeout)
        missing = set(item_ids)
        while time.monotonic() < deadline:
            page = self.api("GET", "/sent-items?limit=100").json()["items"]
            missing = set(item_ids) - {i["id"] for i in page}
            if not missing:
                return
            time.sleep(0.25)
        raise AssertionError(f"{sorted(missing)} not in the sent list after {timeout} s")

    def send_emails(self, *receivers: str, **extra: Any) -> list[dict[str, Any]]:
        body = {"sender": {"email": "shop@example.com"}, "to": [{"email": r} for r in receivers],
                "subject": "e2e", "text": "hello", **extra}  # fmt: skip
        answer = self.api("POST", "/emails", json=body, groups=("vdq-senders",))
        assert answer.status_code == 201, answer.text
        return answer.json()["items"]

    def send_sms(self, *receivers: str) -> list[dict[str, Any]]:
        body = {"sender": {"cell": "+15005550006"}, "to": [{"cell": r} for r in receivers],
                "body": "e2e code 123"}
        answer = self.api("POST", "/sms", json=body, groups=("vdq-senders",))
        assert answer.status_code == 201, answer.text
        return answer.json()["items"]


def _admin_token() -> str:
    from vdq.local.front import make_token

    return make_token(SECRET, ["vdq-admins"])


# Package scope: each stack stops when the e2e tests end, not idling through the rest.
@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("stack") / "vdq-local.log")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def polling_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("polling") / "vdq-local.log", "--polling")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def faulty_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("faults") / "vdq-local.log",
              "--faults", "duplicate,late,reordered,missing,throttle,5xx,slow",
              "--log-level", "INFO",  # a failure is read from this log afterwards
              VDQ_LOCAL_FAULT_RATE="0.3", VDQ_LOCAL_FAULT_DELAY_SECONDS="1",
              VDQ_TWILIO_SMS_TIMEOUT_HOURS="0.05")  # retries keep the first window: 3 min
    yield s
    s.stop()
