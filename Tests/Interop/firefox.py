"""Headless Firefox ESR as an interop peer, driven over its built-in WebDriver BiDi (no geckodriver).

    async with Firefox() as browser:
        page = await browser.open_peer_page()
        sdp = await page.call("makeOffer", {"send": True, "recv": True})
        ...
        stats = await page.call("stats")

The same shape as chromium.py: `Firefox` launches the browser with fake media in a fresh profile and
serves pages/ on loopback; `Page` is one browsing context (a tab) with `evaluate`, `call`,
`navigate`, `console` and `capture_png`. Pages written for Chromium run unchanged.

Firefox listens for BiDi at ws://127.0.0.1:PORT/session once `--remote-debugging-port=PORT` is given.
One WebSocket session serves every tab; commands name their tab (`context`).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import websockets
from aiohttp import web

from harness import kill_process

PAGES = Path(__file__).resolve().parent / "pages"

# user.js of every fresh profile. The media prefs give fake devices without a prompt and host
# candidates on loopback (`permission.fake` too: without it Firefox gathers no candidate in a
# namespace that has only `lo`); the rest keeps a first run quiet and off the network.
#
# A page that never called getUserMedia (an audience member) gathers only the address of the
# default route unless the site holds a camera or microphone permission; a namespace with only `lo`
# has no default route, so such a page offered no candidate at all and its ICE failed. The
# `permissions.default.*` prefs grant both to every site, as a viewer who allowed the camera once.
PREFS: dict[str, Any] = {
    "media.navigator.streams.fake": True,
    "media.navigator.permission.disabled": True,
    "media.navigator.permission.fake": True,
    "permissions.default.camera": 1,
    "permissions.default.microphone": 1,
    "media.peerconnection.ice.loopback": True,
    "media.peerconnection.ice.obfuscate_host_addresses": False,
    "media.peerconnection.ice.default_address_only": False,
    "media.peerconnection.ice.no_host": False,
    "media.peerconnection.ice.proxy_only": False,
    "media.autoplay.default": 0,
    "media.autoplay.blocking_policy": 0,
    "media.block-autoplay-until-in-foreground": False,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
    "browser.startup.page": 0,
    "browser.aboutwelcome.enabled": False,
    "browser.tabs.warnOnClose": False,
    "browser.sessionstore.resume_from_crash": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.search.update": False,
    "app.update.disabledForTesting": True,
    "app.normandy.enabled": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.reportingpolicy.firstRun": False,
    "extensions.update.enabled": False,
    "extensions.getAddons.cache.enabled": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "network.dns.disablePrefetch": True,
    "network.http.speculative-parallel-limit": 0,
    "network.proxy.type": 0,
    "services.settings.server": "http://127.0.0.1:9/settings",
    "dom.push.enabled": False,
    "messaging-system.rsexperimentloader.enabled": False,
    "app.shield.optoutstudies.enabled": False,
    "extensions.systemAddon.update.enabled": False,
    "browser.newtabpage.enabled": False,
    "remote.prefs.recommended": True,
}


def user_js(prefs: dict[str, Any]) -> str:
    return "".join(f"user_pref({json.dumps(name)}, {json.dumps(value)});\n" for name, value in prefs.items())


class BiDiError(RuntimeError):
    pass


def remote_value(value: dict) -> Any:
    """A BiDi RemoteValue (serialized with returnByValue semantics) as plain Python, like CDP's `value`."""
    kind = value.get("type")
    inner = value.get("value")
    if kind in ("undefined", "null"):
        return None
    if kind == "number":
        if isinstance(inner, str):  # NaN, -0, Infinity, -Infinity
            return {"NaN": math.nan, "-0": -0.0, "Infinity": math.inf, "-Infinity": -math.inf}[inner]
        return inner
    if kind in ("string", "boolean", "date"):
        return inner
    if kind == "bigint":
        return int(inner)
    if kind in ("array", "set"):
        return [remote_value(v) for v in inner or []]
    if kind in ("object", "map"):
        out: dict = {}
        for key, item in inner or []:
            out[key if isinstance(key, str) else json.dumps(remote_value(key))] = remote_value(item)
        return out
    return None  # functions, nodes, windows…: CDP's returnByValue gives nothing usable either


class Page:
    """One browsing context (tab): `evaluate` and `call` into the page's JS."""

    def __init__(self, browser: "Firefox", context: str):
        self.browser = browser
        self.context = context
        self.console: list[str] = []

    async def send(self, method: str, params: dict | None = None, timeout: float = 30) -> dict:
        return await self.browser.send(method, params, timeout)

    async def evaluate(self, expression: str, timeout: float = 30) -> Any:
        """Evaluates `expression` (awaiting a returned promise) and returns its JSON value."""
        result = await self.send(
            "script.evaluate",
            {
                "expression": expression,
                "target": {"context": self.context},
                "awaitPromise": True,
                "resultOwnership": "none",
                "serializationOptions": {"maxObjectDepth": 20, "maxDomDepth": 0},
            },
            timeout=timeout,
        )
        if result.get("type") == "exception":
            details = result.get("exceptionDetails", {})
            raise BiDiError(f"page error in {expression[:80]!r}: {details.get('text')}")
        return remote_value(result.get("result", {}))

    async def call(self, function: str, *args: Any, timeout: float = 30) -> Any:
        """Calls a page function with JSON arguments: `await page.call("acceptOffer", sdp)`."""
        rendered = ", ".join(json.dumps(a) for a in args)
        return await self.evaluate(f"{function}({rendered})", timeout=timeout)

    async def navigate(self, url: str, timeout: float = 60) -> None:
        await self.send(
            "browsingContext.navigate", {"context": self.context, "url": url, "wait": "complete"}, timeout)

    async def wait_loaded(self, timeout: float = 15) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                if await self.evaluate("document.readyState === 'complete' && typeof makeOffer === 'function'", timeout=5):
                    return
            except BiDiError:
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("page did not load")
            await asyncio.sleep(0.1)

    async def capture_png(self) -> bytes:
        shot = await self.send("browsingContext.captureScreenshot", {"context": self.context}, timeout=30)
        return base64.b64decode(shot["data"])

    async def close(self) -> None:
        try:
            await self.send("browsingContext.close", {"context": self.context}, timeout=5)
        except Exception:
            pass


class Firefox:
    """Launches headless Firefox ESR with fake media in a fresh profile and serves pages/ on loopback."""

    def __init__(self, binary: str | None = None, extra_prefs: dict[str, Any] | None = None):
        self.binary = (binary or os.environ.get("FIREFOX_BIN") or shutil.which("firefox-esr")
                       or shutil.which("firefox") or "firefox-esr")
        self.prefs = {**PREFS, **(extra_prefs or {})}
        self.proc: subprocess.Popen | None = None
        self.profile: str | None = None
        self.port = 0
        self.pages: list[Page] = []
        self.page_base = ""
        self.log_path: str | None = None
        self._ws: Any = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._reader: asyncio.Future | None = None
        self._site_runner: web.AppRunner | None = None
        self._first_context: str | None = None

    async def __aenter__(self) -> "Firefox":
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def start(self, timeout: float = 60) -> None:
        await self._serve_pages()
        self.profile = tempfile.mkdtemp(prefix="understudy-firefox-")
        Path(self.profile, "user.js").write_text(user_js(self.prefs))
        self.log_path = os.path.join(self.profile, "firefox.log")
        # Port 0: Firefox picks a free port and says which ("WebDriver BiDi listening on ws://…").
        args = [self.binary, "--headless", "--remote-debugging-port=0",
                "--remote-allow-hosts=127.0.0.1", "--profile", self.profile, "--no-remote", "about:blank"]
        env = {**os.environ, "MOZ_CRASHREPORTER_DISABLE": "1", "MOZ_CRASHREPORTER": "0"}
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                args, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        # Firefox says where BiDi listens once its remote agent is up.
        while not (listening := re.search(r"WebDriver BiDi listening on ws://127\.0\.0\.1:(\d+)", self._log_text())):
            if self.proc.poll() is not None:
                raise RuntimeError(f"firefox exited {self.proc.returncode}: {self.log_tail()}")
            if loop.time() > deadline:
                raise TimeoutError(f"firefox did not open WebDriver BiDi: {self.log_tail()}")
            await asyncio.sleep(0.1)
        self.port = int(listening.group(1))
        self._ws = await asyncio.wait_for(
            websockets.connect(f"ws://127.0.0.1:{self.port}/session", max_size=None, open_timeout=10), 15)
        self._reader = asyncio.ensure_future(self._read_loop())
        await self.send("session.new", {"capabilities": {"alwaysMatch": {"acceptInsecureCerts": True}}})
        await self.send("session.subscribe", {"events": ["log.entryAdded"]})
        tree = await self.send("browsingContext.getTree", {"maxDepth": 0})
        contexts = tree.get("contexts", [])
        self._first_context = contexts[0]["context"] if contexts else None

    async def _read_loop(self) -> None:
        try:
            async for raw in self._ws:
                message = json.loads(raw)
                if message.get("type") in ("success", "error") and "id" in message:
                    future = self._pending.pop(message["id"], None)
                    if future is not None and not future.done():
                        future.set_result(message)
                elif message.get("method") == "log.entryAdded":
                    entry = message.get("params", {})
                    context = entry.get("source", {}).get("context")
                    line = f"{entry.get('level', '')}: {entry.get('text', '')}"
                    for page in self.pages:
                        if page.context == context:
                            page.console.append(line)
        except (websockets.ConnectionClosed, asyncio.CancelledError):
            pass
        finally:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(BiDiError("WebDriver BiDi connection closed"))
            self._pending.clear()

    async def send(self, method: str, params: dict | None = None, timeout: float = 30) -> dict:
        if self._ws is None:
            raise BiDiError("not connected")
        message_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[message_id] = future
        await self._ws.send(json.dumps({"id": message_id, "method": method, "params": params or {}}))
        try:
            reply = await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(message_id, None)
        if reply.get("type") == "error":
            raise BiDiError(f"{method}: {reply.get('error')}: {reply.get('message')}")
        return reply.get("result", {})

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
        """A tab at `url`: the start tab first, then new ones."""
        if self._first_context is not None:
            context, self._first_context = self._first_context, None
        else:
            context = (await self.send("browsingContext.create", {"type": "tab"}))["context"]
        page = Page(self, context)
        self.pages.append(page)
        if url != "about:blank":
            await page.navigate(url)
        return page

    async def open_peer_page(self) -> Page:
        page = await self.open_page(f"{self.page_base}/peer.html")
        await page.wait_loaded()
        return page

    def _log_text(self) -> str:
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    async def stop(self) -> None:
        for page in self.pages:
            try:
                await asyncio.wait_for(page.evaluate("typeof closePeer === 'function' && closePeer()", timeout=3), 4)
            except Exception:
                pass
        self.pages.clear()
        if self._ws is not None:
            try:
                await asyncio.wait_for(self.send("session.end", timeout=3), 4)
            except Exception:
                pass
            try:
                await asyncio.wait_for(self._ws.close(), 5)
            except Exception:
                pass
            self._ws = None
        if self._reader is not None:
            self._reader.cancel()
            self._reader = None
        if self.proc is not None:
            await asyncio.to_thread(kill_process, self.proc, 10)
        self.proc = None
        if self._site_runner is not None:
            await self._site_runner.cleanup()
            self._site_runner = None
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None
