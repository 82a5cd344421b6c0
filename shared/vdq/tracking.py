"""Email tracking strategies: how a sent email carries its queue item's key to SES events.

SES events name the message by its SES message ID, which the worker stores only after SES
answers; an event can arrive first. A strategy attaches the item's key to the email and reads
it back from an event. It only proposes an item: the provider-ID check stays in VDQ's own
matching code, so no strategy can skip it.

``VDQ_EMAIL_TRACKING_STRATEGY`` names the class by dotted path. The base class is the no-op
strategy (events match by message ID only); the default carries the key in SES message tags.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Any

from vdq.errors import SettingsError
from vdq.ids import is_id

ITEM_TAG = "vdq_item"
ATTEMPT_TAG = "vdq_attempt"


class EmailTrackingStrategy:
    """Attaches nothing and finds nothing."""

    def attach(self, tags: list[dict[str, str]], item: Any) -> None:
        """Add tracking data for ``item`` to the SES message tags (``{"Name", "Value"}``)."""

    def find_queue_item(self, event: dict[str, Any]) -> tuple[str, int | None] | None:
        """(item id, attempt or None) named by a parsed SES event, or None."""
        return None


class TagEmailTrackingStrategy(EmailTrackingStrategy):
    """The item's id and attempt as the SES message tags ``vdq_item`` and ``vdq_attempt``."""

    def attach(self, tags: list[dict[str, str]], item: Any) -> None:
        tags.append({"Name": ITEM_TAG, "Value": item.id})
        tags.append({"Name": ATTEMPT_TAG, "Value": str(int(item.attempt))})

    def find_queue_item(self, event: dict[str, Any]) -> tuple[str, int | None] | None:
        mail = event.get("mail")
        tags = mail.get("tags") if isinstance(mail, dict) else None
        if not isinstance(tags, dict):
            return None
        item_id = _first(tags.get(ITEM_TAG))
        if item_id is None or not is_id(item_id):
            return None
        attempt = _first(tags.get(ATTEMPT_TAG))
        return item_id, int(attempt) if attempt is not None and attempt.isdigit() else None


def _first(values: Any) -> str | None:
    """SES sends each tag as a list of values."""
    if isinstance(values, list) and values and isinstance(values[0], str):
        return values[0]
    return values if isinstance(values, str) else None


@lru_cache(maxsize=8)
def load_strategy(dotted_path: str) -> EmailTrackingStrategy:
    """An instance of the strategy class at ``dotted_path`` (``package.module.Class``)."""
    module_name, _, class_name = dotted_path.strip().rpartition(".")
    problem = None
    try:
        cls = getattr(importlib.import_module(module_name), class_name) if module_name else None
    except (ImportError, AttributeError) as exc:
        cls, problem = None, str(exc)
    if not (isinstance(cls, type) and issubclass(cls, EmailTrackingStrategy)):
        raise SettingsError(
            f"setting VDQ_EMAIL_TRACKING_STRATEGY={dotted_path!r} must name a subclass of "
            f"vdq.tracking.EmailTrackingStrategy" + (f": {problem}" if problem else "")
        )
    return cls()
