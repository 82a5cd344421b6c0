"""Fault switches of the sandboxes, for tests and demos.

``duplicate``, ``late``, ``reordered`` and ``missing`` act on the notifications a provider sends
back (Twilio status callbacks, SES events); ``throttle``, ``5xx`` and ``slow`` act on the answers
to send requests. Each hits a share ``rate`` of its chances. ``missing`` drops only in-flight
notifications (Twilio ``queued``/``sent``; SES ``Send`` only where the configuration set
subscribes it, which VDQ's does not): a lost final status is what the SMS timeout is for, and
SES would retry delivering its own events.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

KINDS = ("duplicate", "late", "reordered", "missing", "throttle", "5xx", "slow")


@dataclass
class Faults:
    kinds: frozenset[str] = frozenset()
    rate: float = 0.3
    delay_seconds: float = 2.0
    _random: random.Random = field(default_factory=random.Random, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def parse(cls, text: str, rate: float = 0.3, delay_seconds: float = 2.0) -> Faults:
        kinds = frozenset(k.strip().lower() for k in text.split(",") if k.strip())
        unknown = sorted(kinds - set(KINDS))
        if unknown:
            raise ValueError(f"unknown faults {unknown}; choose from {', '.join(KINDS)}")
        return cls(kinds, min(rate, 1.0), delay_seconds)

    def hit(self, kind: str) -> bool:
        """Whether fault ``kind`` strikes this time."""
        if kind not in self.kinds:
            return False
        with self._lock:
            return self._random.random() < self.rate

    def shuffle(self, items: list) -> list:
        with self._lock:
            out = list(items)
            self._random.shuffle(out)
            return out

    def describe(self) -> str:
        if not self.kinds:
            return "none"
        return f"{', '.join(sorted(self.kinds))} (rate {self.rate}, delay {self.delay_seconds}s)"
