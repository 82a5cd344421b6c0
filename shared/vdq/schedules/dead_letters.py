"""Dead letters: a send message SQS moved to its lane's dead-letter queue (its delivery failed
``MAX_RECEIVE_COUNT`` times) is the last word of its attempt.

An item still waiting for that attempt (queued, delayed) is errored with why; one still
``sending`` past its claim's lease is errored "outcome unknown" (its holder may have reached the
provider; within the lease the message waits for a later run: an accepted message's check or
first result records it first); one awaiting without a timer gets its timeout's. A check dead
in the results queue's is done here (vdq.results.checks). The message is deleted once handled
(every write conditional: a repeat changes nothing)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from vdq.core.clock import parse_iso
from vdq.core.errors import InvalidTransition
from vdq.core.observability import logger
from vdq.schedules.leases import outcome_unknown
from vdq.schedules.report import ACTOR, Report
from vdq.workflow.table import State
from vdq.workflow.transitions import Step, apply

if TYPE_CHECKING:
    from vdq.runtime import Runtime

DEAD_LETTER_ROUNDS = 5  # receives of up to ten messages from each dead-letter queue a run
DEAD_LETTER_RESULT = (
    "its send message failed {n} deliveries and was dead-lettered (the send function failed "
    "on it each time: see its log); nothing was sent for this attempt"
)


def dead_letters(runtime: Runtime, report: Report) -> None:
    """The send lanes' dead-letter queues, and the checks in the results queue's (see the
    module's docstring)."""
    s = runtime.settings
    lanes = {s.send_dead_letter_queue_url, s.high_send_dead_letter_queue_url,
             s.bulk_send_dead_letter_queue_url} - {""}  # fmt: skip
    for url in sorted(lanes):
        _drain(url, runtime, report, dead_send)
    if s.results_dead_letter_queue_url:
        _drain(s.results_dead_letter_queue_url, runtime, report, dead_result)


def _drain(url: str, runtime: Runtime, report: Report,
           handle: Callable[[dict[str, Any], Runtime, Report], bool]) -> None:  # fmt: skip
    sqs = runtime.client("sqs")
    left: list[str] = []  # receipt handles of what stays for an operator (or the next run)
    try:
        for _ in range(DEAD_LETTER_ROUNDS):
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                      AttributeNames=["ApproximateReceiveCount"]
                                      ).get("Messages", [])  # fmt: skip
            if not got:
                return
            for message in got:
                try:
                    handled = handle(message, runtime, report)
                except Exception:
                    report.add("failed")
                    logger.exception("dead letter %s not handled; the next run tries again",
                                     message.get("MessageId"))  # fmt: skip
                    handled = False
                if handled:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                else:
                    left.append(message["ReceiptHandle"])
    finally:
        _give_back(sqs, url, left)


def _give_back(sqs: Any, url: str, handles: list[str]) -> None:
    """Make what the run left visible again at once, not after the queue's visibility timeout:
    an operator's look (receive-message) or redrive (a message move task) then finds all of
    it. Only at the end of the run, so that its later receives reach the messages behind."""
    for start in range(0, len(handles), 10):
        entries = [{"Id": str(n), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                   for n, handle in enumerate(handles[start:start + 10])]  # fmt: skip
        try:
            sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)
        except Exception:  # they come back after the visibility timeout all the same
            logger.exception("dead letters not given back at once")


def dead_send(message: dict[str, Any], runtime: Runtime, report: Report) -> bool:
    """One dead send message: its attempt's last word (True: handled, delete it)."""
    from vdq.workflow.sendqueue import SendMessage

    try:
        sent = SendMessage.parse(message.get("Body") or "")
    except (ValueError, KeyError, TypeError):
        logger.error("dead letter %s is no send message: dropped", message.get("MessageId"))
        return True
    item = runtime.store.get_item(sent.item_id)
    if item is None or int(item.attempt) != sent.attempt:
        report.add("dead_dropped")
        return True
    if item.state == State.SENDING.value:
        lease_end = parse_iso(item.claimed_at or item.updated_at) + timedelta(
            seconds=runtime.settings.lease_seconds)
        if runtime.clock.now() < lease_end:
            # The provider may have taken it, and its check (due within the lease) or its
            # first result records it: the message waits for a later run past the lease.
            report.add("dead_waits")
            return False
        report.add(f"dead_{outcome_unknown(item, runtime) or 'moved'}")
    elif item.state in (State.QUEUED.value, State.DELAYED.value):
        n = int((message.get("Attributes") or {}).get("ApproximateReceiveCount") or 0)
        step = Step("error", actor=ACTOR, source="schedule", attempt=sent.attempt,
                    result=DEAD_LETTER_RESULT.format(n=n or "its"),
                    expect=frozenset({State.QUEUED.value, State.DELAYED.value}))  # fmt: skip
        try:
            report.add(f"dead_{apply(item, step, runtime).kind}")
        except InvalidTransition:
            report.add("dead_moved")
    elif item.state == State.AWAITING.value:
        from vdq.results import checks

        sent_check = checks.Sent(item.id, sent.attempt, item.provider_id or "", item.updated_at)
        if checks.decide(item, sent_check, runtime, strong=True):
            report.add("dead_awaits")
    else:
        report.add("dead_dropped")
    return True


def dead_result(message: dict[str, Any], runtime: Runtime, report: Report) -> bool:
    """A dead message of the results queue: a check is done here (True: delete it); anything
    else (an SES event, a lookup) stays for an operator (the queue's alarm)."""
    from vdq.results import checks

    try:
        data = json.loads(message.get("Body") or "")
    except ValueError:
        return False
    if not isinstance(data, dict) or data.get("kind") != checks.KIND:
        return False
    try:
        report.add("dead_checks")
        checks.handle(data, runtime)
    except ValueError:
        logger.error("dead check %s is malformed: dropped", message.get("MessageId"))
    return True
