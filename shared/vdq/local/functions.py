"""The Lambda handlers the local stack runs, imported lazily from ``functions/<name>/handler.py``.

A handler whose module is not there (yet) is reported as missing. One lock per function and
event source (``lane``) keeps each source to one invocation at a time: a poller is one Lambda
event source mapping at a concurrency of one, and two sources of one function (the schedule's
timer and its stream mapping) run side by side, as Lambda runs them in separate instances.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vdq.core import resources
from vdq.local.serving import log

REPO = Path(__file__).resolve().parents[3]
NAMES = ("enqueue", "operator", "webhook", "send", "schedule")
TIMEOUT_SECONDS = {  # the deployed functions' timeouts (infra.config.DEFAULT_TIMEOUT_SECONDS)
    "enqueue": resources.API_FUNCTION_TIMEOUT_SECONDS,
    "operator": resources.API_FUNCTION_TIMEOUT_SECONDS,
    "webhook": resources.RESULTS_FUNCTION_TIMEOUT_SECONDS,
    "send": resources.SEND_FUNCTION_TIMEOUT_SECONDS,
    "schedule": resources.SCHEDULE_FUNCTION_TIMEOUT_SECONDS,
}


@dataclass
class LambdaContext:
    """The attributes Powertools and handlers read from a Lambda context."""

    function_name: str
    memory_limit_in_mb: int = 256
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = ""
    log_stream_name: str = "local"
    timeout_seconds: float = resources.RESULTS_FUNCTION_TIMEOUT_SECONDS
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        """The function's timeout less the time since the invocation started (not enforced)."""
        left = self.timeout_seconds - (time.monotonic() - self.started)
        return max(0, int(left * 1000))


class Functions:
    def __init__(self) -> None:
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._handlers: dict[str, Any] = {}
        self._broken: dict[str, str] = {}

    def path(self, name: str) -> Path:
        return REPO / "functions" / name / "handler.py"

    def available(self, name: str) -> bool:
        return self._load(name) is not None

    def status(self) -> dict[str, str]:
        out = {}
        for name in NAMES:
            handler = self._load(name)
            out[name] = "ready" if handler else self._broken.get(name, "missing")
        return out

    def _load(self, name: str) -> Any:
        if name in self._handlers:
            return self._handlers[name]
        if not self.path(name).exists():
            return None
        try:
            module = importlib.import_module(f"functions.{name}.handler")
        except Exception as exc:  # a half-written handler must not stop the stack
            if self._broken.get(name) != f"broken: {exc}":
                log.error("functions/%s/handler.py does not import: %s", name, exc)
            self._broken[name] = f"broken: {exc}"
            return None
        self._broken.pop(name, None)
        self._handlers[name] = module.handler
        return module.handler

    def invoke(self, name: str, event: dict[str, Any], lane: str = "") -> Any:
        """Run the handler as Lambda would; LookupError when it is not there."""
        handler = self._load(name)
        if handler is None:
            raise LookupError(f"functions/{name}/handler.py is {self._broken.get(name, 'missing')}")
        with self._locks_lock:
            lock = self._locks.setdefault((name, lane), threading.Lock())
        with lock:
            return handler(event, LambdaContext(f"vdq-local-{name}",
                                                timeout_seconds=TIMEOUT_SECONDS[name]))
