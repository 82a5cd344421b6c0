"""Email through the local stack: the SES mailbox simulator, attachments, over HTTP and the CLI."""

from __future__ import annotations

import base64

import pytest

import requests
from tests.e2e.conftest import patient, requires

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator")]

SIM = "simulator.amazonses.com"


@pytest.mark.parametrize(
    "address,state,event",
    [
        (f"success@{SIM}", "succeeded", "deliver"),
        # +labels: the bounce and the complaint suppress the address they reach, and other
        # tests of this stack send to bounce@ too (each +label variant is its own address).
        (f"bounce+email@{SIM}", "errored", "bounce"),
        (f"complaint+email@{SIM}", "succeeded", "complaint"),
        (f"suppressionlist@{SIM}", "errored", "suppress"),
        (f"ooto@{SIM}", "succeeded", "deliver"),
        ("ada@example.org", "succeeded", "deliver"),
    ],
)
def test_every_mailbox_simulator_address_reaches_its_documented_state(stack, address, state,
                                                                       event):  # fmt: skip
    [item] = stack.send_emails(address)
    done = stack.wait(item["id"], state)
    assert done["provider_id"], "the SES message ID is stored"
    texts = " ".join(f"{h.get('name')} {h.get('text')}" for h in done["history"]).lower()
    if event == "complaint":  # the complaint follows the delivery: recorded, state kept
        stack.wait(item["id"], "succeeded")
        assert _history_with(stack, item["id"], "complain"), f"no complaint in: {texts}"
    else:
        assert event in texts, texts
    sent = [m for m in stack.sandbox("ses")["emails"] if m["message_id"] == done["provider_id"]]
    assert len(sent) == 1 and sent[0]["destination"] == [address]
    assert sent[0]["tags"]["vdq_item"] == [item["id"]], "the item rides in the SES tags"


def _history_with(stack, item_id: str, word: str, timeout: float = 10) -> bool:
    import time

    from tests.e2e.conftest import patient

    deadline = time.monotonic() + patient(timeout)
    while time.monotonic() < deadline:
        history = stack.item(item_id)["history"]
        if any(word in f"{h.get('name')} {h.get('text')}".lower() for h in history):
            return True
        time.sleep(0.25)
    return False


def test_an_email_with_an_attachment_is_sent_with_it_and_the_file_downloads(stack, tmp_path):
    report = tmp_path / "report.csv"
    report.write_bytes(b"order,total\n1042,99.50\n")
    done = stack.cli("send-email", "--json", "--from", "shop@example.com", "--to",
                     f"success@{SIM}", "--subject", "Your report", "--text", "attached",
                     "--attach", str(report), check=True)  # fmt: skip
    import json

    [item] = json.loads(done.stdout)["items"]
    final = stack.wait(item["id"], "succeeded")
    [attachment] = final["attachments"]
    assert attachment["filename"] == "report.csv"
    download = stack.api("GET", f"/attachments/{attachment['id']}", allow_redirects=False)
    assert download.status_code == 302
    got = requests.get(download.headers["Location"], timeout=patient(10))
    assert got.content == report.read_bytes()
    assert stack.api("GET", f"/attachments/{attachment['id']}", groups=("vdq-senders",),
                     allow_redirects=False).status_code == 403  # fmt: skip
    [sent] = [m for m in stack.sandbox("ses")["emails"] if m["message_id"] == final["provider_id"]]
    assert sent["attachments"] == ["report.csv"]


def test_inline_attachment_body_is_base64_over_http(stack):
    data = base64.b64encode(b"\x89PNG fake").decode()
    [item] = stack.send_emails("grace@example.org", attachments=[
        {"filename": "logo.png", "content_type": "image/png", "content_base64": data}])
    final = stack.wait(item["id"], "succeeded")
    assert [a["filename"] for a in final["attachments"]] == ["logo.png"]


def test_state_changes_are_published_from_the_tables_stream(stack):
    """The local stack reads the table's stream as Lambda's event source mapping does and the
    schedule function publishes the default events (transitions into errored) to the bus."""
    import time
    import uuid

    from tests.e2e.conftest import patient

    before = stack.status()["state_events_published"]
    # A bounce errors the item; a fresh address, since a bounce also suppresses it.
    [item] = stack.send_emails(f"bounce+{uuid.uuid4().hex[:12]}@{SIM}")
    assert stack.wait(item["id"], "errored")["state"] == "errored"
    deadline = time.monotonic() + patient(10)
    while stack.status()["state_events_published"] <= before and time.monotonic() < deadline:
        time.sleep(0.25)
    status = stack.status()
    assert status["state_events_published"] > before, (status, stack.item(item["id"]))
