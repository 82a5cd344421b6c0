"""Ctrl-C stops the local stack within its budget, whatever one of its loops is doing.

A loop used to be told to stop only when the one before it had finished: a schedule task
failing every second, then three pollers each given 10 s, added up past the 30 s a user (and the
e2e test) waits after Ctrl-C.
"""

from typing import Any

from vdq.local.schedules import TASKS, Schedules
from vdq.local.stack import STOP_SECONDS, LocalStack, Options


class _Functions:
    def __init__(self) -> None:
        self.invoked: list[str] = []
        self.on_invoke = lambda: None

    def available(self, name: str) -> bool:
        return True

    def invoke(self, name: str, event: dict[str, Any], lane: str = "") -> None:
        self.invoked.append(event["task"])
        self.on_invoke()


def test_a_halted_schedule_runs_no_further_task_of_its_tick():
    functions = _Functions()
    schedules = Schedules(functions, seconds=60)  # type: ignore[arg-type]
    functions.on_invoke = schedules.halt
    schedules.run_once()
    assert functions.invoked == [TASKS[0]]


class _Part:
    def __init__(self, name: str, journal: list[tuple[str, str, float | None]],
                 loop: bool) -> None:  # fmt: skip
        self.name, self.journal = name, journal
        if loop:
            self.halt = lambda: journal.append(("halt", name, None))

    def stop(self, timeout: float | None = None) -> None:
        self.journal.append(("stop", self.name, timeout))


def test_stop_tells_every_loop_before_waiting_for_any_and_shares_one_budget():
    journal: list[tuple[str, str, float | None]] = []
    stack = LocalStack(Options(), env={})
    stack._parts = [_Part("moto", journal, loop=False), _Part("send", journal, loop=True),
                    _Part("schedules", journal, loop=True)]  # fmt: skip
    stack.stop()
    assert [(what, name) for what, name, _ in journal] == [
        ("halt", "send"), ("halt", "schedules"),
        ("stop", "schedules"), ("stop", "send"), ("stop", "moto"),
    ]  # fmt: skip
    budgets = [timeout for what, _, timeout in journal if what == "stop" and timeout is not None]
    assert len(budgets) == 2 and all(0 <= t <= STOP_SECONDS for t in budgets)
    assert stack._parts == []
