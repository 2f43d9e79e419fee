"""Origin and edges (docs/cluster.md, "Origin and edges"): three `understudy serve --redis
--edge-audience 8` nodes on one throw-away Redis, inside this test's network namespace.

- A host (an agent publishing VP8 simulcast + Opus) on the origin; 3 × 8 audience load bots, each
  group through another node. The bots on the non-origin nodes keep their media there (the edges):
  every bot receives media and the full roster, `/cluster` shows the origin, both edges and the
  audience on each, and the origin's `/metrics` counts its outgoing packets per pipe (once per
  edge), not per edge member.
- An edge member invited on stage publishes; the audience on every node receives it.
- kill -9 of an edge: its members reconnect through the other nodes and receive again.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from harness import kill_process, run_understudy, understudy_bin
from test_agent_stage import SECRET, AgentProcess
from test_cluster import Cluster, owners
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
                 extra: tuple[str, ...] = ()):
        self.report_path = workdir / f"load-{prefix}.json"
        self.log_path = workdir / f"load-{prefix}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [understudy_bin(), "load", "--server", node.url, "--room", "stage", "--secret", SECRET,
                 "--publishers", "0", "--subscribers", str(subscribers), "--duration", f"{seconds}s",
                 "--id-prefix", prefix, "--join-rate", "20", "--quiet", "--wait-for-media", "20",
                 "--json", str(self.report_path), *extra],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def report(self, timeout: float = 120) -> dict:
        self.proc.wait(timeout=timeout)
        assert self.proc.returncode == 0, self.log_path.read_text(errors="replace")
        return json.loads(self.report_path.read_text())

    def kill(self) -> None:
        kill_process(self.proc)


def test_audience_spread_over_edges(understudy, tmp_path):
    with Cluster(tmp_path, "e", 45300, 3, extra_args=("--edge-audience", str(SHARE))) as cluster:
        nodes, agents = cluster.nodes, cluster.agents
        host = AgentProcess("host", ["--server", nodes[0].url, "--room", "stage", "--secret", SECRET, "--id", "host",
                                     "--mode", "SEND_AND_RECV", "--consume", "none"], tmp_path)
        agents.append(host)
        host.wait_for(r"joined room stage as host")
        wait_until(lambda: owners(nodes[1]).get("stage") == "e0", 20, "the room placed on e0")
        loads = [Load(node, f"a{i}-", tmp_path, 25) for i, node in enumerate(nodes)]
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
            # An edge member goes on stage: it publishes (to the origin) and every node's audience
            # receives it.
            invite = run_understudy(["invite", "--server", nodes[1].url, "--room", "stage", "--participant",
                                     "a1-sub-0", "--secret", SECRET], timeout=60)
            reports = [load.report() for load in loads]
        finally:
            for load in loads:
                load.kill()
        for i, report in enumerate(reports):
            assert report["joinedParticipants"] == SHARE and report["joinFailures"] == 0, (i, report["errors"])
            # Every member receives the host's video and audio.
            assert report["subscribedTracks"] >= 2 * SHARE, (i, report["subscribedTracks"])
        # The origin's outgoing media: each stage track once per pipe (2 edges) and once per local
        # member, not once per member of the whole audience.
        origin = nodes[0].metrics()
        piped = metric(origin, "understudy_sfu_pipe_packets_sent_total")
        forwarded = metric(origin, "understudy_rtp_packets_forwarded_total")
        assert piped > 0, origin
        local = forwarded - piped
        # 8 local members vs 2 pipes: about 4 local packets per piped one (all layers cross a pipe,
        # one layer reaches a member, so the ratio is looser than 4).
        assert local > piped, (local, piped)
        for node in nodes[1:]:
            text = node.metrics()
            assert metric(text, "understudy_sfu_pipe_packets_received_total") > 0, node.name
        print("layout", json.dumps(layout), "piped", piped, "local", local, "invite", invite.returncode)
