"""Model-based test in a harsh world: random interleavings of enqueues (email, email with files,
SMS), send deliveries by SQS and Lambda's event source mapping as they behave (queues.py:
batches, visibility, redelivery after a failure or a crash, duplicates while a message is in
flight and after its delete, invocations that start late, dead letters), provider events (SES
and Twilio: duplicate, reordered, late across attempts, racing the worker, floods of opens and
clicks), operator retry/cancel/resend, sweeps, SMS checks, purges and the clock, each step
possibly under AWS's real failure modes (see harsh.py): stale reads, throttled or half-applied
batches, cancelled transactions, a process killed between any two AWS calls, failed publishes.

Checked after every step: the seed's workflow (support.py), the provider called at most once per
(item, attempt), nothing stranded, files deleted exactly when the seed says, the state item's
size bounded, provider IDs never taken from another attempt, and every answer documented. The
table's stream is consumed in windows (batches failed and given again, last calls cut by a crash
and given again): once a window has taken every record, the counts it wrote match the items.
And VDQ's promise (``drain``): once the queues are drained (every visible, delayed and in-flight
message delivered until none is left) and the clock has passed every timer, every item is done
or errored, or parked by a reputation hold still on (an operator's to release or cancel).

``VDQ_SOAK=1`` (``make soak``) explores far more schedules. ``VDQ_MODEL_FAULTS`` (comma list of
crash, stale, batch, tx, sqs, race), ``VDQ_MODEL_RULES`` (rule names) and ``VDQ_MODEL_SKIP``
(words of check names) narrow a run, to hunt one class of defect at a time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import vdq
from tests.reliability import world as w
from tests.reliability.harsh import BATCH_MODES, TX_REASONS, Plan
from tests.reliability.support import DONE, FIGURES, Crash, fresh_clock
from tests.reliability.world import engagement_event, harsh_world
from tests.support.results import ses_body, ses_event
from vdq.api import Caller
from vdq.core import ids, resources
from vdq.core.clock import iso
from vdq.core.errors import VdqError
from vdq.intake import rest as intake
from vdq.local.pollers import passes
from vdq.operations import actions, done_list
from vdq.results import checks, guard
from vdq.results import matching as results
from vdq.schedules import postings
from vdq.schedules import sweeps as schedules
from vdq.store.expiry import gone
from vdq.store.history import RECENT_ENTRY_BYTES, RECENT_LIMIT
from vdq.store.holds import Level
from vdq.store.postings import Tallies, counter_kind, shard_tag
from vdq.workflow.sendqueue import SendMessage
from vdq.workflow.transitions import Step, apply

SOAK = os.environ.get("VDQ_SOAK") == "1"
EXAMPLES = int(os.environ.get("VDQ_MODEL_EXAMPLES", 20_000 if SOAK else 2_000))
STEPS = int(os.environ.get("VDQ_MODEL_STEPS", 20 if SOAK else 12))
FAULTS = set(os.environ.get("VDQ_MODEL_FAULTS", "crash,stale,batch,tx,sqs,race").split(","))
# Checks to leave out (each a word of a check's name, e.g. "flood,cancelled"), to hunt a class.
SKIP = [s for s in os.environ.get("VDQ_MODEL_SKIP", "").split(",") if s]
# Rules to keep (comma list of rule names; unset: all), to hunt a long sequence.
RULES = [s for s in os.environ.get("VDQ_MODEL_RULES", "").split(",") if s]
METHODS = os.environ.get("VDQ_MODEL_METHODS", "email,sms,files").split(",")
MAX_ITEMS = 4
# The producer whose email the reputation guard holds (the Python API's items name none).
PRODUCER = Caller("shop", ("vdq-senders",), frozenset({"vdq.add_queueitem"}))
OPERATOR = Caller("op-1", ("vdq-operators",),
                  frozenset({"vdq.can_resend", "vdq.list_queueitem",
                             "vdq.read_queueitem"}))  # fmt: skip
# Samples of the SES events a deployed stack receives (vdq.core.resources.SES_EVENTS: no Send).
SES_KINDS = ["delivery", "bounce_permanent", "bounce_transient", "delivery_delay", "complaint",
             "reject"]  # fmt: skip
FINAL_SES = {"delivery", "bounce_permanent", "bounce_transient", "reject"}
TWILIO_STATUSES = ["queued", "sent", "delivered", "undelivered", "failed"]
PLANS = ["ok", "ok", "ok", "transient", "permanent", "ambiguous", "crash"]
ADVANCE = [0.5, 20, 301, 1000]  # the lease is 300 s, the publish grace 900 s
# When the send function starts after the mapping received its batch: at once, or late in the
# batch's visibility (Lambda retries a throttled invocation until the visibility runs out).
LATE = [0.0, 0.0, 0.0, 200.0]
BATCH = [1, 1, 2, 3]  # messages the mapping hands the function at once
DRAIN_ROUNDS = 400  # deliveries and clock moves a drain may take before it is called stuck
FLOOD = 20  # open/click events of one flood
# Bytes a flood may add to the state item: its marks' share of the seen set (240), and the
# entries the state item still has room for (vdq.store.history: a bound, not one per event).
FLOOD_GROWTH = 240 + RECENT_LIMIT * (RECENT_ENTRY_BYTES + 1)
FILE = {"filename": "invoice.pdf", "content_type": "application/pdf",
        "content_base64": "JVBERi0xLjQK"}


def _plans(*kinds: str) -> st.SearchStrategy[Plan]:
    options: list[st.SearchStrategy[Plan]] = [st.just(Plan())] * 3
    if "crash" in FAULTS:
        # After the step's k-th request, or after its first write or transaction (a commit).
        after = st.one_of(st.integers(1, 6), st.sampled_from(["write", "TransactWriteItems"]))
        options.append(st.builds(lambda k: Plan(crash_after=k), after))
    if "stale" in FAULTS:
        options.append(st.just(Plan(stale=True)))
    if "tx" in FAULTS:
        options.append(st.builds(lambda r, n: Plan(tx=r, tx_nth=n),
                                 st.sampled_from(TX_REASONS), st.integers(1, 2)))  # fmt: skip
    if "batch" in kinds and "batch" in FAULTS:
        options.append(st.builds(lambda m: Plan(batch=m), st.sampled_from(BATCH_MODES)))
    if "sqs" in kinds and "sqs" in FAULTS:
        options.append(st.builds(lambda m: Plan(sqs=m), st.sampled_from(["half", "all"])))
    return st.one_of(options)


STEP_FAULTS = _plans()
WRITE_FAULTS = _plans("batch", "sqs")
# Where a concurrent handler cuts in: before the step's first write, its first transaction, or its
# first or second request.
RACE = (st.sampled_from(["write", "TransactWriteItems", 1, 2]) if "race" in FAULTS
        else st.just(0))  # fmt: skip


@pytest.fixture(scope="module")
def world():
    with harsh_world(index_shards=2, max_files_age_seconds=0) as created:
        try:
            yield created
        finally:
            ids.random_bytes = os.urandom


class Workflow(RuleBasedStateMachine):
    world: Any = None

    def __init__(self) -> None:
        super().__init__()
        self.w = self.world
        self.rt = self.w.fresh(fresh_clock())
        # A deployment past its first day: the stream trusts an item's ``ap``
        # (vdq.workflow.retention.apart_trusted_after), so the model tries the reads it skips.
        self.rt.overrides["apart_since"] = 0
        # Identifiers from a fixed seed: items are picked by their sorted identifiers, so
        # random ones would make a replayed schedule pick other items (Hypothesis: "flaky").
        ids.random_bytes = random.Random(0).randbytes
        self.seam = self.w.seam
        self.events: list[tuple[str, Any, str | None]] = []  # (kind, payload, item key)
        self.last_sweep = None
        self.after_purge = False
        self.timers_acted_at = None
        self.stream_read = 0  # records of the table's stream the windows have taken
        guard._cache.clear()  # a container of this schedule's own
        FIGURES["schedules explored"] += 1

    # ---- helpers -----------------------------------------------------------------------------

    def _ids(self) -> list[str]:
        return sorted(self.w.raw_items())

    def _pick(self, n: int) -> str | None:
        ids = self._ids()
        return ids[n % len(ids)] if ids else None

    def _accepted(self) -> list[tuple[str, str, int]]:
        """(provider message ID, item, attempt) of every message a provider took."""
        out = [(m, i, a) for m, (i, a) in self.w.ses.accepted.items()]
        return out + [(s, i, a) for s, (i, a) in self.w.twilio.accepted.items()]

    def _step(self, plan: Plan, work: Any) -> tuple[Any, BaseException | None]:
        """Run ``work`` under ``plan``: (its value, the error it raised); a crash is no answer."""
        self.after_purge = False
        with self.seam.step(plan):
            try:
                answer: tuple[Any, BaseException | None] = (work(), None)
            except Crash:
                answer = (None, Crash())
            except AssertionError:
                raise  # a check failed (here or in a handler's own assert)
            except Exception as exc:  # the caller judges the answer
                answer = (None, exc)
            for exc in self.seam.nested_errors:  # a check of an interleaved handler
                if isinstance(exc, AssertionError):
                    raise exc
        return answer

    def _violation(self, problems: list[str], what: str) -> None:
        if problems and any(word in what for word in SKIP):
            FIGURES["violations left out (VDQ_MODEL_SKIP)"] += 1
            return
        if problems:
            FIGURES["violations"] += 1
        assert not problems, f"{what}: {problems}"

    def _documented(self, exc: BaseException | None, what: str) -> None:
        if exc is None or isinstance(exc, Crash):
            return
        ok = isinstance(exc, VdqError) and exc.status in w.DOCUMENTED
        self._violation([] if ok else [f"{type(exc).__name__}: {exc}"], f"{what} answered a 5xx")

    # ---- enqueue -----------------------------------------------------------------------------

    @initialize(method=st.sampled_from(METHODS))
    def first_item(self, method: str) -> None:
        Workflow.enqueue(self, method, 1, Plan())

    @rule(method=st.sampled_from(METHODS), receivers=st.integers(1, 3),
          plan=WRITE_FAULTS)  # fmt: skip
    def enqueue(self, method: str, receivers: int, plan: Plan) -> None:
        if len(self._ids()) >= MAX_ITEMS:
            return
        if method == "sms":
            to = [f"+1415555010{n}" for n in range(receivers)]
            call = lambda: vdq.add_sms("+15005550006", to, "Your code", runtime=self.rt)  # noqa: E731
        else:
            to = [f"r{n}@example.org" for n in range(receivers)]
            files = [FILE] if method == "files" else None
            call = lambda: vdq.add_email({"email": "shop@example.com"}, to, "Hi", "Text",  # noqa: E731
                                         attachments=files, runtime=self.rt)  # fmt: skip
        before = set(self._ids())
        items, exc = self._step(plan, call)
        FIGURES["enqueues"] += 1
        if isinstance(exc, Crash):
            return
        now = self.w.raw_items()
        stored = set(now) - before
        receivers_of = {i: w.QueueItemRecord.from_raw_data(now[i].to_json()["Attributes"]).receiver
                        for i in stored}  # fmt: skip
        answered = [i.id for i in items] if items is not None else None
        self._violation(w.answer_problems(exc, stored, to, answered, receivers_of),
                        f"enqueue under {plan.describe()}")  # fmt: skip

    @initialize()
    def first_producers_item(self) -> None:
        Workflow.enqueue_by_producer(self, 1, Plan())

    @rule(receivers=st.integers(1, 2), plan=WRITE_FAULTS)
    def enqueue_by_producer(self, receivers: int, plan: Plan) -> None:
        """An email of the producer the reputation guard may hold, through the REST path."""
        if len(self._ids()) >= MAX_ITEMS:
            return
        to = [f"p{n}@example.org" for n in range(receivers)]
        body = {"sender": {"email": "shop@example.com"}, "to": [{"email": r} for r in to],
                "subject": "Hi", "text": "Text"}  # fmt: skip
        before = set(self._ids())
        answer, exc = self._step(plan, lambda: intake.submit("email", body, PRODUCER, self.rt))
        FIGURES["enqueues"] += 1
        if isinstance(exc, Crash):
            return
        now = self.w.raw_items()
        stored = set(now) - before
        receivers_of = {i: w.QueueItemRecord.from_raw_data(now[i].to_json()["Attributes"]).receiver
                        for i in stored}  # fmt: skip
        answered = [i["id"] for i in answer["items"]] if answer is not None else None
        self._violation(w.answer_problems(exc, stored, to, answered, receivers_of),
                        f"a producer's enqueue under {plan.describe()}")  # fmt: skip

    # ---- the reputation guard ------------------------------------------------------------------

    @rule(faults=STEP_FAULTS, seen=st.booleans())
    def hold_producer(self, faults: Plan, seen: bool) -> None:
        """The guard holds the producer: its level record, as an evaluation writes it. ``seen``:
        the send worker reads the holds again at once (a container whose cache ran out); else
        it goes on with what it read before, up to VDQ_HOLD_CACHE_SECONDS."""
        if seen:
            guard.forget(self.rt)
        store = guard.holds_of(self.rt)
        current = store.level(PRODUCER.subject)
        if current is not None and current.held:
            return
        now = iso(self.rt.clock.now())
        held = Level(PRODUCER.subject, "hold", "bounce rate 50.00% (threshold 4%)",
                     hold_id=now, updated_at=now)  # fmt: skip
        self._step(faults, lambda: store.set_level(current, held))
        FIGURES["holds"] += 1

    @rule(faults=STEP_FAULTS, k=RACE, n=st.integers(0, 1000))
    def release_hold(self, faults: Plan, k: int | str, n: int) -> None:
        """An operator releases the hold, possibly while a send delivery cuts in."""
        racing = (k, lambda: self._deliver_nested(n)) if k else None
        plan = dataclasses.replace(faults, interleave=racing)
        answer, exc = self._step(plan, lambda: guard.release(self.rt, PRODUCER.subject, "op-1"))
        FIGURES["releases"] += 1
        self._documented(exc, f"release under {faults.describe()}")
        if exc is None and not answer["more"]:
            left = [sk for pk, sk, _ in self.w._rows(f"HELD#{PRODUCER.subject}")]
            self._violation(left, "items still parked after a release that said none is")

    def _producers_sends(self) -> list[Any]:
        """The send messages SQS ever took of the producer's items, in the order ``duplicate``
        counts them (in flight, waiting, or deleted)."""
        queue = self.w.send_queue
        items = self.w.items()
        known = sorted([*queue.messages, *queue.gone], key=lambda m: (m.sent_at, m.message_id))
        return [(n, m) for n, m in enumerate(known)
                if getattr(items.get(SendMessage.parse(m.body).item_id), "created_by",
                           None) == PRODUCER.subject]  # fmt: skip

    @rule(n=st.integers(0, 1000), stale=st.booleans(), plan=st.sampled_from(PLANS),
          faults=STEP_FAULTS)  # fmt: skip
    @precondition(lambda self: bool(self._producers_sends()))
    def deliver_producers_email(self, n: int, stale: bool, plan: str, faults: Plan) -> None:
        """A delivery of a message of the producer's items (held or not): one SQS hands out
        now, or (``stale``, or none is visible) a copy of any of them ever sent."""
        now = self.rt.clock.now()
        sends = self._producers_sends()
        visible = [m for _, m in sends if m.visible(now) and m in self.w.send_queue.messages]
        if visible and not stale:
            first = visible[n % len(visible)]
        else:
            first = self.w.send_queue.duplicate(sends[n % len(sends)][0], now)
            FIGURES["duplicate deliveries"] += 1
        parked = len(w.parked(self.w))
        self._deliver(plan, faults, limit=1, first=first)
        if len(w.parked(self.w)) > parked:
            FIGURES["sends parked by a hold"] += 1

    @rule(faults=STEP_FAULTS)
    def cancel_held(self, faults: Plan) -> None:
        _, exc = self._step(faults, lambda: guard.cancel(self.rt, PRODUCER.subject, "op-1"))
        FIGURES["operator actions"] += 1
        self._documented(exc, f"cancel of held items under {faults.describe()}")

    # ---- the send worker, through SQS and the event source mapping -----------------------------

    @rule(n=st.integers(0, 1000), size=st.sampled_from(BATCH), late=st.sampled_from(LATE),
          plan=st.sampled_from(PLANS), faults=STEP_FAULTS)  # fmt: skip
    @precondition(lambda self: bool(self.w.send_queue.visible_messages(self.rt.clock.now())))
    def deliver(self, n: int, size: int, late: float, plan: str, faults: Plan) -> None:
        """The send function's mapping takes a batch of visible send messages; what it does not
        delete (a failure reported, an error, a crash) comes back after its visibility."""
        self._deliver(plan, faults, limit=size, start=n, late=late)

    @rule(n=st.integers(0, 1000), plan=st.sampled_from(PLANS), faults=STEP_FAULTS)
    @precondition(lambda self: bool(self.seam.sends))
    def redeliver(self, n: int, plan: str, faults: Plan) -> None:
        """At-least-once: SQS hands out a copy of any send message ever published (its original
        in flight, waiting, or deleted long ago), and the mapping delivers it."""
        copy = self.w.send_queue.duplicate(n, self.rt.clock.now())
        assert copy is not None
        FIGURES["duplicate deliveries"] += 1
        self._deliver(plan, faults, limit=1, first=copy)

    @rule(n=st.integers(0, 1000), queue=st.sampled_from(["send", "results"]))
    @precondition(lambda self: bool(self.seam.sends))
    def duplicate(self, n: int, queue: str) -> None:
        """At-least-once: a copy of a message becomes visible beside the original (in flight,
        waiting, or deleted), to be delivered with the others."""
        target = self.w.send_queue if queue == "send" else self.w.results_queue
        if target.duplicate(n, self.rt.clock.now()) is not None:
            FIGURES["duplicate deliveries"] += 1

    @rule(n=st.integers(0, 1000), k=RACE, m=st.integers(0, 1000), kind=st.integers(0, 20),
          tagging=st.sampled_from(["full", "item", "none"]))  # fmt: skip
    @precondition(lambda self: bool(self.w.send_queue.visible_messages(self.rt.clock.now()))
                  and bool(self._accepted()))  # fmt: skip
    def deliver_racing_an_event(self, n: int, k: int | str, m: int, kind: int,
                                tagging: str) -> None:  # fmt: skip
        """A provider event (of any attempt) is handled while the worker is between two AWS
        calls (after its claim, during the provider call)."""
        event = self._event(m, kind, tagging)
        self._deliver("ok", Plan(interleave=(k, event) if k else None), limit=1, start=n)

    def _deliver(self, plan: str, faults: Plan, *, limit: int = 1, start: int = 0,
                 late: float = 0.0, first: Any = None) -> None:
        self.w.ses.plan = self.w.twilio.plan = plan
        FIGURES["send deliveries"] += 1
        try:
            self._step(faults, lambda: self.w.deliver_sends(limit=limit, start=start, late=late,
                                                            first=first))  # fmt: skip
        finally:
            self.w.ses.plan = self.w.twilio.plan = "ok"

    # ---- provider events ---------------------------------------------------------------------

    def _event(self, m: int, kind: int, tagging: str) -> Any:
        """A handler call for an event of accepted message ``m`` (SES or Twilio)."""
        accepted = self._accepted()
        message_id, item_id, attempt = accepted[m % len(accepted)]
        if message_id.startswith("SM"):
            status = TWILIO_STATUSES[kind % len(TWILIO_STATUSES)]
            params = {"MessageSid": message_id, "MessageStatus": status}
            if status in ("undelivered", "failed"):
                params.update(ErrorCode="30003", ErrorMessage="Unreachable destination handset")
            key = item_id if tagging != "none" else None
            # "full": the URL the send gives (key and attempt); "item": one from before
            # attempts were in it.
            if tagging == "full":
                params["attempt"] = str(attempt)
            return lambda: self._handle(("twilio", params, key), status)
        name = SES_KINDS[kind % len(SES_KINDS)]
        tag_item = None if tagging == "none" else item_id
        tag_attempt = attempt if tagging == "full" else None
        event = ses_event(name, message_id=message_id, item_id=tag_item, attempt=tag_attempt)
        return lambda: self._handle(("ses", event, None), name)

    def _handle(self, event: tuple[str, Any, str | None], name: str, keep: bool = True) -> str:
        source, payload, key = event
        if keep:
            self.events.append(event)
        FIGURES["provider events"] += 1
        if source == "twilio":
            if payload["MessageStatus"] != "queued":
                self.w.twilio.truth[payload["MessageSid"]] = payload["MessageStatus"]
            params = {k: v for k, v in payload.items() if k != "attempt"}
            return results.handle_twilio_callback(params, key, self.rt,
                                                  attempt=payload.get("attempt"))  # fmt: skip
        cancelled = self._cancelled_target(payload)
        outcome = results.handle_ses_event(payload, self.rt)
        if cancelled is not None and name in FINAL_SES and outcome != "duplicate":
            item = self.w.item(cancelled)
            text = results.parse_ses_event(payload).text
            problems = [] if item is not None and (item.state, item.result) == (
                "cancelled", text) else [f"{cancelled} is {item and item.state} with result "
                                         f"{item and item.result!r}"]  # fmt: skip
            self._violation(problems, f"a tagged {name} event of a cancelled email")
        return outcome

    def _cancelled_target(self, payload: dict[str, Any]) -> str | None:
        tags = payload["mail"]["tags"]
        item_id = (tags.get("vdq_item") or [None])[0]
        item = self.w.item(item_id) if item_id else None
        return item_id if item is not None and item.state == "cancelled" else None

    @rule(m=st.integers(0, 1000), kind=st.integers(0, 20),
          tagging=st.sampled_from(["full", "item", "none", "full"]),
          faults=STEP_FAULTS)  # fmt: skip
    @precondition(lambda self: bool(self._accepted()))
    def provider_event(self, m: int, kind: int, tagging: str, faults: Plan) -> None:
        """An event for any message a provider accepted (any order, however late)."""
        event = self._event(m, kind, tagging)
        _, exc = self._step(faults, event)
        if exc is not None and not isinstance(exc, Crash):
            FIGURES["events failed (redelivered later)"] += 1

    @rule(m=st.integers(0, 1000), kind=st.integers(0, 20), k=RACE, n=st.integers(0, 1000))
    @precondition(lambda self: bool(self._accepted())
                  and bool(self.w.send_queue.visible_messages(self.rt.clock.now())))  # fmt: skip
    def event_racing_a_delivery(self, m: int, kind: int, k: int | str, n: int) -> None:
        """A send delivery runs while the event handler is between two AWS calls (after its
        read, before its write)."""
        event = self._event(m, kind, "full")
        self._step(Plan(interleave=(k, lambda: self._deliver_nested(n)) if k else None),
                   event)  # fmt: skip

    # ---- the acceptance left to the first result: its races and its crash ---------------------

    def _newest_accepted(self) -> tuple[str, str, int] | None:
        """The message a provider took last (the one the worker in flight just sent)."""
        accepted = self._accepted()
        return max(accepted, key=lambda a: a[0]) if accepted else None

    def _checks_naming(self, item_id: str) -> list[dict[str, Any]]:
        out = []
        for message in self.w.results_queue.messages:
            data = json.loads(message.body)
            if data.get("kind") == checks.KIND and any(s[0] == item_id for s in data["sent"]):
                out.append(data)
        return out

    @rule(n=st.integers(0, 1000), kind=st.integers(0, 20))
    @precondition(lambda self: bool(self.w.send_queue.visible_messages(self.rt.clock.now())))
    def delivery_racing_the_worker(self, n: int, kind: int) -> None:
        """The first result of the message the worker just sent (an SES event or a Twilio
        callback, with its item and attempt) is handled after the provider took it, before
        the worker publishes the batch's check: it stores the ID and the acceptance; the
        check then finds the item moved on."""
        before = set(m for m, _, _ in self._accepted())

        def event() -> None:
            newest = self._newest_accepted()
            if newest is None or newest[0] in before:
                return
            m = [a[0] for a in self._accepted()].index(newest[0])
            FIGURES["first results racing the worker"] += 1
            self._event(m, kind, "full")()

        self._deliver("ok", Plan(interleave=("SendMessage", event)), limit=1, start=n)

    @rule(m=st.integers(0, 1000), kind=st.integers(0, 20), k=RACE,
          check_first=st.booleans())  # fmt: skip
    @precondition(lambda self: bool(self._accepted()))
    def check_racing_a_delivery(self, m: int, kind: int, k: int | str, check_first: bool) -> None:
        """An item's check (its delay cut short) and one of its results run at once: each is
        between its read and its write when the other runs. One of them stores the ID and the
        acceptance; the other applies to the item as it finds it (exactly once)."""
        accepted = self._accepted()
        _, item_id, _ = accepted[m % len(accepted)]
        found = self._checks_naming(item_id)
        if not found:
            return
        event = self._event(m, kind, "full")

        def check() -> None:
            for data in found:
                checks.handle(data, self.rt)

        first, second = (check, event) if check_first else (event, check)
        FIGURES["checks racing a result"] += 1
        _, exc = self._step(Plan(interleave=(k, second) if k else None), first)
        if exc is not None and not isinstance(exc, Crash):
            FIGURES["events failed (redelivered later)"] += 1

    @rule(n=st.integers(0, 1000), before_lease=st.booleans())
    @precondition(lambda self: bool(self.w.send_queue.visible_messages(self.rt.clock.now())))
    def crash_after_the_provider_before_the_check(self, n: int, before_lease: bool) -> None:
        """SES took an email, then the worker died before its batch's check: no record of the
        acceptance anywhere but SES. A Delivery before the claim's lease ends it succeeded;
        without one, its message ends it errored "outcome unknown" at the lease, and the
        Delivery that comes after is in its history, not lost."""
        before = set(self.w.ses.accepted)
        self._deliver("crash", Plan(), limit=1, start=n)
        new = [(m, key) for m, key in self.w.ses.accepted.items() if m not in before]
        if len(new) != 1:
            return  # the message was no email's to send now (dropped, paced, ...)
        message_id, (item_id, attempt) = new[0]
        item = self.w.item(item_id)
        if item is None or (item.state, int(item.attempt)) != ("sending", attempt):
            return
        FIGURES[f"crashes before the check, Delivery {'before' if before_lease else 'after'} "
                "the lease"] += 1
        event = ses_event("delivery", message_id=message_id, item_id=item_id, attempt=attempt)
        if before_lease:
            self.rt.clock.advance(1)
            self._handle(("ses", event, None), "delivery")
            item = self.w.item(item_id)
            self._violation([] if item is not None and item.state == "succeeded" else [
                f"{item_id} is {item and item.state} after its Delivery"],
                "a Delivery before the lease of a crashed send")  # fmt: skip
            return
        self.rt.clock.advance(self.rt.settings.lease_seconds + 1)
        for _ in range(10):  # its message (and any other visible) comes back
            if not self.w.send_queue.visible_messages(self.rt.clock.now()):
                break
            self._deliver("ok", Plan(), limit=10)
            item = self.w.item(item_id)
            if item is not None and item.state != "sending":
                break
        item = self.w.item(item_id)
        if item is None or int(item.attempt) != attempt or item.state != "errored":
            return  # an operator's step or another message moved it meanwhile
        self._handle(("ses", event, None), "delivery")
        late = [h for h in self.w.history(item_id) if h.kind == "late" and h.name == "succeed"]
        problems = [] if self.w.item(item_id).state == "errored" and late else [
            f"{item_id}: the Delivery after the lease is not in its history as late"]
        self._violation(problems, "a Delivery after the lease of a crashed send")

    def _deliver_nested(self, n: int) -> None:
        FIGURES["send deliveries"] += 1
        with contextlib.suppress(Crash):
            self.w.deliver_sends(limit=1, start=n)

    @rule(kind=st.sampled_from(SES_KINDS), n=st.integers(0, 1000))
    def ses_result_unknown(self, kind: str, n: int) -> None:
        """An event for a message ID no item stores (another sender, or not yet stored)."""
        event = ses_event(kind, message_id=f"0100019a-unknown-{n}", item_id=None)
        self._step(Plan(), lambda: self._handle(("ses", event, None), kind))

    @rule(n=st.integers(0, 1000), faults=STEP_FAULTS)
    @precondition(lambda self: bool(self.events))
    def replay(self, n: int, faults: Plan) -> None:
        """A provider event delivered again (SQS at least once, Twilio's retries)."""
        event = self.events[n % len(self.events)]
        self._step(faults, lambda: self._handle(event, "replay", keep=False))

    @rule(n=st.integers(0, 1000), late=st.sampled_from(LATE), faults=STEP_FAULTS)
    @precondition(lambda self: bool(self.w.results_queue.visible_messages(self.rt.clock.now())))
    def results_delivery(self, n: int, late: float, faults: Plan) -> None:
        """The results function's mapping takes a batch of what VDQ put on the results queue
        (deferred lookups)."""
        self._step(faults, lambda: self.w.deliver_results(limit=3, start=n, late=late))

    @rule(m=st.integers(0, 1000), kind=st.sampled_from(["Open", "Click"]))
    @precondition(lambda self: bool(self.w.ses.accepted))
    def engagement_flood(self, m: int, kind: str) -> None:
        """Opens and clicks of one email, each a distinct event: no state, bounded storage."""
        message_id, (item_id, attempt) = list(self.w.ses.accepted.items())[
            m % len(self.w.ses.accepted)]  # fmt: skip
        raw = self.w.raw_items().get(item_id)
        before = raw.size() if raw is not None else 0
        for k in range(FLOOD):
            event = engagement_event(kind, message_id, item_id, attempt, k)
            self._step(Plan(), lambda e=event: results.handle_ses_event(e, self.rt))
        FIGURES["provider events"] += FLOOD
        raw = self.w.raw_items().get(item_id)
        grown = (raw.size() if raw is not None else 0) - before
        self._violation([f"{item_id} grew {grown} bytes"] if grown > FLOOD_GROWTH else [],
                        f"a flood of {FLOOD} {kind} events")  # fmt: skip

    # ---- operators and schedules -------------------------------------------------------------

    @rule(n=st.integers(0, 1000), name=st.sampled_from(["retry", "cancel"]), faults=STEP_FAULTS)
    def operator(self, n: int, name: str, faults: Plan) -> None:
        item_id = self._pick(n)
        if item_id is None:
            return
        step = Step(name, actor="op-1", source="operator")
        _, exc = self._step(faults, lambda: apply(item_id, step, self.rt))
        FIGURES["operator actions"] += 1
        self._documented(exc, f"operator {name} under {faults.describe()}")

    @rule(n=st.integers(0, 1000), bulk=st.booleans(), faults=WRITE_FAULTS)
    def resend(self, n: int, bulk: bool, faults: Plan) -> None:
        items = self.w.items()
        done = sorted(i for i, it in items.items() if it.state in DONE)
        if not done or len(items) >= MAX_ITEMS + 3:
            return
        chosen = done if bulk else [done[n % len(done)]]
        _, exc = self._step(faults, lambda: actions.resend(chosen, OPERATOR, self.rt))
        FIGURES["operator actions"] += 1
        self._documented(exc, f"resend under {faults.describe()}")

    @rule(faults=STEP_FAULTS)
    def sweep(self, faults: Plan) -> None:
        counts, exc = self._step(faults, lambda: schedules.run(["sweep"], self.rt))
        # A sweep that reports a failed step (a write refused through all its tries) has not
        # swept that item: the next run tries it again (test_faults has the case).
        if exc is None and not (counts or {}).get("failed"):
            self.last_sweep = self.rt.clock.now()
        FIGURES["sweeps"] += 1

    @rule(faults=STEP_FAULTS)
    def sms_check(self, faults: Plan) -> None:
        self._step(faults, lambda: schedules.run(["sms"], self.rt))

    @rule()
    def purge(self) -> None:
        """The purge schedule, which runs long (more than the consistency window) after the
        last change."""
        self.rt.clock.advance(2)
        _, exc = self._step(Plan(), lambda: schedules.run(["purge"], self.rt))
        self.after_purge = exc is None

    @rule(faults=STEP_FAULTS)
    def days_pass(self, faults: Plan) -> None:
        """Longer than a content's horizon passes, a day at a time, each day with its daily
        run (the watch of open items' contents, then the purge), the first under ``faults``:
        an item done after this is done past its content's horizon, and extends it first."""
        from vdq.workflow.retention import DAY, horizon_seconds

        for day in range(horizon_seconds(self.rt.settings) // DAY + 2):
            self.rt.clock.advance(DAY)
            self._step(faults if day == 0 else Plan(),
                       lambda: schedules.run(["purge"], self.rt))  # fmt: skip
        FIGURES["days passed"] += 1

    @rule(seconds=st.sampled_from(ADVANCE))
    def advance(self, seconds: float) -> None:
        self.rt.clock.advance(seconds)

    @rule(post=st.booleans())
    def drain(self, post: bool) -> None:
        """VDQ's promise: the queues are drained (every visible, delayed and in-flight message
        delivered until none is left) and the clock passes every timer, the schedules running
        each time the queues are empty: then every item is done or errored, and nothing waits
        on a timer. ``post``: then a stream window takes what the stream holds, so the
        invariants of a consumed stream (counts, the sent list) see the items done."""
        rounds = w.drain(self.w, lambda work: self._step(Plan(), work), DRAIN_ROUNDS)
        FIGURES["drains"] += 1
        self.last_sweep = self.rt.clock.now()
        self._violation([] if rounds is not None else [
            f"the queues still hold {self.w.send_queue.counts(self.rt.clock.now())} sends, "
            f"{self.w.results_queue.counts(self.rt.clock.now())} results after {DRAIN_ROUNDS} "
            "rounds"], "drain")  # fmt: skip
        items = self.w.items()
        self._violation(w.overdue(items, self.rt.settings, self.rt.clock.now()),
                        "after the timers")  # fmt: skip
        self._violation(w.undone(items, w.parked(self.w, held_only=True)), "drained")
        if post:
            self.stream_window(0, False, Plan())

    # ---- the table's stream --------------------------------------------------------------------

    def _stream(self) -> list[dict[str, Any]]:
        from tests.reliability.support import TABLE
        from tests.support.aws import stream_records

        return stream_records(TABLE, self.rt.client("dynamodb"))

    @rule(cut=st.integers(0, 12), fail=st.booleans(), faults=STEP_FAULTS)
    def stream_window(self, cut: int, fail: bool, faults: Plan) -> None:
        """One window of the stream mapping over what the stream grew by: two batches (the
        first failed once and given again with the state of before it, when ``fail``), each
        stamping the records of the items it carries into a done state (the first under
        ``faults``, a batch that failed given again, as Lambda does), then the last call under
        ``faults``; a last call cut short is given again, as Lambda does."""
        import copy

        from tests.reliability.support import TABLE
        from vdq.workflow import retention

        records = self._stream()
        fresh, self.stream_read = records[self.stream_read:], len(records)
        wanted = [dict(r, eventSource="aws:dynamodb") for r in fresh if passes(r)]
        for n, batch in enumerate((wanted[:cut], wanted[cut:])):
            for attempt in range(10):
                plan = faults if n == attempt == 0 else Plan()
                _, exc = self._step(plan, lambda b=batch: retention.stamp_changes(b, self.rt))
                if exc is None:
                    break
            else:
                raise AssertionError("a stream batch's stamping never got through")
        window = postings.Window(shard=shard_tag("shardId-model"))

        def lookup(item_id: str) -> dict[str, Any] | None:
            item = self.w.item(item_id)
            return None if item is None else {"id": item.id, "method": item.method,
                                              "created_by": item.created_by,
                                              "sender": item.sender}  # fmt: skip

        for batch in (wanted[:cut], wanted[cut:]):
            if fail and batch:
                postings.fold(copy.deepcopy(window), batch, lookup)  # its answer was lost
            postings.fold(window, batch, lookup)
        tallies = Tallies(self.rt.client("dynamodb"), TABLE)
        for attempt in range(10):
            state = copy.deepcopy(window)  # every try of the last call gets the same state
            _, exc = self._step(faults if attempt == 0 else Plan(), lambda w=state: postings.flush(
                w, tallies, retention_days=self.rt.settings.retention_days,
                now=int(self.rt.clock.now().timestamp())))  # fmt: skip
            if exc is None:
                break
        else:
            raise AssertionError("the window's last call never got through")
        FIGURES["stream windows"] += 1
        # What the window itself wrote (stamps, postings, counts) passes no filter: taken.
        tail = self._stream()[self.stream_read:]
        if not any(passes(r) for r in tail):
            self.stream_read += len(tail)

    def _counted(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, sk, item in self.w._rows("CNT#"):
            if counter_kind(sk)[0] != "all":
                continue
            for name, value in item.to_json()["Attributes"].items():
                if "N" in value and name != "expiration":
                    counts[name] = counts.get(name, 0) + int(value["N"])
        return counts

    # ---- invariants --------------------------------------------------------------------------

    @invariant()
    def provider_called_at_most_once_per_attempt(self) -> None:
        self._violation(w.twice_per_attempt(self.w), "double send")

    @invariant()
    def every_item_follows_the_workflow_and_the_rules(self) -> None:
        items = self.w.items()
        s = self.rt.settings
        self._violation(w.workflow_problems(self.w, items, self.last_sweep), "workflow")
        self._violation(w.stranded(self.w, items, s, w.parked(self.w)), "stranded")
        self._violation(w.file_problems(self.w, items, after_purge=self.after_purge), "files")
        self._violation(w.oversized(self.w), "state item size")
        w.note_provider_ids(self.w, items)
        self._violation(w.provider_id_kept(self.w, items), "provider ID")
        self._violation(w.retention_problems(self.w, items), "retention")
        self._violation(w.count_problems(self.w, items), "content count")

    @invariant()
    def every_record_of_a_done_item_expires_once_the_stream_is_consumed(self) -> None:
        """Once the stream's records are all taken, every record beside a done item's state
        (history, event marks) carries the item's expiration: stamped by the stream, or
        written with it."""
        if self.stream_read == 0 or len(self._stream()) != self.stream_read:
            return
        FIGURES["stream stamps checked"] += 1
        self._violation(w.unstamped(self.w, self.w.items()), "unstamped record")

    @invariant()
    def the_counts_of_a_consumed_stream_match_the_items(self) -> None:
        """Every item was counted queued once, and each in a done state (which it never leaves)
        entered it once, whatever the windows' failures and replays."""
        if self.stream_read == 0 or len(self._stream()) != self.stream_read:
            return  # records the windows have not taken yet
        counted = self._counted()
        FIGURES["stream counts checked"] += 1
        problems = []
        for method in ("email", "sms"):
            items = [i for i in self.w.items().values() if i.method == method]
            wanted = {"queued": len(items)}
            for state in ("succeeded", "cancelled", "unconfirmed"):
                wanted[state] = sum(1 for i in items if i.state == state)
            for name, n in wanted.items():
                if counted.get(f"{method}.{name}", 0) != n:
                    problems.append(f"{method}.{name} counted {counted.get(f'{method}.{name}', 0)}"
                                    f", items {n}")  # fmt: skip
        self._violation(problems, "stream counts")

    @invariant()
    def the_sent_list_of_a_consumed_stream_is_the_done_items(self) -> None:
        """Once the stream's records are all taken, the sent list (GET /sent-items, page by
        page) holds every live item in a done state once, most recently done first, and no
        other: the windows' failures and replays neither lose nor repeat an entry."""
        if self.stream_read == 0 or len(self._stream()) != self.stream_read:
            return
        FIGURES["sent lists checked"] += 1
        listed: list[str] = []
        cursor = None
        for _ in range(1000):
            page = done_list.list_done(self.rt, limit=7, cursor=cursor)
            listed += [i["id"] for i in page["items"]]
            cursor = page["cursor"]
            if cursor is None:
                break
        now = self.rt.clock.now()
        done = sorted((i for i in self.w.items().values()
                       if i.state in DONE and not gone(i.expiration, now)),
                      key=lambda i: (i.done_at[:23], i.id), reverse=True)  # fmt: skip
        wanted = [i.id for i in done]
        FIGURES["sent list entries checked"] += len(wanted)
        problems = [] if listed == wanted else [f"listed {listed}, done items {wanted}"]
        self._violation(problems, "sent list")


def narrowed(machine: type[Workflow]) -> type[Workflow]:
    """``machine`` with only the rules ``VDQ_MODEL_RULES`` names (a rule hidden by a plain
    attribute is no rule)."""
    if not RULES:
        return machine
    rules = [n for n, v in vars(machine).items() if hasattr(v, "hypothesis_stateful_rule")]
    return type("Narrowed", (machine,), {n: None for n in rules if n not in RULES})


def test_random_interleavings_keep_the_workflow(world):
    Workflow.world = world
    seeded = os.environ.get("VDQ_MODEL_RANDOM") == "1"
    run_state_machine_as_test(
        narrowed(Workflow),
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=not (SOAK or seeded),
            database=None,
        ),
    )


def test_the_model_plays_only_the_ses_events_a_deployed_stack_receives():
    played = {ses_body(kind)["eventType"] for kind in SES_KINDS}
    assert played <= set(resources.SES_EVENTS)


def test_drains_that_pass_days_run_the_daily_schedule_as_eventbridge_does(world):
    """Found by the soak: each drain passes every timer (three days and more at a time), and
    ten of them passed a month without the daily run, whose watch extends the content of an
    item errored that long; the content then neared its expiration under its open item. The
    daily schedule runs each day the clock passes, as EventBridge runs it."""
    Workflow.world = world
    machine = Workflow()
    machine.first_item(method="email")
    machine.first_producers_item()
    machine.deliver_producers_email(faults=Plan(), n=0, plan="permanent", stale=False)
    assert any(i.state == "errored" for i in machine.w.items().values())
    for _ in range(14):
        machine.drain(post=False)
        machine.every_item_follows_the_workflow_and_the_rules()


def test_the_records_of_a_flooded_email_are_stamped_when_it_is_delivered(world):
    """The stream's stamping in the model has records to stamp: a flood of opens on an email
    SES took puts marks and entries beside its state item (its set and entries full); its
    Delivery makes it done; the stream's window stamps them all."""
    Workflow.world = world
    machine = Workflow()
    machine.first_item(method="email")
    machine.deliver(n=0, size=10, late=0.0, plan="ok", faults=Plan())
    machine.engagement_flood(m=0, kind="Open")
    machine.provider_event(m=0, kind=SES_KINDS.index("delivery"), tagging="full", faults=Plan())
    assert {i.state for i in machine.w.items().values()} == {"succeeded"}
    checked = FIGURES["records beside done items checked"]
    machine.stream_window(cut=0, fail=False, faults=Plan())
    machine.every_record_of_a_done_item_expires_once_the_stream_is_consumed()
    assert FIGURES["records beside done items checked"] > checked
