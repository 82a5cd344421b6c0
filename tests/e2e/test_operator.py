"""Operators through the CLI: list, show, retry, cancel, resend (with its progress bar), watch,
--json and the exit codes that say what failed."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import patient, requires

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator")]

SIM = "simulator.amazonses.com"


def test_retry_starts_a_new_attempt_that_sends_again(stack):
    [item] = stack.send_sms("+15005550001")
    stack.wait(item["id"], "errored")
    dry = stack.cli("retry", item["id"], "--dry-run", check=True)
    assert "errored -> queued" in dry.stdout and stack.item(item["id"])["state"] == "errored"
    stack.cli("retry", item["id"], check=True)
    again = stack.wait(item["id"], "errored")
    assert again["attempt"] == 2
    names = [h["name"] for h in again["history"]]
    assert "retry" in names and names.count("send") == 2, names


def test_cancel_moves_an_errored_item_to_cancelled_and_refuses_a_done_one(stack):
    [item] = stack.send_emails(f"bounce+cancel@{SIM}")  # its own address: bounces suppress
    stack.wait(item["id"], "errored")
    cancelled = stack.cli("cancel", item["id"], "--json", check=True)
    assert json.loads(cancelled.stdout)["to_state"] == "cancelled"
    assert stack.item(item["id"])["state"] == "cancelled"
    again = stack.cli("cancel", item["id"])
    assert again.returncode == 6, "409: not possible in the item's state"


def test_resend_copies_sent_items_with_a_progress_bar(stack):
    items = stack.send_emails(f"success@{SIM}", "lin@example.org")
    for i in items:
        stack.wait(i["id"], "succeeded")
    done = stack.cli("resend", *[i["id"] for i in items], "--json", check=True)
    copies = json.loads(done.stdout)["items"]
    assert len(copies) == 2 and "resending [" in done.stderr and "2/2" in done.stderr
    for copy, original in zip(copies, items, strict=True):
        assert copy["resent_from"] == original["id"]
        assert stack.wait(copy["id"], "succeeded")["receiver"] == original["receiver"]


def test_resend_of_an_item_not_done_fails_for_it_alone(stack):
    [sent] = stack.send_emails(f"success@{SIM}")
    [active] = stack.send_sms("+15005550012")
    stack.wait(sent["id"], "succeeded")
    stack.wait(active["id"], "awaiting")
    partial = stack.cli("resend", sent["id"], active["id"])
    assert partial.returncode == 9, partial.stderr
    assert active["id"] in partial.stderr
    only_bad = stack.cli("resend", active["id"])
    assert only_bad.returncode == 5


def test_list_and_show_print_tables_and_a_timeline(stack):
    [item] = stack.send_emails(f"success@{SIM}")
    stack.wait(item["id"], "succeeded")
    stack.listed(item["id"])  # the sent list follows the stream by its window
    listed = stack.cli("list", "--sent", "--limit", "100", check=True)
    assert "STATE" in listed.stdout and item["id"] in listed.stdout
    as_json = json.loads(stack.cli("list", "--sent", "--json", "--limit", "100").stdout)
    assert item["id"] in [i["id"] for i in as_json["items"]]
    shown = stack.cli("show", item["id"], check=True)
    assert "history" in shown.stdout and "queued" in shown.stdout and "succeed" in shown.stdout
    active = stack.cli("list", check=True).stdout
    assert item["id"] not in active, "a done item leaves the active queue"


def test_watch_prints_state_changes_as_they_happen(stack):
    import subprocess
    import sys

    env = {**stack.env, "VDQ_API_URL": stack.url, "VDQ_TOKEN": stack.token("vdq-viewers")}
    watcher = subprocess.Popen([sys.executable, "-m", "vdq.cli", "watch", "--seconds", "8",
                                "--interval", "0.3"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    import time

    time.sleep(1.5)
    [item] = stack.send_sms("+15005550012")
    out, err = watcher.communicate(timeout=patient(30))
    assert watcher.returncode == 0, err
    states = [line.split()[3] for line in out.splitlines() if item["id"] in line]
    assert states and states[-1] == "awaiting", out


def test_exit_codes_say_what_failed(stack):
    assert stack.cli("show", "01AAAAAAAAAAAAAAAAAAAAAAAA").returncode == 5
    assert stack.cli("list", token="not-a-token").returncode == 4
    assert stack.cli("list", token=stack.token("vdq-senders")).returncode == 4  # no permission
    bad = stack.cli("send-sms", "--from", "+15005550006", "--to", "not-a-number", "--body", "x")
    assert bad.returncode == 7
    unreachable = stack.cli("list", "--api-url", "http://127.0.0.1:9")
    assert unreachable.returncode == 3
    assert stack.cli("frobnicate").returncode == 2
    assert "exit codes" in stack.cli("--help").stdout
