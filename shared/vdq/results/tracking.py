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

from vdq.core.errors import SettingsError
from vdq.core.ids import is_id

ITEM_TAG = "vdq_item"
ATTEMPT_TAG = "vdq_attempt"
MAX_ATTEMPT_DIGITS = 9


class EmailTrackingStrategy:
    """Attaches nothing and finds nothing."""

    # True when every SES event of an email it sent names the email's queue item: such events
    # are matched by the item's key, and the item's SES message ID needs no mapping record.
    keyed = False

    def attach(self, tags: list[dict[str, str]], item: Any) -> None:
        """Add tracking data for ``item`` to the SES message tags (``{"Name", "Value"}``)."""

    def find_queue_item(self, event: dict[str, Any]) -> tuple[str, int | None] | None:
        """(item id, attempt or None) named by a parsed SES event, or None."""
        return None


class TagEmailTrackingStrategy(EmailTrackingStrategy):
    """The item's id and attempt as the SES message tags ``vdq_item`` and ``vdq_attempt``."""

    keyed = True  # SES puts a message's tags on every event it publishes for it

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
        if attempt is None or not is_attempt(attempt):
            return item_id, None
        return item_id, int(attempt)


def is_attempt(text: str) -> bool:
    """Whether ``text`` is an attempt number as VDQ writes one (ASCII digits, a few of them;
    never thousands, which ``int`` refuses)."""
    return text.isascii() and text.isdigit() and len(text) <= MAX_ATTEMPT_DIGITS


def _first(values: Any) -> str | None:
    """SES sends each tag as a list of values."""
    if isinstance(values, list) and values and isinstance(values[0], str):
        return values[0]
    return values if isinstance(values, str) else None


def strategy_for(runtime: Any) -> EmailTrackingStrategy:
    """The runtime's strategy: ``runtime.overrides["email_tracking"]`` (tests) or the setting's."""
    override = runtime.overrides.get("email_tracking")
    return override or load_strategy(runtime.settings.email_tracking_strategy)


def tags_for(item: Any, runtime: Any) -> list[dict[str, str]]:
    """The SES message tags the runtime's strategy attaches to ``item``'s email."""
    tags: list[dict[str, str]] = []
    strategy_for(runtime).attach(tags, item)
    return tags


def maps_provider_id(item: Any, runtime: Any) -> bool:
    """Whether a write that stores the provider ID of ``item`` also writes a mapping record
    for it (in the same transaction). Results that name no item are found through it: only an
    email sent by a strategy that does not key its events needs one. A keyed email's events,
    and every Twilio status callback (its URL carries ``queue_item`` and ``attempt``), name
    their item; polling reads the SID the item stores. The mapping would be two write units
    spent on a record never read. (Items stored before keep theirs, and it still matches.)"""
    return item.method == "email" and not strategy_for(runtime).keyed


def defers_acceptance(item: Any, runtime: Any) -> bool:
    """Whether the send worker leaves the record of the provider's acceptance to the item's
    first provider event (or its check: vdq.results.checks), which stores the ID with its
    ``await`` entry: a keyed email, and an SMS whose status callbacks come (not polling). An
    event that cannot name its item (an untagged email), or no event at all (polling), needs
    the acceptance written at once."""
    if item.method == "email":
        return strategy_for(runtime).keyed
    return not runtime.settings.twilio_polling


# The module's path before the package had subpackages: a deployment configured with it keeps
# its strategy.
_FORMER_MODULE = "vdq.tracking"


@lru_cache(maxsize=8)
def load_strategy(dotted_path: str) -> EmailTrackingStrategy:
    """An instance of the strategy class at ``dotted_path`` (``package.module.Class``)."""
    module_name, _, class_name = dotted_path.strip().rpartition(".")
    if module_name == _FORMER_MODULE:
        module_name = __name__
    problem = None
    try:
        cls = getattr(importlib.import_module(module_name), class_name) if module_name else None
    except (ImportError, AttributeError) as exc:
        cls, problem = None, str(exc)
    if not (isinstance(cls, type) and issubclass(cls, EmailTrackingStrategy)):
        raise SettingsError(
            f"setting VDQ_EMAIL_TRACKING_STRATEGY={dotted_path!r} must name a subclass of "
            f"vdq.results.tracking.EmailTrackingStrategy" + (f": {problem}" if problem else "")
        )
    return cls()
