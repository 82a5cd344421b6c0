"""The metrics the deployed alarms watch are the ones the code emits, printed as Lambda ships
them: one EMF JSON line an invocation, and nothing for an invocation that counted nothing."""

from __future__ import annotations

import json

import vdq
from vdq.core import observability, resources
from vdq.core.observability import metrics
from vdq.workflow.transitions import Step, apply


def _count(name: str) -> float:
    values = metrics.metric_set.get(name, {}).get("Value", [])
    return sum(values)


def test_an_item_entering_errored_counts_one_errored_item(aws, runtime):
    metrics.clear_metrics()
    (item,) = vdq.add_email({"email": "shop@example.com"}, ["a@example.org"], "Hi", "Hello")
    apply(item.id, Step("error", actor="vdq", result="boom"), runtime)
    assert _count(resources.METRIC_ITEMS_ERRORED) == 1
    apply(item.id, Step("cancel", actor="op", source="operator"), runtime)
    assert _count(resources.METRIC_ITEMS_ERRORED) == 1
    metrics.clear_metrics()


def _stdout_lines(text: str) -> list[dict]:
    """Every line a handler printed, each one JSON object (what Lambda's JSON log format passes
    through unchanged: a metric line split over lines, or not JSON, would be text, not EMF)."""
    return [json.loads(line) for line in text.splitlines()]


def _emf(lines: list[dict]) -> list[dict]:
    return [line for line in lines if "_aws" in line]


def test_a_stuck_send_prints_both_alarms_metrics_on_one_json_line(aws, runtime, clock, capsys):
    """A send whose holder died after its claim: its message, delivered again after the
    claim's lease, errors it "outcome unknown" in the send function."""
    from functions.send import handler as send_handler

    from tests.support.aws import drain
    from tests.support.results import LambdaContext, new_email, to_sending

    item = new_email(runtime)
    [body] = [json.dumps(m) for m in drain(aws)]
    to_sending(item, runtime)
    metrics.clear_metrics()  # the enqueue's, outside a handler
    clock.advance(runtime.settings.lease_seconds + 1)
    capsys.readouterr()
    event = {"Records": [{"messageId": "m1", "receiptHandle": "r1", "body": body}]}
    assert send_handler.handler(event, LambdaContext()) == {"batchItemFailures": []}
    assert runtime.store.get_item(item.id).state == "errored"
    [line] = _emf(_stdout_lines(capsys.readouterr().out))
    # The lease's end (the StuckSending alarm) and the item entering errored (the ErroredItems
    # alarm), in the namespace and dimension the alarms read.
    assert line[resources.METRIC_LEASES_EXPIRED] in (1, [1])
    assert line[resources.METRIC_ITEMS_ERRORED] in (1, [1])
    [directive] = line["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == observability.NAMESPACE
    assert directive["Dimensions"] == [["service"]] and line["service"] == observability.SERVICE
    names = {m["Name"] for m in directive["Metrics"]}
    assert {resources.METRIC_LEASES_EXPIRED, resources.METRIC_ITEMS_ERRORED} <= names


def test_an_idle_minute_prints_no_metric_and_no_line(aws, runtime, capsys):
    from functions.schedule import handler as schedule_handler

    from tests.support.results import LambdaContext

    metrics.clear_metrics()
    capsys.readouterr()
    for task in ("sms", "sweep", "purge"):
        assert not any(schedule_handler.handler({"task": task}, LambdaContext()).values())
    printed = capsys.readouterr()
    # No zero counts (CloudWatch would bill each as a metric), no "nothing to do" line, and
    # no warning of an invocation without metrics.
    assert printed.out == "" and printed.err == ""


def test_a_delivered_emails_events_print_no_line_but_its_metrics(aws, runtime, capsys):
    from functions.webhook import handler as webhook

    from tests.support.results import LambdaContext, new_email, ses_event, sqs_event, to_awaiting

    item = to_awaiting(new_email(runtime), runtime, "M-1")
    metrics.clear_metrics()  # the enqueue's, outside a handler
    capsys.readouterr()
    event = ses_event("delivery", message_id="M-1", item_id=item.id)
    assert webhook.handler(sqs_event(event), LambdaContext()) == {"batchItemFailures": []}
    assert runtime.store.get_item(item.id).state == "succeeded"
    # Every delivered email has its events: their line is DEBUG (the item's history has them).
    assert _stdout_lines(capsys.readouterr().out) == []


def test_a_producer_held_prints_the_reputation_alarms_metrics(aws, runtime, capsys):
    from functions.schedule import handler as schedule_handler

    from tests.support.results import LambdaContext
    from vdq.store.postings import Tallies

    hour = runtime.clock.now().strftime("%Y-%m-%dT%H")
    tallies = Tallies(runtime.client("dynamodb"), runtime.settings.table_name)
    tallies.add_counts(hour, "p#shop#0", "s1", "1", "2", {"sent": 300, "bounce": 15}, 2**40)
    tallies.add_counts(hour, "p#news#0", "s1", "1", "2", {"sent": 300, "bounce": 9}, 2**40)
    records = [_bounce_record("shop", "3"), _bounce_record("news", "4")]
    metrics.clear_metrics()
    capsys.readouterr()
    schedule_handler.handler({"Records": records, "state": {}, "shardId": "shard-1",
                              "isFinalInvokeForWindow": True}, LambdaContext())
    [line] = _emf(_stdout_lines(capsys.readouterr().out))
    assert line[resources.METRIC_PRODUCERS_HELD] in (1, [1])  # shop: 16 of 301, over 4%
    assert line[resources.METRIC_REPUTATION_WARNINGS] in (1, [1])  # news: 10 of 301, over 2.5%


def _bounce_record(producer: str, sequence: str) -> dict:
    """A stream record of an email's permanent bounce, as the mapping hands it on."""
    image = {"pk": {"S": f"QI#01J0000000000000000000000{sequence}"}, "sk": {"S": "STATE"},
             "id": {"S": f"01J0000000000000000000000{sequence}"}, "method": {"S": "email"},
             "created_by": {"S": producer}, "sender": {"S": "shop@example.com"},
             "state": {"S": "awaiting"}, "updated_at": {"S": "2026-12-05T10:00:00.000000Z"}}
    entry = {"sk": "H#2026-12-05T10:00:00.000000Z#1", "actor": "ses", "source": "provider",
             "kind": "event", "name": "Bounce", "text": "SES bounce (Permanent, General)"}
    bounced = dict(image, recent={"L": [{"S": json.dumps(entry)}]})
    return {"eventName": "MODIFY", "eventSource": "aws:dynamodb",
            "dynamodb": {"SequenceNumber": sequence, "OldImage": image, "NewImage": bounced}}
