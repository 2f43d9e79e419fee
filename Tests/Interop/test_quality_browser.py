"""The agent's received quality against Chromium's getStats for the same stream.

A Chromium host publishes its fake camera; a Chromium viewer (RECV_ONLY) and the agent
(`understudy join --consume stage --metrics ...`) both receive the host's webcam through the SFU.
Over the same 15 s window, the agent's frame rate (frames completed by its receiver, from
`understudy_agent_track_frames_total` in /metrics) and Chromium's (`framesDecoded` of the viewer's
inbound-rtp) agree within 10 %, and so do their freeze counts (within one: on loopback both should
see none, and a scheduler stall on this 2-core machine may show in one and not the other).

The second test drops 3 % of the SFU's outgoing datagrams at random with nftables (`numgen random`,
real loss in the test's namespace) once both receive: the frame rates still agree within 10 % and
the freeze counts within two (each receiver loses different packets, NACK repairs most), and the
agent's audio (no NACK for audio) is concealed and its MOS estimate falls below the clean 4.41.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
import urllib.request
from pathlib import Path

from browser_support import WINDOW, Agent, DevServer, RoomPage
from chromium import Chromium
from harness import free_port

ROOM = "quality-browser"
WINDOW_SECONDS = 15


def _metric(text: str, name: str, participant: str, kind: str) -> float | None:
    pattern = rf'^{name}\{{kind="{kind}",participant="{participant}"\}} (\S+)$'
    match = re.search(pattern, text, re.MULTILINE)
    return float(match.group(1)) if match else None


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


UDP_LOW = 46000


def _drop_sfu_output(percent: int) -> None:
    """Drops `percent` % of the datagrams the SFU's UDP ports send (this namespace only)."""
    for command in (
        ["nft", "add", "table", "inet", "quality"],
        ["nft", "add", "chain", "inet", "quality", "out", "{ type filter hook output priority 0; }"],
        ["nft", "add", "rule", "inet", "quality", "out", "udp", "sport", f"{UDP_LOW}-{UDP_LOW + 59}",
         "numgen", "random", "mod", "100", "<", str(percent), "drop"],
    ):
        subprocess.run(command, check=True, capture_output=True, timeout=10)


def _clear_drop() -> None:
    subprocess.run(["nft", "delete", "table", "inet", "quality"], capture_output=True, timeout=10)


async def _play(workdir: Path, loss_percent: int = 0) -> dict:
    server = DevServer(workdir, udp_low=UDP_LOW).start()
    metrics_port = free_port()
    record = workdir / "agent"
    record.mkdir()
    agent: Agent | None = None
    try:
        await server.ready()
        async with Chromium(extra_flags=WINDOW) as host_browser, Chromium(extra_flags=WINDOW) as viewer_browser:
            host = await RoomPage.open(host_browser, server, ROOM, name="Host", id="host", mode="SEND_AND_RECV")
            await host.wait_until("host publishes", lambda s: "webcam" in set(s["producing"]))
            viewer = await RoomPage.open(viewer_browser, server, ROOM, name="Viewer", id="viewer", mode="RECV_ONLY")
            agent = Agent(server, ROOM, record, extra=["--metrics", f"127.0.0.1:{metrics_port}"]).start()
            await agent.wait_for(r"consuming host", 30)
            await viewer.wait_frames("host", 60, timeout=60)

            async def agent_frames() -> float:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    text = await asyncio.to_thread(_scrape, metrics_port)
                    frames = _metric(text, "understudy_agent_track_frames_total", "host", "video")
                    if frames and frames >= 60:
                        return frames
                    await asyncio.sleep(0.5)
                raise AssertionError(f"the agent's /metrics has no video frames from host:\n{text}")

            await agent_frames()
            if loss_percent:
                _drop_sfu_output(loss_percent)
                await asyncio.sleep(2)  # the window starts under loss
            start_time = time.monotonic()
            chrome0 = await viewer.video_stats("host")
            text0 = await asyncio.to_thread(_scrape, metrics_port)
            await asyncio.sleep(WINDOW_SECONDS)
            chrome1 = await viewer.video_stats("host")
            text1 = await asyncio.to_thread(_scrape, metrics_port)
            seconds = time.monotonic() - start_time
            return {"seconds": seconds, "chrome": (chrome0, chrome1), "agent": (text0, text1)}
    finally:
        if loss_percent:
            _clear_drop()
        if agent is not None:
            agent.stop()
        server.stop()


def _compare(result: dict, freeze_tolerance: int) -> str:
    seconds = result["seconds"]
    chrome0, chrome1 = result["chrome"]
    text0, text1 = result["agent"]

    def agent(name: str, text: str) -> float:
        value = _metric(text, name, "host", "video")
        assert value is not None, f"{name} missing from /metrics:\n{text}"
        return value

    agent_fps = (agent("understudy_agent_track_frames_total", text1)
                 - agent("understudy_agent_track_frames_total", text0)) / seconds
    chrome_fps = (chrome1["framesDecoded"] - chrome0["framesDecoded"]) / seconds
    agent_freezes = agent("understudy_agent_track_freezes_total", text1) - agent("understudy_agent_track_freezes_total", text0)
    chrome_freezes = chrome1["freezeCount"] - chrome0["freezeCount"]
    summary = (f"agent {agent_fps:.2f} fps, {agent_freezes:.0f} freezes; chromium {chrome_fps:.2f} fps, "
               f"{chrome_freezes} freezes over {seconds:.1f} s")
    print(summary)
    assert chrome_fps > 5, summary
    assert abs(agent_fps - chrome_fps) <= 0.10 * chrome_fps, summary
    assert abs(agent_freezes - chrome_freezes) <= freeze_tolerance, summary
    return summary


def test_agent_fps_and_freezes_agree_with_chromium_getstats(understudy, tmp_path):
    result = asyncio.run(asyncio.wait_for(_play(tmp_path), 180))
    summary = _compare(result, freeze_tolerance=1)
    text1 = result["agent"][1]
    # The agent's own average since the first frame says the same.
    fps = _metric(text1, "understudy_agent_track_fps", "host", "video")
    chrome_fps = (result["chrome"][1]["framesDecoded"] - result["chrome"][0]["framesDecoded"]) / result["seconds"]
    assert fps is not None and abs(fps - chrome_fps) <= 0.25 * chrome_fps, summary


def test_under_random_loss_fps_freezes_agree_and_mos_falls(understudy, tmp_path):
    result = asyncio.run(asyncio.wait_for(_play(tmp_path, loss_percent=3), 180))
    summary = _compare(result, freeze_tolerance=2)
    text0, text1 = result["agent"]
    mos = _metric(text1, "understudy_agent_track_mos", "host", "audio")
    concealed0 = _metric(text0, "understudy_agent_track_concealed_seconds_total", "host", "audio") or 0
    concealed1 = _metric(text1, "understudy_agent_track_concealed_seconds_total", "host", "audio") or 0
    lost = (_metric(text1, "understudy_agent_track_packets_lost_total", "host", "video") or 0) - (
        _metric(text0, "understudy_agent_track_packets_lost_total", "host", "video") or 0)
    summary += f"; agent audio MOS {mos}, concealed {concealed1 - concealed0:.2f} s, video packets lost {lost:.0f}"
    print(summary)
    assert concealed1 > concealed0, summary
    assert mos is not None and mos < 4.35, summary
