"""`vdq local` and `vdq token` need the local extra; without it they say how to install it."""

from __future__ import annotations

import sys

import pytest

from vdq.cli.client import EXIT_USAGE
from vdq.cli.main import main


@pytest.mark.parametrize("missing", ["moto", "jwt"])
@pytest.mark.parametrize("command", [["local"], ["token", "--secret", "s"]])
def test_a_command_of_the_local_stack_without_the_local_extra_says_to_install_it(
        monkeypatch, capsys, missing, command):  # fmt: skip
    monkeypatch.setitem(sys.modules, missing, None)  # as if not installed
    assert main(command) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"vdq {command[0]}: needs the local extra ({missing} not installed)" in err
    assert "pip install 'vdq[local]'" in err


def test_with_the_local_extra_a_token_is_printed(capsys):
    assert main(["token", "--secret", "s"]) == 0
    assert capsys.readouterr().out.count(".") == 2  # header.claims.signature
