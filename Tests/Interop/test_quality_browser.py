"""The agent's received quality against Chromium's getStats for the same stream, under real shaping.

A Chromium host publishes its fake camera (3 simulcast layers) and microphone; a Chromium viewer
(RECV_ONLY) and the agent (`understudy join --consume stage --metrics ...`) both receive them
through the SFU. One session runs four windows of 15 s, one after the other, and in each both
sides are read at the same two instants (their cumulative counters: the agent's
`understudy_agent_track_*` in /metrics, the viewer's inbound-rtp through the page), so both
figures cover the same stretch of the same stream. The shaping is the kernel's, in the test's
network namespace, on the path from the SFU to both receivers (their UDP ports), the same for both:

1. clean;
2. random loss: nftables drops LOSS_PERCENT % of the datagrams to the receivers with
   `numgen random`, each datagram on its own;
3. the same loss: nftables drops LOSS_PERCENT % chosen by a hash of the RTP sequence number
   (`jhash @th,80,16`: UDP payload bytes 2-3, in the clear under SRTP). The SFU forwards one audio
   stream with the same numbers to both, so both lose the very same audio packets;
4. rate limit: `tc` gives each receiver an `htb` class of RATE_SHARE × the clean window's bitrate
   (at least MIN_CAP_KBIT) with a 100 ms `bfifo` queue: it shapes the key-frame bursts and the
   estimator's probes. The window starts once both decode frames of the same height (or after
   SETTLE_SECONDS). A cap below the stream's rate (0.8×) passed on a machine at load average 20
   (fps 19.90 vs 19.17, freezes 2 vs 1) but not at 35 (the estimator's probing overloads each
   queue in its own way: 18.26 vs 16.39 fps, 8 vs 3 freezes), so it is not the test's setting.

UDP GSO is off in the server, so each datagram is judged alone (a GSO message is one packet to
nftables and tc).

Compared in each window:
- frames per second: the agent's frames completed (`frames_total`) ÷ seconds against Chromium's
  `framesDecoded` ÷ the same seconds, within 10 %;
- freezes (both use the W3C definition, counted when the freeze ends): within 10 % or one freeze,
  whichever is more, on a clean path. Counts are small (0-3 in 15 s), and a freeze that straddles
  the window's edge ends in one side's window and not the other. On an impaired path the agent may
  count up to two more than Chromium (still at least Chromium's less one): the agent times each
  frame when it completes, Chromium when it is rendered, after a jitter buffer that grows to hide
  a frame late by its NACK repair (measured: 1 vs 0 under both losses, 2 vs 0 under the rate
  limit). Each receiver also loses its own packets under random loss and the rate limit;
- loss, defined alike: Δlost ÷ (Δreceived + Δlost) over the window from the RFC 3550 cumulative
  counters, after repair (a negative Δlost, holes open at the first instant repaired in the
  window, counts as none lost). The agent counts a retransmission that fills a hole as received;
  libwebrtc counts a packet repaired by RTX as lost on the media SSRC (the RTX packet is received
  on the RTX SSRC), so Chromium's after-repair loss is `packetsLost − retransmittedPacketsReceived`
  (its before-repair figure is printed too). Audio is never repaired (no NACK for Opus): it carries
  the comparison.
  - the same loss: audio within 10 %, with at least 15 packets lost on each side;
  - random loss: two independent draws of ~5 % of ~750 packets differ by chance by more than 10 %
    (one standard deviation of the difference is ~1.1 points, a fifth of the figure), so they
    agree within 10 % or three standard deviations of that difference, whichever is more;
  - video, repaired by NACK on both sides, and anything on a clean path: the shares are near 0,
    where 10 % of them means nothing, so within 0.5 points;
  - rate limit: each queue drops its own packets, compared as random loss.
- the agent's E-model MOS (audio) falls from the clean window to the random-loss one, as its
  cumulative loss rises.
"""

from __future__ import annotations

import asyncio
import math
import os
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
RATE_SHARE = 1.2
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


def _drop(ports: set[int], percent: int, same: bool) -> None:
    """Drops `percent` % of the datagrams to `ports` (the receivers'): at random per datagram
    (`numgen random`), or, when `same`, those whose RTP sequence number (UDP payload bytes 2-3, in
    the clear under SRTP) hashes below it (`jhash`), so every receiver of a stream loses the same
    packets. Counts what it saw and dropped. This namespace only."""
    chooser = ["jhash", "@th,80,16"] if same else ["numgen", "random"]
    targets = "{ " + ", ".join(str(p) for p in sorted(ports)) + " }"
    _run("nft", "add", "table", "inet", NFT_TABLE)
    _run("nft", "add", "chain", "inet", NFT_TABLE, "out", "{ type filter hook output priority 0 ; }")
    _run("nft", "add", "rule", "inet", NFT_TABLE, "out", "udp", "dport", targets, "counter")
    _run("nft", "add", "rule", "inet", NFT_TABLE, "out", "udp", "dport", targets, *chooser, "mod", "100", "lt",
         str(percent), "counter", "drop")


def _drop_counters() -> list[int]:
    """The packet counts of the rules above: [seen, dropped]."""
    out = subprocess.run(["nft", "list", "table", "inet", NFT_TABLE], capture_output=True, text=True,
                         timeout=10).stdout
    return [int(n) for n in re.findall(r"counter packets (\d+)", out)]


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

    async def layer(self) -> tuple[float, float, float, float]:
        """Both sides' decoded height and frame count (Chromium's, then the agent's)."""
        video = await self.viewer.video_stats("host")
        text = await asyncio.to_thread(_scrape, self.metrics_port)
        return (video["height"], _metric(text, "understudy_agent_track_frame_height", "video") or 0,
                video["framesDecoded"], _metric(text, "understudy_agent_track_frames_total", "video") or 0)


async def _session(workdir: Path) -> dict:
    # One datagram per send, so nftables and tc judge each datagram (a UDP GSO message is one
    # packet to them); the server inherits it (the agent sends only RTCP).
    gso = os.environ.get("UNDERSTUDY_UDP_GSO")
    os.environ["UNDERSTUDY_UDP_GSO"] = "0"
    try:
        server = DevServer(workdir, udp_low=UDP_LOW).start()
    finally:
        if gso is None:
            del os.environ["UNDERSTUDY_UDP_GSO"]
        else:
            os.environ["UNDERSTUDY_UDP_GSO"] = gso
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

            path = await viewer.page.evaluate("window.understudyRoom.subscribePath()")
            assert path and path["localPort"], f"no subscribe path: {path}"
            receivers = {"viewer": {path["localPort"]}, "agent": _udp_ports(agent.proc.pid)}
            assert receivers["agent"], "the agent has no UDP socket in ss"
            ports = receivers["viewer"] | receivers["agent"]

            result["windows"]["clean"] = await session.window("clean")
            for name, same in (("random", False), ("same", True)):
                _drop(ports, LOSS_PERCENT, same)
                try:
                    await asyncio.sleep(2)  # the window starts under loss
                    before = _drop_counters()
                    result["windows"][name] = await session.window(name)
                    result["windows"][name]["dropped"] = [b - a for a, b in zip(before, _drop_counters())]
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
            result["shaping"] = {"clean_kbit": clean_kbit, "cap_kbit": cap, "ports": receivers}
            _shape(receivers, cap)
            try:
                # Both on the same layer and decoding, for three readings a second apart.
                settle_start = time.monotonic()
                readings: list[tuple[float, float, float, float]] = []
                await asyncio.sleep(3)
                while time.monotonic() - settle_start < SETTLE_SECONDS:
                    readings.append(await session.layer())
                    last3 = readings[-3:]
                    if (len(last3) == 3 and all(r[:2] == last3[0][:2] for r in last3) and last3[0][0] == last3[0][1]
                            and last3[2][2] > last3[0][2] and last3[2][3] > last3[0][3]):
                        break
                    await asyncio.sleep(1)
                result["shaping"]["settle"] = [r[:2] for r in readings]
                result["windows"]["rate"] = await session.window("rate")
                result["shaping"]["heights_after"] = (await session.layer())[:2]
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
        # A hole open at the first instant and repaired in the window makes Δlost negative: none lost.
        lost = max(0.0, lost)
        return lost / (lost + received) * 100 if lost + received > 0 else 0.0

    # libwebrtc counts a video packet repaired by RTX as lost on the media SSRC (the RTX packet is
    # received on its own SSRC): after repair, as the agent counts, is lost − RTX received.
    chrome_video_lost = max(0.0, chrome("video", "packetsLost") - chrome("video", "retransmittedPacketsReceived"))
    agent_audio_lost = agent("understudy_agent_track_packets_lost_total", "audio")
    agent_audio_received = agent("understudy_agent_track_packets_received_total", "audio")
    return {
        "seconds": seconds,
        "agent_fps": agent("understudy_agent_track_frames_total", "video") / seconds,
        "chrome_fps": chrome("video", "framesDecoded") / seconds,
        "agent_freezes": agent("understudy_agent_track_freezes_total", "video"),
        "chrome_freezes": chrome("video", "freezeCount"),
        "agent_video_loss": loss(agent("understudy_agent_track_packets_lost_total", "video"),
                                 agent("understudy_agent_track_packets_received_total", "video")),
        "chrome_video_loss": loss(chrome_video_lost, chrome("video", "packetsReceived")),
        "chrome_video_loss_before_repair": loss(chrome("video", "packetsLost"), chrome("video", "packetsReceived")),
        "agent_audio_loss": loss(agent_audio_lost, agent_audio_received),
        "chrome_audio_loss": loss(chrome("audio", "packetsLost"), chrome("audio", "packetsReceived")),
        "agent_audio_lost": agent_audio_lost,
        "agent_audio_expected": agent_audio_lost + agent_audio_received,
        "chrome_audio_lost": chrome("audio", "packetsLost"),
        "chrome_audio_expected": chrome("audio", "packetsLost") + chrome("audio", "packetsReceived"),
        "agent_mos": _metric(last["agent"], "understudy_agent_track_mos", "audio"),
        "dropped": window.get("dropped"),
    }


def _summary(name: str, f: dict) -> str:
    return (f"{name} ({f['seconds']:.1f} s): fps agent {f['agent_fps']:.2f} chromium {f['chrome_fps']:.2f}; "
            f"freezes {f['agent_freezes']:.0f} vs {f['chrome_freezes']:.0f}; video loss after repair "
            f"{f['agent_video_loss']:.2f} % vs {f['chrome_video_loss']:.2f} % (chromium before repair "
            f"{f['chrome_video_loss_before_repair']:.2f} %); audio loss {f['agent_audio_loss']:.2f} % "
            f"({f['agent_audio_lost']:.0f} of {f['agent_audio_expected']:.0f}) vs {f['chrome_audio_loss']:.2f} % "
            f"({f['chrome_audio_lost']:.0f} of {f['chrome_audio_expected']:.0f}); agent MOS {f['agent_mos']}; "
            f"datagrams to the receivers seen, dropped: {f['dropped']}")


def _agree(a: float, b: float, relative: float, absolute: float) -> bool:
    return abs(a - b) <= max(relative * max(abs(a), abs(b)), absolute)


def _check_fps_freezes_and_video_loss(f: dict, summary: str, impaired: bool = True) -> None:
    assert f["chrome_fps"] > 5, summary
    assert _agree(f["agent_fps"], f["chrome_fps"], 0.10, 0), summary
    # One freeze either way for the window's edges; on an impaired path up to two more either way:
    # the agent times frames as they complete, Chromium as rendered after its jitter buffer, so a late
    # (repaired) frame can freeze one and not the other. Chromium's side also stalls on a starved CPU
    # (CI measured 0 at the agent vs 2 at Chromium with the same 0.00 % loss after repair and equal fps).
    slack = 2 if impaired else 1
    low = min(f["chrome_freezes"] * 0.9, f["chrome_freezes"] - slack)
    high = max(f["chrome_freezes"] * 1.1, f["chrome_freezes"] + slack)
    assert low <= f["agent_freezes"] <= high, summary
    assert _agree(f["agent_video_loss"], f["chrome_video_loss"], 0.10, 0.5), summary


def _binomial_tolerance(f: dict) -> float:
    """Three standard deviations (percentage points) of the difference of two independent loss
    shares drawn at the same rate, with each side's packet count."""
    p = (f["agent_audio_lost"] + f["chrome_audio_lost"]) / max(1, f["agent_audio_expected"] + f["chrome_audio_expected"])
    n1, n2 = max(1, f["agent_audio_expected"]), max(1, f["chrome_audio_expected"])
    return 3 * math.sqrt(p * (1 - p) * (1 / n1 + 1 / n2)) * 100


def test_clean_fps_freezes_and_loss_agree_with_chromium(session):
    f = _figures(session["windows"]["clean"])
    summary = _summary("clean", f)
    print(summary)
    _check_fps_freezes_and_video_loss(f, summary, impaired=False)
    assert _agree(f["agent_audio_loss"], f["chrome_audio_loss"], 0.10, 0.5), summary


def test_same_loss_agrees_with_chromium_within_10_percent(session):
    f = _figures(session["windows"]["same"])
    summary = _summary("same packets lost", f)
    print(summary)
    _check_fps_freezes_and_video_loss(f, summary)
    # Both lose the same audio packets (never repaired): dozens each, agreeing within 10 %.
    assert f["chrome_audio_lost"] >= 15, summary
    assert _agree(f["agent_audio_loss"], f["chrome_audio_loss"], 0.10, 0), summary


def test_random_loss_agrees_with_chromium_and_mos_falls(session):
    clean = _figures(session["windows"]["clean"])
    f = _figures(session["windows"]["random"])
    tolerance = _binomial_tolerance(f)
    summary = _summary("random loss", f) + f"; clean MOS {clean['agent_mos']}; audio tolerance {tolerance:.2f} points"
    print(summary)
    _check_fps_freezes_and_video_loss(f, summary)
    assert f["chrome_audio_lost"] >= 15 and f["agent_audio_lost"] >= 15, summary
    assert _agree(f["agent_audio_loss"], f["chrome_audio_loss"], 0.10, tolerance), summary
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
    _check_fps_freezes_and_video_loss(f, summary)
    # Each queue drops its own packets: within 10 % or the chance difference, whichever is more.
    assert _agree(f["agent_audio_loss"], f["chrome_audio_loss"], 0.10, max(0.5, _binomial_tolerance(f))), summary
