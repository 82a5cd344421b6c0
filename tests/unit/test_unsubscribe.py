"""Unsubscribe tokens: only this deployment's key makes one, for one receiver."""

from __future__ import annotations

from dataclasses import replace

from vdq.core.settings import Settings
from vdq.results import unsubscribe

KEY = b"k" * 32
TABLE = "vdq-prod"


def test_a_token_names_its_receiver():
    token = unsubscribe.make_token("ada@example.org", KEY, TABLE)
    assert unsubscribe.receiver_of(token, KEY, TABLE) == "ada@example.org"


def test_a_token_made_with_another_key_is_refused():
    forged = unsubscribe.make_token("ada@example.org", b"x" * 32, TABLE)
    assert unsubscribe.receiver_of(forged, KEY, TABLE) is None


def test_a_token_of_another_deployment_is_refused():
    other = unsubscribe.make_token("ada@example.org", KEY, "vdq-staging")
    assert unsubscribe.receiver_of(other, KEY, TABLE) is None


def test_an_altered_token_is_refused():
    token = unsubscribe.make_token("ada@example.org", KEY, TABLE)
    receiver, signature = token.split(".")
    flipped = signature[:-1] + ("A" if signature[-1] != "A" else "B")
    assert unsubscribe.receiver_of(f"{receiver}.{flipped}", KEY, TABLE) is None
    assert unsubscribe.receiver_of(token[:-3], KEY, TABLE) is None
    assert unsubscribe.receiver_of(token + "x", KEY, TABLE) is None
    assert unsubscribe.receiver_of("not-a-token", KEY, TABLE) is None
    assert unsubscribe.receiver_of("%%%.%%%", KEY, TABLE) is None


def test_only_the_exact_text_of_a_token_is_one():
    # base64 decoding skips characters outside its alphabet and accepts padding: a token
    # with anything added is refused all the same (one token per receiver, nothing else).
    token = unsubscribe.make_token("ada@example.org", KEY, TABLE)
    receiver, signature = token.split(".")
    for edited in (token + "=", token + "==", f"{receiver[:4]}!{receiver[4:]}.{signature}",
                   f"{receiver}=.{signature}", f"{receiver}.{signature[:10]}$${signature[10:]}",
                   f"{receiver} .{signature}", f"{receiver}.{signature}\n", f"../{token}"):
        assert unsubscribe.receiver_of(edited, KEY, TABLE) is None, edited


def test_another_receivers_signature_does_not_fit():
    ada = unsubscribe.make_token("ada@example.org", KEY, TABLE)
    grace = unsubscribe.make_token("grace@example.org", KEY, TABLE)
    swapped = f"{grace.split('.')[0]}.{ada.split('.')[1]}"
    assert unsubscribe.receiver_of(swapped, KEY, TABLE) is None


def test_each_plus_label_variant_has_its_own_token():
    one = unsubscribe.make_token("bounce+a1@simulator.amazonses.com", KEY, TABLE)
    two = unsubscribe.make_token("bounce+a2@simulator.amazonses.com", KEY, TABLE)
    assert one.split(".")[1] != two.split(".")[1]


def test_the_same_receiver_always_gets_the_same_token():
    # A replayed link is harmless: it names the same receiver, whose suppression is idempotent.
    assert unsubscribe.make_token("a@b.org", KEY, TABLE) == unsubscribe.make_token(
        "a@b.org", KEY, TABLE)


class _Item:
    method = "email"
    receiver = "Ada@Example.org"


def test_headers_only_for_an_email_that_wants_them_with_a_key_and_a_url():
    settings = replace(Settings(), table_name=TABLE, unsubscribe_key="secret",
                       unsubscribe_url="https://api.example.com/v1/unsubscribe/")
    headers = unsubscribe.headers(_Item(), {"list_unsubscribe": True}, settings)
    url = headers["List-Unsubscribe"][1:-1]
    assert url.startswith("https://api.example.com/v1/unsubscribe/")
    token = url.rsplit("/", 1)[1]
    assert unsubscribe.receiver_of(token, unsubscribe.key(settings), TABLE) == "ada@example.org"
    assert headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert unsubscribe.headers(_Item(), {}, settings) == {}
    assert unsubscribe.headers(_Item(), {"list_unsubscribe": True},
                               replace(settings, unsubscribe_url=None)) == {}
    assert unsubscribe.headers(_Item(), {"list_unsubscribe": True},
                               replace(settings, unsubscribe_key=None)) == {}


def test_bulk_lane_mail_carries_the_headers_without_the_flag_and_sms_never_does():
    class Bulk(_Item):
        priority = "bulk"

    class Normal(_Item):
        priority = "normal"

    class Sms(Bulk):
        method = "sms"

    assert unsubscribe.wants_unsubscribe(Bulk(), {})
    assert not unsubscribe.wants_unsubscribe(Normal(), {})
    assert unsubscribe.wants_unsubscribe(Normal(), {"list_unsubscribe": True})
    assert not unsubscribe.wants_unsubscribe(Sms(), {"list_unsubscribe": True})


def test_the_page_escapes_what_it_shows():
    html = unsubscribe.page("T", '<script>"x"</script>', 'a"b')
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'action="a&quot;b"' in html
