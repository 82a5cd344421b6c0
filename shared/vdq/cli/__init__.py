"""``vdq``: the command line client of VDQ's REST API, for any deployment (local or AWS).

``main`` parses and runs a command (vdq.cli.main); the commands (vdq.cli.commands) talk to the
API through one client (vdq.cli.client) and print through vdq.cli.render, which shows producer
and provider text with every control character escaped.
"""

from __future__ import annotations

from vdq.cli.main import main

__all__ = ["main"]
