"""What refused a producer's last charge, remembered by a container for a moment.

A producer sending past its limit would otherwise cost a conditional write (and, with
VDQ_QUOTA_SHARDS, a read of every shard) on its counters for every refused request: at 1,000
requests a second that is the record's whole write capacity. The records that refused a charge
say how full each window was; while they are at most ``seconds`` old, a charge they cannot hold
is refused from them without a request, and the 429 names the counts they hold.

They are a lower bound of the counts while no item is taken back: counts only grow until a
window turns (the records then count nothing of the caller's newer window: the charge goes to
DynamoDB). A refund made in this container forgets them; one made in another container is seen
within ``seconds``: until then, a request the refund made room for may be refused (429).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

# How long a container trusts the records that refused a charge.
FULL_MEMO_SECONDS = 1.0
# The producers whose refusals a container remembers at once (stale ones dropped first).
MEMO_SIZE = 1024


# What the records of an earlier release counted in each window, and the clients they name.
Carried = dict[str, tuple[int, tuple[str, ...]]]


class Seen(NamedTuple):
    """The counters records a refusal read (one a shard; None: none yet) and what an earlier
    release's records counted (window name -> count, the clients they name)."""

    rows: list[dict[str, Any] | None]
    carried: Carried


class Refusals:
    """Each producer's last refusal in this container, while it is fresh."""

    def __init__(self, seconds: float = FULL_MEMO_SECONDS,
                 monotonic: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.seconds = seconds
        self._monotonic = monotonic
        # producer -> (when, what the refusal read, the refunds made before its charge began)
        self._last: dict[str, tuple[float, Seen, int]] = {}
        self._refunds = 0
        self._lock = threading.Lock()

    def mark(self) -> int:
        """Taken as a charge begins, and given to ``remember``: a refund made after it may
        have made room its reads do not show."""
        return self._refunds

    def refunded(self) -> None:
        """An item was taken back in this container: what earlier refusals read is stale."""
        with self._lock:
            self._refunds += 1

    def remember(self, producer: str, seen: Seen, mark: int) -> None:
        """What refused a charge of ``producer`` that began at ``mark``."""
        if self.seconds <= 0:
            return
        now = self._monotonic()
        with self._lock:
            if len(self._last) >= MEMO_SIZE:
                for stale in [p for p, (at, _, _) in self._last.items()
                              if now - at >= self.seconds]:  # fmt: skip
                    del self._last[stale]
            if len(self._last) < MEMO_SIZE or producer in self._last:
                self._last[producer] = (now, seen, mark)

    def recall(self, producer: str) -> Seen | None:
        """What the last refusal of ``producer`` read, while it is fresh: at most ``seconds``
        old, and no refund made here since its charge began."""
        found = self._last.get(producer)
        if found is None:
            return None
        at, seen, mark = found
        if self._monotonic() - at < self.seconds and mark == self._refunds:
            return seen
        with self._lock:
            if self._last.get(producer) is found:
                del self._last[producer]
        return None
