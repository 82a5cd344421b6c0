"""The reputation guard against the local stack, as a producer and an operator meet it: one
producer sending to the SES sandbox's bounce and complaint addresses is held within its window
while another producer's email keeps flowing; its held email is released and sent, none lost and
none sent twice; or cancelled. Its own stack: the guard holds at a small volume here."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import SECRET, Stack, patient, requires
from tests.e2e.test_console import audit, no_null_text, sign_in
from tests.support.browser import Browser, find_chromium
from vdq.local.front import make_token

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator", "schedule")]

SIM = "simulator.amazonses.com"
MIN_SENT = 8


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("guard") / "vdq-local.log",
              VDQ_REPUTATION_MIN_SENT=str(MIN_SENT), VDQ_HOLD_CACHE_SECONDS="1")  # fmt: skip
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    binary = find_chromium()
    if binary is None:
        pytest.skip("headless Chromium is not installed: run `make browser`")
    b = Browser(binary, tmp_path_factory.mktemp("chromium"), timeout=patient(20))
    yield b
    b.close()


def send(stack: Stack, producer: str, *receivers: str) -> dict[str, Any]:
    token = make_token(SECRET, ["vdq-senders"], subject=producer)
    body = {"sender": {"email": "shop@example.com"}, "to": [{"email": r} for r in receivers],
            "subject": "e2e", "text": "hello"}  # fmt: skip
    answer = stack.api("POST", "/emails", json=body, token=token)
    assert answer.status_code == 201, answer.text
    return answer.json()


def unique(kind: str) -> str:
    """A simulator address no earlier test suppressed (a bounce suppresses its address)."""
    return f"{kind}+{uuid.uuid4().hex[:10]}@{SIM}"


def level_of(stack: Stack, producer: str) -> str | None:
    answer = stack.api("GET", "/producers", groups=("vdq-viewers",))
    assert answer.status_code == 200, answer.text
    row = next((p for p in answer.json()["producers"] if p["producer"] == producer), None)
    return row["level"]["level"] if row is not None and row["level"] else None


def wait_for(condition: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + patient(timeout)
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {patient(timeout):.0f} s")


def hold(stack: Stack, producer: str) -> None:
    """Bounces and complaints past the hold thresholds: the producer is held. Its clean email
    goes first, so that the window counting the bounces holds it: one counted after them
    leaves the producer watched until the minute sweep judges it again
    (docs/operating/reputation.md), a minute this test need not wait."""
    [clean] = send(stack, producer, f"success@{SIM}")["items"]
    stack.wait(clean["id"])
    items = send(stack, producer, *[unique("bounce") for _ in range(MIN_SENT - 2)],
                 unique("complaint"))["items"]  # fmt: skip
    for item in items:
        stack.wait(item["id"])
    wait_for(lambda: level_of(stack, producer) == "hold", f"{producer} held")


def sends_of(stack: Stack, item_id: str) -> int:
    """How many times the worker sent the item (its ``send`` entries of attempt 1)."""
    history = stack.api("GET", f"/queue-items/{item_id}/history",
                        params={"limit": "500"}).json()["entries"]  # fmt: skip
    return sum(1 for e in history if e["name"] == "await")


def test_a_bouncing_producer_is_held_while_another_keeps_sending_then_released(stack):
    hold(stack, "careless")
    answer = send(stack, "careless", f"success@{SIM}", f"success+2@{SIM}")
    assert answer["held"]["producer"] == "careless"
    assert "bounce rate" in answer["held"]["reason"]
    held_ids = [i["id"] for i in answer["items"]]
    other = send(stack, "careful", f"success@{SIM}")
    assert "held" not in other
    assert stack.wait(other["items"][0]["id"])["state"] == "succeeded"  # still flowing
    wait_for(lambda: all(stack.item(i)["held"] for i in held_ids), "the items parked")
    time.sleep(patient(2))  # parked: nothing sends them meanwhile
    assert [stack.item(i)["state"] for i in held_ids] == ["queued", "queued"]
    listed = stack.api("GET", "/producers/careless/held", groups=("vdq-viewers",)).json()
    assert sorted(i["id"] for i in listed["items"]) == sorted(held_ids)
    refused = stack.api("POST", "/producers/careless/release", groups=("vdq-operators",))
    assert refused.status_code == 403
    released = stack.cli("producers", "release", "careless", "--json", check=True)
    assert '"done": 2' in released.stdout
    for item_id in held_ids:
        item = stack.wait(item_id)
        assert item["state"] == "succeeded" and item["held"] is None
    time.sleep(patient(2))  # a second send would show by now
    assert [sends_of(stack, i) for i in held_ids] == [1, 1]
    out = stack.cli("producers", check=True).stdout
    assert "careless" in out and "released" in out


def test_what_a_hold_parked_can_be_cancelled_instead(stack):
    hold(stack, "campaign")
    parked = [i["id"] for i in send(stack, "campaign", f"success@{SIM}")["items"]]
    wait_for(lambda: stack.item(parked[0])["held"], "the item parked")
    cancelled = stack.api("POST", "/producers/campaign/cancel-held")
    assert cancelled.status_code == 200 and cancelled.json()["done"] == 1
    assert stack.item(parked[0])["state"] == "cancelled"
    assert level_of(stack, "campaign") == "hold"  # the hold stays until a release
    assert stack.api("GET", "/producers/campaign/held").json()["items"] == []


def test_the_console_shows_rates_against_thresholds_and_releases_a_hold(stack, browser):
    hold(stack, "console-shop")
    parked = [i["id"] for i in send(stack, "console-shop", f"success@{SIM}")["items"]]
    wait_for(lambda: stack.item(parked[0])["held"], "the item parked")
    sign_in(browser, stack.url, "vdq-admins")
    browser.goto(f"{stack.url}/console/#/producers")
    browser.wait_for("document.querySelector('#producers-caption')")
    row = ("[...document.querySelectorAll('#producers tbody tr')].find(r => "
           "r.cells[0].textContent === 'console-shop')")  # fmt: skip
    browser.wait_for(row)
    cells = browser.evaluate(f"[...{row}.cells].map(c => c.textContent)")
    assert cells[4].endswith("(holds at 4%)") and cells[6].startswith("hold")
    assert "not available" in browser.text("#producers-ses")  # the local stack has no CloudWatch
    assert audit(browser) == []
    no_null_text(browser)
    browser.click("[data-key='held-console-shop']")
    browser.wait_for("document.querySelector('#held-items')")
    assert parked[0] in browser.text("#held")
    assert audit(browser) == []
    browser.click("[data-key='release-console-shop']")
    browser.wait_for("document.querySelector('#confirm-work')")
    assert audit(browser) == []
    browser.click("#confirm-go")
    browser.wait_for("document.querySelector('#status').textContent.includes('sent again')")
    assert stack.wait(parked[0])["state"] == "succeeded"
    browser.goto(f"{stack.url}/console/#/item/{parked[0]}")
    browser.wait_for("document.querySelector('#timeline')")
    no_null_text(browser)


def test_a_viewer_sees_the_rates_and_no_release(stack, browser):
    hold(stack, "viewer-shop")
    sign_in(browser, stack.url, "vdq-viewers")
    browser.goto(f"{stack.url}/console/#/producers")
    browser.wait_for("document.querySelector(\"[data-key='held-viewer-shop']\")")
    assert browser.evaluate("document.querySelector(\"[data-key='release-viewer-shop']\")") \
        is None


def test_a_producer_called_account_has_its_own_row_and_buttons(stack, browser):
    # The whole account's row is shown as "the whole account"; a producer whose name is
    # "account" is a producer like any other, and may be released from the console.
    hold(stack, "account")
    sign_in(browser, stack.url, "vdq-admins")
    browser.goto(f"{stack.url}/console/#/producers")
    browser.wait_for("document.querySelector(\"[data-key='release-account']\")")
    names = browser.evaluate("[...document.querySelectorAll('#producers tbody tr')]"
                             ".map(r => r.cells[0].textContent)")  # fmt: skip
    assert "account" in names and names[-1] == "the whole account"


# A release cut short (its request ran out of time before it sent anything): the first press
# is answered `more` without reaching the API, and until the next press the producer reads as
# such a release leaves it, `released`, its items still parked.
CUT_SHORT = """
window.__cut = 1;
const wholeFetch = window.fetch;
const json = (data, status) => new Response(JSON.stringify(data),
  { status, headers: { "Content-Type": "application/json" } });
window.fetch = async (input, options) => {
  const url = new URL(String(input), window.location.href);
  if (url.pathname.endsWith("/producers/cut-shop/release")) {
    if (window.__cut === 1) {
      window.__cut = 2;
      return json({ producer: "cut-shop", done: 0, skipped: 0, more: true, level: null }, 200);
    }
    window.__cut = 0;
  }
  const answer = await wholeFetch(input, options);
  if (window.__cut !== 2 || !url.pathname.endsWith("/producers")) return answer;
  const data = await answer.json();
  for (const row of data.producers) {
    if (row.producer === "cut-shop") {
      row.level = { ...row.level, level: "released", reason: "released by ops" };
    }
  }
  return json(data, answer.status);
};
"""


def test_a_release_cut_short_can_be_pressed_again_while_items_are_parked(stack, browser):
    """Found in use: after a release cut short, the console said "more are parked: do it
    again", and offered no Release button to do it with: it showed one at `hold` only."""
    hold(stack, "cut-shop")
    parked = [i["id"] for i in send(stack, "cut-shop", f"success@{SIM}")["items"]]
    wait_for(lambda: stack.item(parked[0])["held"], "the item parked")
    sign_in(browser, stack.url, "vdq-admins")
    release = "document.querySelector(\"[data-key='release-cut-shop']\")"
    with browser.scripted(CUT_SHORT):
        browser.goto(f"{stack.url}/console/#/producers")
        browser.reload()
        browser.wait_for(release)
        browser.click("[data-key='release-cut-shop']")
        browser.wait_for("document.querySelector('#confirm-work')")
        browser.click("#confirm-go")
        browser.wait_for("document.querySelector('#status').textContent.includes('do it again')")
        row = ("[...document.querySelectorAll('#producers tbody tr')].find(r => "
               "r.cells[0].textContent === 'cut-shop')")  # fmt: skip
        browser.wait_for(f"{row}?.cells[6].textContent.startsWith('released')")
        browser.wait_for(release)  # its items still parked: the button to do it again
        assert audit(browser) == []
        browser.click("[data-key='release-cut-shop']")
        browser.wait_for("document.querySelector('#confirm-work')")
        assert "release was cut short" in browser.text("#confirm-work")
        browser.click("#confirm-go")
        browser.wait_for("document.querySelector('#status').textContent.includes('1 parked')")
        assert stack.wait(parked[0])["state"] == "succeeded"
        assert level_of(stack, "cut-shop") == "released"
        # Released, nothing parked: nothing to release; its held items may still be read.
        browser.wait_for(f"{release} === null && "
                         "document.querySelector(\"[data-key='held-cut-shop']\")")  # fmt: skip
        no_null_text(browser)


# A producer whose level moved on with items still parked (a release cut short, then a warning
# or a recovery): every answer shows `moved-shop` at `warn`, as the API would, its `parked` as
# the API reads it. Counts the page's reads of /producers and of held items.
MOVED_ON = """
window.__reads = 0;
window.__held = 0;
const wholeFetch = window.fetch;
window.fetch = async (input, options) => {
  const url = new URL(String(input), window.location.href);
  if (url.pathname.endsWith("/held")) window.__held += 1;
  const answer = await wholeFetch(input, options);
  if (!url.pathname.endsWith("/producers")) return answer;
  window.__reads += 1;
  const data = await answer.json();
  for (const row of data.producers) {
    if (row.producer === "moved-shop") {
      row.level = { ...row.level, level: "warn", hold_id: null, reason: "bounce rate 3.00%" };
    }
  }
  return new Response(JSON.stringify(data),
    { status: answer.status, headers: { "Content-Type": "application/json" } });
};
"""


def test_items_parked_behind_a_level_moved_on_can_be_released_or_cancelled(stack, browser):
    """Found in use: a release cut short, then new rates moved the level on (a warning, or
    back to ok): the page offered no Release and no held items; only the minute sweep sent
    the items, and the operator could neither see them nor cancel them."""
    hold(stack, "moved-shop")
    parked = [i["id"] for i in send(stack, "moved-shop", f"success@{SIM}")["items"]]
    wait_for(lambda: stack.item(parked[0])["held"], "the item parked")
    sign_in(browser, stack.url, "vdq-admins")
    release = "document.querySelector(\"[data-key='release-moved-shop']\")"
    row = ("[...document.querySelectorAll('#producers tbody tr')].find(r => "
           "r.cells[0].textContent === 'moved-shop')")  # fmt: skip
    with browser.scripted(MOVED_ON):
        browser.goto(f"{stack.url}/console/#/producers")
        browser.reload()
        browser.wait_for(release)
        assert browser.evaluate(f"{row}.cells[6].textContent").startswith("warn")
        assert audit(browser) == []
        browser.click("[data-key='held-moved-shop']")
        browser.wait_for("document.querySelector('#held-items')")
        assert parked[0] in browser.text("#held")
        assert browser.evaluate("document.querySelector('#cancel-held')") is not None
        browser.click("[data-key='release-moved-shop']")
        browser.wait_for("document.querySelector('#confirm-work')")
        assert "release was cut short" in browser.text("#confirm-work")
        browser.click("#confirm-go")
        browser.wait_for("document.querySelector('#status').textContent.includes('1 parked')")
        assert stack.wait(parked[0])["state"] == "succeeded"
        # Nothing parked any more: nothing to release, nor held items to read, at that level.
        browser.wait_for(f"{release} === null && "
                         "document.querySelector(\"[data-key='held-moved-shop']\") === null")
        no_null_text(browser)


def test_the_producers_page_reads_no_held_items_to_offer_release(stack, browser):
    """Found in review: each refresh (every 5 s) read the held items of every released
    producer, one request each, to know whether to offer Release."""
    hold(stack, "quiet-shop")
    assert stack.api("POST", "/producers/quiet-shop/release").status_code == 200
    sign_in(browser, stack.url, "vdq-admins")
    with browser.scripted(MOVED_ON):
        browser.goto(f"{stack.url}/console/#/producers")
        browser.reload()
        browser.wait_for("document.querySelector(\"[data-key='held-quiet-shop']\")")
        browser.wait_for("window.__reads >= 2", timeout=patient(20))  # a refresh too
        assert browser.evaluate("window.__held") == 0
        assert browser.evaluate("document.querySelector(\"[data-key='release-quiet-shop']\")") \
            is None


# The flag unread: from the second read on, the API could not tell whether `flag-shop` (shown
# at `warn`) has items parked; `unread-shop`'s never could be read.
FLAG_UNREAD = """
window.__reads = 0;
const wholeFetch = window.fetch;
window.fetch = async (input, options) => {
  const url = new URL(String(input), window.location.href);
  const answer = await wholeFetch(input, options);
  if (!url.pathname.endsWith("/producers")) return answer;
  window.__reads += 1;
  const data = await answer.json();
  for (const row of data.producers) {
    if (row.producer === "flag-shop") {
      row.level = { ...row.level, level: "warn", hold_id: null, reason: "bounce rate 3.00%" };
      if (window.__reads > 1) row.parked = null;
    }
  }
  data.producers.push({ ...data.account, producer: "unread-shop", parked: null,
    level: { ...(data.account.level || {}), level: "warn", reason: "bounce rate 3.00%" } });
  return new Response(JSON.stringify(data),
    { status: answer.status, headers: { "Content-Type": "application/json" } });
};
"""


def test_a_parked_flag_the_api_could_not_read_leaves_the_page_as_last_read(stack, browser):
    hold(stack, "flag-shop")
    parked = [i["id"] for i in send(stack, "flag-shop", f"success@{SIM}")["items"]]
    wait_for(lambda: stack.item(parked[0])["held"], "the item parked")
    sign_in(browser, stack.url, "vdq-admins")
    with browser.scripted(FLAG_UNREAD):
        browser.goto(f"{stack.url}/console/#/producers")
        browser.reload()
        browser.wait_for("document.querySelector(\"[data-key='release-flag-shop']\")")
        browser.wait_for("window.__reads >= 3", timeout=patient(20))
        # Unread: as the last read found it; never read: nothing offered; the rates all shown.
        assert browser.evaluate("document.querySelector(\"[data-key='release-flag-shop']\")") \
            is not None
        assert browser.evaluate("document.querySelector(\"[data-key='release-unread-shop']\")") \
            is None
        names = browser.evaluate("[...document.querySelectorAll('#producers tbody tr')]"
                                 ".map(r => r.cells[0].textContent)")  # fmt: skip
        assert {"flag-shop", "unread-shop"} <= set(names) and names[-1] == "the whole account"
        assert browser.text("#alert") == ""
        no_null_text(browser)
    assert stack.api("POST", "/producers/flag-shop/cancel-held").json()["done"] == 1
