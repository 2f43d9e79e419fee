"""Plumbing for the browser-page tests: `understudy serve` in development mode, the agent
(`understudy join`) as a child process, and a Chromium or Firefox tab on the room page.

Every wait has a deadline and every process is stopped in `finally` by its owner.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable

from chromium import Chromium
from harness import free_port, kill_process, understudy_bin

# A fixed window for the screenshots; getDisplayMedia picks the screen without a picker.
WINDOW = ["--window-size=1280,860", "--auto-select-desktop-capture-source=Entire screen"]


class LogProcess:
    """A child process whose merged stdout/stderr is collected line by line in a thread."""

    def __init__(self, args: list[str], log_path: Path):
        self.args = args
        self.log_path = log_path
        self.lines: list[str] = []
        self.proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def start(self) -> "LogProcess":
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True, bufsize=1,
        )
        threading.Thread(target=self._pump, daemon=True).start()
        return self

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with open(self.log_path, "w") as log:
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                with self._lock:
                    self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def find(self, pattern: str) -> re.Match | None:
        return re.search(pattern, self.text())

    async def wait_for(self, pattern: str, timeout: float) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = self.find(pattern)
            if match:
                return match
            if self.proc is not None and self.proc.poll() is not None:
                await asyncio.sleep(0.3)  # let the pump read what is left
                match = self.find(pattern)
                if match:
                    return match
                raise AssertionError(
                    f"{self.args[1]} exited {self.proc.returncode} before /{pattern}/:\n{self.tail()}")
            await asyncio.sleep(0.1)
        raise AssertionError(f"no /{pattern}/ from {self.args[1]} within {timeout}s:\n{self.tail()}")

    async def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.args[1]} did not exit within {timeout}s:\n{self.tail()}")
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)
        return self.proc.returncode

    def tail(self, lines: int = 40) -> str:
        with self._lock:
            return "\n".join(self.lines[-lines:])

    def stop(self, grace: float = 10) -> None:
        if self.proc is not None:
            kill_process(self.proc, grace)


class DevServer(LogProcess):
    """`understudy serve` without a secret: development mode, so `/dev/token` exists."""

    def __init__(self, workdir: Path, udp_low: int, secret: str | None = None):
        self.port = free_port()
        args = [understudy_bin(), "serve", "--listen", f"127.0.0.1:{self.port}",
                "--udp-ports", f"{udp_low}-{udp_low + 59}"]
        if secret:
            args += ["--secret", secret]
        super().__init__(args, workdir / "serve.log")
        self.secret = secret

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def ready(self, timeout: float = 20) -> "DevServer":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"understudy serve exited {self.proc.returncode}:\n{self.tail()}")
            try:
                status = await asyncio.to_thread(http_status, f"{self.base}/healthz")
                if status == 200:
                    break
            except OSError:
                pass
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"understudy serve did not become healthy:\n{self.tail()}")
        if self.secret is None:
            match = await self.wait_for(r"dev secret for this run: (\S+)", 5)
            self.secret = match.group(1)
        return self


def http_status(url: str, timeout: float = 2) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


class Agent(LogProcess):
    """`understudy join`: RECV_ONLY, consumes the stage, records, follows stage invites."""

    def __init__(self, server: DevServer, room: str, record: Path, participant: str = "agent",
                 extra: list[str] | None = None):
        args = [understudy_bin(), "join", "--server", server.base, "--room", room,
                "--secret", server.secret or "", "--id", participant, "--name", "Agent",
                "--mode", "RECV_ONLY", "--consume", "stage", "--record", str(record), *(extra or [])]
        super().__init__(args, record.parent / f"{participant}.log")


class Publisher(LogProcess):
    """`understudy join` on stage: SEND_AND_RECV, consumes nothing, publishes its test pattern (or
    `video`, a file sent without re-encoding) encoded as `codec` (`--video-codec`)."""

    def __init__(self, server: DevServer, room: str, workdir: Path, codec: str, participant: str = "bot",
                 video: str | None = None):
        args = [understudy_bin(), "join", "--server", server.base, "--room", room,
                "--secret", server.secret or "", "--id", participant, "--name", participant.capitalize(),
                "--mode", "SEND_AND_RECV", "--consume", "none", "--video-codec", codec]
        if video:
            args += ["--video", video]
        super().__init__(args, workdir / f"{participant}.log")


class RoomPage:
    """One person in the room: a headless Chromium or Firefox tab on the served page (both drivers
    give a page `evaluate`, `navigate`, `capture_png` and `console`)."""

    def __init__(self, browser: Any, page: Any, name: str):
        self.browser = browser
        self.page = page
        self.name = name

    @classmethod
    async def open(cls, browser: Any, server: DevServer, room: str, **query: str) -> "RoomPage":
        url = f"{server.base}/room/{urllib.parse.quote(room)}?{urllib.parse.urlencode({'autoJoin': '1', **query})}"
        # /json/new would cut the URL at its first '&': open a blank tab, then navigate.
        page = await browser.open_page("about:blank")
        await page.navigate(url)
        self = cls(browser, page, query.get("name", "?"))
        await self.wait_until("page joined", lambda s: s["joined"], timeout=30)
        return self

    async def snapshot(self) -> dict:
        return await self.page.evaluate(
            "window.understudyRoom ? window.understudyRoom.snapshot() : {joined: false}", timeout=10)

    async def wait_until(self, what: str, predicate: Callable[[dict], Any], timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        snapshot: dict = {}
        while time.monotonic() < deadline:
            try:
                snapshot = await self.snapshot()
                if predicate(snapshot):
                    return snapshot
            except Exception as error:  # a page still loading answers with an error
                snapshot = {"error": repr(error)}
            await asyncio.sleep(0.2)
        raise AssertionError(f"{self.name}: {what} did not happen within {timeout}s; last state {snapshot}\n"
                             f"console: {self.page.console[-10:]}")

    async def video_stats(self, participant: str) -> dict:
        return await self.page.evaluate(f"window.understudyRoom.videoStats({json.dumps(participant)})")

    async def wait_frames(self, participant: str, frames: int, timeout: float = 40) -> dict:
        """Waits until the page decoded `frames` video frames of `participant` (none yet: no stats);
        returns its stats."""
        deadline = time.monotonic() + timeout
        stats: dict = {}
        while time.monotonic() < deadline:
            stats = await self.video_stats(participant) or {}
            if stats.get("framesDecoded", 0) >= frames:
                return stats
            await asyncio.sleep(0.5)
        raise AssertionError(f"{self.name}: decoded only {stats} of {participant} within {timeout}s")

    async def rendered_frames(self, participant: str) -> int:
        """Frames the participant's tile video presented, counted with requestVideoFrameCallback (in
        Firefox `getVideoPlaybackQuality().totalVideoFrames` stays 0 for a live stream). The
        first call starts the count."""
        return await self.page.evaluate(
            "(() => { const v = document.querySelector("
            f"{json.dumps(f'#stage-list .tile[data-participant-id={json.dumps(participant)}] video')});"
            " if (!v) return 0;"
            " if (v.understudyFrames === undefined) { v.understudyFrames = 0;"
            "   const step = () => { v.understudyFrames += 1; v.requestVideoFrameCallback(step); };"
            "   v.requestVideoFrameCallback(step); }"
            " return v.understudyFrames; })()")

    async def wait_rendered_frames(self, participant: str, frames: int, timeout: float = 40) -> int:
        deadline = time.monotonic() + timeout
        count = 0
        while time.monotonic() < deadline:
            count = await self.rendered_frames(participant)
            if count >= frames:
                return count
            await asyncio.sleep(0.5)
        raise AssertionError(f"{self.name}: presented only {count} frames of {participant} within {timeout}s")

    async def watch_freezes(self, participant: str) -> None:
        """Starts sampling the participant's received video (W3C `freezeCount`/`totalFreezesDuration`,
        Chromium's own: a freeze is a gap between rendered frames longer than max(3 x the mean frame
        duration, mean + 150 ms)) every 100 ms inside the page, so that each freeze is seen alone and
        its own duration is known; ``freezes`` reads them."""
        await self.page.evaluate(
            "(() => { if (window.understudyFreezes) return;"
            " const w = window.understudyFreezes = { events: [], last: null, samples: 0 };"
            " const poll = async () => {"
            f"  try {{ const v = await window.understudyRoom.receivedVideo({json.dumps(participant)});"
            "   if (v) { const l = w.last;"
            "    if (l && v.freezeCount > l.freezeCount) { const n = v.freezeCount - l.freezeCount;"
            "     w.events.push({ at: Date.now() / 1000, count: n, width: v.width,"
            "      duration: (v.totalFreezesDuration - l.totalFreezesDuration) / n }); }"
            "    w.last = v; w.samples += 1; } } catch (e) {}"
            "  setTimeout(poll, 100); };"
            " poll(); })()")

    async def freezes(self) -> dict:
        """What ``watch_freezes`` saw: `events`, one per sample whose freeze count rose (`at`: wall-clock
        seconds when it was seen, `duration`: seconds; when `count` > 1 freezes ended between two
        samples, their mean), and the last sample."""
        return await self.page.evaluate("window.understudyFreezes || { events: [], last: null, samples: 0 }")

    async def click(self, selector: str) -> None:
        """Clicks the button the way a person does (a DOM click on the visible button)."""
        found = await self.page.evaluate(
            f"(() => {{ const b = document.querySelector({json.dumps(selector)});"
            " if (!b || b.disabled) return false; b.click(); return true; })()")
        if not found:
            raise AssertionError(f"{self.name}: no enabled button {selector}\n{await self.snapshot()}")

    async def screenshot(self, path: Path) -> int:
        data = await self.page.capture_png()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return len(data)


def action_selector(action: str, participant: str, area: str = "") -> str:
    return f'{area} button[data-action="{action}"][data-participant-id="{participant}"]'.strip()
