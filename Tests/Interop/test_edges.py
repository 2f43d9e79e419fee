"""Origin and edges (docs/cluster.md, "Origin and edges"): three `understudy serve --redis
--edge-audience 8` nodes on one throw-away Redis, inside this test's network namespace.

- A host (an agent publishing VP8 simulcast + Opus) on the origin; 3 × 8 audience load bots, each
  group through another node. The bots on the non-origin nodes keep their media there (the edges):
  every bot receives media and the full roster, `/cluster` shows the origin, both edges and the
  audience on each, and the origin's `/metrics` counts its outgoing packets per pipe (once per
  edge), not per edge member.
- An edge member invited on stage publishes to its edge, which pipes the tracks to the origin; the
  audience on every node receives it.
- kill -9 of an edge: its members (an agent, and load bots with `--reconnect`) reconnect through the
  other nodes and receive again; the bots' report has each one's rejoin and media-again times.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import asyncio

from harness import kill_process, run_understudy, understudy_bin
from room_client import RoomClient
from test_agent_stage import SECRET, AgentProcess, wait_for_frames
from test_cluster import Cluster, owners, token_for
from test_fleet import wait_until

SHARE = 8


def metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def room_layout(node, room: str) -> dict:
    return node.get("/cluster").get("rooms", {}).get(room, {})


class Load:
    """One `understudy load` of audience bots through one node."""

    def __init__(self, node, prefix: str, workdir: Path, seconds: int, subscribers: int = SHARE,
                 extra: tuple[str, ...] = (), wait_for_media: int = 20):
        self.report_path = workdir / f"load-{prefix}.json"
        self.log_path = workdir / f"load-{prefix}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [understudy_bin(), "load", "--server", node.url, "--room", "stage", "--secret", SECRET,
                 "--publishers", "0", "--subscribers", str(subscribers), "--duration", f"{seconds}s",
                 "--id-prefix", prefix, "--join-rate", "20", "--quiet", "--wait-for-media", str(wait_for_media),
                 "--json", str(self.report_path), *extra],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def report(self, timeout: float = 120) -> dict:
        self.proc.wait(timeout=timeout)
        assert self.proc.returncode == 0, self.log_path.read_text(errors="replace")
        return json.loads(self.report_path.read_text())

    def kill(self) -> None:
        kill_process(self.proc)


async def edge_member_stats(node) -> dict:
    """getStats of a signalling-only client in RECV_ONLY through `node`: its consumers are on the edge."""
    client = await RoomClient.connect(f"ws://127.0.0.1:{node.port}/v1/rtc", token_for("stage", "probe"))
    try:
        await client.join("stage", "probe", mode="RECV_ONLY")
        deadline = time.monotonic() + 30
        while True:
            stats = await client.request("getStats", {})
            if any(c.get("participantId") == "host" for c in stats.get("consumers", [])) or time.monotonic() > deadline:
                return stats
            await asyncio.sleep(0.5)
    finally:
        await client.close()


def start_stage(cluster, via: int, origin: str, tmp_path: Path) -> tuple["AgentProcess", dict]:
    """The host (an agent publishing VP8 simulcast + Opus) joining through node `via`, the room placed
    on `origin`, and two audience agents (the SDK: they reconnect), one through each of nodes 1 and 2,
    recording what they get. Returns the host and, per node, the watcher and its recording folder."""
    nodes, agents = cluster.nodes, cluster.agents
    host = AgentProcess("host", ["--server", nodes[via].url, "--room", "stage", "--secret", SECRET, "--id", "host",
                                 "--mode", "SEND_AND_RECV", "--consume", "none"], tmp_path)
    agents.append(host)
    host.wait_for(r"joined room stage as host")
    wait_until(lambda: owners(nodes[1]).get("stage") == origin, 20, f"the room placed on {origin}")
    watchers = {}
    for i in (1, 2):
        rec = tmp_path / f"rec{i}"
        agent = AgentProcess(f"w{i}", ["--server", nodes[i].url, "--room", "stage", "--secret", SECRET,
                                       "--id", f"w{i}", "--mode", "RECV_ONLY", "--consume", "all",
                                       "--record", str(rec)], tmp_path)
        agents.append(agent)
        agent.wait_for(rf"joined room stage as w{i}")
        watchers[i] = (agent, rec)
    return host, watchers


def test_audience_spread_over_edges(understudy, tmp_path):
    with Cluster(tmp_path, "e", 45300, 3, extra_args=("--edge-audience", str(SHARE))) as cluster:
        nodes, agents = cluster.nodes, cluster.agents
        # Two audience agents, one through each edge.
        host, watchers = start_stage(cluster, 0, "e0", tmp_path)
        # getStats of an edge member reports its consumers from the edge, named with the room's ids.
        stats = asyncio.run(edge_member_stats(nodes[2]))
        assert {c["kind"] for c in stats["consumers"] if c["participantId"] == "host"} >= {"mic", "webcam"}, stats
        # 8 audience members through each node: 7 load bots + the agent on each edge, 8 bots on the origin.
        loads = [Load(node, f"a{i}", tmp_path, 12, subscribers=SHARE if i == 0 else SHARE - 1)
                 for i, node in enumerate(nodes)]
        try:
            # /cluster: the origin, both edges, the audience on each.
            def layout_complete():
                layout = room_layout(nodes[2], "stage")
                audience = layout.get("audience", {})
                done = (layout.get("origin") == "e0" and sorted(layout.get("edges", [])) == ["e1", "e2"]
                        and all(audience.get(n) == SHARE for n in ("e0", "e1", "e2")))
                return layout if done else None
            layout = wait_until(layout_complete, 60, "the origin, two edges and 8 members on each",
                                lambda: json.dumps(room_layout(nodes[2], "stage")))
            # The origin's outgoing media while everyone receives: each stage track once per pipe (2
            # edges) and once per local member, not once per member of the whole audience.
            before = nodes[0].metrics()
            time.sleep(3)
            after = nodes[0].metrics()
            piped = (metric(after, "understudy_sfu_pipe_packets_sent_total")
                     - metric(before, "understudy_sfu_pipe_packets_sent_total"))
            local = (metric(after, "understudy_rtp_packets_forwarded_total")
                     - metric(before, "understudy_rtp_packets_forwarded_total") - piped)
            # 8 local members vs 2 pipes; a pipe carries every simulcast layer, a member one, so the
            # ratio is looser than 4. Without edges it would be 24 members and no pipe.
            assert piped > 0 and local > piped, (local, piped)
            for node in nodes[1:]:
                text = node.metrics()
                assert metric(text, "understudy_cluster_edge_members") == SHARE, (node.name, text)
                assert metric(text, "understudy_sfu_pipe_packets_received_total") > 0, node.name
            # Every watcher on an edge learns the whole audience (roster through the origin).
            for i, (agent, _) in watchers.items():
                wait_until(lambda: all(f"a{j}-sub-{SHARE - 1}" in agent.log() for j in range(3)), 60,
                           f"w{i} sees every node's audience", agent.log)
            reports = [load.report() for load in loads]
        finally:
            for load in loads:
                load.kill()
        for i, report in enumerate(reports):
            joined = SHARE if i == 0 else SHARE - 1
            assert report["joinedParticipants"] == joined and report["joinFailures"] == 0, (i, report["errors"])
            # Every member receives the host's video and audio.
            assert report["subscribedTracks"] >= 2 * joined, (i, report["subscribedTracks"])
            assert report["packets"] > 0 and all(t.get("packets", 1) > 0 for t in report["tracks"]), report["tracks"]
        for i, (agent, rec) in watchers.items():
            webm = wait_until(lambda: next(iter(rec.glob("host*.webm")), None), 30, f"w{i} records the host",
                              agent.log)
            wait_for_frames(webm, {"vp8": 30, "opus": 50})
        # An edge member invited on stage publishes; the audience of its own edge (w3) and of the other
        # edge (w2) receives it.
        w1, rec1 = watchers[1]
        w2, rec2 = watchers[2]
        rec3 = tmp_path / "rec3"
        w3 = AgentProcess("w3", ["--server", nodes[1].url, "--room", "stage", "--secret", SECRET, "--id", "w3",
                                 "--mode", "RECV_ONLY", "--consume", "all", "--record", str(rec3)], tmp_path)
        agents.append(w3)
        w3.wait_for(r"joined room stage as w3")
        invite = run_understudy(["invite", "--server", nodes[2].url, "--room", "stage", "--participant", "w1",
                                 "--secret", SECRET], timeout=60)
        assert invite.returncode == 0, invite.stderr
        w1.wait_for(r"changed own mode to SEND_AND_RECV", timeout=60)
        for agent, rec in ((w2, rec2), (w3, rec3)):
            guest = wait_until(lambda: next(iter(rec.glob("w1*.webm")), None), 60,
                               f"{agent.name} records the guest w1", agent.log)
            wait_for_frames(guest, {"vp8": 30})
        # Back to the audience: the guest's tracks close everywhere, so its edge pipes nothing more.
        back = run_understudy(["invite", "--server", nodes[0].url, "--room", "stage", "--participant", "w1",
                               "--mode", "RECV_ONLY", "--secret", SECRET], timeout=60)
        assert back.returncode == 0, back.stderr
        w1.wait_for(r"changed own mode to RECV_ONLY", timeout=60)
        w2.wait_for(r"mode of w1 is now RECV_ONLY", timeout=60)

        def edge_pipe_quiet():
            first = metric(nodes[1].metrics(), "understudy_sfu_pipe_packets_sent_total")
            time.sleep(1.5)
            return metric(nodes[1].metrics(), "understudy_sfu_pipe_packets_sent_total") == first
        wait_until(edge_pipe_quiet, 30, "the guest's edge stops piping its tracks")
        # The guest published to its own edge, which pipes its tracks to the origin (and the origin on
        # to the other edge).
        assert metric(nodes[1].metrics(), "understudy_sfu_pipe_packets_sent_total") > 0
        # kill -9 of an edge: its members (the agent and 4 load bots that reconnect) rejoin through the
        # other nodes and receive again. The bots' run lasts past the kill and then until each one
        # has rejoined and receives (or 90 s).
        rejoiners = Load(nodes[2], "k", tmp_path, 15, subscribers=4, extra=("--reconnect", "60s"),
                         wait_for_media=90)
        try:
            wait_until(lambda: room_layout(nodes[0], "stage").get("audience", {}).get("e2") == 5, 60,
                       "the agent and 4 reconnecting bots on e2", lambda: json.dumps(room_layout(nodes[0], "stage")))
            webm = next(iter(rec2.glob("host*.webm")))
            frames_before = wait_for_frames(webm, {"vp8": 1})["vp8"]
            assert rejoiners.proc.poll() is None, "the bots' run ended before the kill"
            os.killpg(nodes[2].proc.pid, signal.SIGKILL)
            nodes[2].proc.wait(timeout=10)
            w2.wait_for(r"connection lost; reconnecting", timeout=30)
            w2.wait_for(r"reconnected", timeout=60)
            wait_for_frames(webm, {"vp8": frames_before + 60}, timeout=60)
            report = rejoiners.report(timeout=150)
        finally:
            rejoiners.kill()
        reconnects = report["reconnects"]
        assert report["joinedParticipants"] == 4 and reconnects["count"] == 4 and reconnects["failed"] == 0, \
            (reconnects, report["errors"])
        # Each bot rejoined and got media again on tracks announced after the rejoin.
        assert all(r["rejoinMs"] is not None and r["mediaMs"] is not None for r in reconnects["each"]), reconnects
        # The phases of each rejoin, in order (what cluster-goal.py breaks the edge kill down by): the
        # attempts (every one but the last failed, with its reason), the successful one's socket and
        # join, its subscribe connection connected.
        for r in reconnects["each"]:
            attempts = r["attemptsMs"]
            assert attempts and len(r["attemptFailures"]) == len(attempts) - 1, r
            assert attempts[-1] <= r["socketMs"] <= r["joinSentMs"] <= r["rejoinMs"], r
            assert r["connectedMs"] is not None and r["trackAnnouncedMs"] is not None, r
        assert all(t["packets"] > 0 for t in report["tracks"] if not t["closed"]), report["tracks"]
        print("layout", json.dumps(layout), "piped", piped, "local", local, "bots rejoined: media again",
              json.dumps(reconnects["mediaMs"]))


def test_origin_death_moves_the_stage_and_edges_reattach(understudy, tmp_path):
    with Cluster(tmp_path, "o", 45400, 3, extra_args=("--edge-audience", str(SHARE))) as cluster:
        nodes, agents = cluster.nodes, cluster.agents
        # The host reaches the origin o0 through o1; one audience agent through each of o1 and o2.
        host, watchers = start_stage(cluster, 1, "o0", tmp_path)
        wait_until(lambda: sorted(room_layout(nodes[1], "stage").get("edges", [])) == ["o1", "o2"], 30,
                   "two edges", lambda: json.dumps(room_layout(nodes[1], "stage")))
        webms = {}
        for i, (agent, rec) in watchers.items():
            webms[i] = wait_until(lambda: next(iter(rec.glob("host*.webm")), None), 60, f"w{i} records the host",
                                  agent.log)
        before = {i: wait_for_frames(webm, {"vp8": 60})["vp8"] for i, webm in webms.items()}
        os.killpg(nodes[0].proc.pid, signal.SIGKILL)
        nodes[0].proc.wait(timeout=10)
        killed_at = time.monotonic()
        # The host reconnects (through its own node o1), the room is placed on o1 or o2, and the
        # audience's rejoins make the other node its edge: both record on.
        host.wait_for(r"reconnected", timeout=60)
        for i, (agent, _) in watchers.items():
            agent.wait_for(r"reconnected", timeout=60)
        for i, webm in webms.items():
            wait_for_frames(webm, {"vp8": before[i] + 60}, timeout=60)
        moved_in = time.monotonic() - killed_at
        layout = wait_until(
            lambda: (lambda l: l if l.get("origin") in ("o1", "o2") and len(l.get("edges", [])) == 1 else None)(
                room_layout(nodes[1], "stage")), 30, "the stage on a live node with the other as its edge",
            lambda: json.dumps(room_layout(nodes[1], "stage")))
        print("moved and received again after", round(moved_in, 1), "s:", json.dumps(layout))


def test_audience_reaching_the_origin_past_its_share_goes_to_an_edge(understudy, tmp_path):
    """With a share of 2, the third RECV_ONLY member joining straight through the origin has its
    media placed on another node (an edge), as one reaching a full edge would."""
    with Cluster(tmp_path, "s", 45500, 3, extra_args=("--edge-audience", "2")) as cluster:
        nodes = cluster.nodes

        async def members():
            clients = []
            try:
                for i in range(3):
                    client = await RoomClient.connect(f"ws://127.0.0.1:{nodes[0].port}/v1/rtc",
                                                      token_for("share", f"m{i}"))
                    clients.append(client)
                    await client.join("share", f"m{i}", mode="RECV_ONLY")
                    if i == 0:
                        wait_until(lambda: owners(nodes[1]).get("share") == "s0", 20, "the room placed on s0")
                layout = wait_until(
                    lambda: (lambda l: l if l.get("audience", {}).get("s0") == 2
                             and sum(l.get("audience", {}).values()) == 3
                             and l.get("participants") == 3 else None)(room_layout(nodes[0], "share")),
                    30, "2 members on the origin and 1 on an edge, 3 in the room",
                    lambda: json.dumps(room_layout(nodes[0], "share")))
                return layout
            finally:
                for client in clients:
                    await client.close()

        layout = asyncio.run(members())
        assert layout["origin"] == "s0" and len(layout["edges"]) == 1, layout
