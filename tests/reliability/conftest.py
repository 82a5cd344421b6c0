"""Prints the reliability figures at the end of the session."""

from __future__ import annotations

from typing import Any

from tests.reliability.support import FIGURES


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section("reliability figures")
    for name in sorted(n for n in FIGURES if n != "violations"):
        terminalreporter.write_line(f"{name:>32}: {FIGURES[name]}")
    terminalreporter.write_line(f"{'violations found':>32}: {FIGURES.get('violations', 0)}")
