"""The generated pages by their path under docs/, made from the checkout's code.

Two kinds. The committed ones can be read on the repository's web view too: ``python -m docsite``
writes them, and the site's build (and a test) fails while one differs from what the code makes.
The others join the site only when it is built: the CLI's help, whose layout depends on the
Python that formats it, and SECURITY.md, which already has its place at the repository's root.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
OPENAPI = ROOT / "shared" / "vdq" / "openapi.json"
SECURITY = ROOT / "SECURITY.md"
# What the generated pages are made from (the package and infra/ whole, wherever a module sits
# in them): `make docs` rebuilds the site when one changes.
SOURCES = (SECURITY, ROOT / "shared" / "vdq", ROOT / "infra")


def _api() -> str:
    from docsite.openapi import api_page

    return api_page(json.loads(OPENAPI.read_text()))


def _settings() -> str:
    from docsite.reference import settings_page

    return settings_page()


def _cli() -> str:
    from docsite.reference import cli_page

    return cli_page()


COMMITTED: dict[str, Callable[[], str]] = {
    "reference/api.md": _api,
    "reference/settings.md": _settings,
}
BUILT: dict[str, Callable[[], str]] = {
    "reference/cli.md": _cli,
    "security.md": SECURITY.read_text,
}


def stale() -> list[str]:
    """The committed pages that differ from what the code makes now (or are missing)."""
    found = []
    for path, make in COMMITTED.items():
        page = DOCS / path
        if not page.is_file() or page.read_text() != make():
            found.append(f"docs/{path}")
    return found


def write() -> list[str]:
    """Write every committed page; the paths of those that changed."""
    changed = []
    for path, make in COMMITTED.items():
        page, text = DOCS / path, make()
        if not page.is_file() or page.read_text() != text:
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(text)
            changed.append(f"docs/{path}")
    return changed
