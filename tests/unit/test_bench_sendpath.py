"""bench.sendpath counts what a reader climbs back through on the send path."""

from __future__ import annotations

from bench.sendpath import measure_path


def test_steps_returns_and_climbs_are_counted_from_the_module_changes():
    path = [("call", "dispatch.send"), ("call", "workflow.transitions"),
            ("call", "workflow.table"), ("return", "workflow.transitions"),
            ("return", "dispatch.send"), ("call", "results.suppression"),
            ("return", "dispatch.send"), ("call", "dispatch.pacing")]  # fmt: skip
    result = measure_path(path)
    assert result["modules"] == 5
    assert result["steps"] == 7
    assert result["returns"] == 3
    # transitions -> send and suppression -> send climb to dispatch; table -> transitions does
    # not leave its layer
    assert result["up_a_layer"] == 2


def test_an_empty_path_has_no_steps():
    assert measure_path([])["steps"] == 0
