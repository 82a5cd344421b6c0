"""The reputation guard's judging: the level each producer's (and the account's) bounce and
complaint rates reach (ok, warn, hold), written to its record when it changes.

Judged from the hourly counters (vdq.results.reputation's arithmetic), by ``evaluate``: the
stream consumer calls it when a window counted a producer's bounces or complaints, so it runs
once per window of a shard that saw one, never per message. It reads the producer's window (one
BatchGetItem of ``VDQ_REPUTATION_WINDOW_HOURS`` small records, counted from its last release on)
and writes its level (``GUARD`` / ``P#<producer>``) when the level changes: warn, hold. Entering
either emits a metric (the stack's alarms watch it) and an EventBridge event. The account's
rates are judged the same way; they warn and alarm, and hold no one. The minute sweep judges
again what no stream window would (``recheck_warnings``), and ``overview`` rates every producer
for the operator.

What a hold then does to a producer's email, and its release, is vdq.results.guard's: this
module reads and writes the level records through it, and the guard never imports this one, so
the send path, which needs only the holds, loads no judging.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from vdq.core import resources
from vdq.core.clock import iso
from vdq.core.observability import logger, metrics
from vdq.results import reputation
from vdq.results.guard import NO_PRODUCER, has_parked, holds_of, publish_event, shown
from vdq.results.reputation import HOLD, OK, WARN, Figures
from vdq.store.holds import ACCOUNT, RELEASED, Holds, Level
from vdq.store.postings import Tallies
from vdq.store.tx import StoreBusy

if TYPE_CHECKING:
    from vdq.runtime import Runtime

METRICS = {WARN: resources.METRIC_REPUTATION_WARNINGS, HOLD: resources.METRIC_PRODUCERS_HELD}
# A warning this old is judged again by the minute sweep (recheck_warnings).
RECHECK_AFTER = timedelta(minutes=10)


@dataclass(frozen=True)
class Rated:
    """One producer's (or the account's) figures, level and thresholds now."""

    producer: str
    figures: Figures
    limits: reputation.Limits
    verdict: reputation.Verdict
    record: Level | None


def rate(runtime: Runtime, producer: str, *, tallies: Tallies | None = None,
         record: Level | None = None) -> Rated:  # fmt: skip
    """A producer's (``ACCOUNT``: the account's) figures over its window, counted from its
    last release on, and the level they reach."""
    s = runtime.settings
    tallies = tallies or Tallies(runtime.client("dynamodb"), s.table_name)
    since = record.since if record is not None else None
    hours = reputation.window_hours(runtime.clock.now(), s.reputation_window_hours, since)
    if producer == ACCOUNT:
        counts = tallies.counters(hours)
        by_hour = [Figures.of(counts.get(h, {}), "email.") for h in hours]
        limits = reputation.limits_for(s, None)
    else:
        counts = tallies.named(hours, "p", producer)
        by_hour = [Figures.of(counts.get(h, {})) for h in hours]
        # The baseline is the release hour's counts: taken away while that hour is in the
        # window, never once it has left it (the hours summed no longer hold those counts).
        if since is not None and record is not None and since in hours:
            at = hours.index(since)
            by_hour[at] = by_hour[at] - Figures.of(record.baseline)
        limits = reputation.limits_for(s, producer)
    figures = sum(by_hour, Figures())
    may_hold = s.reputation_guard == "hold" and producer not in (ACCOUNT, NO_PRODUCER)
    verdict = reputation.judge(figures, limits, hold=True if producer == ACCOUNT else may_hold)
    judged = record is None or not record.held or producer == ACCOUNT  # held: not judged again
    if (judged and verdict.level == OK and s.reputation_guard != "off"
            and reputation.may_reach_a_level(by_hour, limits)):  # fmt: skip
        verdict = replace(verdict, watch=True, reason=f"{verdict.reason}; {WATCHED}")
    return Rated(producer, figures, limits, verdict, record)


# What a watched producer's reason adds (reputation.may_reach_a_level).
WATCHED = ("watched, judged again each minute: its bounces or complaints would warn or hold "
           "once the emails a rate needs are counted, or once the window's older hours leave it")


def evaluate(runtime: Runtime, producers: Iterable[str], *, account: bool = False,
             tallies: Tallies | None = None) -> list[Level]:  # fmt: skip
    """Judge each producer (and the account) now and record a level that changed; returns
    the levels written. A hold stays until it is released; a warning clears when the rates
    fall back. A producer at ok whose bounces or complaints would warn or hold once the emails
    a rate needs are counted, or once the window's older hours leave it, is recorded as watched
    (its level as it was; ``Level.watch``, not returned): the minute sweep judges it again
    until its rates act or its bounces leave the window. A producer whose record another write
    changed between the read and the write is judged again from it (``JUDGE_TRIES``)."""
    if runtime.settings.reputation_guard == "off":
        return []
    store = holds_of(runtime)
    names = [*producers, *((ACCOUNT,) if account else ())]
    written: list[Level] = []
    busy: list[str] = []
    for name in dict.fromkeys(names):
        for attempt in range(JUDGE_TRIES):
            done, level = _judge(runtime, store, name, tallies, again=attempt > 0)
            if done:
                break
            # Another evaluation, a release or a watch's end wrote the record since it was
            # read: judge again from it, so that a hold this one found is not lost to it.
            logger.info("the guard's level of %s changed meanwhile: judged again", name)
        else:
            busy.append(name)  # the others are judged still
            continue
        if level is not None:
            written.append(level)
    if busy:
        raise StoreBusy(f"the guard's levels of {busy} kept changing; judged again later")
    return written


# Judgements of one producer made again when its record changed between the read and the write.
JUDGE_TRIES = 5


def _judge(runtime: Runtime, store: Holds, name: str, tallies: Tallies | None, *,
           again: bool = False) -> tuple[bool, Level | None]:  # fmt: skip
    """Judge one producer: (False, None) when its record changed before the write; otherwise
    (True, the level written when it changed). ``again``: judged again after another write;
    a level it wrote with its event still to be put is that writer's to signal (or, failing
    it, the minute sweep's), not this one's, so that the event is put once."""
    current = store.level(name)
    if current is not None and current.unsignalled and not again:  # its event not yet put
        signal(current, Figures.of(current.figures), runtime)
        if store.signalled(current):
            current = replace(current, unsignalled=False)
    if current is not None and current.held and name != ACCOUNT:
        return True, None  # held until an operator releases it
    rated = rate(runtime, name, tallies=tallies, record=current)
    new = _next(rated, current, runtime)
    if new is None:
        return True, None
    if new is UNWATCHED:  # an ok record kept only for its watch: the levels stay few
        return current is None or store.drop_level(current), None
    if not store.set_level(current, new):
        return False, None
    if new.level == (current.level if current is not None else OK):
        return True, None  # only whether it is watched changed
    if new.unsignalled:
        signal(new, rated.figures, runtime)
        store.signalled(new)
    return True, new


# What ``_next`` answers for an ok record whose watch ended: it is deleted, not kept, so that
# the level records (every send container reads them all) stay those of producers that
# reached a level.
UNWATCHED = Level("", OK)


def _next(rated: Rated, current: Level | None, runtime: Runtime) -> Level | None:
    """The record to write (``UNWATCHED``: the record to delete), or None when it stays."""
    level, watch = rated.verdict.level, rated.verdict.watch
    before = current.level if current is not None else OK
    now = iso(runtime.clock.now())
    if level == before or (level == OK and before in (OK, RELEASED)):
        if watch == (current is not None and current.watch):
            return None
        if current is None:
            return Level(rated.producer, OK, rated.verdict.reason, updated_at=now,
                         figures=rated.figures.as_counts(), watch=True)  # fmt: skip
        if before == OK and not watch and current.since is None and not current.baseline:
            return UNWATCHED  # a record that holds a release's window stays, unwatched
        # The level stays (ok, warn or released, with a release's window and baseline).
        reason = rated.verdict.reason if before == OK else current.reason
        return replace(current, reason=reason, updated_at=now, watch=watch,
                       figures=rated.figures.as_counts(), unsignalled=False)  # fmt: skip
    # The window a release began goes on (its baseline too) until the next release.
    return Level(rated.producer, level, rated.verdict.reason,
                 hold_id=now if level == HOLD else None, updated_at=now,
                 figures=rated.figures.as_counts(),
                 since=current.since if current is not None else None,
                 baseline=current.baseline if current is not None else {},
                 unsignalled=level in (WARN, HOLD), watch=watch)  # fmt: skip


def signal(level: Level, figures: Figures, runtime: Runtime) -> None:
    """The metric the stack's alarms watch, and an event on the state-events bus."""
    name = METRICS.get(level.level)
    if name:
        metrics.add_metric(name=name, unit="Count", value=1)
    who = "the whole account" if level.producer == ACCOUNT else f"producer {level.producer}"
    logger.warning("reputation guard: %s is at %s: %s", who, level.level,
                   level.reason)  # fmt: skip
    publish_event(level, figures, runtime)


def recheck_warnings(runtime: Runtime, report: Any) -> None:
    """Judge again each producer (and the account) whose warning is older than
    RECHECK_AFTER, and each watched one. The stream consumer looks only at windows that
    counted a bounce or a complaint, so a warning would otherwise stay while clean email brings
    the rates down or the window slides past the bounces; it clears within a minute of the
    rates falling back. A watched producer's bounces would warn or hold once the emails a rate
    needs are counted (another shard's window may count them after the bounces) or once the
    window's older hours leave it, and neither judges anyone: it is held within a minute of
    either. A level whose event was refused after it was written (``unsignalled``) gets its
    event at the next run. One Query of the levels a minute, and one small read per warned
    or watched producer."""
    if runtime.settings.reputation_guard == "off":
        return
    before = iso(runtime.clock.now() - RECHECK_AFTER)
    warned = [lv.producer for lv in holds_of(runtime).levels()
              if (lv.level == WARN and lv.updated_at < before) or (lv.watch and not lv.held)
              or lv.unsignalled]  # a level written, its event refused: put it now
    if not warned:
        return
    producers = [p for p in warned if p != ACCOUNT]
    cleared = evaluate(runtime, producers, account=ACCOUNT in warned)
    if cleared:
        report.add("warnings_changed", len(cleared))


def overview(runtime: Runtime) -> dict[str, Any]:
    """Every producer seen in the window (and every one with a record): its figures, level,
    thresholds and whether it has items parked (vdq.results.guard.has_parked); and the
    account's."""
    s = runtime.settings
    tallies = Tallies(runtime.client("dynamodb"), s.table_name)
    records = {lv.producer: lv for lv in holds_of(runtime).levels()}
    names: set[str] = {n for n in records if n != ACCOUNT}
    for hour in reputation.window_hours(runtime.clock.now(), s.reputation_window_hours):
        names |= {name for (kind, name) in tallies.reputation(hour) if kind == "p"}
    rows = [_row(rate(runtime, n, tallies=tallies, record=records.get(n)),
                 has_parked(runtime, records.get(n))) for n in sorted(names)]  # fmt: skip
    account = _row(rate(runtime, ACCOUNT, tallies=tallies, record=records.get(ACCOUNT)), False)
    return {"window_hours": s.reputation_window_hours, "guard": s.reputation_guard,
            "account": account, "producers": rows}  # fmt: skip


def _row(rated: Rated, parked: bool | None) -> dict[str, Any]:
    f = rated.figures
    record = rated.record
    return {"producer": shown(rated.producer), **f.as_counts(),
            "bounce_rate": f.bounce_rate, "complaint_rate": f.complaint_rate,
            "rates_count": rated.verdict.counted, "judged": rated.verdict.level,
            "reason": rated.verdict.reason, "watched": rated.verdict.watch,
            "thresholds": rated.limits.as_dict(),
            "level": record.as_dict() if record is not None else None,
            "parked": parked}  # fmt: skip
