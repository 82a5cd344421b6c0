"""The table's stream handed to the schedule function as the deployed mapping hands it: the
records its filters let through, in a tumbling window of one shard, the window's state carried
from batch to batch, and a last invocation that writes the window (vdq.schedules.postings).
In-process moto serves no stream API: its stream backend is read directly."""

from __future__ import annotations

from typing import Any

from functions.schedule import handler as schedule

from tests.support.aws import stream_records
from tests.support.results import LambdaContext
from vdq.local.pollers import passes

SHARD = "shardId-00000001700000000000-0a1b2c3d"


class Stream:
    """Reads the stream from where it last stopped; each ``window`` hands on what is new."""

    def __init__(self, table: str, shard: str = SHARD) -> None:
        self.table = table
        self.shard = shard
        self.read = 0

    def new_records(self) -> list[dict[str, Any]]:
        records = stream_records(self.table)
        fresh, self.read = records[self.read:], len(records)
        return [dict(r, eventSource="aws:dynamodb") for r in fresh if passes(r)]

    def invoke(self, records: list[dict[str, Any]], state: dict[str, Any], *,
               final: bool) -> dict[str, Any]:  # fmt: skip
        event = {"Records": records, "state": state, "shardId": self.shard,
                 "window": {"start": "2026-12-05T10:00:00Z", "end": "2026-12-05T10:01:00Z"},
                 "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/x",
                 "isFinalInvokeForWindow": final, "isWindowTerminatedEarly": False}
        return dict(schedule.handler(event, LambdaContext()))

    def window(self, batch: int = 100) -> dict[str, Any]:
        """Every new record in batches of ``batch``, then the window's last invocation; its
        answer."""
        records = self.new_records()
        state: dict[str, Any] = {}
        for start in range(0, len(records), batch):
            state = self.invoke(records[start : start + batch], state, final=False)["state"]
        return self.invoke([], state, final=True)


def posted(table: str) -> dict[str, Any]:
    """The stream's records so far, posted as a window of one shard writes them (what the sent
    list and the searches by time read); a record posted before is skipped by the shard's
    checkpoint, as a window given again skips it."""
    return Stream(table).window()
