"""moto's TransactWriteItems, without its copy of the whole table.

moto backs every transaction up by deep-copying each table it touches, once per action, and
keeps every copy for good (each model object it makes joins its class's ``instances_tracked``,
which only moto's own reset reads). A local stack that has sent a few thousand messages then
holds a copy of its table per transaction: memory and time grow with the square of the
messages sent. An artefact of the emulator, not of DynamoDB or VDQ.

``install`` keeps moto's semantics (all or nothing, stream records only for what committed)
with a snapshot of the items the transaction touches and of the length of each table's stream,
and forgets moto's tracked DynamoDB objects after each transaction. The local stack installs it;
the benchmarks install it too and put the original back (``uninstall``). Lean transactions run
one at a time in the process (``_LOCK``), whoever calls them.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Held for a whole lean transaction: the switch on moto's Table class below is the process's,
# so two threads' transactions must not overlap (one would put back the other's switch, and
# plain moto would then never take back a cancelled transaction).
_LOCK = threading.RLock()


def install() -> Any:
    """Patch moto; returns the original method (the same one however often installed)."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    original = DynamoDBBackend.transact_write_items
    if getattr(original, "_vdq_lean", False):
        return original._vdq_original  # type: ignore[attr-defined]

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        with _LOCK:
            lean(self, transact_items)

    def lean(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved: list[tuple[Any, Any, Any, Any]] = []
        streams: dict[int, tuple[Any, int]] = {}
        for entry in transact_items:
            _, op = next(iter(entry.items()))
            table = self.tables.get(op.get("TableName"))
            if table is None:
                continue
            shard = getattr(table, "stream_shard", None)
            if shard is not None:
                streams.setdefault(id(shard), (shard, len(shard.items)))
            source = op.get("Item") or op.get("Key") or {}
            if table.hash_key_attr not in source or (
                table.range_key_attr and table.range_key_attr not in source
            ):
                continue
            hk = DynamoType(source[table.hash_key_attr])
            rk = DynamoType(source[table.range_key_attr]) if table.range_key_attr else None
            current = table.items.get(hk, {}).get(rk) if rk is not None else table.items.get(hk)
            saved.append((table, hk, rk, copy.deepcopy(current)))
        had = Table.__dict__.get("__deepcopy__")
        setattr(Table, "__deepcopy__", _same_table)  # noqa: B010
        try:
            original(self, transact_items)
        except Exception:
            for table, hk, rk, item in reversed(saved):
                _restore(table, hk, rk, item)
            for shard, length in streams.values():
                del shard.items[length:]  # the records of writes taken back
            raise
        finally:
            if had is None:
                delattr(Table, "__deepcopy__")
            else:
                setattr(Table, "__deepcopy__", had)  # noqa: B010
            forget_tracked()

    transact_write_items._vdq_lean = True  # type: ignore[attr-defined]
    transact_write_items._vdq_original = original  # type: ignore[attr-defined]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    return original


@contextmanager
def installed() -> Iterator[None]:
    """Lean transactions while inside; plain moto's back after, unless they were installed
    before (the local stack's stay)."""
    from moto.dynamodb.models import DynamoDBBackend

    ours = not getattr(DynamoDBBackend.transact_write_items, "_vdq_lean", False)
    original = install()
    try:
        yield
    finally:
        if ours:
            uninstall(original)


def uninstall(original: Any) -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    with _LOCK:
        DynamoDBBackend.transact_write_items = original  # type: ignore[method-assign]
        if Table.__dict__.get("__deepcopy__") is _same_table:
            delattr(Table, "__deepcopy__")


def _same_table(table: Any, memo: Any) -> Any:
    """Table's deep copy while a lean transaction runs: the table itself."""
    return table


def forget_tracked() -> None:
    """Drop moto's list of every DynamoDB model object it made (only its reset reads them)."""
    from moto.core.model_instances import model_data

    for model in model_data.get("dynamodb", {}).values():
        model.instances_tracked.clear()  # type: ignore[attr-defined]


def _restore(table: Any, hk: Any, rk: Any, item: Any) -> None:
    if rk is None:  # a table without a sort key
        if item is None:
            table.items.pop(hk, None)
        else:
            table.items[hk] = item
        return
    if item is None:
        table.items.get(hk, {}).pop(rk, None)
    else:
        table.items.setdefault(hk, {})[rk] = item


def table_copies_on() -> bool:
    """Whether moto copies a table in a transaction (what lets plain moto take one back),
    waiting for a lean transaction in flight to end first. The tests check it after each test:
    a leak would make every later cancelled transaction half-applied."""
    from moto.dynamodb.models.table import Table

    with _LOCK:
        return "__deepcopy__" not in Table.__dict__
