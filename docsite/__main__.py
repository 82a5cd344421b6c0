"""``python -m docsite``: write the committed generated pages (docs/reference/api.md and
docs/reference/settings.md) from the code; run it after changing a setting, a deploy choice or
the OpenAPI document."""

from __future__ import annotations

from docsite.pages import write

changed = write()
print("\n".join(f"wrote {path}" for path in changed) or "the generated pages are current")
