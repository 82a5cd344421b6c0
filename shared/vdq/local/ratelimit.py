"""The sandboxes' sending rate: a token bucket per sender, as the providers enforce theirs.

A bucket fills at ``rate`` per second and holds one second's worth plus one, so a sender paced
at the rate is not refused for a few milliseconds of jitter, and one that sends faster is
refused past a short burst. ``None``: no limit (the default: the sandboxes take whatever tests
send).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimit:
    def __init__(self, rate: float | None,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.rate = rate
        self.capacity = rate + 1.0 if rate else 0.0
        self.accepted = 0
        self.refused = 0
        self.by_sender: dict[str, tuple[int, int]] = {}  # sender -> (accepted, refused)
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # sender -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, sender: str = "") -> bool:
        """Whether one more send from ``sender`` fits the rate now (and count it)."""
        if not self.rate:
            return True
        with self._lock:
            now = self._clock()
            tokens, at = self._buckets.get(sender, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - at) * self.rate)
            accepted, refused = self.by_sender.get(sender, (0, 0))
            if tokens < 1.0:
                self._buckets[sender] = (tokens, now)
                self.refused += 1
                self.by_sender[sender] = (accepted, refused + 1)
                return False
            self._buckets[sender] = (tokens - 1.0, now)
            self.accepted += 1
            self.by_sender[sender] = (accepted + 1, refused)
            return True

    def describe(self) -> str:
        return f"{self.rate:g}/s" if self.rate else "unlimited"
