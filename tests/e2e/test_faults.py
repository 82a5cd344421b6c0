"""A run through sandboxes that duplicate, delay, reorder and drop notifications and throttle,
fail and slow down send requests: every item still reaches its documented state, each is
accepted by its provider exactly once, and nothing is left in a queue or dead-letter queue."""

from __future__ import annotations

import time

import pytest

from tests.e2e.conftest import FINAL, patient, requires

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator", "schedule")]

SIM = "simulator.amazonses.com"
INJECTED = ("20429", "20500", "429", "500", "Too Many Requests", "injected")


def test_injected_faults_lose_nothing(faulty_stack):
    s = faulty_stack
    expected: dict[str, str] = {}
    emails = [f"success+{n}@{SIM}" for n in range(6)] + [f"bounce@{SIM}"] + [
        f"user{n}@example.org" for n in range(3)]  # fmt: skip
    for item in s.send_emails(*emails):
        receiver = item["receiver"]["email"]
        expected[item["id"]] = "errored" if receiver.startswith("bounce@") else "succeeded"
    numbers = [f"+1415555020{n}" for n in range(5)] + ["+15005550010"]
    for item in s.send_sms(*numbers):
        expected[item["id"]] = "errored" if item["receiver"]["cell"] == "+15005550010" else (
            "succeeded")  # fmt: skip

    retried: set[str] = set()
    deadline = time.monotonic() + patient(120)
    while time.monotonic() < deadline:
        items = {i: s.item(i) for i in expected}
        pending = [i for i, it in items.items() if it["state"] not in FINAL]
        refused = [i for i, it in items.items() if it["state"] == "errored"
                   and any(x in (it["result"] or "") for x in INJECTED)]  # fmt: skip
        for item_id in refused:  # a send the provider refused for a fault: the operator retries
            s.cli("retry", item_id, check=True)
            retried.add(item_id)
        if not pending and not refused:
            break
        time.sleep(0.5)
    states = {i: s.item(i)["state"] for i in expected}
    assert states == expected, {i: _story(s.item(i)) for i in expected if states[i] != expected[i]}

    ses = s.sandbox("ses")["emails"]
    for item_id in expected:
        item = s.item(item_id)
        if item["method"] == "email":
            accepted = [m for m in ses if m["tags"].get("vdq_item") == [item_id]]
            assert len(accepted) == 1, f"{item_id} accepted {len(accepted)} times by SES"
    sids = [m["sid"] for m in s.sandbox("twilio")["messages"]]
    sms_ids = [i for i in expected if s.item(i)["method"] == "sms"]
    assert len(sids) == len(set(sids)) and len(sids) == len(sms_ids), "one Twilio message each"

    # Late duplicates land a while after the states settle: wait for the queues to drain.
    empty = {"visible": 0, "in_flight": 0, "delayed": 0}
    deadline = time.monotonic() + patient(15)
    status = s.status()
    while any(d != empty for d in status["queues"].values()) and time.monotonic() < deadline:
        time.sleep(0.5)
        status = s.status()
    assert status["faults"] != "none"
    for name, depth in status["queues"].items():
        assert depth == empty, (name, depth)


def _story(item: dict) -> dict:
    """What a failure shows of an item: its result and its history, one line per entry."""
    lines = [" ".join(str(h.get(k)) for k in ("at", "name", "from_state", "to_state", "actor",
                                              "attempt", "text") if h.get(k) is not None)
             for h in item.get("history") or []]  # fmt: skip
    return {"result": item.get("result"), "provider_id": item.get("provider_id"),
            "history": lines}
