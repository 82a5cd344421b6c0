"""One invocation of the table's stream mapping: what the schedule function does with a batch of
stream records, and what a repair of a batch the mapping skipped does again
(vdq.schedules.repair).

It folds the records into the window's postings and counts (vdq.schedules.postings), stamps
the older records of items that entered a done state (vdq.workflow.retention), archives what TTL
deleted (vdq.schedules.archive, with ``VDQ_ARCHIVE=s3``) and publishes the state-change events
(vdq.workflow.stateevents). A failure raises: the mapping gives the batch again, with the
window's state of before it. Each step may run twice: postings and counts are written once per
shard's checkpoint, stamping and archiving write the same again, and an event is published again
with the same ``event_id``. The window comes first: an invocation that died between its writes
finishes them when given again, before any other step can fail, so a batch the mapping gives up
on holds a window either written whole or not begun (but when the writes themselves fail each
time), which its repair tells apart (vdq.schedules.repair).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vdq.schedules import archive, postings
from vdq.workflow import retention

if TYPE_CHECKING:
    from vdq.runtime import Runtime
    from vdq.store.flushes import Flush


def is_stream_event(event: Mapping[str, Any]) -> bool:
    """A batch of the stream (a window's last invocation may hold no record: the shard's id
    says it is the stream's)."""
    records = event.get("Records")
    first = records[0] if isinstance(records, list) and records else {}
    return "shardId" in event or (isinstance(first, dict)
                                  and first.get("eventSource") == "aws:dynamodb")  # fmt: skip


def consume(event: Mapping[str, Any], runtime: Runtime, *, mark: bool = True,
            write: bool = True, marked: Flush | None = None) -> dict[str, Any]:  # fmt: skip
    """Do what a batch of the stream asks (see the module's docstring); returns what Lambda
    takes back: what was published, stamped, archived, and the window's answer. ``mark``,
    ``write`` and ``marked``: vdq.schedules.postings.consume's (a repair's)."""
    found = event.get("Records")
    records: list[dict[str, Any]] = found if isinstance(found, list) else []
    window = postings.consume(event, runtime, mark=mark, write=write, marked=marked)
    # Items that entered a done state give their older records their expiration.
    stamped = retention.stamp_changes(records, runtime)
    archived = archive.archive(records, runtime)  # TTL deletions, with VDQ_ARCHIVE=s3
    published = runtime.state_events.publish_changes(records)
    return {"published": published, "expiring": stamped, "archived": archived, **window}
