"""Unsubscribe tokens: only this deployment's key makes one, for one receiver and one list, and
a token shows neither."""

from __future__ import annotations

import base64
from dataclasses import replace

from vdq.core.settings import Settings
from vdq.results import unsubscribe

KEY = b"k" * 32
TABLE = "vdq-prod"
ADA = unsubscribe.Unsubscribe("ada@example.org", "news")


def token(receiver: str = ADA.receiver, list_name: str = ADA.list_name, key: bytes = KEY,
          table: str = TABLE) -> str:  # fmt: skip
    return unsubscribe.make_token(receiver, list_name, key, table)


def test_a_token_names_its_receiver_and_list():
    assert unsubscribe.read_token(token(), KEY, TABLE) == ADA


def test_a_token_shows_neither_the_address_nor_the_list():
    made = token()
    raw = base64.urlsafe_b64decode(made + "=" * (-len(made) % 4))
    for secret in (b"ada", b"example.org", b"news"):
        assert secret not in raw and secret.decode() not in made
    # Addresses of one length bucket make tokens of one length.
    assert len(token("a@example.org")) == len(token("ab@example.org"))


def test_a_token_made_with_another_key_is_refused():
    assert unsubscribe.read_token(token(key=b"x" * 32), KEY, TABLE) is None


def test_a_token_of_another_deployment_is_refused():
    assert unsubscribe.read_token(token(table="vdq-staging"), KEY, TABLE) is None


def test_an_altered_token_is_refused():
    made = token()
    for n in (0, 3, 20, len(made) - 1):  # the version, the IV, the sealed text, its end
        flipped = made[:n] + ("A" if made[n] != "A" else "B") + made[n + 1 :]
        assert unsubscribe.read_token(flipped, KEY, TABLE) is None, n
    for edited in (made[:-3], made + "x", made[:-22], "not-a-token", "%%%.%%%", "", "AA"):
        assert unsubscribe.read_token(edited, KEY, TABLE) is None, edited


def test_only_the_exact_text_of_a_token_is_one():
    # base64 decoding skips characters outside its alphabet and accepts padding: a token
    # with anything added is refused all the same (one token per receiver and list).
    made = token()
    for edited in (made + "=", made + "==", f"{made[:4]}!{made[4:]}", f"{made} ",
                   f"{made}\n", f"../{made}", made.replace("-", "+").replace("_", "/")):
        assert unsubscribe.read_token(edited, KEY, TABLE) is None, edited


def test_parts_of_two_tokens_do_not_make_one():
    ada, grace = token(), token("grace@example.org")
    assert len(ada) == len(grace)
    spliced = ada[:24] + grace[24:]  # ada's IV, grace's sealed text
    assert unsubscribe.read_token(spliced, KEY, TABLE) is None


def test_each_plus_label_variant_and_each_list_has_its_own_token():
    one = token("bounce+a1@simulator.amazonses.com")
    two = token("bounce+a2@simulator.amazonses.com")
    assert one != two and token(list_name="offers") != token()


def test_the_same_receiver_and_list_always_get_the_same_token():
    # A replayed link is harmless: it names the same receiver and list, and the unsubscribe
    # is idempotent.
    assert token() == token()


def test_a_token_sent_before_lists_still_names_its_receiver_and_the_default_list():
    old = unsubscribe.legacy_token("ada@example.org", KEY, TABLE)
    assert unsubscribe.read_token(old, KEY, TABLE) == ("ada@example.org", "general")
    receiver, signature = old.split(".")
    flipped = signature[:-1] + ("A" if signature[-1] != "A" else "B")
    grace = unsubscribe.legacy_token("grace@example.org", KEY, TABLE)
    for bad in (f"{receiver}.{flipped}", old[:-3], old + "=", f"{receiver}=.{signature}",
                f"{grace.split('.')[0]}.{signature}",
                unsubscribe.legacy_token("ada@example.org", b"x" * 32, TABLE),
                unsubscribe.legacy_token("ada@example.org", KEY, "vdq-staging")):
        assert unsubscribe.read_token(bad, KEY, TABLE) is None, bad


class _Item:
    method = "email"
    receiver = "Ada@Example.org"


def test_headers_only_for_an_email_that_wants_them_with_a_key_and_a_url():
    settings = replace(Settings(), table_name=TABLE, unsubscribe_key="secret",
                       unsubscribe_url="https://api.example.com/v1/unsubscribe/")
    headers = unsubscribe.headers(_Item(), {"list_unsubscribe": True}, settings)
    url = headers["List-Unsubscribe"][1:-1]
    assert url.startswith("https://api.example.com/v1/unsubscribe/")
    made = url.rsplit("/", 1)[1]
    assert unsubscribe.read_token(made, unsubscribe.key(settings), TABLE) == (
        "ada@example.org", "general")  # list mail that names no list
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


def test_an_address_is_shown_masked_enough_to_recognise():
    assert unsubscribe.masked("ada@example.org") == "a***@example.org"
    assert unsubscribe.masked("a@example.org") == "a***@example.org"
    assert unsubscribe.masked("+14155550177") == "+***0177"
    assert unsubscribe.masked("") == "***"
    assert unsubscribe.masked("@example.org") == "***@example.org"
