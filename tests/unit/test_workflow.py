"""The workflow table against the seed's: every (state, transition) pair."""

from __future__ import annotations

import pytest

from vdq import workflow
from vdq.errors import Forbidden, InvalidTransition, NotFound
from vdq.workflow import DONE_STATES, State

S = State
# The seed's table: transition -> (sources, target, permission).
SEED = {
    "send": ({S.QUEUED, S.DELAYED}, S.SENDING, None),
    "await": ({S.SENDING}, S.AWAITING, None),
    "delay": ({S.SENDING, S.AWAITING}, S.DELAYED, None),
    "error": ({S.QUEUED, S.SENDING, S.AWAITING, S.DELAYED}, S.ERRORED, None),
    "succeed": ({S.SENDING, S.AWAITING}, S.SUCCEEDED, None),
    "timeout": ({S.AWAITING}, S.UNCONFIRMED, None),
    "retry": ({S.DELAYED, S.ERRORED}, S.QUEUED, "vdq.can_retry"),
    "cancel": ({S.QUEUED, S.DELAYED, S.ERRORED}, S.CANCELLED, "vdq.can_cancel"),
}
IGNORED = {("succeed", S.CANCELLED), ("error", S.CANCELLED)}
GATES = {"vdq.list_queueitem", "vdq.read_queueitem", "vdq.read_workflow"}


def test_eight_states_eight_transitions_and_the_done_states():
    assert len(State) == 8
    assert set(workflow.TRANSITIONS) == set(SEED)
    assert {S.CANCELLED, S.SUCCEEDED, S.UNCONFIRMED} == DONE_STATES
    assert workflow.INITIAL_STATE is S.QUEUED
    assert not workflow.is_done(S.ERRORED)


@pytest.mark.parametrize("name", sorted(SEED))
@pytest.mark.parametrize("state", list(State))
def test_every_state_transition_pair_matches_the_seed(name, state):
    sources, target, _ = SEED[name]
    if state in sources:
        decision = workflow.decide(name, state, "I1")
        assert not decision.ignored
        assert decision.target is target
    elif (name, state) in IGNORED:
        decision = workflow.decide(name, state, "I1")
        assert decision.ignored
        assert decision.target is state  # state kept
        assert not decision.enters_done
    else:
        with pytest.raises(InvalidTransition) as err:
            workflow.decide(name, state, "I1")
        assert err.value.state == state.value
        assert "I1" in str(err.value) and name in str(err.value)


@pytest.mark.parametrize("name", sorted(SEED))
def test_transition_permissions_and_the_gates(name):
    permission = SEED[name][2]
    everything = frozenset(GATES | {"vdq.can_retry", "vdq.can_cancel", "vdq.can_resend"})
    if permission is None:
        with pytest.raises(Forbidden):
            workflow.authorize(name, everything)
        return
    assert workflow.authorize(name, everything).name == name
    for missing in (*GATES, permission):
        with pytest.raises(Forbidden) as err:
            workflow.authorize(name, everything - {missing})
        assert missing in str(err.value)


def test_unknown_transition_is_not_found():
    with pytest.raises(NotFound):
        workflow.decide("explode", S.QUEUED, "I1")


def test_entering_done_only_from_an_active_state():
    assert workflow.decide("succeed", S.AWAITING, "I").enters_done
    assert workflow.decide("cancel", S.ERRORED, "I").enters_done
    assert not workflow.decide("error", S.SENDING, "I").enters_done
