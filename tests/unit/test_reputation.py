"""The reputation guard's arithmetic (pure): rates over a window, thresholds per producer and
for the account, the volume a rate needs, the window after a release, and the settings."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vdq.core.errors import SettingsError
from vdq.core.settings import Settings
from vdq.results import reputation
from vdq.results.reputation import HOLD, OK, WARN, Figures, Limits, judge
from vdq.schedules import postings as consumer

LIMITS = reputation.limits_for(Settings(), "shop")


def test_the_defaults_sit_below_ses_review_and_pause_figures():
    # SES reviews an account at 5% bounces or 0.1% complaints, may pause it at 10% or 0.5%.
    assert Limits(2.5, 4.0, 0.05, 0.08, 200) == LIMITS
    assert LIMITS.bounce_hold < 5 and LIMITS.complaint_hold < 0.1
    assert LIMITS.bounce_warn < LIMITS.bounce_hold
    assert LIMITS.complaint_warn < LIMITS.complaint_hold


def test_a_rate_is_per_email_sent():
    f = Figures(sent=1000, delivered=950, bounced=40, complained=1, rejected=2)
    assert f.bounce_rate == pytest.approx(4.0)
    assert f.complaint_rate == pytest.approx(0.1)
    assert Figures().bounce_rate is None and Figures().complaint_rate is None


@pytest.mark.parametrize(("figures", "level"), [
    (Figures(sent=1000, bounced=24), OK),
    (Figures(sent=1000, bounced=25), WARN),  # 2.5%: the warn threshold is reached
    (Figures(sent=1000, bounced=39), WARN),
    (Figures(sent=1000, bounced=40), HOLD),
    (Figures(sent=10000, complained=4), OK),  # 0.04%
    (Figures(sent=10000, complained=5), WARN),
    (Figures(sent=10000, complained=8), HOLD),  # 0.08%
    (Figures(sent=10000, bounced=100, complained=8), HOLD),  # 1% bounces, complaints hold
])  # fmt: skip
def test_the_level_is_the_highest_threshold_either_rate_reaches(figures, level):
    verdict = judge(figures, LIMITS)
    assert verdict.level == level and verdict.counted


def test_below_the_minimum_volume_no_rate_acts():
    verdict = judge(Figures(sent=199, bounced=199), LIMITS)
    assert verdict.level == OK and not verdict.counted
    assert "199 emails" in verdict.reason and "200" in verdict.reason


def test_the_reason_names_the_rate_and_its_threshold():
    verdict = judge(Figures(sent=1000, bounced=50, complained=1), LIMITS)
    assert verdict.level == HOLD
    assert "bounce rate 5.00% (threshold 4%)" in verdict.reason
    assert "complaint rate 0.100% (threshold 0.08%)" in verdict.reason


def test_a_guard_that_only_warns_never_holds():
    assert judge(Figures(sent=1000, bounced=900), LIMITS, hold=False).level == WARN


@given(sent=st.integers(1, 10**6), bounced=st.integers(0, 10**6), complained=st.integers(0, 10**6))
def test_a_level_only_rises_with_more_bounces(sent, bounced, complained):
    order = {OK: 0, WARN: 1, HOLD: 2}
    low = judge(Figures(sent=sent, bounced=bounced, complained=complained), LIMITS)
    high = judge(Figures(sent=sent, bounced=bounced + 1, complained=complained), LIMITS)
    assert order[high.level] >= order[low.level]


def test_a_producer_override_replaces_only_what_it_names():
    s = Settings.from_env({
        "VDQ_PRODUCER_THRESHOLDS": '{"newsletter": {"bounce_hold": 3, "min_sent": 1000}}',
        "VDQ_ACCOUNT_THRESHOLDS": '{"complaint_warn": 0.03}',
        "VDQ_BOUNCE_WARN_PERCENT": "2"})  # fmt: skip
    assert reputation.limits_for(s, "newsletter") == Limits(2.0, 3.0, 0.05, 0.08, 1000)
    assert reputation.limits_for(s, "shop") == Limits(2.0, 4.0, 0.05, 0.08, 200)
    assert reputation.limits_for(s, None) == Limits(2.0, 4.0, 0.03, 0.08, 200)


@pytest.mark.parametrize(("name", "value"), [
    ("VDQ_BOUNCE_HOLD_PERCENT", "0"),
    ("VDQ_COMPLAINT_WARN_PERCENT", "101"),
    ("VDQ_REPUTATION_WINDOW_HOURS", "721"),
    ("VDQ_REPUTATION_GUARD", "pause"),
    ("VDQ_HOLD_EXEMPT_HIGH", "maybe"),
    ("VDQ_PRODUCER_THRESHOLDS", '{"shop": {"bounce_hold": "4"}}'),
    ("VDQ_PRODUCER_THRESHOLDS", '{"shop": {"bounce_stop": 4}}'),
    ("VDQ_PRODUCER_THRESHOLDS", '{"shop": {"min_sent": 0}}'),
    ("VDQ_ACCOUNT_THRESHOLDS", '{"bounce_hold": 200}'),
])  # fmt: skip
def test_a_bad_threshold_setting_fails_naming_it(name, value):
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: value})


def test_the_window_is_whole_hours_ending_now_and_restarts_at_a_release():
    now = datetime(2026, 3, 2, 5, 42, tzinfo=UTC)
    hours = reputation.window_hours(now, 24)
    assert len(hours) == 24 and hours[0] == "2026-03-01T06" and hours[-1] == "2026-03-02T05"
    assert reputation.window_hours(now, 24, since="2026-03-02T03") == [
        "2026-03-02T03", "2026-03-02T04", "2026-03-02T05"]


def test_a_baseline_is_taken_away_never_below_nothing():
    left = Figures(sent=100, bounced=10) - Figures(sent=40, bounced=12)
    assert left == Figures(sent=60, bounced=0)


def test_figures_sum_hourly_counts_by_the_counters_names():
    hours = [{"email.sent": 10, "email.bounce": 1, "sms.sent": 5},
             {"email.sent": 5, "email.complaint": 1, "email.succeeded": 4}]  # fmt: skip
    assert reputation.figures_of(hours, "email.") == Figures(15, 4, 1, 1, 0)
    assert reputation.figures_of([{"sent": 3, "bounce": 1, "sms.sent": 9}]) == Figures(3, 0, 1)


@pytest.mark.parametrize(("sender", "identities", "identity"), [
    ("News@Shop.Example", (), "shop.example"),
    ("news@shop.example", ("news@shop.example",), "news@shop.example"),
    ("other@shop.example", ("news@shop.example", "shop.example"), "shop.example"),
])  # fmt: skip
def test_a_sender_rates_as_its_ses_identity(sender, identities, identity):
    assert reputation.identity_of(sender, identities) == identity


def test_an_sms_counts_apart_from_a_producers_email_reputation():
    window = consumer.Window(shard="s1")
    consumer.fold(window, [_insert("01J00000000000000000000001", "sms"),
                           _sent("01J00000000000000000000001", "sms", "2"),
                           _sent("01J00000000000000000000002", "email", "3")],
                  lambda _id: None)  # fmt: skip
    by_sk = {k.split("|", 1)[1]: v["n"] for k, v in window.counts.items()}
    producer = next(v for k, v in by_sk.items() if k.startswith("p#shop#"))
    assert producer == {"sms.sent": 1, "sent": 1}


def test_a_window_with_bounces_or_complaints_names_what_the_guard_looks_at():
    window = consumer.Window(shard="s1")
    window.count("2026-03-02T05", "p#shop#0", "1", ["sent", "bounce"])
    window.count("2026-03-02T05", "p#news#0", "2", ["sent"])
    window.count("2026-03-02T05", "p#promo#0", "3", ["complaint"])
    window.count("2026-03-02T05", "all#0", "3", ["email.complaint"])
    assert consumer.guard_targets(window) == (["promo", "shop"], True)
    quiet = consumer.Window(shard="s1")
    quiet.count("2026-03-02T05", "p#shop#0", "1", ["sent", "sms.bounce"])
    assert consumer.guard_targets(quiet) == ([], False)


def _image(item_id: str, method: str, **extra: str) -> dict[str, dict[str, str]]:
    plain = {"pk": f"QI#{item_id}", "sk": "STATE", "id": item_id, "method": method,
             "created_by": "shop", "sender": "news@shop.example", "state": "queued",
             "queued_at": "2026-03-02T05:00:00.000000Z",
             "updated_at": "2026-03-02T05:00:00.000000Z", **extra}  # fmt: skip
    return {k: {"S": v} for k, v in plain.items()}


def _insert(item_id: str, method: str) -> dict:
    return {"eventName": "INSERT",
            "dynamodb": {"SequenceNumber": "1", "NewImage": _image(item_id, method)}}


def _sent(item_id: str, method: str, sequence: str) -> dict:
    return {"eventName": "MODIFY", "dynamodb": {
        "SequenceNumber": sequence, "OldImage": _image(item_id, method, state="sending"),
        "NewImage": _image(item_id, method, state="awaiting", provider_id=f"p-{item_id}")}}


# Watched: fewer emails than a rate needs, and bounces (complaints) enough to reach a warning at
# that volume. With the defaults (200 emails, 2.5% and 0.05%), 5 bounces or 1 complaint.


@pytest.mark.parametrize(("figures", "watched"), [
    (Figures(sent=0, bounced=4), False),  # 4 of 200 is 2%: only a new bounce can warn
    (Figures(sent=0, bounced=5), True),
    (Figures(sent=199, bounced=5), True),
    (Figures(sent=200, bounced=4), False),  # counted: judged as any other
    (Figures(sent=3, complained=1), True),
    (Figures(sent=3), False),
])
def test_a_producer_is_watched_while_bounces_may_reach_a_warning_at_the_volume_a_rate_needs(
        figures, watched):  # fmt: skip
    verdict = judge(figures, LIMITS)
    assert (verdict.level, verdict.counted) == (OK, figures.sent >= 200)
    assert reputation.may_reach_a_level([figures], LIMITS) == watched


@given(sent=st.integers(0, 400), bounced=st.integers(0, 50), complained=st.integers(0, 5),
       more=st.integers(0, 400))
def test_a_producer_not_watched_reaches_no_warning_by_clean_email_alone(
        sent, bounced, complained, more):  # fmt: skip
    # What the watch must not miss: one left unwatched whose later clean email brings it to a
    # warning (no bounce, so nothing would judge it).
    figures = Figures(sent=sent, bounced=bounced, complained=complained)
    if judge(figures, LIMITS).counted or reputation.may_reach_a_level([figures], LIMITS):
        return
    later = Figures(sent=sent + more, bounced=bounced, complained=complained)
    assert judge(later, LIMITS).level == OK


def test_a_window_whose_clean_hours_may_slide_out_before_its_bounces_is_watched():
    limits = Limits(2.5, 4.0, 0.05, 0.08, 10)
    bounce_last = [Figures(sent=100), Figures(sent=2, bounced=1)]  # 1 of 102 now, 1 of 10 later
    assert judge(reputation.figures_of(f.as_counts() for f in bounce_last), limits).level == OK
    assert reputation.may_reach_a_level(bounce_last, limits)
    bounce_first = [Figures(sent=100, bounced=1), Figures(sent=2)]  # it leaves with its hour
    assert not reputation.may_reach_a_level(bounce_first, limits)
    assert not reputation.may_reach_a_level([], limits)
