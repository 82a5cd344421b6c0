"""Model-based test: random interleavings of send deliveries (duplicate and stale), SES events
(duplicate, reordered, late, unknown), operator retry/cancel/resend, sweeps, worker crashes and
the clock, checked after every step against the seed's workflow written out in support.py.

``VDQ_SOAK=1`` (``make soak``) explores far more schedules.
"""

from __future__ import annotations

import os
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
from tests.reliability.support import (
    DONE,
    FIGURES,
    Crash,
    FakeSes,
    RecordingQueue,
    check_history,
    empty_table,
    lease_passed,
    make_settings,
    moto_aws,
    runtime_for,
)
from tests.support.results import ses_event
from vdq import results, schedules, send
from vdq.api import Caller
from vdq.errors import InvalidTransition
from vdq.operations import actions
from vdq.sendqueue import SendMessage
from vdq.transitions import Step, apply

SOAK = os.environ.get("VDQ_SOAK") == "1"
# About 0.2 s of CPU per schedule under in-process moto.
EXAMPLES = int(os.environ.get("VDQ_MODEL_EXAMPLES", 20_000 if SOAK else 2_000))
STEPS = 20 if SOAK else 10
MAX_ITEMS = 3
OPERATOR = Caller("op-1", ("vdq-operators",),
                  frozenset({"vdq.can_resend", "vdq.list_queueitem",
                             "vdq.read_queueitem"}))  # fmt: skip
SES_KINDS = ["delivery", "bounce_permanent", "bounce_transient", "send", "delivery_delay",
             "complaint", "reject"]  # fmt: skip
PLANS = ["ok", "ok", "ok", "transient", "permanent", "ambiguous", "crash"]
ADVANCE = [0.5, 20, 301, 1000]  # the lease is 300 s, the publish grace 900 s


@pytest.fixture(scope="module")
def rel_settings():
    with moto_aws() as urls:
        yield make_settings(urls, index_shards=2)


class Workflow(RuleBasedStateMachine):
    settings_: Any = None

    def __init__(self) -> None:
        super().__init__()
        empty_table()
        self.ses = FakeSes()
        self.queue = RecordingQueue()
        self.rt = runtime_for(self.settings_, ses_provider=self.ses, send_queue=self.queue)
        self.store = self.rt.store
        self.items: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.last_sweep = None
        self.last_body: str | None = None
        FIGURES["schedules explored"] += 1

    def _pick(self, n: int) -> str | None:
        return self.items[n % len(self.items)] if self.items else None

    # ---- rules -------------------------------------------------------------------------------

    @initialize()
    def first_item(self) -> None:
        self.enqueue()

    @rule()
    def enqueue(self) -> None:
        if len(self.items) >= MAX_ITEMS:
            return
        (item,) = vdq.add_email({"email": "shop@example.com"}, ["ada@example.org"], "Hi", "Text",
                                runtime=self.rt)  # fmt: skip
        self.items.append(item.id)

    @rule()
    def enqueue_with_publish_failure(self) -> None:
        if len(self.items) >= MAX_ITEMS:
            return
        self.queue.fail = True
        try:
            (item,) = vdq.add_email({"email": "shop@example.com"}, ["bo@example.org"], "Hi",
                                    "Text", runtime=self.rt)  # fmt: skip
        finally:
            self.queue.fail = False
        self.items.append(item.id)
        assert self.store.get_item(item.id).state == "errored"

    @rule(n=st.integers(0, 1000), plan=st.sampled_from(PLANS))
    @precondition(lambda self: bool(self.queue.bodies))
    def deliver(self, n: int, plan: str) -> None:
        """One SQS delivery of any message ever published: fresh, duplicate or stale."""
        if not self.queue.bodies:
            return
        body = self.queue.bodies[n % len(self.queue.bodies)]
        self._deliver(body, plan)

    @rule(plan=st.sampled_from(PLANS))
    @precondition(lambda self: self.last_body is not None)
    def deliver_again(self, plan: str) -> None:
        """SQS delivers the message just handled once more (at-least-once delivery)."""
        self._deliver(self.last_body, plan)

    def _deliver(self, body: str, plan: str) -> None:
        self.last_body = body
        self.ses.plan = plan
        FIGURES["send deliveries"] += 1
        try:
            send.process(SendMessage.parse(body), self.rt)
        except Crash:
            FIGURES["worker crashes"] += 1
        finally:
            self.ses.plan = "ok"

    @rule(n=st.integers(0, 1000))
    @precondition(lambda self: bool(self.queue.bodies))
    def claim_then_die(self, n: int) -> None:
        """The worker claims, then dies before calling SES."""
        if self.queue.bodies:
            send.claim(SendMessage.parse(self.queue.bodies[n % len(self.queue.bodies)]), self.rt)
            FIGURES["worker crashes"] += 1

    @rule(n=st.integers(0, 1000), kind=st.sampled_from(SES_KINDS),
          tagging=st.sampled_from(["full", "item", "none", "other_attempt"]))  # fmt: skip
    @precondition(lambda self: bool(self.ses.accepted))
    def ses_result(self, n: int, kind: str, tagging: str) -> None:
        """An SES event for any message SES accepted (in any order, however late)."""
        if not self.ses.accepted:
            return
        message_id = list(self.ses.accepted)[n % len(self.ses.accepted)]
        item_id, attempt = self.ses.accepted[message_id]
        tag_item = None if tagging == "none" else item_id
        tag_attempt = {"full": attempt, "item": None, "other_attempt": attempt + 1}.get(tagging)
        event = ses_event(kind, message_id=message_id, item_id=tag_item, attempt=tag_attempt)
        self._deliver_event(event)

    @rule(kind=st.sampled_from(SES_KINDS), n=st.integers(0, 1000))
    def ses_result_unknown(self, kind: str, n: int) -> None:
        """An event for a message ID no item stores (another sender, or not yet stored)."""
        event = ses_event(kind, message_id=f"0100019a-unknown-{n}", item_id=None)
        self._deliver_event(event)

    @rule(n=st.integers(0, 1000))
    @precondition(lambda self: bool(self.events))
    def ses_replay(self, n: int) -> None:
        if self.events:
            self._deliver_event(self.events[n % len(self.events)], keep=False)

    def _deliver_event(self, event: dict[str, Any], keep: bool = True) -> None:
        before = {i: self.store.get_item(i).state for i in self.items}
        outcome = results.handle_ses_event(event, self.rt)
        FIGURES["provider events"] += 1
        if keep:
            self.events.append(event)
        if outcome == "duplicate":
            after = {i: self.store.get_item(i).state for i in self.items}
            assert after == before, "a duplicate event changed a state"

    @rule(n=st.integers(0, 1000), name=st.sampled_from(["retry", "cancel"]))
    def operator(self, n: int, name: str) -> None:
        item_id = self._pick(n)
        if item_id is None:
            return
        before = self.store.get_item(item_id)
        try:
            apply(item_id, Step(name, actor="op-1", source="operator"), self.rt)
        except InvalidTransition:
            after = self.store.get_item(item_id)
            assert (after.state, after.attempt) == (before.state, before.attempt)
        FIGURES["operator actions"] += 1

    @rule(n=st.integers(0, 1000))
    def resend(self, n: int) -> None:
        item_id = self._pick(n)
        if item_id is None or len(self.items) >= MAX_ITEMS + 2:
            return
        if self.store.get_item(item_id).state not in DONE:
            return
        (copy,) = actions.resend([item_id], OPERATOR, self.rt)
        self.items.append(copy.id)
        FIGURES["operator actions"] += 1

    @rule()
    def sweep(self) -> None:
        schedules.run(["sweep"], self.rt)
        self.last_sweep = self.rt.clock.now()
        FIGURES["sweeps"] += 1

    @rule(seconds=st.sampled_from(ADVANCE))
    def advance(self, seconds: float) -> None:
        self.rt.clock.advance(seconds)

    # ---- invariants --------------------------------------------------------------------------

    @invariant()
    def provider_called_at_most_once_per_attempt(self) -> None:
        doubles = self.ses.double_calls()
        if doubles:
            FIGURES["violations"] += 1
        assert not doubles, f"SES called more than once for (item, attempt): {doubles}"

    @invariant()
    def every_item_follows_the_workflow(self) -> None:
        for item_id in self.items:
            item = self.store.get_item(item_id)
            assert item is not None, f"accepted item {item_id} disappeared"
            problems = check_history(item, self.store.history(item_id))
            swept = self.last_sweep is not None and item.state == "sending"
            if swept and lease_passed(item, self.rt.settings, self.last_sweep):
                problems.append("still sending after its lease and a sweep")
            if problems:
                FIGURES["violations"] += 1
            assert not problems, f"{item_id}: {problems}"


def test_random_interleavings_keep_the_workflow(rel_settings):
    Workflow.settings_ = rel_settings
    run_state_machine_as_test(
        Workflow,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=not SOAK,
            database=None,
        ),
    )
