"""The README's examples, as a newcomer pastes them: its curl commands and its Python example
run against the local stack, with the two variables the banner's line exports, and queue what
they say; the getting-started page's curl commands too. So neither can drift from the API."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from tests.e2e.conftest import REPO, requires

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
