"""Load a page in headless Chromium over the DevTools protocol; collect console errors and requests.

Chromium is started with ``--remote-debugging-port=0``; the port it picked is read from
``DevToolsActivePort`` in its profile directory, and the page target is driven over a WebSocket
(``websocket-client``, a dependency of the ``kubernetes`` client). Collected: ``Runtime.exceptionThrown``,
``Runtime.consoleAPICalled`` of type error/assert, ``Log.entryAdded`` at level error, and every
network request whose URL is not ``file:``, ``data:`` or ``blob:`` (a self-contained page makes none).
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websocket

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-allow-origins=*",
    "--window-size=1400,1000",
)


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageResult:
    errors: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    plots: int = 0
    plots_drawn: int = 0
    title: str = ""


class _Session:
    def __init__(self, ws_url: str) -> None:
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        ident = self.next_id
        self.ws.settimeout(120)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def pump(self, until: str | None, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.ws.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                msg = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                return
            self.events.append(msg)
            if until is not None and msg.get("method") == until:
                return


def _port(profile: Path, proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if marker.exists():
            lines = marker.read_text().splitlines()
            if lines and lines[0].isdigit():
                return int(lines[0])
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode}")
        time.sleep(0.05)
    raise TimeoutError("chromium did not open its DevTools port")


def load_page(
    binary: str, page: Path, profile: Path, screenshot: Path, *, settle_s: float = 1.0
) -> PageResult:
    profile.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [binary, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port = _port(profile, proc, 60)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = json.loads(resp.read())
        target = next(t for t in targets if t.get("type") == "page")
        session = _Session(target["webSocketDebuggerUrl"])
        for domain in ("Runtime", "Log", "Page", "Network"):
            session.call(f"{domain}.enable")
        session.call("Page.navigate", url=page.resolve().as_uri())
        session.pump("Page.loadEventFired", 60)
        session.pump(None, settle_s)  # plots render after load; late errors land here
        result = PageResult()
        counts = session.call(
            "Runtime.evaluate",
            expression="JSON.stringify([document.querySelectorAll('.js-plotly-plot').length,"
            "document.querySelectorAll('.js-plotly-plot .main-svg').length, document.title])",
            returnByValue=True,
        )
        plots, drawn, title = json.loads(counts["result"]["value"])
        result.plots, result.plots_drawn, result.title = plots, drawn, title
        size = session.call("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 12000), "scale": 1}
        shot = session.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        for event in session.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                result.errors.append(
                    f"exception: {details.get('exception', {}).get('description') or details.get('text')}"
                )
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                result.errors.append(f"console.{params['type']}: {args}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                result.errors.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Network.requestWillBeSent":
                url = params.get("request", {}).get("url", "")
                if not url.startswith(("file:", "data:", "blob:", "about:")):
                    result.external_requests.append(url)
        with contextlib.suppress(RuntimeError, websocket.WebSocketException, OSError):
            session.call("Browser.close")
        session.ws.close()
        return result
    finally:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
