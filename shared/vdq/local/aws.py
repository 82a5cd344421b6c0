"""The local stack's AWS endpoint: moto's server, closed to web pages.

moto's own ThreadedMotoServer answers every origin with CORS headers, so any web page a developer
visits could read the local table or publish fake SES events. This serves the same moto
application behind a guard that answers 403, before moto sees the request, when

- the Host header is not a loopback name (``127.0.0.1``, ``localhost``, ``[::1]``, with or
  without this server's port): a DNS-rebinding page reaches us under its own name;
- the request carries an ``Origin`` header (a browser's cross-origin call, the CORS preflight
  included; an AWS SDK never sends one),

and drops every ``Access-Control-*`` header from moto's answers.

DynamoDB and SQS answer one request at a time (``Serial``). moto's backends are not
thread-safe: its TransactWriteItems deep-copies the table while another request thread changes
it (a 500 where AWS never fails), and a condition checked in one thread can be overtaken by a
write in another before its own write lands; its DeleteMessage rebuilds the queue's message list
from a copy, dropping a message another thread sent meanwhile (a send message lost: an item left
``queued``). DynamoDB makes every conditional write atomic and SQS loses no message it accepted;
the product relies on both, so the local endpoint must too. ReceiveMessage stays outside (it
long-polls, and only adds to what it reads).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from vdq.local.serving import web_page_refusal

StartResponse = Callable[..., Any]


class Guard:
    """WSGI middleware: loopback Host only, no Origin, no CORS headers out."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]],
                 port: int) -> None:  # fmt: skip
        self.app = app
        self.port = port

    def refusal(self, environ: dict[str, Any]) -> str | None:
        return web_page_refusal(environ.get("HTTP_HOST"), environ.get("HTTP_ORIGIN"), self.port)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        reason = self.refusal(environ)
        if reason is not None:
            body = f"403 Forbidden: {reason}\n".encode()
            start_response("403 Forbidden", [("Content-Type", "text/plain"),
                                             ("Content-Length", str(len(body)))])  # fmt: skip
            return [body]

        def strip_cors(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
            kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
            return start_response(status, kept, *exc)

        return self.app(environ, strip_cors)


# The JSON protocol's target prefixes of the services whose requests ``Serial`` serializes.
SERIAL_TARGETS = ("DynamoDB_20120810.", "DynamoDBStreams_20120810.", "AmazonSQS.")
UNSERIALIZED = ("AmazonSQS.ReceiveMessage",)


class Serial:
    """WSGI middleware: one DynamoDB, DynamoDB Streams or SQS request at a time, whole.

    One lock for the process, not one per server: moto's backends are the process's, and a
    stopped server's request thread may still be finishing when the next server serves."""

    _lock = threading.Lock()

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self.app = app
        self.requests = 0  # serialized so far, for tests

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET") or ""
        if not target.startswith(SERIAL_TARGETS) or target in UNSERIALIZED:
            return self.app(environ, start_response)
        with self._lock:
            self.requests += 1
            # The answer is produced in full inside the lock: moto builds it eagerly anyway.
            return list(self.app(environ, start_response))


class LocalAws:
    """moto on ``127.0.0.1:port`` behind the Guard, DynamoDB and SQS serialized, served from a
    daemon thread."""

    def __init__(self, port: int) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        from vdq.local import motolean

        motolean.install()  # moto would keep a copy of the table per transaction
        self.serial = Serial(DomainDispatcherApplication(create_backend_app))
        app = Guard(self.serial, port)
        self.server = make_server("127.0.0.1", port, app, threaded=True,
                                  request_handler=MotoRequestHandler)  # fmt: skip
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="aws",
                                        daemon=True)  # fmt: skip

    def start(self) -> LocalAws:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)
