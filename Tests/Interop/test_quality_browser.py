"""The agent's received quality against Chromium's getStats for the same stream, under real shaping.

A Chromium host publishes its fake camera (3 simulcast layers) and microphone; a Chromium viewer
(RECV_ONLY) and the agent (`understudy join --consume stage --metrics ...`) both receive them
through the SFU. One session runs three windows of 15 s, one after the other, and in each window
both sides are read at the same two instants (their cumulative counters: the agent's
`understudy_agent_track_*` in /metrics, the viewer's inbound-rtp through the page), so both
figures cover the same stretch of the same stream:

1. clean;
2. random loss: nftables `numgen random` drops LOSS_PERCENT % of the host's datagrams into the
   SFU (its publish connection: the segment both receivers share). Both receivers then get the
   very same lossy stream: the SFU repairs the video upstream with NACK, and forwards the audio
   (no NACK for Opus) with its gaps to both;
3. rate limit: an `htb` class of RATE_SHARE × the clean window's bitrate (at least MIN_CAP_KBIT)
   with a 100 ms `bfifo` queue for each receiver, on the path to it only (`tc` on `lo`, filtered by
   the receiver's own UDP ports), the same for both. The SFU's estimator, fed by each receiver's
   transport-cc, moves both to a layer that fits; the window starts once both decode the same
   height (or after SETTLE_SECONDS).

Compared in each window:
- frames per second: the agent's frames completed (`frames_total`) ÷ seconds against Chromium's
  `framesDecoded` ÷ the same seconds, within 10 %;
- freezes (both use the W3C definition, counted when the freeze ends): within 10 % or one freeze,
  whichever is more. One freeze, because a freeze that straddles the window's edge ends in one
  side's window and not the other, and in the rate window the two paths are shaped alike but are
  not the same path (each queue drops its own packets);
- loss, defined alike on both sides: Δlost ÷ (Δreceived + Δlost) over the window, from the RFC 3550
  cumulative counters after repair (Chromium's inbound-rtp `packetsLost`/`packetsReceived`; the
  agent's `packets_lost_total`/`packets_received_total`, where a retransmission that fills a hole
  counts as received, as libwebrtc counts a recovered RTX packet). Audio loss in the loss window
  (the same gaps reach both) agrees within 10 % of the larger. Where both are small (video after
  NACK repair, and everything on a clean path) the relative figure means nothing, so they agree
  within 0.5 percentage points instead. In the rate window each receiver's own queue decides what
  it loses, so its loss is compared within 10 % or 0.5 points, whichever is more.
- the agent's E-model MOS (audio) falls from the clean window to the lossy one, as its cumulative
  loss rises.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from browser_support import WINDOW, Agent, DevServer, RoomPage
from chromium import Chromium
from harness import free_port, understudy_bin

ROOM = "quality-browser"
WINDOW_SECONDS = 15
UDP_LOW = 46000
LOSS_PERCENT = 5
RATE_SHARE = 0.5
MIN_CAP_KBIT = 250
SETTLE_SECONDS = 30
NFT_TABLE = "understudy_quality"


def _metric(text: str, name: str, kind: str, participant: str = "host") -> float | None:
    pattern = rf'^{name}\{{kind="{kind}",participant="{participant}"\}} (\S+)$'
    match = re.search(pattern, text, re.MULTILINE)
    return float(match.group(1)) if match else None


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def _run(*command: str) -> None:
    subprocess.run(list(command), check=True, capture_output=True, timeout=10)


def _drop_upstream(host_port: int, sfu_port: int, percent: int) -> None:
    """Drops `percent` % of the host's datagrams into the SFU, at random (this namespace only)."""
    _run("nft", "add", "table", "inet", NFT_TABLE)
    _run("nft", "add", "chain", "inet", NFT_TABLE, "out", "{ type filter hook output priority 0 ; }")
    _run("nft", "add", "rule", "inet", NFT_TABLE, "out", "udp", "sport", str(host_port), "udp", "dport",
         str(sfu_port), "numgen", "random", "mod", "100", "lt", str(percent), "drop")


def _shape(receivers: dict[str, set[int]], kbit: int) -> None:
    """One htb class of `kbit` with a 100 ms queue per receiver, for the datagrams to its ports."""
    _run("tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "10")
    _run("tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit")
    for index, ports in enumerate(receivers.values()):
        handle = 20 + index
        _run("tc", "class", "add", "dev", "lo", "parent", "1:", "classid", f"1:{handle}", "htb", "rate",
             f"{kbit}kbit", "ceil", f"{kbit}kbit", "burst", "6k")
        _run("tc", "qdisc", "add", "dev", "lo", "parent", f"1:{handle}", "handle", f"{handle}:", "bfifo", "limit",
             str(max(3000, kbit * 1000 // 8 // 10)))
        for port in sorted(ports):
            _run("tc", "filter", "add", "dev", "lo", "protocol", "ip", "parent", "1:", "prio", "1", "u32", "match",
                 "ip", "protocol", "17", "0xff", "match", "ip", "dport", str(port), "0xffff", "flowid",
                 f"1:{handle}")


def _lift() -> None:
    subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], capture_output=True, timeout=10)
    subprocess.run(["nft", "delete", "table", "inet", NFT_TABLE], capture_output=True, timeout=10)


def _udp_ports(pid: int) -> set[int]:
    """The UDP ports a process has bound (its ICE sockets), from `ss`."""
    out = subprocess.run(["ss", "-Huanp"], capture_output=True, text=True, timeout=10).stdout
    ports = set()
    for line in out.splitlines():
        if f"pid={pid}," in line:
            ports.add(int(line.split()[3].rsplit(":", 1)[1]))
    return ports


class Session:
    """The two receivers and how to read both at one instant."""

    def __init__(self, viewer: RoomPage, metrics_port: int):
        self.viewer = viewer
        self.metrics_port = metrics_port

    async def sample(self) -> dict:
        video, audio, text = await asyncio.gather(
            self.viewer.video_stats("host"), self.viewer.page.evaluate("window.understudyRoom.audioStats('host')"),
            asyncio.to_thread(_scrape, self.metrics_port))
        return {"t": time.monotonic(), "video": video, "audio": audio or {}, "agent": text}

    async def window(self, name: str) -> dict:
        first = await self.sample()
        await asyncio.sleep(WINDOW_SECONDS)
        last = await self.sample()
        return {"name": name, "first": first, "last": last}

    async def heights(self) -> tuple[float, float]:
        video = await self.viewer.video_stats("host")
        text = await asyncio.to_thread(_scrape, self.metrics_port)
        return video["height"], _metric(text, "understudy_agent_track_frame_height", "video") or 0


async def _session(workdir: Path) -> dict:
    server = DevServer(workdir, udp_low=UDP_LOW).start()
    metrics_port = free_port()
    record = workdir / "agent"
    record.mkdir()
    agent: Agent | None = None
    result: dict = {"windows": {}}
    try:
        await server.ready()
        async with Chromium(extra_flags=WINDOW) as host_browser, Chromium(extra_flags=WINDOW) as viewer_browser:
            host = await RoomPage.open(host_browser, server, ROOM, name="Host", id="host", mode="SEND_AND_RECV")
            await host.wait_until("host publishes", lambda s: {"webcam", "mic"} <= set(s["producing"]))
            viewer = await RoomPage.open(viewer_browser, server, ROOM, name="Viewer", id="viewer", mode="RECV_ONLY")
            agent = Agent(server, ROOM, record, extra=["--metrics", f"127.0.0.1:{metrics_port}"]).start()
            await agent.wait_for(r"consuming host", 30)
            await viewer.wait_frames("host", 60, timeout=60)
            session = Session(viewer, metrics_port)
            deadline = time.monotonic() + 30
            text = ""
            while time.monotonic() < deadline:
                text = await asyncio.to_thread(_scrape, metrics_port)
                if (_metric(text, "understudy_agent_track_frames_total", "video") or 0) >= 60 and (
                        await viewer.page.evaluate("window.understudyRoom.audioStats('host')")):
                    break
                await asyncio.sleep(0.5)
            else:
                raise AssertionError(f"the agent's /metrics has no video frames from host:\n{text}")

            result["windows"]["clean"] = await session.window("clean")

            publish = await host.page.evaluate("window.understudyRoom.publishPath()")
            assert publish and publish["localPort"] and publish["remotePort"], f"no publish path: {publish}"
            _drop_upstream(publish["localPort"], publish["remotePort"], LOSS_PERCENT)
            try:
                await asyncio.sleep(2)  # the window starts under loss
                result["windows"]["loss"] = await session.window("loss")
            finally:
                _lift()
            await asyncio.sleep(3)

            clean = result["windows"]["clean"]
            seconds = clean["last"]["t"] - clean["first"]["t"]
            received_bytes = (clean["last"]["video"]["bytesReceived"] - clean["first"]["video"]["bytesReceived"]
                              + clean["last"]["audio"].get("bytesReceived", 0)
                              - clean["first"]["audio"].get("bytesReceived", 0))
            clean_kbit = received_bytes * 8 / 1000 / seconds
            cap = max(MIN_CAP_KBIT, int(clean_kbit * RATE_SHARE))
            path = await viewer.page.evaluate("window.understudyRoom.subscribePath()")
            assert path and path["localPort"], f"no subscribe path: {path}"
            receivers = {"viewer": {path["localPort"]}, "agent": _udp_ports(agent.proc.pid)}
            assert receivers["agent"], "the agent has no UDP socket in ss"
            result["shaping"] = {"clean_kbit": clean_kbit, "cap_kbit": cap, "ports": receivers}
            _shape(receivers, cap)
            try:
                # Both on the same layer, held for three readings a second apart.
                settle_start = time.monotonic()
                readings: list[tuple[float, float]] = []
                await asyncio.sleep(3)
                while time.monotonic() - settle_start < SETTLE_SECONDS:
                    readings.append(await session.heights())
                    last3 = readings[-3:]
                    if len(last3) == 3 and all(h == last3[0] for h in last3) and last3[0][0] == last3[0][1]:
                        break
                    await asyncio.sleep(1)
                result["shaping"]["settle"] = readings
                result["windows"]["rate"] = await session.window("rate")
                result["shaping"]["heights_after"] = await session.heights()
            finally:
                _lift()
            return result
    finally:
        _lift()
        if agent is not None:
            agent.stop()
        server.stop()


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> dict:
    """One session for the three tests (the windows follow each other on the same stream)."""
    if not Path(understudy_bin()).is_file():
        pytest.fail(f"understudy binary not found at {understudy_bin()} (build it with `swift build`)")
    return asyncio.run(asyncio.wait_for(_session(tmp_path_factory.mktemp("quality")), 420))


def _figures(window: dict) -> dict:
    """Both sides' readings over one window (the difference of the cumulative counters)."""
    first, last = window["first"], window["last"]
    seconds = last["t"] - first["t"]

    def agent(name: str, kind: str) -> float:
        value = _metric(last["agent"], name, kind)
        before = _metric(first["agent"], name, kind)
        assert value is not None and before is not None, f"{name} ({kind}) missing from /metrics:\n{last['agent']}"
        return value - before

    def chrome(kind: str, name: str) -> float:
        return last[kind].get(name, 0) - first[kind].get(name, 0)

    def loss(lost: float, received: float) -> float:
        return lost / (lost + received) * 100 if lost + received > 0 else 0.0

    return {
        "seconds": seconds,
        "agent_fps": agent("understudy_agent_track_frames_total", "video") / seconds,
        "chrome_fps": chrome("video", "framesDecoded") / seconds,
        "agent_freezes": agent("understudy_agent_track_freezes_total", "video"),
        "chrome_freezes": chrome("video", "freezeCount"),
        "agent_video_loss": loss(agent("understudy_agent_track_packets_lost_total", "video"),
                                 agent("understudy_agent_track_packets_received_total", "video")),
        "chrome_video_loss": loss(chrome("video", "packetsLost"), chrome("video", "packetsReceived")),
        "agent_audio_loss": loss(agent("understudy_agent_track_packets_lost_total", "audio"),
                                 agent("understudy_agent_track_packets_received_total", "audio")),
        "chrome_audio_loss": loss(chrome("audio", "packetsLost"), chrome("audio", "packetsReceived")),
        "agent_audio_lost": agent("understudy_agent_track_packets_lost_total", "audio"),
        "chrome_audio_lost": chrome("audio", "packetsLost"),
        "agent_mos": _metric(last["agent"], "understudy_agent_track_mos", "audio"),
    }


def _summary(name: str, f: dict) -> str:
    return (f"{name} ({f['seconds']:.1f} s): fps agent {f['agent_fps']:.2f} chromium {f['chrome_fps']:.2f}; "
            f"freezes {f['agent_freezes']:.0f} vs {f['chrome_freezes']:.0f}; video loss "
            f"{f['agent_video_loss']:.2f} % vs {f['chrome_video_loss']:.2f} %; audio loss "
            f"{f['agent_audio_loss']:.2f} % ({f['agent_audio_lost']:.0f}) vs {f['chrome_audio_loss']:.2f} % "
            f"({f['chrome_audio_lost']:.0f}); agent MOS {f['agent_mos']}")


def _agree(a: float, b: float, relative: float, absolute: float) -> bool:
    return abs(a - b) <= max(relative * max(abs(a), abs(b)), absolute)


def _check_fps_and_freezes(f: dict, summary: str) -> None:
    assert f["chrome_fps"] > 5, summary
    assert _agree(f["agent_fps"], f["chrome_fps"], 0.10, 0), summary
    assert _agree(f["agent_freezes"], f["chrome_freezes"], 0.10, 1), summary


def test_clean_fps_freezes_and_loss_agree_with_chromium(session):
    f = _figures(session["windows"]["clean"])
    summary = _summary("clean", f)
    print(summary)
    _check_fps_and_freezes(f, summary)
    assert _agree(f["agent_video_loss"], f["chrome_video_loss"], 0.10, 0.5), summary
    assert _agree(f["agent_audio_loss"], f["chrome_audio_loss"], 0.10, 0.5), summary


def test_random_loss_agrees_with_chromium_and_mos_falls(session):
    clean = _figures(session["windows"]["clean"])
    f = _figures(session["windows"]["loss"])
    summary = _summary("loss", f) + f"; clean MOS {clean['agent_mos']}"
    print(summary)
    _check_fps_and_freezes(f, summary)
    # The same gaps reach both receivers: at 5 % of ~750 packets, dozens lost on each side.
    assert f["chrome_audio_lost"] >= 10, summary
    assert _agree(f["agent_audio_loss"], f["chrome_audio_loss"], 0.10, 0), summary
    assert _agree(f["agent_video_loss"], f["chrome_video_loss"], 0.10, 0.5), summary
    # The MOS estimate moves the other way from the loss.
    assert f["agent_audio_loss"] > clean["agent_audio_loss"], summary
    assert clean["agent_mos"] is not None and f["agent_mos"] is not None, summary
    assert f["agent_mos"] < clean["agent_mos"], summary


def test_rate_limited_fps_freezes_and_loss_agree_with_chromium(session):
    f = _figures(session["windows"]["rate"])
    shaping = session["shaping"]
    summary = (_summary("rate", f) + f"; cap {shaping['cap_kbit']} kbit/s per receiver (clean "
               f"{shaping['clean_kbit']:.0f}), heights (chromium, agent) while settling {shaping['settle']}, "
               f"after {shaping['heights_after']}")
    print(summary)
    _check_fps_and_freezes(f, summary)
    assert _agree(f["agent_video_loss"], f["chrome_video_loss"], 0.10, 0.5), summary
    assert _agree(f["agent_audio_loss"], f["chrome_audio_loss"], 0.10, 0.5), summary
