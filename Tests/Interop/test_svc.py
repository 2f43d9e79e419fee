"""VP9 SVC and AV1 layers from a browser, selected per subscriber by the SFU (issue 35, item 2).

Headless Chromium publishes its 960x540 camera on the room page with `?codec=vp9&svc=L3T3_KEY`: one
encoding (one SSRC) carrying three spatial and three temporal layers. Two audience pages subscribe;
one asks for `setQuality low`. The SFU must forward that one only the base spatial layer, so it decodes
a smaller `frameWidth` than the other (getStats), and its getStats names the consumer's layers
(`currentSpatialLayer` 0 against 2). An agent (`understudy join --record`, quality high) records the
top layer: each picture is written as a VP9 superframe of its three layer frames, so ffprobe reads
frames as wide as the publisher's encoding. (Chromium's encoder marks every layer frame shown: libvpx
players show a superframe's last frame, ffmpeg each one, three frames of one timestamp; its null
muxer's complaint about those timestamps is not a decode error.)

In the same browser, a second host publishes AV1 with `?codec=av1&svc=L3T3`: the SFU reads each
frame's layers and decode targets from the dependency descriptor the page's offer negotiated. A page
asking for `setQuality low` decodes the base spatial layer (a smaller `frameWidth`, the consumer at
spatial layer 0), one at `high` the top layer; both keep decoding.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import Counter
from pathlib import Path

from browser_support import WINDOW, Agent, DevServer, RoomPage
from chromium import Chromium
from harness import decode_errors

ROOM = "svc-room"


def _frame_widths(path: Path) -> list[int]:
    result = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=width", "-of", "csv=p=0",
         str(path)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"ffprobe failed on {path}: {result.stderr.strip()}"
    return [int(w) for w in result.stdout.replace(",", " ").split() if w.isdigit()]


async def _consumer_layers(page: RoomPage) -> list[dict]:
    """The page's video consumers as the server's getStats reports them (the stats overlay polls it)."""
    stats = await page.page.evaluate("window.understudyRoom.serverStats()") or {}
    return [c for c in stats.get("consumers", []) if c.get("kind") == "webcam"]


async def _wait(what: str, probe, predicate, timeout: float = 60):
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = await probe()
        if predicate(value):
            return value
        await asyncio.sleep(1)
    raise AssertionError(f"{what} did not happen within {timeout}s; last {value}")


async def _play_av1(browser, server: DevServer) -> dict:
    """AV1 L3T3: the low page gets the base spatial layer, the high page the top one."""
    out: dict = {}
    room = "svc-av1-room"
    host = await RoomPage.open(
        browser, server, room, name="AV1Host", id="av1host", mode="SEND_AND_RECV", codec="av1", svc="L3T3",
        camera="960x540")
    await host.wait_until("the AV1 host publishes", lambda s: {"webcam", "mic"} <= set(s["producing"]), timeout=30)
    low = await RoomPage.open(browser, server, room, name="AV1Low", id="av1low", mode="RECV_ONLY")
    high = await RoomPage.open(browser, server, room, name="AV1High", id="av1high", mode="RECV_ONLY")
    for page in (low, high):
        await page.wait_frames("av1host", 30, timeout=60)
    await low.page.evaluate("window.understudyRoom.setQuality('av1host', 'low')")
    out["publish"] = await host.page.evaluate("window.understudyRoom.publishStats()")
    out["low"] = await _wait(
        "the low AV1 page decodes a smaller picture", lambda: low.video_stats("av1host"),
        lambda s: 0 < s["width"] < out["publish"]["width"], timeout=60)
    out["high"] = await _wait(
        "the high AV1 page decodes the full picture", lambda: high.video_stats("av1host"),
        lambda s: s["width"] >= out["publish"]["width"] * 0.9, timeout=60)
    out["low_layers"] = await _wait(
        "the low AV1 page's getStats names spatial layer 0", lambda: _consumer_layers(low),
        lambda cs: any(c.get("currentSpatialLayer") == 0 and c.get("targetSpatialLayer") == 0 for c in cs),
        timeout=30)
    out["high_layers"] = await _wait(
        "the high AV1 page's getStats names the top spatial layer", lambda: _consumer_layers(high),
        lambda cs: any(c.get("currentSpatialLayer") == 2 for c in cs), timeout=30)
    for name, page in (("low", low), ("high", high)):
        frames = out[name]["framesDecoded"]
        out[name + "_later"] = await _wait(
            f"the {name} AV1 page keeps decoding", lambda page=page: page.video_stats("av1host"),
            lambda s, frames=frames: s["framesDecoded"] >= frames + 60, timeout=30)
    # The VP9 part needs the CPU an AV1 L3T3 encoder takes: these pages leave.
    for page in (host, low, high):
        await page.page.navigate("about:blank")
    return out


async def _play(workdir: Path) -> dict:
    record = workdir / "agent"
    record.mkdir()
    out: dict = {}
    server = DevServer(workdir, udp_low=47400).start()
    agent = None
    try:
        await server.ready()
        async with Chromium(extra_flags=WINDOW) as browser:
            out["av1"] = await _play_av1(browser, server)
            host = await RoomPage.open(
                browser, server, ROOM, name="Host", id="host", mode="SEND_AND_RECV", codec="vp9", svc="L3T3_KEY",
                camera="960x540")
            await host.wait_until("host publishes", lambda s: {"webcam", "mic"} <= set(s["producing"]), timeout=30)
            low = await RoomPage.open(browser, server, ROOM, name="Low", id="low", mode="RECV_ONLY")
            high = await RoomPage.open(browser, server, ROOM, name="High", id="high", mode="RECV_ONLY")
            for page in (low, high):
                await page.wait_frames("host", 30, timeout=60)
            await low.page.evaluate("window.understudyRoom.setQuality('host', 'low')")
            agent = Agent(server, ROOM, record, extra=["--quality", "high"]).start()
            await agent.wait_for(r"recording host -> ", 30)

            out["publish"] = await host.page.evaluate("window.understudyRoom.publishStats()")
            # The low page decodes the base layer; the high one the top (a key picture makes the switch).
            out["low"] = await _wait(
                "the low page decodes a smaller picture", lambda: low.video_stats("host"),
                lambda s: 0 < s["width"] < out["publish"]["width"], timeout=60)
            out["high"] = await _wait(
                "the high page decodes the full picture", lambda: high.video_stats("host"),
                lambda s: s["width"] >= out["publish"]["width"] * 0.9, timeout=60)
            out["low_layers"] = await _wait(
                "the low page's getStats names spatial layer 0", lambda: _consumer_layers(low),
                lambda cs: any(c.get("currentSpatialLayer") == 0 and c.get("targetSpatialLayer") == 0 for c in cs),
                timeout=30)
            out["high_layers"] = await _wait(
                "the high page's getStats names the top spatial layer", lambda: _consumer_layers(high),
                lambda cs: any(c.get("currentSpatialLayer") == 2 for c in cs), timeout=30)
            # Both keep decoding after the switch.
            frames = out["low"]["framesDecoded"]
            out["low_later"] = await _wait(
                "the low page keeps decoding", lambda: low.video_stats("host"),
                lambda s: s["framesDecoded"] >= frames + 60, timeout=30)
            await asyncio.sleep(4)
            out["publish_end"] = await host.page.evaluate("window.understudyRoom.publishStats()")
            agent.stop()
            await agent.wait_exit(20)
    finally:
        if agent is not None:
            agent.stop()
        server.stop()
    out["agent_log"] = agent.text() if agent else ""
    out["record"] = record
    return out


def test_svc_layers_are_selected_per_subscriber(tmp_path: Path) -> None:
    result = asyncio.run(_play(tmp_path))
    av1 = result["av1"]
    print(f"AV1 published {av1['publish']['width']} wide; low decodes {av1['low']['width']}, "
          f"high {av1['high']['width']}; low consumer {av1['low_layers']}")
    assert av1["publish"]["codec"] == "video/AV1", av1["publish"]
    assert av1["low"]["codec"] == "video/AV1" and av1["high"]["codec"] == "video/AV1", av1
    assert av1["low"]["width"] * 2 <= av1["high"]["width"], av1
    publish = result["publish"]
    assert publish["codec"] == "video/VP9", publish
    assert len(publish["layers"]) == 1, f"SVC is one encoding: {publish}"
    low, high = result["low"], result["high"]
    print(f"published {publish['width']} wide; low decodes {low['width']}x{low['height']}, "
          f"high {high['width']}x{high['height']}; low consumer {result['low_layers']}")
    assert low["codec"] == "video/VP9" and high["codec"] == "video/VP9", (low, high)
    assert low["width"] * 2 <= high["width"], (low, high)

    path = result["record"] / "host.webm"
    assert path.exists(), f"the agent recorded nothing:\n{result['agent_log'][-3000:]}"
    errors = [line for line in decode_errors(path).splitlines()
              if "non monotonically increasing dts" not in line and "Last message repeated" not in line]
    assert errors == [], f"{path} does not decode cleanly: {errors[:5]}"
    widths = _frame_widths(path)
    top = max(publish["width"], result["publish_end"]["width"])
    full = [w for w in widths if w >= top * 0.9]
    assert len(full) > 60, f"{len(full)} of {len(widths)} recorded frames at the top layer's width {top}"
    assert max(widths[-60:]) >= top * 0.9, (Counter(widths[-60:]), publish, result["publish_end"])
