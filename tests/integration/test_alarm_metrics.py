"""The metrics the deployed alarms watch are the ones the code emits."""

from __future__ import annotations

import vdq
from vdq.core import resources
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
