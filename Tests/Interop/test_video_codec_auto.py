"""`--video-codec auto` (issue 35, codecs item 1): publishers send what the room's receivers accept.

Every join declares the video codecs it receives (`videoCodecs`); the room page declares
`RTCRtpReceiver.getCapabilities('video')`, here narrowed with its `receiveCodecs` option. The server
keeps the room's intersection (`roomVideoCodecs`) and tells everyone when it changes.

In one Chromium: a viewer page declaring VP8 and H.264 joins; an `understudy join --video-codec
auto` agent then publishes H.264 (H.264 first, the room accepts it), and the page decodes it; an
`understudy load --video-codec auto` bot publishes H.264 too. A second viewer declaring VP8 only
joins: the room's list becomes `["vp8"]`, the agent publishes its webcam again in VP8, and both pages
decode VP8 from it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from browser_support import WINDOW, DevServer, LogProcess, Publisher, RoomPage
from chromium import Chromium
from harness import understudy_bin

ROOM = "codec-auto"
UDP_LOW = 48300


def _load(server: DevServer, workdir: Path) -> LogProcess:
    return LogProcess(
        [understudy_bin(), "load", "--server", server.base, "--room", ROOM, "--secret", server.secret or "",
         "--publishers", "1", "--subscribers", "0", "--video-codec", "auto", "--no-simulcast",
         "--id-prefix", "autoload", "--duration", "120"],
        workdir / "load.log")


async def _wait_codec(page: RoomPage, who: str, codec: str, frames: int = 30, timeout: float = 60) -> dict:
    """Waits until `page` decoded `frames` more frames of `who` in `codec` (a switch starts a new
    stream: its counters start again)."""
    deadline = asyncio.get_running_loop().time() + timeout
    stats: dict = {}
    while asyncio.get_running_loop().time() < deadline:
        stats = await page.video_stats(who) or {}
        if stats.get("codec") == codec and stats.get("framesDecoded", 0) >= frames:
            return stats
        await asyncio.sleep(0.5)
    raise AssertionError(f"{page.name}: no {frames} {codec} frames of {who} within {timeout}s; last {stats}")


async def _play(workdir: Path) -> dict:
    out: dict = {}
    server = DevServer(workdir, udp_low=UDP_LOW).start()
    bot = load = None
    try:
        await server.ready()
        async with Chromium(extra_flags=WINDOW) as browser:
            both = await RoomPage.open(browser, server, ROOM, name="Both", id="both", mode="RECV_ONLY",
                                       receiveCodecs="vp8,h264")
            out["both_joined"] = (await both.snapshot())["roomVideoCodecs"]
            bot = Publisher(server, ROOM, workdir, "auto").start()
            await bot.wait_for(r"joined room", 30)
            out["h264"] = await _wait_codec(both, "bot", "video/H264")
            load = _load(server, workdir).start()
            match = await both.wait_until(
                "a load bot on stage", lambda s: any(p.startswith("autoload") for p in s["stage"]), timeout=60)
            name = next(p for p in match["stage"] if p.startswith("autoload"))
            out["load"] = await _wait_codec(both, name, "video/H264", frames=10)

            vp8 = await RoomPage.open(browser, server, ROOM, name="VP8", id="vp8only", mode="RECV_ONLY",
                                      receiveCodecs="vp8")
            out["vp8_joined"] = (await vp8.snapshot())["roomVideoCodecs"]
            changed = await both.wait_until(
                "the room's list changes", lambda s: s["roomVideoCodecs"] == ["vp8"], timeout=30)
            out["both_changed"] = changed["roomVideoCodecs"]
            out["vp8"] = await _wait_codec(vp8, "bot", "video/VP8")
            out["both_vp8"] = await _wait_codec(both, "bot", "video/VP8")
    finally:
        for p in (load, bot):
            if p is not None:
                p.stop()
        server.stop()
    out["bot_log"] = bot.text() if bot else ""
    return out


def test_auto_publishes_h264_then_follows_a_vp8_only_viewer(tmp_path: Path) -> None:
    result = asyncio.run(_play(tmp_path))
    print({k: v for k, v in result.items() if k != "bot_log"})
    assert result["both_joined"] == ["vp8", "h264"], result
    assert result["h264"]["codec"] == "video/H264", result["h264"]
    assert result["load"]["codec"] == "video/H264", result["load"]
    assert result["vp8_joined"] == ["vp8"], result
    assert result["both_changed"] == ["vp8"], result
    assert result["vp8"]["codec"] == "video/VP8" and result["both_vp8"]["codec"] == "video/VP8", result
