"""Provider IDs: each SES message ID or Twilio SID mapped to its queue item, and orphans.

An orphan is a provider event that arrived before any item stored its ID; the mapping keeps it
(with a TTL) until an item adopts the ID.
"""

from __future__ import annotations

import json
from typing import Any

from pynamodb.exceptions import DoesNotExist, PutError, UpdateError

from vdq.core.errors import VdqError
from vdq.store.models import MAP_SK, ProviderRecord, provider_pk


class ProviderIdTaken(VdqError):
    """Another item already stores this provider ID."""

    code = "provider_id_taken"

    def __init__(self, provider_id: str, owner: ProviderRecord | None) -> None:
        super().__init__(f"provider ID {provider_id} is stored by another queue item")
        self.provider_id = provider_id
        self.owner = owner


class Keys:
    """Reads and writes of the provider-ID mappings."""

    def find_by_provider_id(self, provider_id: str) -> ProviderRecord | None:
        try:
            return ProviderRecord.get(provider_pk(provider_id), MAP_SK, consistent_read=True)
        except DoesNotExist:
            return None

    def add_orphan(self, provider_id: str, seen: ProviderRecord | None, orphan: dict[str, Any],
                   expiration: int, limit: int) -> bool:  # fmt: skip
        """Keep ``orphan`` on the mapping of ``provider_id``, which no item holds yet.

        Conditional on the mapping being as ``seen`` (one read-modify-write of the JSON list);
        False when it changed meanwhile (an item stored the ID, or another orphan came first).
        """
        old = seen.orphans if seen is not None else None
        orphans = json.loads(old) if old else []
        if any(o.get("event_id") == orphan.get("event_id") for o in orphans):
            return True
        orphans = [*orphans, orphan][-limit:]
        record = ProviderRecord(provider_pk(provider_id), MAP_SK,
                                orphans=json.dumps(orphans, separators=(",", ":")),
                                expiration=expiration)  # fmt: skip
        unchanged = (
            ProviderRecord.pk.does_not_exist() if seen is None else ProviderRecord.orphans == old
        )
        try:
            record.save(condition=ProviderRecord.item_id.does_not_exist() & unchanged)
        except PutError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def adopt_orphans(self, provider_id: str, item_id: str, attempt: int,
                      expiration: int | None = None) -> list[dict[str, Any]]:  # fmt: skip
        """Give the mapping of ``provider_id`` its item and the expiration of a mapping
        (``expiration``; None: none); returns the orphans it holds (they stay until
        ``clear_orphans``, so a crash in between loses none).

        ``ProviderIdTaken`` when another item holds the mapping.
        """
        record = ProviderRecord(provider_pk(provider_id), MAP_SK)
        condition = ProviderRecord.item_id.does_not_exist() | (ProviderRecord.item_id == item_id)
        try:
            record.update(
                actions=[ProviderRecord.item_id.set(item_id),
                         ProviderRecord.attempt.set(attempt),
                         ProviderRecord.expiration.remove() if expiration is None
                         else ProviderRecord.expiration.set(expiration)],
                condition=condition,
            )
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                raise ProviderIdTaken(provider_id, self.find_by_provider_id(provider_id)) from None
            raise
        return json.loads(record.orphans) if record.orphans else []

    def clear_orphans(self, provider_id: str, item_id: str) -> None:
        record = ProviderRecord(provider_pk(provider_id), MAP_SK)
        try:
            record.update(actions=[ProviderRecord.orphans.remove()],
                          condition=ProviderRecord.item_id == item_id)  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
