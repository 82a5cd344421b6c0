"""What a producer's quota counters record holds, and the UpdateItem that counts into it.

One record per producer (pk ``QUOTA#<producer>``, sk ``Q``; with VDQ_QUOTA_SHARDS, shard i of
them is ``QUOTA<i>#<producer>``) holds each limit's current window: its key (``<kind>w``:
``s#<second>``, ``m#<minute>``, ``d#<date>``) and its count (``<kind>n``); a group's record also
names the clients charged to it in its longest window (``<kind>c``: a 6-byte digest of each, so
a group of many clients keeps the record small). ``Update`` builds one conditional write that
counts a request into every window (or turns an older one to the caller's), so that a charge is
one write unit whatever the number of limits. How charges use it: ``vdq.store.counters``.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

SK = "Q"
DAY = 86_400
KINDS = ("s", "m", "d")  # the windows a record holds, shortest first
_SPANS = {"s": 1, "m": 60}


# What every quota_pk starts with, whatever its shard (shard 0 has no number).
QUOTA_KEY = re.compile(r"^QUOTA\d*#")


def quota_pk(producer: str, shard: int = 0) -> str:
    """The partition key of a producer's counters record, or of its shard ``shard`` (one of
    VDQ_QUOTA_SHARDS; shard 0 is the record of one shard, so raising the setting keeps it)."""
    return f"QUOTA#{producer}" if shard == 0 else f"QUOTA{shard}#{producer}"


def share(limit: int, shard: int, shards: int) -> int:
    """What shard ``shard`` of ``shards`` may count of ``limit``: the shares sum to it."""
    return limit // shards + (1 if shard < limit % shards else 0)


def window_key(kind: str, second: int) -> tuple[str, int]:
    """The key of the window of ``kind`` (``s``, ``m``, ``d``) that holds the epoch
    ``second``, and its end (epoch seconds)."""
    if kind == "d":
        start = second - second % DAY
        return f"d#{datetime.fromtimestamp(start, UTC).date().isoformat()}", start + DAY
    index = second // _SPANS[kind]
    return f"{kind}#{index}", (index + 1) * _SPANS[kind]


def key_end(key: str) -> int:
    """When the window named ``key`` ends (epoch seconds)."""
    kind, _, rest = key.partition("#")
    if kind == "d":
        return int(datetime.fromisoformat(rest).replace(tzinfo=UTC).timestamp()) + DAY
    return (int(rest) + 1) * _SPANS[kind]


@dataclass(frozen=True)
class Window:
    """One fixed window of one limit: its name (``per_minute``), record key, limit and end."""

    name: str
    sk: str
    limit: int
    ends_at: int  # epoch seconds
    # Of a charge's windows: the shard record it counted in, and how many of the charge's
    # items (None: all of them; a charge spread over shards counts a part in each).
    shard: int = 0
    amount: int | None = None

    @property
    def kind(self) -> str:
        """``s``, ``m`` or ``d``: the record's attributes of this limit are named after it."""
        return self.sk.partition("#")[0]


def order(window_key: str) -> tuple[int, str]:
    """A window key's place in time among its kind's (a second's or minute's number, a date)."""
    number = window_key.partition("#")[2]
    return len(number), number


def held_key(item: dict[str, Any], window: Window) -> str | None:
    """The key of the window of ``window``'s kind the record holds, when it is that window or
    a newer one (another function's clock runs ahead: it counts for the caller's); else None."""
    held = item.get(f"{window.kind}w", {}).get("S")
    return held if held and order(held) >= order(window.sk) else None


def count_in(item: dict[str, Any], window: Window) -> int:
    """What ``item`` (a counters record, wire shape) counts in ``window`` (0: it holds an
    older window of that kind, or none)."""
    if held_key(item, window) is None:
        return 0
    return int(item.get(f"{window.kind}n", {}).get("N", "0"))


def member_digest(client: str) -> str:
    """How a group's record names a client charged to it: 8 characters (6 bytes of a hash)."""
    digest = hashlib.blake2b(client.encode(), digest_size=6).digest()
    return base64.urlsafe_b64encode(digest).decode()


def members_window(windows: Sequence[Window]) -> Window:
    """The window whose record attributes name a group's clients: the longest kind (by kind,
    not by end: in the last second of a minute, its second and minute end together)."""
    return max(windows, key=lambda w: KINDS.index(w.kind))


def caller_second(windows: Sequence[Window]) -> int:
    """The caller's second, as its windows say (its shortest window ends within a minute)."""
    return min(w.ends_at for w in windows) - 1


def expiration_of(windows: Sequence[Window]) -> int:
    """Two days past the start of the caller's UTC day: past the end of any window a caller
    within a day of it charges."""
    now = caller_second(windows)
    return now - now % DAY + 2 * DAY


class Update:
    """A charge's UpdateItem, built a window at a time."""

    def __init__(self, count: int, member: str | None, expiration: int) -> None:
        self.count = count
        self.member = member
        self.names = {"#exp": "expiration"}
        self.values: dict[str, Any] = {":exp": {"N": str(expiration)}, ":n": {"N": str(count)}}
        self.sets: list[str] = ["#exp = :exp"]
        self.adds: list[str] = []
        self.removes: list[str] = []
        self.conditions: list[str] = []
        if member is not None:
            self.values[":member"] = {"SS": [member]}

    def _name(self, w: Window, part: str) -> str:
        self.names[f"#{w.kind}{part}"] = f"{w.kind}{part}"
        return f"#{w.kind}{part}"

    def _amount(self, w: Window, amount: int | None) -> tuple[int, str]:
        """The items counted in ``w`` (the charge's count unless a part of it) and the
        placeholder of that number."""
        if amount is None or amount == self.count:
            return self.count, ":n"
        self.values[f":{w.kind}add"] = {"N": str(amount)}
        return amount, f":{w.kind}add"

    def count_into(self, w: Window, key: str, members: bool, amount: int | None = None) -> None:
        """Add the count (or ``amount`` of it) to the window the record holds (``key``), if
        it has room; ``members``: this window names the group's clients."""
        amount, placeholder = self._amount(w, amount)
        self.values[f":{w.kind}held"] = {"S": key}
        self.values[f":{w.kind}room"] = {"N": str(w.limit - amount)}
        self.conditions.append(
            f"{self._name(w, 'w')} = :{w.kind}held AND {self._name(w, 'n')} <= :{w.kind}room"
        )
        self.adds.append(f"{self._name(w, 'n')} {placeholder}")
        if members and self.member is not None:
            self.adds.append(f"{self._name(w, 'c')} :member")

    def turn(self, w: Window, held: str | None, start: int, members: Sequence[str] | None,
             amount: int | None = None) -> None:  # fmt: skip
        """Start ``w`` in place of the older window ``held`` (None: the record holds none of
        this limit) at ``start`` (what a record of an earlier release counted) + the count
        (or ``amount`` of it); ``members`` (None: this window does not name the group's
        clients): those it starts with, besides the caller's."""
        amount = self.count if amount is None else amount
        self.values[f":{w.kind}new"] = {"S": w.sk}
        self.values[f":{w.kind}start"] = {"N": str(start + amount)}
        self.sets += [
            f"{self._name(w, 'w')} = :{w.kind}new",
            f"{self._name(w, 'n')} = :{w.kind}start",
        ]
        if held:
            self.values[f":{w.kind}held"] = {"S": held}
            self.conditions.append(f"{self._name(w, 'w')} = :{w.kind}held")
        else:
            self.conditions.append(f"attribute_not_exists({self._name(w, 'w')})")
        joined = sorted({*(members or ()), *([self.member] if self.member is not None else [])})
        if members is not None and joined:
            self.values[f":{w.kind}members"] = {"SS": joined}
            self.sets.append(f"{self._name(w, 'c')} = :{w.kind}members")
        else:
            self.removes.append(self._name(w, "c"))

    def request(self) -> dict[str, Any]:
        expression = "SET " + ", ".join(self.sets)
        if self.adds:
            expression += " ADD " + ", ".join(self.adds)
        if self.removes:
            expression += " REMOVE " + ", ".join(self.removes)
        condition = " AND ".join(f"({c})" for c in self.conditions)
        used = f"{expression} {condition}"
        return {
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": self.names,
            "ExpressionAttributeValues": {
                k: v for k, v in self.values.items() if mentions(used, k)
            },
        }


def mentions(text: str, placeholder: str) -> bool:
    """``placeholder`` (``:n``) appears in ``text`` as itself, not as the start of another."""
    return re.search(re.escape(placeholder) + r"(?![A-Za-z0-9_])", text) is not None
