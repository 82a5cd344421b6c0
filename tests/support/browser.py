"""Headless Chromium driven over the Chrome DevTools Protocol (CDP), for the console's e2e tests.

No WebDriver: Chromium is started with ``--remote-debugging-port=0`` and its page is driven over
the DevTools WebSocket (aiohttp's client, already installed with the runtime's twilio). Clicks
and keys are real input events (``Input.dispatch*``), not ``element.click()`` from a script, so
what a test clicks is what a user can reach. Chromium comes from Debian (``make browser``).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class CdpError(Exception):
    pass


class Browser:
    def __init__(self, binary: str, workdir: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.profile = workdir / "profile"
        self.profile.mkdir(parents=True, exist_ok=True)
        self._log = (workdir / "chromium.log").open("w")
        self.process = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-sync",
             "--disable-background-networking", "--disable-component-update",
             "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
             f"--user-data-dir={self.profile}", "--window-size=1280,900", "about:blank"],
            stdout=self._log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.events: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        try:
            self._run(self._connect(self._page_socket()))
            for domain in ("Page", "Runtime", "Log"):
                self.send(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    # Plumbing.
    def _page_socket(self) -> str:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise CdpError(f"chromium exited with {self.process.returncode}")
            if port_file.exists() and port_file.read_text().strip():
                port = int(port_file.read_text().split()[0])
                targets = self._run(self._targets(port))
                pages = [t for t in targets if t.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            time.sleep(0.1)
        raise CdpError(f"chromium did not open its DevTools port in {self.timeout} s")

    @staticmethod
    async def _targets(port: int) -> list[dict[str, Any]]:
        async with aiohttp.ClientSession() as session, session.get(
            f"http://127.0.0.1:{port}/json/list"
        ) as answer:
            return list(await answer.json())

    async def _connect(self, url: str) -> None:
        self._session = aiohttp.ClientSession()
        self._socket = await self._session.ws_connect(url, max_msg_size=0)
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for message in self._socket:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            waiter = self._waiting.pop(data.get("id", -1), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(data)
            elif "method" in data:
                self.events.append(data)

    async def _send(self, method: str, params: dict[str, Any]) -> Any:
        number = next(self._ids)
        waiter = self._loop.create_future()
        self._waiting[number] = waiter
        await self._socket.send_str(json.dumps({"id": number, "method": method,
                                                "params": params}))  # fmt: skip
        return await asyncio.wait_for(waiter, self.timeout)

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(self.timeout + 5)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        answer = self._run(self._send(method, params))
        if "error" in answer:
            raise CdpError(f"{method}: {answer['error']}")
        return dict(answer.get("result") or {})

    def close(self) -> None:
        try:
            if hasattr(self, "_socket"):
                self._run(self._socket.close())
                self._run(self._session.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            self._log.close()

    # What a test does.
    def evaluate(self, expression: str) -> Any:
        answer = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)  # fmt: skip
        if "exceptionDetails" in answer:
            raise CdpError(f"{expression}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """The expression's value once it is truthy (CdpError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            try:
                # An element comes back as {} (falsy here): found is true.
                value = self.evaluate(f"(v => v instanceof Node ? true : v)({expression})")
            except CdpError:
                value = None  # the page is between documents
            if value:
                return value
            time.sleep(0.1)
        raise CdpError(f"still falsy after {timeout} s: {expression} (last: {value!r}); "
                       f"page: {self.text('body')[:2000]!r}")  # fmt: skip

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def reload(self) -> None:
        self.send("Page.reload", ignoreCache=True)
        self.wait_for("document.readyState === 'complete'")

    @contextmanager
    def scripted(self, source: str) -> Iterator[None]:
        """Every document loaded inside runs ``source`` first (a test's stand-in for the
        network: a late, failed or lost answer); after, the page is loaded again without it."""
        script = self.send("Page.addScriptToEvaluateOnNewDocument", source=source)
        try:
            yield
        finally:
            self.send("Page.removeScriptToEvaluateOnNewDocument", identifier=script["identifier"])
            self.reload()

    def text(self, selector: str) -> str:
        return str(self.evaluate(f"document.querySelector({json.dumps(selector)})"
                                 f"?.textContent ?? ''"))  # fmt: skip

    def click(self, selector: str, times: int = 1) -> None:
        """A real mouse click at the middle of the element's first box (a link that wraps has
        one per line), scrolled into view first; ``times`` 2 is a double click, its two presses
        as a mouse sends them, without waiting for what the first one does."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) "
            "return null; e.scrollIntoView({block: 'center'}); const r = "
            "e.getClientRects()[0]; return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        if not box:
            raise CdpError(f"nothing to click at {selector}")
        x, y = box
        for count in range(1, times + 1):
            for kind in ("mousePressed", "mouseReleased"):
                self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                          clickCount=count)  # fmt: skip

    def key(self, key: str) -> None:
        """A key press (Tab, Enter, Space) as a keyboard sends it."""
        codes = {"Tab": (9, ""), "Enter": (13, "\r"), " ": (32, " ")}
        number, typed = codes[key]
        down: dict[str, Any] = {"type": "keyDown", "key": key, "windowsVirtualKeyCode": number,
                                "code": "Space" if key == " " else key}  # fmt: skip
        if typed:
            down["text"] = typed
        self.send("Input.dispatchKeyEvent", **down)
        self.send("Input.dispatchKeyEvent", type="keyUp", key=key, windowsVirtualKeyCode=number,
                  code=down["code"])  # fmt: skip

    def type(self, text: str) -> None:
        self.send("Input.insertText", text=text)

    def viewport(self, width: int, height: int, mobile: bool = False) -> None:
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=mobile)  # fmt: skip

    def screenshot(self, path: Path, whole: bool = False) -> None:
        """A PNG of the viewport, or of the ``whole`` page."""
        extra: dict[str, Any] = {}
        if whole:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            extra = {"captureBeyondViewport": True, "clip": {
                "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}}
        data = self.send("Page.captureScreenshot", format="png", **extra)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def log_entries(self) -> list[dict[str, Any]]:
        """What the page logged (CSP violations and errors among them)."""
        return [e["params"]["entry"] for e in self.events if e.get("method") == "Log.entryAdded"]
