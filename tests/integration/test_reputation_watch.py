# ruff: noqa: F811  (the fixtures rt and events are test_reputation_guard's)
"""The reputation guard's watch, on moto: a producer whose bounces were judged on fewer emails
than a rate needs (another shard's window counts them later), or whose window's clean hours
slide out before its bounces, is judged again each minute until its rates act or its bounces
leave, since counting clean email or sliding the window judges no one. A watch costs a read a
minute while it lasts and leaves no record once it ends."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from tests.integration.test_reputation_guard import (  # noqa: F401  (fixtures)
    RELEASED,
    count,
    crashed_release,
    events,
    hold,
    post,
    process_all,
    refuse_events_once,
    rt,
    sweep,
)
from vdq.cli.producers import print_producers
from vdq.core.clock import iso
from vdq.core.setting_values import Thresholds
from vdq.dispatch import send
from vdq.operations import producers as operations
from vdq.results import guard, judging
from vdq.results.reputation import Figures, judge, limits_for, may_reach_a_level
from vdq.store.holds import Holds, Level
from vdq.store.tx import StoreBusy

# Found by the end-to-end suite: one shard's window counted a producer's bounces before another
# shard's window counted the emails they bounced from. Judged then, its rates counted nothing
# (fewer emails than a rate needs), and nothing looked at it again until its next bounce: a
# producer at 25% bounces went on sending.


def reads_of_levels_window(rt):
    """BatchGetItems of counter records the next calls make (a producer's window is one)."""
    made = []
    rt.client("dynamodb").meta.events.register(
        "provide-client-params.dynamodb.BatchGetItem", lambda params, **_: made.append(1))
    return made


def test_a_producer_judged_before_its_emails_counted_is_held_once_they_are(aws, rt):
    count(rt, "shop", sent=2, bounce=5)  # the bounces' window first: 2 of the 10 a rate needs
    assert judging.evaluate(rt, ["shop"]) == []  # no level yet: judged again each minute
    assert sweep(rt).get("warnings_changed") is None
    count(rt, "shop", sent=18)  # the other shard's window: 5 of 20 bounced
    assert sweep(rt)["warnings_changed"] == 1
    level = guard.holds_of(rt).level("shop")
    assert level.level == "hold" and "bounce rate 25.00%" in level.reason
    assert not level.watch


def test_a_watched_producer_whose_rates_come_out_clean_is_left_and_no_longer_read(aws, rt):
    count(rt, "shop", sent=2, bounce=1)
    judging.evaluate(rt, ["shop"])
    assert guard.holds_of(rt).level("shop").watch
    count(rt, "shop", sent=98)  # 1% of 100
    assert sweep(rt).get("warnings_changed") is None
    assert guard.holds_of(rt).level("shop") is None  # the levels stay those of a level
    made = reads_of_levels_window(rt)
    sweep(rt)
    assert made == []


def test_bounces_too_few_to_reach_a_warning_at_the_volume_a_rate_needs_are_not_watched(aws, rt):
    # 1 bounce of the 200 a rate needs is 0.5%, under the 2.5% warning: whatever is sent
    # later, only a new bounce (which judges it again) can bring it to one.
    rt.settings = replace(rt.settings, reputation_min_sent=200)
    count(rt, "shop", sent=3, bounce=1)
    assert judging.evaluate(rt, ["shop"]) == []
    assert guard.holds_of(rt).level("shop") is None  # nothing written
    count(rt, "shop", sent=2, bounce=4)  # 5 of 200 would be 2.5%: it could warn
    judging.evaluate(rt, ["shop"])
    assert guard.holds_of(rt).level("shop").watch


def test_a_watch_ends_when_the_window_slides_past_the_bounces(aws, rt, clock):
    count(rt, "shop", sent=2, bounce=5)
    judging.evaluate(rt, ["shop"])
    clock.advance(rt.settings.reputation_window_hours * 3600 + 60)
    sweep(rt)
    assert guard.holds_of(rt).level("shop") is None


def test_a_released_producer_is_watched_from_its_release_and_stays_released(aws, rt):
    hold(rt)
    guard.release(rt, "shop", "ops@example.com")
    count(rt, "shop", sent=1, bounce=3)
    assert judging.evaluate(rt, ["shop"]) == []
    level = guard.holds_of(rt).level("shop")
    assert (level.level, level.watch, level.released_by) == (RELEASED, True, "ops@example.com")
    count(rt, "shop", sent=19)  # 3 of 20 since the release
    sweep(rt)
    assert guard.holds_of(rt).level("shop").level == "hold"


def test_a_warning_whose_window_no_longer_counts_is_watched(aws, rt, clock):
    # The window slid past most of the emails it was judged on, not past the bounces.
    hour = clock.now()
    count(rt, "shop", sent=100, bounce=0)
    clock.advance(3600)
    count(rt, "shop", sent=5, bounce=3)
    assert judging.evaluate(rt, ["shop"])[0].level == "warn"
    first_hour_ends = hour.replace(minute=0, second=0, microsecond=0) + timedelta(
        hours=rt.settings.reputation_window_hours, minutes=1)
    clock.advance((first_hour_ends - clock.now()).total_seconds())
    assert sweep(rt)["warnings_changed"] == 1
    level = guard.holds_of(rt).level("shop")
    assert (level.level, level.watch) == ("ok", True)


def test_the_minute_sweep_reads_the_window_of_each_watched_producer_once(aws, rt):
    for name in ("a", "b", "c"):
        count(rt, name, sent=1, bounce=2)
    judging.evaluate(rt, ["a", "b", "c"])
    made = reads_of_levels_window(rt)
    assert sweep(rt).get("warnings_changed") is None
    assert len(made) == 3


def test_a_watch_that_ends_while_another_window_writes_the_record_keeps_the_newer(aws, rt, clock):
    count(rt, "shop", sent=2, bounce=5)
    judging.evaluate(rt, ["shop"])
    store = guard.holds_of(rt)
    read = store.level("shop")  # the sweep's read, before the window's write
    clock.advance(1)
    newer = replace(read, updated_at=guard.iso(clock.now()), reason="another window's")
    assert store.set_level(read, newer)
    assert not store.drop_level(read)
    assert store.level("shop") == newer


# ---- what a watch must not miss ---------------------------------------------------------------


@pytest.mark.parametrize(("mode", "expected"), [("hold", "hold"), ("warn", "warn")])
def test_a_hold_threshold_below_the_warning_is_watched_too(aws, rt, mode, expected):
    # VDQ_PRODUCER_THRESHOLDS accepts a hold below the warning (nothing checks warn <= hold):
    # {"shop": {"bounce_hold": 2}} with the default 2.5% warning. 4 bounces of the 200 a rate
    # needs is 2%, a hold once the emails are counted, though short of the warning's 5.
    rt.settings = replace(
        rt.settings,
        reputation_min_sent=200,
        reputation_guard=mode,
        producer_thresholds={"shop": Thresholds(bounce_hold=2.0)},
    )
    count(rt, "shop", sent=0, bounce=4)  # the bounces' window first
    assert judging.evaluate(rt, ["shop"]) == []
    count(rt, "shop", sent=200)  # the other shard's window: 4 of 200, 2%
    sweep(rt)
    level = guard.holds_of(rt).level("shop")
    assert level is not None and level.level == expected, level


@pytest.mark.parametrize(
    ("setting", "percent", "min_sent", "bounced", "complained"),
    [
        ("bounce_warn_percent", 2.2, 1500, 33, 0),  # 2.2 * 1500 == 3300.0000000000005
        ("complaint_warn_percent", 0.07, 10_000, 0, 7),  # 0.07 * 10000 == 700.0000000000001
    ],
)
def test_bounces_that_warn_at_the_volume_a_rate_needs_are_watched_whatever_the_float(
        aws, rt, setting, percent, min_sent, bounced, complained):  # fmt: skip
    # The watch judges as judge does (100 * bounced / sent >= warn): a product of threshold
    # and volume that rounds up (2.2 * 1500) would say "cannot warn" of figures judge warns at.
    rt.settings = replace(rt.settings, reputation_min_sent=min_sent, **{setting: percent})
    limits = limits_for(rt.settings, "shop")
    at_volume = Figures(sent=min_sent, bounced=bounced, complained=complained)
    assert judge(at_volume, limits).level == "warn"
    early = Figures(sent=0, bounced=bounced, complained=complained)
    assert may_reach_a_level([early], limits)


def test_an_ok_whose_window_slides_below_the_volume_is_watched_as_a_warning_is(aws, rt, clock):
    # Judged counted (ok) on yesterday's clean volume, the window then slides past it and
    # leaves the bounce on too few emails; today's clean email brings 1 bounce of 10 (10%, past
    # the 4% hold), and no new bounce judges it.
    count(rt, "shop", sent=100)
    clock.advance(3600 * (rt.settings.reputation_window_hours - 1))
    count(rt, "shop", sent=2, bounce=1)
    assert judging.evaluate(rt, ["shop"]) == []  # 1 of 102: ok, counted
    clock.advance(3600)  # the hour of the 100 clean emails leaves the window
    sweep(rt)
    count(rt, "shop", sent=8)  # 1 bounce of 10 emails
    assert judging.rate(rt, "shop").verdict.level == "hold"  # what a judgement would find
    sweep(rt)
    level = guard.holds_of(rt).level("shop")
    assert level is not None and level.level == "hold", level


def test_a_hold_the_sweep_found_puts_its_event_at_the_next_run(aws, rt, events):
    # The stream's hold whose event EventBridge refused is put at the window's retry
    # (test_an_event_refused_after_the_level_is_written_is_put_at_the_retry). The minute sweep
    # holds too, now: its hold is written (unsignalled) and the event refused; the next run
    # puts it, though it judges no held producer again.
    count(rt, "shop", sent=2, bounce=5)
    judging.evaluate(rt, ["shop"])
    count(rt, "shop", sent=18)
    refuse_events_once(rt)
    assert sweep(rt)["failed"] == 1  # the hold is written, its event refused
    level = guard.holds_of(rt).level("shop")
    assert (level.level, level.unsignalled) == ("hold", True)
    sweep(rt)
    sweep(rt)
    assert [e["DetailType"] for e in events] == ["Producer held", "Producer held"]
    assert not guard.holds_of(rt).level("shop").unsignalled


# ---- what a watch costs -------------------------------------------------------------------------


def queries_of(rt, prefix):
    """Queries the next calls make of partitions whose key begins with ``prefix``."""
    made: list[str] = []

    def seen(params, **_):
        pk = params.get("ExpressionAttributeValues", {}).get(":pk", {}).get("S", "")
        if pk.startswith(prefix):
            made.append(pk)

    rt.client("dynamodb").meta.events.register("provide-client-params.dynamodb.Query", seen)
    return made


def test_a_watch_that_ended_costs_the_minute_sweep_nothing(aws, rt):
    # A watched producer costs a read a minute while its watch lasts. The watch writes a level
    # record for a producer that had none; kept once the watch ended, resume_releases would
    # Query HELD#<producer> for it every minute, for ever.
    count(rt, "shop", sent=2, bounce=1)
    judging.evaluate(rt, ["shop"])
    count(rt, "shop", sent=98)  # 1 of 100: ok, counted
    sweep(rt)
    assert guard.holds_of(rt).level("shop") is None  # the watch ended with its record
    made = queries_of(rt, "HELD#")
    sweep(rt)
    assert made == []


def test_a_producer_watched_and_cleared_leaves_no_record_the_console_shows(aws, rt):
    # The same figures judged in one window (2 + 98 sent, 1 bounce) leave no record; judged in
    # two, neither does the watch between them (GET /producers, and every levels() Query, the
    # send path's held() included, read each record).
    count(rt, "news", sent=100, bounce=1)
    judging.evaluate(rt, ["news"])
    count(rt, "shop", sent=2, bounce=1)
    judging.evaluate(rt, ["shop"])
    count(rt, "shop", sent=98)
    sweep(rt)
    rows = {r["producer"]: r for r in judging.overview(rt)["producers"]}
    assert rows["news"]["level"] is None
    assert rows["shop"]["level"] is None, rows["shop"]["level"]


# ---- races --------------------------------------------------------------------------------------


def test_the_sweep_and_the_stream_judging_a_watched_producer_at_once_hold_it_once(
        aws, rt, events, clock, monkeypatch):  # fmt: skip
    count(rt, "shop", sent=2, bounce=5)
    judging.evaluate(rt, ["shop"])
    count(rt, "shop", sent=18)
    rate = judging.rate
    nested = []

    def racing(runtime, producer, **kwargs):
        rated = rate(runtime, producer, **kwargs)
        if not nested:  # the sweep read the record and the counts: the stream holds first
            nested.append(1)
            clock.advance(0.001)
            assert [lv.level for lv in judging.evaluate(rt, ["shop"])] == ["hold"]
            clock.advance(0.001)
        return rated

    monkeypatch.setattr(judging, "rate", racing)
    assert sweep(rt).get("warnings_changed") is None  # its write found the record changed
    level = guard.holds_of(rt).level("shop")
    assert (level.level, level.watch, level.unsignalled) == ("hold", False, False)
    assert [e["DetailType"] for e in events] == ["Producer held"]


def test_a_stale_watch_write_does_not_undo_a_release(aws, rt, clock):
    count(rt, "shop", sent=20, bounce=5)
    (held,) = judging.evaluate(rt, ["shop"])
    store = guard.holds_of(rt)
    clock.advance(1)
    guard.release(rt, "shop", "op")
    stale = replace(held, watch=True, updated_at="x")
    assert not store.set_level(held, stale)
    assert store.level("shop").level == "released"


# ---- what a watch's end keeps, and what the view says -------------------------------------------


HOUR = "%Y-%m-%dT%H"


def held_then_released_then_watched(rt, clock, release=None, *, held_first=False):
    """A producer held on 20 bounces of 20 emails, released (its window restarts at the
    release, so those bounces no longer count), warned on its own email since, cleared to ok
    and watched (1 bounce of 1 email this hour), as the stream and the sweep would record it.
    Returns the release's hour."""
    if not held_first:
        count(rt, "shop", sent=20, bounce=20)
        (held,) = judging.evaluate(rt, ["shop"])
        assert held.level == "hold"
    (release or (lambda: guard.release(rt, "shop", "op")))()
    since = clock.now().strftime(HOUR)
    count(rt, "shop", sent=200, bounce=5)  # 2.5% since the release: a warning
    (warned,) = judging.evaluate(rt, ["shop"])
    assert (warned.level, warned.since) == ("warn", since)
    clock.advance(3600)
    count(rt, "shop", sent=100)  # clean
    clock.advance(3600)
    count(rt, "shop", sent=1, bounce=1)  # 6 of 301 since the release (ok); this hour 1 of 1
    (cleared,) = judging.evaluate(rt, ["shop"])
    assert (cleared.level, cleared.watch, cleared.since) == ("ok", True, since)
    return since


def test_a_watch_that_ends_keeps_the_release_window_of_its_record(aws, rt, clock):
    # The ok record a cleared warning wrote carries the release's window (since, baseline):
    # the end of its watch keeps it, or the 20 bounces the operator released would count
    # again and the next bounce would hold the producer on them.
    since = held_then_released_then_watched(rt, clock)
    count(rt, "shop", sent=100)  # this hour 1 of 101: the watch ends
    sweep(rt)
    count(rt, "shop", sent=0, bounce=1)  # 7 of 401 since the release: 1.75%
    assert [(lv.level, lv.reason) for lv in judging.evaluate(rt, ["shop"])] == []
    level = guard.holds_of(rt).level("shop")
    assert level is not None and level.since == since, level


def test_a_watch_that_ends_keeps_what_a_release_cut_short_left_parked_to_be_sent(
        aws, rt, clock, monkeypatch):  # fmt: skip
    # resume_releases finds what a release cut short left parked through the level records
    # only: the end of a watch keeps the record of a released producer whose items the sweep
    # has not sent yet (its resume step failed, or its budget went to a long list).
    count(rt, "shop", sent=20, bounce=20)
    judging.evaluate(rt, ["shop"])
    item_id = post(rt, "shop", "ada@example.org")["items"][0]["id"]
    assert process_all(aws, rt) == {item_id: send.HELD}

    def failing(runtime, report):
        raise RuntimeError("throttled")

    with monkeypatch.context() as m:
        m.setattr(guard, "resume_releases", failing)
        held_then_released_then_watched(rt, clock, lambda: crashed_release(rt, m),
                                        held_first=True)
        count(rt, "shop", sent=100)
        sweep(rt)  # the watch ends (its resume step failing, as it may for a while)
    sweep(rt)
    assert list(guard.holds_of(rt).all_parked("shop")) == []
    assert rt.store.get_item(item_id).held is None


def test_the_producers_view_says_a_producer_is_watched(aws, rt, clock):
    # GET /producers (and `vdq producers`) say why a producer at "ok" is read each minute.
    count(rt, "shop", sent=100)
    clock.advance(3600)
    count(rt, "shop", sent=5, bounce=1)  # 1 of 105 ok; this hour's 1 of 5 (at 10): 10%
    judging.evaluate(rt, ["shop"])
    assert guard.holds_of(rt).level("shop").watch
    (row,) = judging.overview(rt)["producers"]
    assert "watch" in repr(row), row


def test_a_guard_that_is_off_does_not_say_it_judges_each_minute(aws, rt):
    # With the guard off the sweep judges no one: the reason promises no judgement.
    rt.settings = replace(rt.settings, reputation_guard="off")
    count(rt, "shop", sent=2, bounce=5)
    (row,) = judging.overview(rt)["producers"]
    assert "judged again each minute" not in row["reason"], row["reason"]



def test_a_hold_whose_record_a_watchs_end_deleted_meanwhile_is_judged_again(aws, rt,
                                                                          monkeypatch):  # fmt: skip
    # The stream read the watched record, then the sweep ended the watch and deleted it: the
    # stream's hold, written on condition that the record is as read, is judged again from
    # the record as it now is, not dropped until the producer's next bounce.
    count(rt, "shop", sent=2, bounce=5)
    judging.evaluate(rt, ["shop"])
    store = guard.holds_of(rt)
    rate, deleted = judging.rate, []

    def meanwhile(runtime, producer, **kwargs):
        if not deleted:
            deleted.append(store.drop_level(store.level(producer)))
        return rate(runtime, producer, **kwargs)

    count(rt, "shop", sent=18)
    monkeypatch.setattr(judging, "rate", meanwhile)
    assert [lv.level for lv in judging.evaluate(rt, ["shop"])] == ["hold"]
    assert deleted == [True] and store.level("shop").level == "hold"


def test_vdq_producers_says_a_producer_is_watched(aws, rt, clock, capsys):
    # The API's row says it (watched, and why in its reason), and so does the CLI's table.
    count(rt, "shop", sent=2, bounce=5)
    judging.evaluate(rt, ["shop"])
    assert guard.holds_of(rt).level("shop").watch
    data = json.loads(json.dumps(operations.producers(rt)))  # GET /producers' body
    (row,) = data["producers"]
    assert row["watched"] and judging.WATCHED in row["reason"]
    print_producers(data)
    out = capsys.readouterr().out
    assert "watch" in out, out


def test_a_held_producer_is_not_said_to_be_judged_again_each_minute(aws, rt, clock):
    # A held producer is never judged again (evaluate returns at a hold; recheck_warnings
    # skips a held record's watch): its reason promises no judgement each minute.
    hold(rt)  # 5 of 20 this hour
    clock.advance(3600 * rt.settings.reputation_window_hours)  # that hour left the window
    count(rt, "shop", sent=2, bounce=1)  # e.g. its exempt high-lane mail: 1 of 2 (at 10)
    made = []
    rt.client("dynamodb").meta.events.register(
        "provide-client-params.dynamodb.BatchGetItem", lambda params, **_: made.append(1))
    sweep(rt)
    assert made == []  # the sweep did not judge it
    (row,) = judging.overview(rt)["producers"]
    assert row["level"]["level"] == "hold"
    assert "judged again each minute" not in row["reason"], row["reason"]


def test_a_judgement_retried_after_another_write_does_not_put_that_writes_event_again(
        aws, rt, events, clock, monkeypatch):  # fmt: skip
    # Another window wrote a warning between this evaluation's read and its write, and puts
    # its event next (write, then signal). Judged again, this one reads that record at once,
    # still unsignalled: the warning's event is the other's to put, not this one's too.
    count(rt, "shop", sent=20, bounce=5)
    store = guard.holds_of(rt)
    rate, other = judging.rate, []

    def racing(runtime, producer, **kwargs):
        rated = rate(runtime, producer, **kwargs)
        if not other:
            clock.advance(0.001)
            warn = Level("shop", "warn", "bounce rate 3.00% (threshold 2.5%)",
                         updated_at=iso(clock.now()), unsignalled=True)
            assert store.set_level(None, warn)  # the other window's write ...
            other.append(warn)
            clock.advance(0.001)
        return rated

    monkeypatch.setattr(judging, "rate", racing)
    assert [lv.level for lv in judging.evaluate(rt, ["shop"])] == ["hold"]
    judging.signal(other[0], Figures(), rt)  # ... and its event, as its evaluate puts it
    store.signalled(other[0])
    kinds = [e["DetailType"] for e in events]
    assert kinds.count("Reputation warning") == 1, kinds


def test_one_producer_whose_record_keeps_changing_does_not_leave_the_others_unjudged(
        aws, rt, monkeypatch):  # fmt: skip
    # One producer whose record keeps changing fails the evaluation (the stream window, or
    # the sweep's step, is tried again), but only once the others of it are judged.
    count(rt, "busy", sent=2, bounce=5)
    count(rt, "shop", sent=20, bounce=5)  # 25%: a hold
    set_level = Holds.set_level

    def changed(self, current, new):
        return False if new.producer == "busy" else set_level(self, current, new)

    monkeypatch.setattr(Holds, "set_level", changed)
    with pytest.raises(StoreBusy):
        judging.evaluate(rt, ["busy", "shop"])
    level = guard.holds_of(rt).level("shop")
    assert level is not None and level.level == "hold", level
