"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol, and a static
file server for a built site: what the site's browser test needs, nothing more.

Chromium is started with ``--remote-debugging-port=0`` and says on stderr where its
DevTools socket listens; commands go over one page's WebSocket (websocket-client).
"""

from __future__ import annotations

import base64
import functools
import http.server
import itertools
import json
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import websocket

_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


def find_chromium() -> str | None:
    """The Chromium binary on PATH (Debian names it ``chromium``), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@contextmanager
def serve_directory(root: Path) -> Iterator[str]:
    """Serve ``root`` over HTTP on a free loopback port; yields the base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class Page:
    """One browser tab: navigate, evaluate JavaScript, wait for a condition, screenshot."""

    def __init__(self, socket: websocket.WebSocket) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events on the way are skipped)."""
        command_id = next(self._ids)
        self._socket.send(json.dumps({"id": command_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv())
            if message.get("id") == command_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when a promise)."""
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, *, timeout: float) -> Any:
        """Poll a JavaScript expression until it is truthy; its value, or TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression!r} still false after {timeout} s")
            time.sleep(0.05)

    def open(self, url: str, *, timeout: float) -> None:
        """Navigate to ``url`` and wait until its document has loaded."""
        self.send("Page.navigate", url=url)
        self.wait_for(
            f"document.readyState === 'complete' && location.href === {json.dumps(url)}",
            timeout=timeout,
        )

    def screenshot(self, path: Path) -> Path:
        """Save the viewport as a PNG."""
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path


@contextmanager
def chromium_page(
    binary: str, profile: Path, *, width: int = 1280, height: int = 900
) -> Iterator[Page]:
    """A headless Chromium with one tab of the given size; stopped on exit."""
    process = subprocess.Popen(
        [
            binary,
            "--headless",
            "--no-sandbox",  # root in CI, where Chromium's sandbox refuses to start
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        browser_url = None
        for line in process.stderr:  # the line comes within a second or two of the start
            found = _LISTENING.search(line)
            if found:
                browser_url = found[1]
                break
        if browser_url is None:
            raise RuntimeError(f"{binary} exited ({process.wait()}) without a DevTools socket")
        threading.Thread(target=process.stderr.read, daemon=True).start()  # keep it drained
        port = browser_url.split("/")[2]
        with urllib.request.urlopen(f"http://{port}/json/list", timeout=30) as answer:
            targets = json.load(answer)
        page_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        socket = websocket.create_connection(page_url, timeout=60)
        try:
            page = Page(socket)
            page.send("Page.enable")
            page.send("Runtime.enable")
            yield page
        finally:
            socket.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
