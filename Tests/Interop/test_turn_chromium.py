"""TURN and ICE-TCP with a peer nobody here wrote. ICE-TCP: headless Chromium (the room's own browser page) publishes
to `understudy serve --ice-tcp` while every UDP datagram to or from the server's media port is
dropped by nftables in this test's network namespace; Chromium's active TCP candidate reaches the
server's passive one (RFC 6544), and the agent (itself over ICE-TCP) records it. ffprobe/ffmpeg
judge the file; the nft counters show that UDP was tried and dropped and that TCP carried the media.
TURN: the page takes the room server's `iceServers` hand-out and Chromium's own TURN client relays
through coturn, while the agent records through Understudy's.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from browser_support import WINDOW, Agent, DevServer, RoomPage
from chromium import Chromium
from harness import decode_errors, free_port, understudy_bin
from test_agent_stage import wait_for_frames
from test_turn import (
    TURN_IP, TURN_PASSWORD, TURN_USER, _require_tools, all_udp_blocked, coturn, rule_packets,
    udp_blocked_except_relay,
)

ROOM = "ice-tcp-browser"
MEDIA_PORT = 44700


class ICETCPServer(DevServer):
    """The development-mode server on one shared UDP port, with ICE-TCP on the same number."""

    def __init__(self, workdir: Path):
        super().__init__(workdir, udp_low=MEDIA_PORT)
        self.args = [understudy_bin(), "serve", "--listen", f"127.0.0.1:{self.port}",
                     "--udp-port", str(MEDIA_PORT), "--ice-tcp"]


async def _play(workdir: Path) -> dict:
    record = workdir / "agent"
    record.mkdir()
    server = ICETCPServer(workdir).start()
    agent: Agent | None = None
    try:
        await server.ready()
        async with Chromium(extra_flags=WINDOW) as browser:
            host = await RoomPage.open(browser, server, ROOM, name="Host", id="host", mode="SEND_AND_RECV")
            await host.wait_until(
                "host publishes", lambda s: {"webcam", "mic"} <= set(s["producing"]), timeout=60)
            agent = Agent(server, ROOM, record).start()
            await agent.wait_for(r"joined room", 30)
            counts = await asyncio.to_thread(wait_for_frames, record / "host.webm", {"vp8": 60, "opus": 100}, 90)
            agent.stop()
            return {"counts": counts, "file": record / "host.webm"}
    finally:
        if agent is not None:
            agent.stop()
        server.stop()


def test_chromium_publishes_over_ice_tcp_and_the_agent_records_it(understudy, tmp_path):
    _require_tools()
    with all_udp_blocked(MEDIA_PORT):
        results = asyncio.run(asyncio.wait_for(_play(tmp_path), 180))
        direct_in, tcp_in = rule_packets("direct-in"), rule_packets("tcp-in")
    print(f"Chromium over ICE-TCP recorded: {results['counts']}; udp dropped={direct_in} tcp segments={tcp_in}")
    assert decode_errors(results["file"]) == ""
    assert direct_in > 0, "nobody tried UDP: the block proves nothing"
    assert tcp_in >= 200, tcp_in


class TURNHandOutServer(DevServer):
    """The development-mode server on one shared UDP port, handing out coturn in its join response."""

    def __init__(self, workdir: Path, media_port: int, ice: str):
        super().__init__(workdir, udp_low=media_port)
        self.args = [understudy_bin(), "serve", "--listen", f"127.0.0.1:{self.port}",
                     "--udp-port", str(media_port), "--ice-servers", ice]


async def _play_turn(workdir: Path, media_port: int, ice: str) -> dict:
    record = workdir / "agent"
    record.mkdir()
    server = TURNHandOutServer(workdir, media_port, ice).start()
    agent: Agent | None = None
    try:
        await server.ready()
        async with Chromium(extra_flags=WINDOW) as browser:
            host = await RoomPage.open(browser, server, ROOM, name="Host", id="host", mode="SEND_AND_RECV")
            await host.wait_until(
                "host publishes", lambda s: {"webcam", "mic"} <= set(s["producing"]), timeout=60)
            agent = Agent(server, ROOM, record).start()
            await agent.wait_for(r"joined room", 30)
            counts = await asyncio.to_thread(wait_for_frames, record / "host.webm", {"vp8": 60, "opus": 100}, 90)
            return {"counts": counts, "file": record / "host.webm"}
    finally:
        if agent is not None:
            agent.stop()
        server.stop()


def test_chromium_relays_through_the_handed_out_turn_server(understudy, tmp_path):
    """The page takes `iceServers` from the join response: Chromium's own TURN client publishes
    through coturn, the agent records through ours; direct UDP to the server is dropped."""
    _require_tools()
    turn_port, tls_port, media_port = free_port(), free_port(), 44750
    ice = f"turn:{TURN_USER}:{TURN_PASSWORD}@{TURN_IP}:{turn_port}?transport=udp"
    with coturn(tmp_path, turn_port, tls_port), udp_blocked_except_relay(media_port):
        results = asyncio.run(asyncio.wait_for(_play_turn(tmp_path, media_port, ice), 180))
        relayed, direct_in = rule_packets("relayed-in"), rule_packets("direct-in")
    print(f"Chromium through coturn recorded: {results['counts']}; relayed-in={relayed} direct-in={direct_in}")
    assert decode_errors(results["file"]) == ""
    assert relayed >= 200, relayed
