"""The schedule's dead-letter sweep of the results queue's dead letters, against moto: a check
is done and deleted; what an operator must redrive (an SES event, a lookup, a kept STOP) is
given back at once, not held out of sight."""

from __future__ import annotations

import json
from dataclasses import replace

from vdq.results import checks
from vdq.schedules.dead_letters import dead_letters
from vdq.schedules.report import Report


def test_what_the_sweep_leaves_for_an_operator_is_visible_again_when_it_ends(aws, runtime):
    """Found by reading the runbook against the sweep: it received every message of the
    results queue's dead-letter queue each minute and left those it does not handle in flight
    for the queue's visibility timeout (30 s), so an operator's look or redrive found them
    missing half the time."""
    sqs = aws["sqs"]
    url = sqs.create_queue(QueueName="vdq-test-results-dlq")["QueueUrl"]
    runtime.settings = replace(runtime.settings, results_dead_letter_queue_url=url)
    event = json.dumps({"eventType": "Delivery", "mail": {"messageId": "m-1"}})
    check = json.dumps({"kind": checks.KIND, "sent": []})
    for body in (event, check):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    report = Report()
    dead_letters(runtime, report)
    assert report.counts.get("dead_checks") == 1
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    assert [m["Body"] for m in got] == [event]  # the check is done and deleted
