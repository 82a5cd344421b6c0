"""``vdq smoke`` against the local stack: the command a deployment runs, here with the local token
(VDQ_TOKEN) and the local stack's URL, through the SES and Twilio sandboxes."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import patient, requires
from tests.support.tables import parse as table

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator")]

SIM = "simulator.amazonses.com"
# Each run's +label keeps its addresses off the suppression list its own bounce and complaint
# feed; the opted-out number is suppressed by its first run.
CHECKS = {"email success": (f"success+smoke-e2e-1@{SIM}", "succeeded + deliver"),
          "email bounce": (f"bounce+smoke-e2e-1@{SIM}", "errored + bounce"),
          "email complaint": (f"complaint+smoke-e2e-1@{SIM}", "succeeded + complain"),
          "sms invalid number": ("+15005550001", "errored + 21211"),
          "sms blocked number": ("+15005550004", "errored or cancelled + 21610"),
          "sms accepted": ("+14155550100", "awaiting or succeeded")}  # fmt: skip


def test_smoke_passes_against_the_local_stack_and_cleans_up(stack):
    timeout = patient(60)
    done = stack.cli("smoke", "--api-url", stack.url, "--sender", "shop@example.com",
                     "--sms", "+15005550006", "--interval", "0.25", "--timeout", str(timeout),
                     "--run-id", "e2e-1", timeout=timeout + 60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = table(done.stdout)
    assert {name: (r["RECEIVER"], r["EXPECTED"]) for name, r in rows.items()} == CHECKS
    assert all(r["RESULT"] == "pass" for r in rows.values()), done.stdout
    assert all(float(r["SECONDS"]) >= 0 for r in rows.values())
    assert "6 of 6 checks passed" in done.stdout
    assert "run e2e-1" in done.stderr and "queued ->" in done.stderr  # the progress
    # Clean-up: the errored items are cancelled; the delivered ones stay as sent items.
    for name in ("email bounce", "sms invalid number", "sms blocked number"):
        item = stack.item(rows[name]["ITEM"])
        assert item["state"] == "cancelled", (name, item["state"])
        assert item["origin"] == {"type": "vdq-smoke", "id": "e2e-1"}
    assert stack.item(rows["email success"]["ITEM"])["state"] == "succeeded"

    # The same run id again: the Idempotency-Keys return the same items, nothing is sent twice.
    sent = len(stack.sandbox("ses")["emails"])
    again = stack.cli("smoke", "--api-url", stack.url, "--sender", "shop@example.com",
                      "--interval", "0.25", "--timeout", "5", "--run-id", "e2e-1", "--json",
                      timeout=120)  # fmt: skip
    assert len(stack.sandbox("ses")["emails"]) == sent
    result = json.loads(again.stdout)
    assert [c["item"] for c in result["checks"]] == [rows[n]["ITEM"] for n in list(CHECKS)[:3]]
    # Its clean-up cancelled the bounce, which errored first: the re-run judges it by the state
    # it was cancelled in, so a finished run checks out again (as --run-id promises).
    assert again.returncode == 0, again.stdout + again.stderr
    assert result["passed"] and result["checks"][1]["got"].startswith("cancelled")


def test_smoke_without_a_sender_is_refused_with_exit_2_before_sending(stack):
    done = stack.cli("smoke", "--api-url", stack.url)
    assert done.returncode == 2 and "no sender: pass --sender" in done.stderr, done.stderr
    assert not done.stdout
