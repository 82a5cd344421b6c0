"""The workflow table against the seed's: every (state, transition) pair."""

from __future__ import annotations

import pytest

from vdq.core.errors import Forbidden, InvalidTransition, NotFound
from vdq.workflow import table as workflow
from vdq.workflow.table import DONE_STATES, State

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


# ---- the give-back: not a transition (vdq.workflow.table, GIVE_BACK)
# --------------------------------


def test_the_give_back_is_not_a_transition_and_no_row_takes_sending_back():
    # It undoes ``send``: no row of the table goes from sending to queued, and the only row
    # from sending to delayed (``delay``) starts a new attempt, which a give-back never does.
    assert workflow.GIVE_BACK not in workflow.TRANSITIONS
    assert not any(S.SENDING in t.sources and t.target is S.QUEUED
                   for t in workflow.TRANSITIONS.values())  # fmt: skip
    assert [n for n, t in workflow.TRANSITIONS.items()
            if S.SENDING in t.sources and t.target is S.DELAYED] == ["delay"]  # fmt: skip
    assert "delay" in workflow.NEW_ATTEMPT_TRANSITIONS
    with pytest.raises(NotFound):  # no operator can apply it
        workflow.authorize(workflow.GIVE_BACK, frozenset(GATES | {"vdq.can_retry"}))


@pytest.mark.parametrize(("retries", "source"), [(None, S.QUEUED), (0, S.QUEUED),
                                                 (1, S.DELAYED), (5, S.DELAYED)])  # fmt: skip
def test_a_give_back_restores_the_state_the_claim_took_the_item_from(retries, source):
    assert workflow.claim_source(retries) is source
    assert workflow.decide("send", source, "I1").target is S.SENDING  # a claim's source


@pytest.mark.parametrize(("attempts", "transition"), [((3, 3), "give_back"), ((3, 4), "delay")])
def test_a_state_event_names_a_give_back_apart_from_a_delay(attempts, transition):
    from vdq.workflow import stateevents

    image = {"sk": {"S": "STATE"}, "id": {"S": "X"}, "method": {"S": "email"},
             "updated_at": {"S": "t"}}  # fmt: skip
    record = {"eventName": "MODIFY", "dynamodb": {
        "OldImage": {**image, "state": {"S": "sending"}, "attempt": {"N": str(attempts[0])}},
        "NewImage": {**image, "state": {"S": "delayed"}, "attempt": {"N": str(attempts[1])}}}}
    assert stateevents.detail_of(record, "all")["transition"] == transition
    record["dynamodb"]["NewImage"]["state"] = {"S": "queued"}
    expected = "give_back" if transition == "give_back" else "unknown"
    assert stateevents.detail_of(record, "all")["transition"] == expected
