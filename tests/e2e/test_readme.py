"""The README's examples, as a newcomer pastes them: its curl commands and its Python example
run against the local stack, with the two variables the banner's line exports, and queue what
they say; the getting-started page's curl commands too. So neither can drift from the API. And
the banner's one line, pasted into a new shell, puts `vdq` there with what it needs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time

import pytest

from tests.e2e.conftest import REPO, patient, requires

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator")]

PAGES = ("README.md", "docs/getting-started.md")


def blocks(page: str, language: str, word: str) -> list[str]:
    """The ``language`` code blocks of ``page`` that hold ``word``."""
    text = (REPO / page).read_text()
    return [b for b in re.findall(rf"```{language}\n(.*?)```", text, re.S) if word in b]


@pytest.fixture
def shell_env(stack) -> dict[str, str]:
    """What the banner's line sets: the API's URL and an admin token."""
    return {**stack.env, "VDQ_API_URL": stack.url, "VDQ_TOKEN": stack.token("vdq-admins")}


@pytest.mark.parametrize("page", PAGES)
def test_the_curl_examples_queue_an_email_and_an_sms(stack, shell_env, page):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    examples = blocks(page, "sh", "curl -s -X POST")
    assert len(examples) == 2, "an email and an SMS"
    methods = []
    for example in examples:
        done = subprocess.run(["bash", "-c", example], env=shell_env, capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        [item] = json.loads(done.stdout)["items"]
        assert item["state"] == "queued"
        methods.append(item["method"])
        assert stack.wait(item["id"], "succeeded")["state"] == "succeeded"
    assert methods == ["email", "sms"]


def test_the_python_example_queues_an_email_and_an_sms(stack, shell_env):
    [example] = blocks("README.md", "python", "requests.post")
    done = subprocess.run([sys.executable, "-c", example], env=shell_env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert [(method, state) for _, method, state in lines] == [("email", "queued"),
                                                                ("sms", "queued")]  # fmt: skip
    for item_id, _, _ in lines:
        assert stack.wait(item_id, "succeeded")["state"] == "succeeded"


def _banner(stack) -> list[str]:
    """The banner's lines (``vdq local`` may answer /health a moment before it prints them)."""
    deadline = time.monotonic() + patient(10)
    while "then try:" not in (text := stack.log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [line.strip() for line in text.splitlines()]


def test_the_banners_line_lets_a_new_shell_run_the_commands_it_suggests(stack, tmp_path):
    """A new shell has neither the variables nor the venv on its PATH: the one line the banner
    prints is all it gets, then the commands the banner suggests, as printed."""
    lines = _banner(stack)
    start = lines.index("then try:")
    export, suggested = lines[start - 1], lines[start + 1 : start + 4]
    assert export.startswith("export VDQ_API_URL=") and "PATH=" in export
    assert [c.split()[:2] for c in suggested] == [["vdq", "send-email"], ["vdq", "send-sms"],
                                                  ["vdq", "find"]]  # fmt: skip
    script = "\n".join(["set -e", export, *suggested])
    shell = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    done = subprocess.run([shutil.which("bash") or "/bin/bash", "--noprofile", "--norc", "-c",
                           script], env=shell, capture_output=True, text=True,
                          timeout=patient(60))  # fmt: skip
    assert done.returncode == 0, done.stderr
    ids = re.findall(r"^([0-9A-Z]{26}) ", done.stdout, re.M)
    assert len(ids) >= 2, done.stdout  # the email and the SMS queued (the list may show more)
    shown = subprocess.run([shutil.which("bash") or "/bin/bash", "--noprofile", "--norc", "-c",
                            f"{export}\nvdq show {ids[0]}"], env=shell, capture_output=True,
                           text=True, timeout=patient(60))  # fmt: skip
    assert shown.returncode == 0 and "history" in shown.stdout, shown.stderr
