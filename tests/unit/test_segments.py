"""SMS segments as Twilio counts them: GSM-7 (160 septets alone, 153 a part, an extension
character two septets never split) or UCS-2 (70 code units alone, 67 a part, a surrogate pair
never split), and the limit of VDQ_SMS_MAX_SEGMENTS at enqueue."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vdq.core.errors import SettingsError, TooManySegments, ValidationError
from vdq.core.settings import Settings
from vdq.intake import messages, segments
from vdq.intake.segments import GSM7, UCS2, count

EXTENSION = "\f^{}\\[~]|€"
CYRILLIC = "ж"  # in the BMP, not in GSM-7: one UTF-16 code unit
EMOJI = "\U0001f600"  # outside the BMP: a surrogate pair, two code units
CURLY = "\u2019"  # a right single quotation mark, as word processors type an apostrophe


def figures(body: str) -> tuple[str, int, int]:
    found = count(body)
    return found.encoding, found.segments, found.units


def test_an_empty_body_is_one_gsm7_segment():
    assert figures("") == (GSM7, 1, 0)


@pytest.mark.parametrize("length,expected", [
    (1, 1), (160, 1), (161, 2), (306, 2), (307, 3), (153 * 10, 10), (153 * 10 + 1, 11),
    (1600, 11),
])  # fmt: skip
def test_gsm7_is_one_segment_to_160_septets_then_153_a_segment(length, expected):
    assert figures("a" * length) == (GSM7, expected, length)


@pytest.mark.parametrize("char", list(EXTENSION))
def test_each_extension_character_takes_two_septets(char):
    assert figures(char * 80) == (GSM7, 1, 160)
    assert figures(char * 81) == (GSM7, 2, 162)  # 76 escape pairs fill 152 of a part's 153
    assert figures("a" * 159 + char) == (GSM7, 2, 161)


def test_an_escape_pair_at_the_153rd_septet_moves_whole_to_the_next_segment():
    # 306 septets either way: with the pair at septets 152-153 it fits the first part exactly;
    # one septet later it would straddle the boundary, so it moves and a third part is needed.
    assert figures("a" * 151 + "{" + "a" * 153) == (GSM7, 2, 306)
    assert figures("a" * 152 + "{" + "a" * 152) == (GSM7, 3, 306)
    assert figures("a" * 152 + "€" + "a" * 150) == (GSM7, 2, 304)


def test_the_whole_default_alphabet_takes_one_septet_a_character():
    alphabet = "".join(sorted(segments.GSM7_BASIC))
    assert len(alphabet) == 127  # 128 code points but the escape
    assert figures(alphabet) == (GSM7, 1, 127)
    for char in "@£$¥èéùìòÇ\n\rØøÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ¤¡ÄÖÑÜ§¿äöñüà":
        assert char in segments.GSM7_BASIC, repr(char)


@pytest.mark.parametrize("char", ["ç", "`", CURLY, "\u201c", "\t", "á", "\u00a0", CYRILLIC, EMOJI])
def test_one_character_outside_gsm7_makes_the_whole_body_ucs2(char):
    # No smart encoding: a curly quote or an accent GSM-7 lacks is sent as UCS-2, as Twilio does.
    found = count("a" * 100 + char)
    assert found.encoding == UCS2
    assert found.segments == 2
    assert segments.first_non_gsm7("a" * 100 + char) == char


@pytest.mark.parametrize("length,expected", [
    (70, 1), (71, 2), (134, 2), (135, 3), (670, 10), (671, 11),
])  # fmt: skip
def test_ucs2_is_one_segment_to_70_code_units_then_67_a_segment(length, expected):
    assert figures(CYRILLIC * length) == (UCS2, expected, length)


def test_a_character_outside_the_bmp_takes_two_code_units():
    assert figures(EMOJI * 35) == (UCS2, 1, 70)
    assert figures(EMOJI * 36) == (UCS2, 2, 72)  # 33 pairs fill 66 of a part's 67
    assert figures(EMOJI * 330) == (UCS2, 10, 660)


def test_a_surrogate_pair_at_the_67th_code_unit_moves_whole_to_the_next_segment():
    assert figures(CYRILLIC * 65 + EMOJI + CYRILLIC * 67) == (UCS2, 2, 134)
    assert figures(CYRILLIC * 66 + EMOJI + CYRILLIC * 66) == (UCS2, 3, 134)


@given(st.text(alphabet=sorted(segments.GSM7_BASIC), max_size=1600))
def test_a_default_alphabet_body_is_160_then_153_septets_a_segment(body):
    expected = 1 if len(body) <= 160 else math.ceil(len(body) / 153)
    assert figures(body) == (GSM7, expected, len(body))


@given(st.text(alphabet=st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"]),
               min_size=1, max_size=1600).filter(lambda t: not segments.is_gsm7(t)))  # fmt: skip
def test_a_bmp_body_outside_gsm7_is_70_then_67_code_units_a_segment(body):
    expected = 1 if len(body) <= 70 else math.ceil(len(body) / 67)
    assert figures(body) == (UCS2, expected, len(body))


@pytest.mark.parametrize("worst,limit,longest", [
    ("a", 10, 1530), ("{", 10, 760), (CYRILLIC, 10, 670), (EMOJI, 10, 330),
    ("a", 1, 160), ("{", 1, 80), (CYRILLIC, 1, 70), (EMOJI, 1, 35), ("a", 20, 1600),
])  # fmt: skip
def test_longest_is_the_most_of_a_character_that_fits_the_limit(worst, limit, longest):
    assert segments.longest(worst, limit, messages.MAX_SMS_BODY) == longest


@given(st.text(alphabet=st.sampled_from(["a", "{", CYRILLIC, EMOJI]), max_size=330))
def test_any_body_no_longer_than_the_worst_characters_limit_fits(body):
    # What the OpenAPI document promises: 330 characters of anything fit in 10 segments.
    assert count(body).segments <= 10


def test_over_the_limit_is_a_400_naming_body_the_count_and_the_limit():
    body = {"sender": {"cell": "+15005550006"}, "to": [{"cell": "+14155550100"}],
            "body": "a" * 307}  # fmt: skip
    assert messages.parse_sms(body, max_segments=3).body == "a" * 307
    with pytest.raises(TooManySegments) as err:
        messages.parse_sms(body, max_segments=2)
    error = err.value
    assert isinstance(error, ValidationError) and error.status == 400
    assert error.field == "body" and error.code == "too_many_segments"
    assert error.details == {"field": "body", "segments": 3, "limit": 2, "encoding": GSM7}
    assert error.message.startswith("body: takes 3 SMS segments (307 septets in GSM-7)")
    assert "the limit is 2 (VDQ_SMS_MAX_SEGMENTS)" in error.message


def test_a_ucs2_refusal_names_the_character_that_made_it_ucs2():
    with pytest.raises(TooManySegments) as err:
        segments.check("a" * 100 + CURLY + "a" * 100, "body", 2)
    assert err.value.details["segments"] == 3 and err.value.details["encoding"] == UCS2
    assert "201 UTF-16 code units in UCS-2" in err.value.message
    assert f"{CURLY!r} is not in the GSM-7 alphabet" in err.value.message


def test_media_urls_do_not_change_the_count_nor_the_limit():
    body = {"sender": {"cell": "+15005550006"}, "to": [{"cell": "+14155550100"}],
            "body": "a" * 161, "media_urls": ["https://example.com/a.png"]}  # fmt: skip
    with pytest.raises(TooManySegments):
        messages.parse_sms(body, max_segments=1)
    assert count(messages.parse_sms(body, max_segments=2).body).segments == 2


def test_the_limit_is_a_setting_of_10_by_default_and_at_least_1():
    assert Settings.from_env({}).sms_max_segments == 10
    assert Settings.from_env({"VDQ_SMS_MAX_SEGMENTS": "3"}).sms_max_segments == 3
    for bad in ("0", "-1", "ten"):
        with pytest.raises(SettingsError, match="VDQ_SMS_MAX_SEGMENTS"):
            Settings.from_env({"VDQ_SMS_MAX_SEGMENTS": bad})
