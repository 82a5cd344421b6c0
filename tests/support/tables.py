"""The CLI's tables as data: rows by their first cell, each a dict by column header."""

from __future__ import annotations

import itertools
import re


def parse(out: str) -> dict[str, dict[str, str]]:
    """The table that starts ``out`` (header, dash line, rows up to a blank line); the columns
    are where the dash line's runs start, so a cell may hold spaces."""
    lines = out.splitlines()
    starts: list[int | None] = [m.start() for m in re.finditer(r"-+", lines[1])]
    spans = list(itertools.pairwise([*starts, None]))
    headers = [lines[0][a:b].strip() for a, b in spans]
    rows = {}
    for line in lines[2:]:
        if not line.strip():
            break
        cells = [line[a:b].strip() for a, b in spans]
        rows[cells[0]] = dict(zip(headers, cells, strict=True))
    return rows
