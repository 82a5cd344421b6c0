"""The EventBridge schedules, locally: every ``VDQ_SCHEDULE_SECONDS`` each task runs once.

The deployed rules pass a constant input ``{"task": ...}`` as the whole event; so does this.
"""

from __future__ import annotations

import threading

from vdq.local.functions import Functions
from vdq.local.serving import log

TASKS = ("sms", "sweep", "purge")


class Schedules:
    def __init__(self, functions: Functions, seconds: float) -> None:
        self.functions = functions
        self.seconds = seconds
        self.runs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="schedules", daemon=True)

    def start(self) -> Schedules:
        self._thread.start()
        return self

    def halt(self) -> None:
        """Ask the loop to end after the task it is running; ``stop`` waits for it."""
        self._stop.set()

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        self._thread.join(timeout=timeout)

    def run_once(self) -> None:
        if not self.functions.available("schedule"):
            return
        for task in TASKS:
            if self._stop.is_set():
                return
            try:
                self.functions.invoke("schedule", {"task": task})
            except Exception:
                log.exception("schedule task %s failed", task)
        self.runs += 1

    def _run(self) -> None:
        while not self._stop.wait(self.seconds):
            self.run_once()
