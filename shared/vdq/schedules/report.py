"""The report of a schedule run: what each task did, counted by name, and the guard that
keeps one item's failure from stopping the run (it is counted and logged; the next run tries
again)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vdq.core.observability import logger

ACTOR = "schedule"  # the actor of the steps the schedule's tasks apply


@dataclass
class Report:
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n


def guard(report: Report, item_id: str, work: Any) -> None:
    """Run ``work`` (a step on the item ``item_id``); a failure is counted and logged, and the
    run goes on."""
    try:
        work()
    except Exception:
        report.add("failed")
        logger.exception("schedule step for %s failed; the next run tries again", item_id)
