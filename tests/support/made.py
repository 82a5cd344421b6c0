"""The DynamoDB operations one boto3 client made, for tests that count a path's requests or
run a race before one of them; and the quota counters an earlier release wrote."""

from __future__ import annotations

from typing import Any

import boto3


class Calls:
    """The DynamoDB operations a client made, and a hook run before one of them."""

    def __init__(self, client: Any) -> None:
        self.made: list[str] = []
        self.before: dict[int, Any] = {}  # the n-th call (from 1) -> what to run first
        client.meta.events.register("before-call.dynamodb.*", self._note)

    def _note(self, model: Any, **_: Any) -> None:
        self.made.append(model.name)
        run = self.before.pop(len(self.made), None)
        if run is not None:
            run()


def earlier_release_counted(table: str, producer: str, window: Any, used: int,
                            members: tuple[str, ...] = ()) -> None:  # fmt: skip
    """A quota counters record of a release that kept one a window (sk the window's key), as it
    wrote it."""
    item = {"pk": {"S": f"QUOTA#{producer}"}, "sk": {"S": window.sk}, "used": {"N": str(used)},
            "expiration": {"N": str(window.ends_at + 60)}}  # fmt: skip
    if members:
        item["members"] = {"SS": list(members)}
    boto3.client("dynamodb").put_item(TableName=table, Item=item)
