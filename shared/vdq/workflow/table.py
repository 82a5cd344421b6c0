"""The queue item workflow: one declarative table, pure Python, used by every path.

Server steps (the worker, provider results, schedules) and operator actions both decide through
``decide``; operator actions also pass ``authorize``. Nothing else gives a state name meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from vdq.core.errors import Forbidden, InvalidTransition, NotFound


class State(StrEnum):
    QUEUED = "queued"
    SENDING = "sending"
    AWAITING = "awaiting"
    DELAYED = "delayed"
    ERRORED = "errored"
    SUCCEEDED = "succeeded"
    CANCELLED = "cancelled"
    UNCONFIRMED = "unconfirmed"


INITIAL_STATE = State.QUEUED
DONE_STATES = frozenset({State.CANCELLED, State.SUCCEEDED, State.UNCONFIRMED})

# The workflow permission, plus the gates the transition endpoint applies before a transition's
# own permission.
WORKFLOW_PERMISSION = "vdq.list_queueitem"
TRANSITION_GATES = ("vdq.list_queueitem", "vdq.read_queueitem", "vdq.read_workflow")


@dataclass(frozen=True)
class Transition:
    name: str
    sources: frozenset[State]
    target: State
    # None: a server transition, which the operator endpoint refuses to every user.
    permission: str | None = None
    # Sources that are accepted but keep the state and skip the side effects.
    ignored_sources: frozenset[State] = frozenset()


def _t(
    name: str,
    sources: set[State],
    target: State,
    permission: str | None = None,
    ignored: set[State] | None = None,
) -> Transition:
    return Transition(name, frozenset(sources), target, permission, frozenset(ignored or ()))


S = State
TRANSITIONS: dict[str, Transition] = {
    t.name: t
    for t in (
        _t("send", {S.QUEUED, S.DELAYED}, S.SENDING),
        _t("await", {S.SENDING}, S.AWAITING),
        _t("delay", {S.SENDING, S.AWAITING}, S.DELAYED),
        _t("error", {S.QUEUED, S.SENDING, S.AWAITING, S.DELAYED}, S.ERRORED,
           ignored={S.CANCELLED}),
        _t("succeed", {S.SENDING, S.AWAITING}, S.SUCCEEDED, ignored={S.CANCELLED}),
        _t("timeout", {S.AWAITING}, S.UNCONFIRMED),
        _t("retry", {S.DELAYED, S.ERRORED}, S.QUEUED, permission="vdq.can_retry"),
        _t("cancel", {S.QUEUED, S.DELAYED, S.ERRORED}, S.CANCELLED, permission="vdq.can_cancel"),
    )
}  # fmt: skip

# Operator transitions start a new attempt: every send message of an older attempt drops itself.
NEW_ATTEMPT_TRANSITIONS = frozenset({"retry", "cancel", "delay"})

# The give-back is not a transition of the table. A worker that claimed an item (``send``) and
# did not call the provider (its turn at the provider's rate is too far off, the provider
# refused it for its rate, or its receiver was suppressed while it waited for its turn:
# vdq.dispatch.giveback.give_back) undoes its own claim: the item returns to the
# state the claim took it from, at the same attempt, its retries untouched. It moves nothing on
# (no attempt, no retry, no result of a send), its target is wherever the claim came from
# (``claim_source``), which a row of one target cannot say, and the table stays the seed's.
# Only the worker whose claim it is writes it (conditional on ``sending`` at that attempt), so
# no operator can apply it; its history entry names why (``GIVE_BACK_ENTRIES``, from
# ``sending`` to the restored state), and a state event names it ``GIVE_BACK``.
GIVE_BACK = "give_back"
GIVE_BACK_ENTRIES = ("paced", "throttled", "suppressed")


def claim_source(retries: float | None) -> State:
    """The state a claim took an item from, which its give-back restores.

    An item enters ``delayed`` only through ``delay``, which counts a retry, and ``queued``
    only at creation or through ``retry``, which resets the count: a claimed item came from
    ``delayed`` exactly when its retries are above 0."""
    return State.DELAYED if (retries or 0) > 0 else State.QUEUED


@dataclass(frozen=True)
class Decision:
    transition: Transition
    source: State
    ignored: bool
    # Derived from the three above (``decide`` sets them: plain values, no call to read).
    target: State = field(init=False)
    enters_done: bool = field(init=False)  # it moves the item into a done state

    def __post_init__(self) -> None:
        target = self.source if self.ignored else self.transition.target
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "enters_done", not self.ignored and target in DONE_STATES
                           and self.source not in DONE_STATES)  # fmt: skip


def transition(name: str) -> Transition:
    try:
        return TRANSITIONS[name]
    except KeyError:
        raise NotFound(f"no transition named {name!r}") from None


def decide(name: str, state: State | str, item_id: str) -> Decision:
    """What applying transition ``name`` to an item in ``state`` does, or InvalidTransition."""
    t = transition(name)
    source = State(state)
    if source in t.sources:
        return Decision(t, source, ignored=False)
    if source in t.ignored_sources:
        return Decision(t, source, ignored=True)
    raise InvalidTransition(item_id, name, source.value)


def allows(name: str, state: State | str) -> bool:
    t = transition(name)
    return State(state) in t.sources or State(state) in t.ignored_sources


def authorize(name: str, permissions: frozenset[str]) -> Transition:
    """The operator gate: Forbidden unless the caller may run transition ``name``."""
    t = transition(name)
    if t.permission is None:
        raise Forbidden(f"transition {name!r} is applied by VDQ itself, not by operators")
    missing = [p for p in (*TRANSITION_GATES, t.permission) if p not in permissions]
    if missing:
        raise Forbidden(f"transition {name!r} needs the permissions {missing}")
    return t


def is_done(state: State | str) -> bool:
    return State(state) in DONE_STATES
