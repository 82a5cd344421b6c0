"""What refused a producer's last charge, remembered by a container for a moment.

A producer sending past its limit would otherwise cost a conditional write (and, with
VDQ_QUOTA_SHARDS, a read of every shard) on its counters for every refused request: at 1,000
requests a second that is the record's whole write capacity. The records that refused a charge
say how full each window was; while they are at most ``seconds`` old, a charge they cannot hold
is refused from them without a request, and the 429 names the counts they hold.

What they count is what the caller's window holds at least: counts only grow until the window
turns, and the records count nothing of a newer window of the caller's (the charge goes to
DynamoDB), nor an earlier release's count of another window than the one it was read for. Three
things can make room they do not show:

- a refund made in this container: it forgets them;
- a refund made in another container: seen within ``seconds`` (until then, a request the refund
  made room for may be refused);
- another function whose clock runs ahead turning the window to the next one, which counts this
  caller in it: a minute or day is not refused from them in its last ``CLOCK_SKEW_SECONDS``
  (a charge then goes to DynamoDB: in that second each refusal costs its requests again, 1 s
  in 60 for a minute limit); a second, whose whole length is within the clocks' skew, is (a
  caller behind may be refused for up to the skew at the end of a full second, as a caller
  ahead is by the records themselves).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

# How long a container trusts the records that refused a charge.
FULL_MEMO_SECONDS = 1.0
# The producers whose refusals a container remembers at once: when it holds that many fresh
# ones, another producer's refusal is not remembered (stale ones are dropped to make room).
MEMO_SIZE = 1024
# How far apart the clocks of two functions may be (Lambda's are kept by NTP, well within it).
CLOCK_SKEW_SECONDS = 1


# What the records of an earlier release counted in each window, and the clients they name, by
# the key of the window (``s#<second>``, ``d#<date>``) they were read for.
Carried = dict[str, tuple[int, tuple[str, ...]]]


class Seen(NamedTuple):
    """The counters records a refusal read (one a shard; None: none yet) and what an earlier
    release's records counted (``Carried``)."""

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
