"""The operator function flushes its metrics: what a resend or transition counts reaches CloudWatch.

Powertools buffers metrics in the process; only ``log_metrics`` prints them as an EMF document
(the JSON line CloudWatch turns into metrics). Without it a resend's ItemsEnqueued and any
ErroredItems caused through the operator API never reach the dashboard or the alarm.
"""

from __future__ import annotations

import json

from tests.support.aws import drain
from tests.support.operator import call, email, succeed
from vdq.core.observability import metrics


def _emf_documents(text: str) -> list[dict]:
    documents = []
    for line in text.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            documents.append(json.loads(line))
    return documents


def _metric_names(document: dict) -> set[str]:
    return {m["Name"] for d in document["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}


def test_a_resend_through_the_handler_prints_its_emf_metrics(aws, runtime, capsys):
    metrics.clear_metrics()
    [item, _cc] = email(runtime)
    succeed(runtime, item.id)
    drain(aws)
    metrics.clear_metrics()
    capsys.readouterr()

    answer = call("resend", params={"id": item.id})

    assert answer.status == 201, answer.body
    [document] = _emf_documents(capsys.readouterr().out)
    assert "ItemsEnqueued" in _metric_names(document)
    assert document["ItemsEnqueued"] in (1, [1])  # one copy enqueued
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "VDQ"
    assert metrics.metric_set == {}  # flushed: nothing waits for a later invocation


def test_a_transition_through_the_handler_leaves_no_metric_buffered(aws, runtime, capsys):
    [item, _cc] = email(runtime)
    metrics.add_metric(name="Probe", unit="Count", value=1)  # as a transition's count would be
    capsys.readouterr()
    answer = call("transition", params={"id": item.id, "name": "cancel"})
    assert answer.status == 200, answer.body
    [document] = _emf_documents(capsys.readouterr().out)
    assert "Probe" in _metric_names(document)
    assert metrics.metric_set == {}
