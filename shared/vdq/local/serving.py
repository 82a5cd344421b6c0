"""What the local servers share: a threaded loopback HTTP server and a delayed-call queue."""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger("vdq.local")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def web_page_refusal(host: str | None, origin: str | None, port: int) -> str | None:
    """Why a request to a local AWS endpoint is refused (None: an SDK's request): it carries an
    ``Origin`` (a browser's cross-origin call; an AWS SDK never sends one), or its Host is not a
    loopback name (a DNS-rebinding page arrives under its own)."""
    host = (host or "").lower()
    if host not in {n for name in LOOPBACK_NAMES for n in (name, f"{name}:{port}")}:
        return f"Host {host!r} is not this machine's loopback address"
    if origin is not None:
        return "cross-origin requests are refused (the local AWS endpoints are for SDKs only)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs through ``logging`` (not stderr) and answers JSON easily."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def answer(self, status: int, body: bytes | str | Any = b"",
               headers: dict[str, str] | None = None) -> None:  # fmt: skip
        if not isinstance(body, bytes | str):
            body = json.dumps(body)
            headers = {"Content-Type": "application/json", **(headers or {})}
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


class Server:
    """A ThreadingHTTPServer on loopback, served from a daemon thread."""

    def __init__(self, name: str, handler: type[BaseHTTPRequestHandler], port: int = 0) -> None:
        self.name = name
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, name=name, daemon=True
        )

    def start(self) -> Server:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


class Later:
    """Runs calls after a delay, in order of due time, on one daemon thread."""

    def __init__(self, name: str) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._count = itertools.count()
        self._cv = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call(self, delay: float, fn: Callable[[], None]) -> None:
        with self._cv:
            heapq.heappush(self._heap, (time.monotonic() + delay, next(self._count), fn))
            self._cv.notify()

    def pending(self) -> int:
        with self._cv:
            return len(self._heap)

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._stopped and (
                    not self._heap or self._heap[0][0] > time.monotonic()
                ):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cv.wait(timeout)
                if self._stopped:
                    return
                _, _, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:
                log.exception("a delayed call failed")
