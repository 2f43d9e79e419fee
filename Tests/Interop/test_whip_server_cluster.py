"""WHIP on a cluster of room servers (docs/protocol.md, section 18, "Cluster mode").

Two `understudy serve --redis` nodes and a throw-away `redis-server`. A WebSocket member opens the
room (placed on one node); a WHIP POST to the other node is answered 307 with the owner's URL
(RFC 9725 allows redirects), and the POST repeated there publishes into the same room.
"""

from __future__ import annotations

import subprocess
import urllib.parse

import test_cluster
from harness import kill_process, understudy_bin
from test_agent_stage import SECRET
from test_cluster import Node, admin_token, owners
from test_fleet import start_redis, wait_until
from whip_server_support import http

ROOM = "clusterwhip"


def _token(participant: str) -> str:
    result = subprocess.run(
        [understudy_bin(), "token", "--secret", SECRET, "--room", ROOM, "--participant", participant,
         "--permissions", "allow_join"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_whip_post_to_a_non_owner_node_is_redirected_to_the_owner(understudy, tmp_path):
    test_cluster.ADMIN = admin_token()  # Node.get reads it
    redis, url = start_redis(tmp_path)
    nodes: list[Node] = []
    host = None
    try:
        nodes = [Node("n1", url, 44700, tmp_path), Node("n2", url, 44701, tmp_path)]
        log = open(tmp_path / "host.log", "w")
        host = subprocess.Popen(
            [understudy_bin(), "join", "--server", nodes[0].url, "--room", ROOM, "--secret", SECRET,
             "--id", "host", "--mode", "SEND_AND_RECV", "--consume", "none"],
            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        owner_id = wait_until(lambda: owners(nodes[0]).get(ROOM), 30, "room placement",
                              lambda: (tmp_path / "host.log").read_text())
        owner = next(n for n in nodes if n.name == owner_id)
        other = next(n for n in nodes if n.name != owner_id)

        sdp = _offer_sdp()
        headers = {"Content-Type": "application/sdp", "Authorization": f"Bearer {_token('cam')}"}
        status, reply_headers, body = http("POST", f"{other.url}/whip/{ROOM}", sdp.encode(), headers)
        assert status == 307, (status, body)
        target = reply_headers["Location"]
        assert urllib.parse.urlsplit(target).port == owner.port, (target, owner.url)
        status, reply_headers, body = http("POST", target, sdp.encode(), headers)
        assert status == 201, (status, body)
        roster = owner.get("/v1/rooms")
        room = next(r for r in roster["rooms"] if r["roomId"] == ROOM)
        assert "cam" in room["participants"] and "host" in room["participants"], roster
        session = urllib.parse.urljoin(target, reply_headers["Location"])
        assert http("DELETE", session)[0] == 200
        wait_until(lambda: "cam" not in next(r for r in owner.get("/v1/rooms")["rooms"]
                                             if r["roomId"] == ROOM)["participants"], 20, "WHIP leave")
    finally:
        if host is not None:
            kill_process(host)
        for node in nodes:
            kill_process(node.proc)
        kill_process(redis)


def _offer_sdp() -> str:
    """A real offer (aiortc, send-only VP8 + Opus); it is never connected."""
    import asyncio

    from aiortc import RTCConfiguration, RTCPeerConnection

    from aiortc_endpoint import Counters, PatternVideoTrack, ToneAudioTrack
    from loopback import use_loopback_only

    async def make() -> str:
        use_loopback_only()
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        counters, totals = Counters(), Counters()
        pc.addTransceiver(PatternVideoTrack(counters, totals), direction="sendonly")
        pc.addTransceiver(ToneAudioTrack(counters, totals), direction="sendonly")
        await pc.setLocalDescription(await pc.createOffer())
        sdp = pc.localDescription.sdp
        await pc.close()
        return sdp

    return asyncio.run(make())
