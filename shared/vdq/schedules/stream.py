"""One invocation of the table's stream mapping: what the schedule function does with a batch of
stream records, and what a repair of a batch the mapping skipped does again
(vdq.schedules.repair).

It stamps the older records of items that entered a done state (vdq.workflow.retention),
archives what TTL deleted (vdq.schedules.archive, with ``VDQ_ARCHIVE=s3``), publishes the
state-change events (vdq.workflow.stateevents) and folds the records into the window's postings
and counts (vdq.schedules.postings). A failure raises: the mapping gives the batch again, with
the window's state of before it. Each step may run twice: stamping and archiving write the same
again, an event is published again with the same ``event_id``, and postings and counts are
written once per shard's checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vdq.schedules import archive, postings
from vdq.workflow import retention

if TYPE_CHECKING:
    from vdq.runtime import Runtime


def is_stream_event(event: Mapping[str, Any]) -> bool:
    """A batch of the stream (a window's last invocation may hold no record: the shard's id
    says it is the stream's)."""
    records = event.get("Records")
    first = records[0] if isinstance(records, list) and records else {}
    return "shardId" in event or (isinstance(first, dict)
                                  and first.get("eventSource") == "aws:dynamodb")  # fmt: skip


def consume(event: Mapping[str, Any], runtime: Runtime) -> dict[str, Any]:
    """Do what a batch of the stream asks (see the module's docstring); returns what Lambda
    takes back: what was published, stamped, archived, and the window's answer."""
    found = event.get("Records")
    records: list[dict[str, Any]] = found if isinstance(found, list) else []
    # Items that entered a done state first give their older records their expiration.
    stamped = retention.stamp_changes(records, runtime)
    archived = archive.archive(records, runtime)  # TTL deletions, with VDQ_ARCHIVE=s3
    published = runtime.state_events.publish_changes(records)
    window = postings.consume(event, runtime)
    return {"published": published, "expiring": stamped, "archived": archived, **window}
