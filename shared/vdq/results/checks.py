"""Checks: the send function's note to look at the messages it sent, a few minutes later.

The send worker writes nothing when the provider accepts a message: most emails get their
Delivery or Bounce within seconds, and an SMS its status callbacks, and that first result
stores the provider ID with the acceptance's history entry (vdq.results.updates). The item
stays ``sending`` until then. So after a batch's sends the send function publishes one message
to the results queue, delayed ``VDQ_CHECK_SECONDS`` (300 s by default, at most SQS's 900), that
names each message the provider accepted: ``{"kind": "vdq.check", "sent": [[id, attempt,
provider ID, accepted at], ...]}``. It is published before the batch's messages are deleted
(the send function returns after it), so a function that dies before it leaves its send
messages, whose deliveries find the items ``sending`` and wait for the claim's lease (which
is longer than the check's delay: vdq.core.settings.lease_seconds), or ``awaiting`` and give
them the timer themselves (vdq.dispatch.send).

The results function reads the items (eventually consistent: the check comes minutes after
the writes it looks at; a read that shows an older item is read again, strongly), and:

- an item still ``sending`` at that attempt (no result came): the acceptance the worker left
  to its first result, written now in one write: ``awaiting``, the provider ID, the ``await``
  entry ("accepted by SES as ...", at the provider's answer) and its timeout's timer (an
  email's ``mailwait``, keyed on the claim that sent it; an SMS's ``await``);
- an email ``awaiting`` at that attempt with no timer (a DeliveryDelay moved it): its
  timeout's timer;
- anything else (done, errored, a later attempt, a timer already): nothing.

About one email in fifty is still without a result then: a write unit and two index units for
those instead of a write unit for every email. Every write is conditional on the item as read:
a check delivered twice, or racing an event, changes nothing the second time (an event that
finds the item moved by the check applies to it as it is then).

When SQS refuses the check, the send function does its work at once (``look``): the same
rules, so every item it names is recorded ``awaiting`` now, with its timer, as the worker did
before it left the acceptance to the first result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vdq.core.errors import InvalidTransition
from vdq.core.observability import logger
from vdq.results import tracking
from vdq.store import ProviderIdTaken, QueueItemRecord
from vdq.workflow import transitions
from vdq.workflow.lanes import priority_of
from vdq.workflow.table import State
from vdq.workflow.transitions import (
    TIMER_EMAIL_AWAIT,
    Step,
    email_wait_since,
    missing_send_entry,
    timer_partition,
)

if TYPE_CHECKING:
    from vdq.runtime import Runtime

ACTOR = "worker"  # the acceptance is the send's, as the worker recorded it
KIND = "vdq.check"
MAX_CHECKED = 100  # sends a check names at most: far above a batch's ten
MAX_ID = 256  # characters of a provider ID (SES's are about 60)


@dataclass(frozen=True)
class Sent:
    """One message the provider accepted: its item, attempt, SES message ID or Twilio SID, and
    when."""

    item_id: str
    attempt: int
    provider_id: str
    at: str

    def as_json(self) -> list[Any]:
        return [self.item_id, self.attempt, self.provider_id, self.at]


def body(sent: Sequence[Sent]) -> str:
    return json.dumps({"kind": KIND, "sent": [s.as_json() for s in sent]},
                      separators=(",", ":"))  # fmt: skip


def parse(data: dict[str, Any]) -> list[Sent]:
    """The sends a check names; ValueError for one no release wrote."""
    listed = data.get("sent")
    if not isinstance(listed, list) or len(listed) > MAX_CHECKED:
        raise ValueError(f"a check names a list of at most {MAX_CHECKED} sends")
    out = []
    for entry in listed:
        if (not isinstance(entry, list) or len(entry) != 4
                or not all(isinstance(v, str) and 0 < len(v) <= MAX_ID for v in entry[::2])
                or not isinstance(entry[1], int) or isinstance(entry[1], bool)
                or not isinstance(entry[3], str)):  # fmt: skip
            raise ValueError("a check's send is [item id, attempt, provider ID, accepted at]")
        out.append(Sent(entry[0], entry[1], entry[2], entry[3]))
    return out


def publish(sent: Sequence[Sent], runtime: Runtime) -> bool:
    """Publish the check of ``sent``; False when SQS did not take it (the caller then looks at
    the items itself: ``look``)."""
    if not sent:
        return True
    s = runtime.settings
    try:
        runtime.client("sqs").send_message(QueueUrl=s.results_queue_url, MessageBody=body(sent),
                                           DelaySeconds=s.check_seconds)  # fmt: skip
    except Exception:
        logger.exception("the check of %d sends was not published; looked at now", len(sent))
        return False
    return True


def handle(data: dict[str, Any], runtime: Runtime) -> str:
    """A check delivered by the results queue (or found in its dead-letter queue)."""
    sent = parse(data)
    items = runtime.store.get_items([s.item_id for s in sent], consistent=False)
    written = sum(1 for s in sent if decide(items.get(s.item_id), s, runtime))
    # (Each write gives a timer: a recorded acceptance comes with its timeout's.)
    return f"checked {len(sent)}, {written} given their timeout's timer"


def look(sent: Sequence[Sent], runtime: Runtime) -> list[Sent]:
    """The check's work done now, reading strongly (the check could not be published); the
    sends it could not do it for (the caller leaves their messages to come again)."""
    if not sent:
        return []
    left = []
    try:
        items = runtime.store.get_items([s.item_id for s in sent])
    except Exception:
        logger.exception("the items of %d sends could not be read for their check", len(sent))
        return list(sent)
    for s in sent:
        try:
            decide(items.get(s.item_id), s, runtime, strong=True)
        except Exception:
            logger.exception("the check of %s could not be done now", s.item_id)
            left.append(s)
    return left


def decide(item: QueueItemRecord | None, sent: Sent, runtime: Runtime,
            strong: bool = False) -> bool:  # fmt: skip
    """The rules of one checked send: True when it wrote the item.

    - an eventually consistent read that shows the item before the check's work (an earlier
      attempt, or this one not yet past ``sending``): read again, strongly (the writes since
      can be younger than the read's lag). A read never shows an item later than it is, so
      done, errored and later attempts are final;
    - gone, at another attempt, or past awaiting (done, errored, a new attempt): nothing;
    - still ``sending`` on a strong read: no result came, the acceptance is written now
      (``accept``);
    - awaiting with a timer, or an SMS (its ``await`` entry wrote its timer): nothing;
    - awaiting an email without one: its timeout's timer, keyed on its claim.
    """
    early = (State.QUEUED.value, State.DELAYED.value, State.SENDING.value)
    if item is not None and not strong and (
            int(item.attempt) < sent.attempt
            or (int(item.attempt) == sent.attempt and item.state in early)):  # fmt: skip
        return decide(runtime.store.get_item(item.id), sent, runtime, strong=True)
    if item is None or int(item.attempt) != sent.attempt:
        return False
    if item.state == State.SENDING.value:
        return accept(item, sent, runtime)
    if item.state != State.AWAITING.value or item.method != "email" or item.timer_pk:
        return False
    partition = timer_partition(TIMER_EMAIL_AWAIT, item.id, runtime.settings.index_shards,
                                priority_of(item))  # fmt: skip
    return runtime.store.add_timer(item, partition, f"{email_wait_since(item)}#{item.id}")


def accept(item: QueueItemRecord, sent: Sent, runtime: Runtime) -> bool:
    """Write the acceptance of a ``sending`` item no result reached: ``await`` with the
    provider ID, its entry at the provider's answer and the timeout's timer, conditional on
    the item as read. False when an event (or another check) moved it first: what it wrote
    stands (it stored the ID itself)."""
    label = "SES" if item.method == "email" else "Twilio"
    # The result of an earlier try (a transient error) no longer describes the item.
    step = Step("await", actor=ACTOR, attempt=sent.attempt, provider_id=sent.provider_id,
                result=None, expect=frozenset({State.SENDING.value}),
                acceptance=f"accepted by {label} as {sent.provider_id}",
                accepted_at=sent.at, timed=True,
                map_provider_id=tracking.maps_provider_id(item, runtime))  # fmt: skip
    try:
        outcome = transitions.apply(item, step, runtime, history=missing_send_entry(item))
    except InvalidTransition:
        return False  # moved on first (an event, the lease): nothing to add
    except ProviderIdTaken:
        logger.error("%s accepted %s as %s, which another item stores: not recorded", label,
                     item.id, sent.provider_id)  # fmt: skip
        return False
    if outcome.kind == "refused":
        logger.error("%s accepted %s as %s, but it stores %s: not recorded", label, item.id,
                     sent.provider_id, outcome.item.provider_id)  # fmt: skip
    return outcome.kind == "moved"
