"""MkDocs hooks (``mkdocs.yml``): the pages made only at build time join the site's files, and
the build stops while a committed generated page is stale (``python -m docsite`` rewrites it)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _importable() -> None:
    """infra/ and docsite/ are not installed: the repository is their root. MkDocs restores
    sys.path after loading a hook, so this runs when the hooks are called."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import File

    _importable()
    from docsite.pages import BUILT, stale

    old = stale()
    if old:
        raise PluginError(f"stale generated pages {', '.join(old)}: run "
                          "`.venv/bin/python -m docsite` and commit them")  # fmt: skip
    for path, make in BUILT.items():
        if files.get_file_from_path(path) is not None:
            raise PluginError(f"docs/{path} is made at build time: remove the file")
        files.append(File.generated(config, path, content=make()))
    return files


def on_serve(server: Any, config: Any, builder: Any) -> Any:
    """``make docs``: a change to what a generated page is made from rebuilds the site too."""
    _importable()
    from docsite.pages import SOURCES

    for source in SOURCES:
        server.watch(str(source))
    return server
