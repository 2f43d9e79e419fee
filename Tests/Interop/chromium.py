"""Headless Chromium as an interop peer, driven over the DevTools protocol.

    async with Chromium() as browser:
        page = await browser.open_peer_page()
        sdp = await page.call("makeOffer", {"send": True, "recv": True})
        ...
        stats = await page.call("stats")

The page (pages/peer.html) is served over http://127.0.0.1 by a tiny aiohttp
server: getUserMedia needs a secure-ish origin, which loopback http is and
file:// is not reliably.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import websockets
from aiohttp import web

from harness import kill_process

PAGES = Path(__file__).resolve().parent / "pages"

CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
    "--allow-loopback-in-peer-connection",
    "--disable-features=WebRtcHideLocalIpsWithMdns",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--mute-audio",
    "--autoplay-policy=no-user-gesture-required",
]


class CDPError(RuntimeError):
    pass


class Page:
    """One DevTools page session: `evaluate` and `call` into the page's JS."""

    def __init__(self, ws: Any, target_id: str):
        self._ws = ws
        self.target_id = target_id
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self.console: list[str] = []
        self._reader = asyncio.ensure_future(self._read_loop())

    async def _read_loop(self) -> None:
        try:
            async for raw in self._ws:
                message = json.loads(raw)
                if "id" in message:
                    future = self._pending.pop(message["id"], None)
                    if future is not None and not future.done():
                        future.set_result(message)
                elif message.get("method") == "Runtime.consoleAPICalled":
                    args = message["params"].get("args", [])
                    self.console.append(
                        " ".join(str(a.get("value", a.get("description", ""))) for a in args)
                    )
                elif message.get("method") == "Runtime.exceptionThrown":
                    details = message["params"].get("exceptionDetails", {})
                    self.console.append(f"exception: {details.get('text')}")
        except (websockets.ConnectionClosed, asyncio.CancelledError):
            pass
        finally:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(CDPError("DevTools connection closed"))
            self._pending.clear()

    async def send(self, method: str, params: dict | None = None, timeout: float = 30) -> dict:
        message_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[message_id] = future
        await self._ws.send(json.dumps({"id": message_id, "method": method, "params": params or {}}))
        try:
            reply = await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(message_id, None)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def evaluate(self, expression: str, timeout: float = 30) -> Any:
        """Evaluates `expression` (awaiting a returned promise) and returns its JSON value."""
        result = await self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            description = details.get("exception", {}).get("description") or details.get("text")
            raise CDPError(f"page error in {expression[:80]!r}: {description}")
        return result.get("result", {}).get("value")

    async def call(self, function: str, *args: Any, timeout: float = 30) -> Any:
        """Calls a page function with JSON arguments: `await page.call("acceptOffer", sdp)`."""
        rendered = ", ".join(json.dumps(a) for a in args)
        return await self.evaluate(f"{function}({rendered})", timeout=timeout)

    async def navigate(self, url: str) -> None:
        """Loads `url` in this tab (the same call as firefox.Page.navigate)."""
        await self.send("Page.enable")
        await self.send("Page.navigate", {"url": url})

    async def capture_png(self) -> bytes:
        shot = await self.send("Page.captureScreenshot", {"format": "png"}, timeout=30)
        return base64.b64decode(shot["data"])

    async def wait_loaded(self, timeout: float = 15) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                if await self.evaluate("document.readyState === 'complete' && typeof makeOffer === 'function'", timeout=5):
                    return
            except CDPError:
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("page did not load")
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        self._reader.cancel()
        try:
            await asyncio.wait_for(self._ws.close(), 5)
        except Exception:
            pass


class Chromium:
    """Launches headless Chromium with fake media and serves pages/ on loopback."""

    def __init__(self, binary: str | None = None, extra_flags: list[str] | None = None):
        self.binary = binary or os.environ.get("CHROMIUM_BIN") or shutil.which("chromium") or "chromium"
        self.extra_flags = extra_flags or []
        self.proc: subprocess.Popen | None = None
        self.profile: str | None = None
        self.devtools_port = 0
        self.pages: list[Page] = []
        self._http: aiohttp.ClientSession | None = None
        self._site_runner: web.AppRunner | None = None
        self.page_base = ""
        self.log_path: str | None = None

    async def __aenter__(self) -> "Chromium":
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def start(self, timeout: float = 30) -> None:
        await self._serve_pages()
        self.profile = tempfile.mkdtemp(prefix="understudy-chromium-")
        self.log_path = os.path.join(self.profile, "chromium.log")
        args = [
            self.binary, *CHROMIUM_FLAGS, *self.extra_flags,
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={self.profile}",
            "about:blank",
        ]
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                args, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
            )
        # Port 0: Chromium picks a free port and writes it to DevToolsActivePort.
        port_file = Path(self.profile) / "DevToolsActivePort"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited {self.proc.returncode}: {self.log_tail()}")
            if port_file.exists():
                text = port_file.read_text().split("\n")
                if text and text[0].strip().isdigit():
                    self.devtools_port = int(text[0])
                    break
            await asyncio.sleep(0.1)
        else:
            raise TimeoutError(f"chromium did not open DevTools: {self.log_tail()}")
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        # Wait until the HTTP discovery endpoint answers.
        while True:
            try:
                async with self._http.get(f"http://127.0.0.1:{self.devtools_port}/json/version") as r:
                    if r.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            if loop.time() > deadline:
                raise TimeoutError("DevTools HTTP endpoint did not answer")
            await asyncio.sleep(0.1)

    async def _serve_pages(self) -> None:
        app = web.Application()
        app.router.add_static("/", str(PAGES))
        self._site_runner = web.AppRunner(app, access_log=None)
        await self._site_runner.setup()
        site = web.TCPSite(self._site_runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.page_base = f"http://127.0.0.1:{port}"

    async def open_page(self, url: str) -> Page:
        """Opens a new tab at `url` (via /json/new) and attaches to it."""
        assert self._http is not None
        async with self._http.put(f"http://127.0.0.1:{self.devtools_port}/json/new?{url}") as r:
            if r.status != 200:
                raise CDPError(f"/json/new returned {r.status}: {await r.text()}")
            target = await r.json()
        ws = await asyncio.wait_for(
            websockets.connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=10),
            15,
        )
        page = Page(ws, target["id"])
        self.pages.append(page)
        await page.send("Runtime.enable")
        return page

    async def open_peer_page(self) -> Page:
        page = await self.open_page(f"{self.page_base}/peer.html")
        await page.wait_loaded()
        return page

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    async def stop(self) -> None:
        for page in self.pages:
            try:
                await asyncio.wait_for(page.evaluate("closePeer()", timeout=3), 4)
            except Exception:
                pass
            await page.close()
        self.pages.clear()
        if self._http is not None:
            await self._http.close()
            self._http = None
        if self.proc is not None:
            await asyncio.to_thread(kill_process, self.proc, 5)
        self.proc = None
        if self._site_runner is not None:
            await self._site_runner.cleanup()
            self._site_runner = None
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None


# Answers (re-)offers on one page connection; peer.html's own acceptOffer starts a new one each time.
ROOM_ANSWER_JS = """
window.roomAnswer = async (sdp) => {
  if (!pc) newPeerConnection();
  await pc.setRemoteDescription({ type: 'offer', sdp });
  await pc.setLocalDescription(await pc.createAnswer());
  await gatheringComplete();
  return pc.localDescription.sdp;
};
true
"""


async def answer_subscriber_offers(page, client, answered: list, errors: list) -> None:
    """Answers every `subscriberOffer` the room client gets with the page's `roomAnswer` (evaluate
    ROOM_ANSWER_JS first): the revisions answered go to `answered`, failures to `errors`."""
    while True:
        offer = await client.notification("subscriberOffer", timeout=3600)
        try:
            sdp = await page.evaluate(f"roomAnswer({json.dumps(offer['sdp'])})")
            await client.request("subscriberAnswer", {"sdp": sdp, "revision": offer["revision"]})
            answered.append(offer["revision"])
        except Exception as error:
            errors.append(f"revision {offer.get('revision')}: {error!r}")
