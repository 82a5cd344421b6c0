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


def test_the_banners_line_lets_a_new_shell_make_the_tokens_the_banner_offers(tmp_path):
    """The banner offers `vdq token --groups a,b` for more tokens; the one line it says to paste
    into another shell is all that shell has, so the line carries the token secret too."""
    import os
    import shlex
    import subprocess
    from pathlib import Path
    from types import SimpleNamespace

    from vdq.local.stack import LocalStack

    stand_in = SimpleNamespace(
        local=SimpleNamespace(group_permissions={"vdq-viewers": [], "vdq-admins": []},
                              schedule_seconds=10.0),
        secret="a-random-secret-of-at-least-32-bytes", secret_generated=True,
        front=SimpleNamespace(url="http://127.0.0.1:8765"), moto_url="http://127.0.0.1:1",
        ses=SimpleNamespace(url="http://127.0.0.1:2"), twilio=SimpleNamespace(url="http://127.0.0.1:3"),
        settings=SimpleNamespace(twilio_polling=False),
        faults=SimpleNamespace(describe=lambda: "none"),
    )  # fmt: skip
    lines = [line.strip() for line in LocalStack.banner(stand_in).splitlines()]
    assert any("vdq token --groups a,b" in line for line in lines)
    [export] = [line for line in lines if line.startswith("export VDQ_API_URL=")]
    root = Path(__file__).resolve().parents[2]
    python_path = os.pathsep.join(str(root / d) for d in ("shared", ""))
    command = f"{shlex.quote(sys.executable)} -m vdq.cli token --groups vdq-viewers"
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": python_path}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", f"{export}\n{command}"],
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(".") == 2
    # and Getting started shows that part of the banner as it is printed
    shown = (root / "docs" / "getting-started.md").read_text()
    [label] = [line for line in lines if line.startswith("In another shell")]
    assert label in shown and "VDQ_TOKEN=eyJ... VDQ_LOCAL_JWT_SECRET=... PATH=" in shown
