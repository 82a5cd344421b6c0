"""The suppression list on the local stack: the mailbox simulator's bounce feeds it, one-click
unsubscribe links work from the raw message the SES sandbox kept (and stop their list's mail
only), an inbound STOP suppresses a number, and operators take an entry off with the CLI."""

from __future__ import annotations

import json
import time

import pytest

import requests
from tests.e2e.conftest import patient, requires

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator")]

SIM = "simulator.amazonses.com"


def _suppressed(stack, receiver: str, timeout: float = 20) -> dict:
    deadline = time.monotonic() + patient(timeout)
    while time.monotonic() < deadline:
        done = stack.cli("suppressions", "list", "--receiver", receiver, "--json", check=True)
        found = json.loads(done.stdout)["suppressions"]
        if found:
            return found[0]
        time.sleep(0.25)
    raise AssertionError(f"{receiver} never reached the suppression list")


def test_a_bounce_suppresses_the_address_and_the_next_email_is_not_sent(stack):
    address = f"bounce+e2e-suppress@{SIM}"
    [first] = stack.send_emails(address)
    stack.wait(first["id"], "errored")
    entry = _suppressed(stack, address)
    assert (entry["reason"], entry["actor"]) == ("bounce", "ses")

    body = {"sender": {"email": "shop@example.com"}, "to": [{"email": address}],
            "subject": "again", "text": "hello"}  # fmt: skip
    answer = stack.api("POST", "/emails", json=body, groups=("vdq-senders",))
    assert answer.status_code == 201, answer.text
    assert [s["receiver"] for s in answer.json()["suppressed"]] == [address]
    [second] = answer.json()["items"]
    done = stack.wait(second["id"], "cancelled")
    assert "suppression list" in done["result"] and done["provider_id"] is None
    sent = [m for m in stack.sandbox("ses")["emails"] if m["destination"] == [address]]
    assert len(sent) == 1, "the second email never reached SES"

    # An operator takes it off the list: the next email goes out again.
    stack.cli("suppressions", "remove", address, check=True)
    [third] = stack.send_emails(address)
    stack.wait(third["id"], "errored")  # sent, and the simulator bounces it again


def test_a_newsletters_unsubscribe_link_stops_that_list_only(stack):
    address = f"success+e2e-unsubscribe@{SIM}"
    [item] = stack.send_emails(address, list="news")
    done = stack.wait(item["id"], "succeeded")
    [sent] = [m for m in stack.sandbox("ses")["emails"]
              if m["message_id"] == done["provider_id"]]  # fmt: skip
    headers = dict(sent["headers"])
    assert headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert f"List-Unsubscribe: {headers['List-Unsubscribe']}" in sent["raw"]
    url = headers["List-Unsubscribe"].strip("<>")
    assert url.startswith(f"{stack.url}/unsubscribe/")

    assert address not in url and "news" not in url  # the token is opaque
    page = requests.get(url, timeout=patient(10))
    assert page.status_code == 200 and "text/html" in page.headers["Content-Type"]
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    assert address not in page.text and f"s***@{SIM}" in page.text  # masked, as the page is
    assert not json.loads(stack.cli("suppressions", "list", "--receiver", address, "--json",
                                    check=True).stdout)["suppressions"]  # fmt: skip
    posted = requests.post(url, data={"List-Unsubscribe": "One-Click"}, timeout=patient(10))
    assert posted.status_code == 200
    entry = _suppressed(stack, address)
    assert (entry["reason"], entry["list"]) == ("unsubscribe", "news")

    # The list's next email is not sent; a password reset still is.
    [news] = stack.send_emails(address, list="news")
    assert '"news"' in stack.wait(news["id"], "cancelled")["result"]
    [reset] = stack.send_emails(address, subject="Reset your password", priority="high")
    stack.wait(reset["id"], "succeeded")
    table = stack.cli("suppressions", "list", "--receiver", address, check=True).stdout
    assert "LIST" in table and "news" in table
    stack.cli("suppressions", "remove", address, "--list", "news", check=True)
    [again] = stack.send_emails(address, list="news")
    stack.wait(again["id"], "succeeded")


def test_an_inbound_stop_suppresses_the_number_and_its_sms_is_not_sent(stack):
    number = "+14155550177"
    twilio = stack._sandbox_url("twilio").rsplit("/_sandbox/", 1)[0]
    answer = requests.post(f"{twilio}/_sandbox/inbound", json={"from": number, "body": "Stop"},
                           timeout=patient(30))  # fmt: skip
    assert answer.status_code == 200 and answer.json()["webhook_status"] == 200, answer.text
    assert _suppressed(stack, number)["reason"] == "sms_opt_out"
    [item] = stack.send_sms(number)
    done = stack.wait(item["id"], "cancelled")
    assert "suppression list" in done["result"]
    messages = stack.sandbox("twilio")["messages"]
    assert not [m for m in messages if m["to"] == number], "Twilio never got it"
