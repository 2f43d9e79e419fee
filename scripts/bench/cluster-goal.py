#!/usr/bin/env python3
"""Issue 38's goal layout as a repeatable bench (`make bench-cluster-goal`, part of `make bench`).

Redis and three `understudy serve --edge-audience N` nodes, each its own process, on loopback; a
stage of 1 simulcast VP8 + Opus host and 2 audio hosts on the origin (g0); N audience load bots
through each node (one `understudy load` per node), those of g1 inviting one of their own on stage
every 10 s. All bots run with `--reconnect`. Phases:

1. ramp, then steady state: the origin's pipe vs local packets over 10 s and each node's CPU;
2. kill -9 of the edge g2: its audience rejoins through the other nodes (per-bot loss → media
   again); g2 is then started again, empty;
3. kill -9 of the origin g0: the stage moves to a surviving node (the hosts reconnect and publish
   again) and the other node becomes its edge (/cluster polled).

Reported: joined, loss, tracks with media, full rosters, the origin's pipe vs local packets, invite
→ promotion and → the guest's first packet at the bots of each node, both kills' rejoin times
(p50/p95/max). Run it inside `unshare -n` (the Makefile does). N: `--audience` or CLUSTER_GOAL_N
(default 60); the issue's goal is 150 (docs/cluster.md has the command and a run's figures).

Usage: cluster-goal.py --bin PATH/understudy [--audience N] [--out docs/benchmarks.md] [--workdir DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

SECRET = "cluster-goal"
ROOM = "live"
BEGIN, END = "<!-- cluster-goal:begin -->", "<!-- cluster-goal:end -->"


def log(message: str) -> None:
    print(f"cluster-goal: {message}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float | None:
    """Nearest rank, as the load report's percentiles."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, min(len(s) - 1, int(-(-len(s) * q // 1)) - 1))]


def spread(values: list[float]) -> dict:
    return {"count": len(values), "p50": pct(values, 0.5), "p95": pct(values, 0.95), "max": max(values, default=None)}


def wait_until(what: str, timeout: float, check):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"cluster-goal: timed out waiting for {what}")
        time.sleep(0.25)


class Node:
    def __init__(self, binary: str, index: int, base: int, redis_port: int, share: int, workdir: Path):
        self.binary, self.index, self.share, self.workdir = binary, index, share, workdir
        self.name = f"g{index}"
        self.port = base + index
        self.udp = base + 10 + index
        self.redis_port = redis_port
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.log_path = self.workdir / f"{self.name}-{self.starts}.log"
        with open(self.log_path, "w") as out:
            self.proc = subprocess.Popen(
                [self.binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--udp-port", str(self.udp),
                 "--redis", f"redis://127.0.0.1:{self.redis_port}", "--node-id", self.name,
                 "--advertise", f"127.0.0.1:{self.port}", "--edge-audience", str(self.share), "--secret", SECRET],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
                return r.status == 200 and "registered" in self.log_path.read_text(errors="replace")
        except OSError:
            return False

    def get(self, path: str, token: str) -> dict:
        request = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=30) as r:
            return json.loads(r.read())

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(self.url + "/metrics", timeout=60) as r:
            text = r.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name + " ") or line.startswith(name + "{"))

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()


class Load:
    def __init__(self, binary: str, node: Node, prefix: str, workdir: Path, args: list[str]):
        self.prefix = prefix
        self.started = time.time()
        self.json = workdir / f"{prefix}.json"
        self.log_path = workdir / f"{prefix}.log"
        with open(self.log_path, "w") as out:
            self.proc = subprocess.Popen(
                [binary, "load", "--server", node.url, "--room", ROOM, "--secret", SECRET, "--id-prefix", prefix,
                 "--quiet", "--reconnect", "60s", "--json", str(self.json), *args],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def running(self) -> bool:
        return self.proc.poll() is None

    def report(self, timeout: float) -> dict:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise SystemExit(f"cluster-goal: load {self.prefix} did not end; see {self.log_path}")
        if self.proc.returncode != 0 or not self.json.exists():
            raise SystemExit(f"cluster-goal: load {self.prefix} failed; see {self.log_path}")
        return json.loads(self.json.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--audience", type=int, default=int(os.environ.get("CLUSTER_GOAL_N", "60")))
    parser.add_argument("--out", help="a Markdown file whose cluster-goal section is replaced (or appended)")
    parser.add_argument("--workdir", default="/tmp/cluster-goal")
    parser.add_argument("--port-base", type=int, default=47980)
    args = parser.parse_args()
    n = args.audience
    if not 1 <= n <= 2000:
        raise SystemExit("cluster-goal: --audience must be 1…2000")
    workdir = Path(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    binary = args.bin
    redis_port = args.port_base + 20
    redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no"],
                             stdout=open(workdir / "redis.log", "w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
    nodes = [Node(binary, i, args.port_base, redis_port, n, workdir) for i in range(3)]
    loads: list[Load] = []
    started = time.time()
    load_before = os.getloadavg()[0]
    try:
        time.sleep(0.5)
        for node in nodes:
            node.start()
        for node in nodes:
            wait_until(f"{node.name} registered", 30, node.healthy)
        admin = subprocess.run([binary, "token", "--secret", SECRET, "--permissions", "allow_join,allow_mod",
                                "--ttl", "2h"], capture_output=True, text=True, check=True).stdout.strip()

        def layout(via: Node) -> dict:
            try:
                return via.get("/cluster", admin).get("rooms", {}).get(ROOM, {})
            except OSError:
                return {}

        # Long enough for every phase on a busy machine. The audience runs end together (no waiting
        # for media, which would end them one by one) and stay for each other's roster checks.
        total = n / 10 + 150
        stage = Load(binary, nodes[0], "stage", workdir,
                     ["--publishers", "1", "--audio-publishers", "2", "--subscribers", "0",
                      "--duration", f"{total + 60:.0f}s"])
        loads.append(stage)
        wait_until("the room on g0", 30, lambda: layout(nodes[1]).get("origin") == "g0")
        everyone = 3 * n + 3
        for i, node in enumerate(nodes):
            extra = ["--invite-every", "10"] if i == 1 else []
            loads.append(Load(binary, node, f"a{i}", workdir,
                              ["--publishers", "0", "--subscribers", str(n), "--duration", f"{total:.0f}s",
                               "--join-rate", "10", "--expect-participants", str(everyone), "--stay", "30",
                               *extra]))
        log(f"3 × {n} audience joining")
        wait_until("every node's audience", 120 + n, lambda: all(
            layout(nodes[0]).get("audience", {}).get(node.name) == n for node in nodes))
        ramped = time.time() - started
        time.sleep(10)
        steady_from = time.time()
        # Steady state: the origin's outgoing media and every node's CPU over 10 s.
        p1, f1 = nodes[0].metric("understudy_sfu_pipe_packets_sent_total"), nodes[0].metric(
            "understudy_rtp_packets_forwarded_total")
        c1 = [node.cpu_seconds() for node in nodes]
        t1 = time.monotonic()
        time.sleep(10)
        p2, f2 = nodes[0].metric("understudy_sfu_pipe_packets_sent_total"), nodes[0].metric(
            "understudy_rtp_packets_forwarded_total")
        c2 = [node.cpu_seconds() for node in nodes]
        window = time.monotonic() - t1
        steady_layout = layout(nodes[0])
        fanout = {"seconds": round(window, 1), "pipePackets": int(p2 - p1), "localPackets": int((f2 - f1) - (p2 - p1)),
                  "edges": len(steady_layout.get("edges", [])),
                  "cpuCores": {node.name: round((c2[i] - c1[i]) / window, 3) for i, node in enumerate(nodes)},
                  "layout": steady_layout}
        log(f"steady: origin piped {fanout['pipePackets']}, sent locally {fanout['localPackets']} in {window:.0f} s")
        # A few more invites while every bot is on the node it joined through (the invite rows are
        # per node).
        time.sleep(30)

        # kill -9 of an edge.
        if not all(load.running() for load in loads):
            raise SystemExit("cluster-goal: a load run ended before the kills; see its log in " + str(workdir))
        edge_killed = time.time()
        nodes[2].kill9()
        log("killed the edge g2")
        wait_until("g2's audience back on g0 and g1", 90, lambda: sum(
            layout(nodes[0]).get("audience", {}).get(name, 0) for name in ("g0", "g1")) == 3 * n)
        edge_back = time.time() - edge_killed
        nodes[2].start()
        wait_until("g2 registered again", 30, nodes[2].healthy)
        time.sleep(5)

        # kill -9 of the origin.
        if not all(load.running() for load in loads):
            raise SystemExit("cluster-goal: a load run ended before the origin's kill; see " + str(workdir))
        origin_killed = time.time()
        nodes[0].kill9()
        log("killed the origin g0")
        moved = wait_until("the stage on g1 or g2 with the other as its edge", 90, lambda: (
            lambda l: l if l.get("origin") in ("g1", "g2") and l.get("edges") else None)(layout(nodes[1])))
        reattached = time.time() - origin_killed
        # The layout as /cluster shows it until everyone is in the room again (kept in summary.json).
        # Its participants, not the audience sum: g1's bots keep one guest on stage (SEND_AND_RECV).
        recovery: list[dict] = []

        def everyone_counted() -> bool:
            seen = layout(nodes[1])
            recovery.append({"seconds": round(time.time() - origin_killed, 2), **seen})
            return seen.get("participants") == everyone

        wait_until("everyone back", 120, everyone_counted)
        everyone_back = time.time() - origin_killed

        reports = {load.prefix: load.report(timeout=total + 300) for load in loads}
    finally:
        for load in loads:
            if load.running():
                os.killpg(load.proc.pid, signal.SIGKILL)
        for node in nodes:
            node.stop()
        redis.kill()

    for load in loads[1:]:
        reports[load.prefix]["_started"] = load.started
    summary = summarize(n, reports, fanout, steady_from, ramped, edge_killed, edge_back, origin_killed, moved, reattached,
                        everyone_back)
    # Each change of the room's layout after the origin's kill, until everyone was counted.
    summary["originKillLayouts"] = [r for i, r in enumerate(recovery)
                                    if i == 0 or {**r, "seconds": 0} != {**recovery[i - 1], "seconds": 0}]
    summary["run"] = (f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(started))} UTC, load average "
                      f"{load_before:.1f} before and {os.getloadavg()[0]:.1f} after")
    (workdir / "summary.json").write_text(json.dumps(summary, indent=1))
    text = markdown(summary)
    print(text)
    if args.out:
        path = Path(args.out)
        old = path.read_text() if path.exists() else ""
        section = f"{BEGIN}\n{text}\n{END}"
        if BEGIN in old and END in old:
            new = old[:old.index(BEGIN)] + section + old[old.index(END) + len(END):]
        else:
            new = old.rstrip("\n") + "\n\n" + section + "\n"
        path.write_text(new)
        log(f"wrote {path}")
    return 0


def summarize(n, reports, fanout, steady_from, ramped, edge_killed, edge_back, origin_killed, moved, reattached, everyone_back):
    audience = [reports[f"a{i}"] for i in range(3)]
    joined = sum(r["joinedParticipants"] for r in audience)
    received = sum(r["packets"] for r in audience)
    lost = sum(r["packetsLost"] for r in audience)
    open_tracks = [t for r in audience for t in r["tracks"] if not t["closed"]]
    # Tracks announced before the first kill (5 s before: time to get media): did each receive media?
    before = [t for r in audience for t in r["tracks"] if t["announcedAtUnixMs"] < edge_killed * 1000 - 5000]
    # Loss from the steady state to the first kill, from the progress ticks (cumulative counters).
    got = lost_steady = 0
    for r in audience:
        ticks = [t for t in r["ticks"] if steady_from <= r["_started"] + t["seconds"] < edge_killed]
        if len(ticks) >= 2:
            got += ticks[-1]["packetsReceived"] - ticks[0]["packetsReceived"]
            lost_steady += max(0, ticks[-1]["packetsLost"] - ticks[0]["packetsLost"])
    rosters = [r.get("rosterCheck") or {} for r in audience]

    # Invite → the guest's first packet at each node's bots (invites sent before the first kill).
    changes = audience[1]["modeChanges"]
    invites = sorted((i for i in changes.get("invites") or []
                      if i["mode"] == "SEND_AND_RECV" and i["sentAtUnixMs"] < edge_killed * 1000 - 10_000),
                     key=lambda i: i["sentAtUnixMs"])
    per_node = {}
    for node, r in enumerate(audience):
        firsts = []
        for k, invite in enumerate(invites):
            until = invites[k + 1]["sentAtUnixMs"] if k + 1 < len(invites) else edge_killed * 1000
            by_bot: dict[str, float] = {}
            for t in r["tracks"]:
                at = t.get("firstPacketAtUnixMs")
                if t["publisher"] == invite["guest"] and at is not None and invite["sentAtUnixMs"] <= at < until:
                    by_bot[t["subscriber"]] = min(by_bot.get(t["subscriber"], at), at)
            firsts += [at - invite["sentAtUnixMs"] for at in by_bot.values()]
        per_node[f"g{node}"] = spread(firsts)

    def reconnections(rs, since, until):
        each = [e for r in rs for e in (r.get("reconnects") or {}).get("each", [])
                if since * 1000 <= e["lostAtUnixMs"] < until * 1000]
        # The phases of each rejoin: attempts (the last one's start), track announced, subscribe
        # connection connected, first packet; and why attempts failed (the first words of each reason).
        reasons: dict[str, int] = {}
        for e in each:
            for why in e.get("attemptFailures") or []:
                key = why[:90]
                reasons[key] = reasons.get(key, 0) + 1
        return {"bots": len(each), "failed": sum(e["failed"] for e in each),
                "mediaMs": spread([e["mediaMs"] for e in each if e.get("mediaMs") is not None]),
                "rejoinMs": spread([e["rejoinMs"] for e in each if e.get("rejoinMs") is not None]),
                "attempts": spread([len(e["attemptsMs"]) for e in each if e.get("attemptsMs")]),
                "lastAttemptMs": spread([e["attemptsMs"][-1] for e in each if e.get("attemptsMs")]),
                "socketMs": spread([e["socketMs"] for e in each if e.get("socketMs")]),
                "joinSentMs": spread([e["joinSentMs"] for e in each if e.get("joinSentMs")]),
                "trackAnnouncedMs": spread([e["trackAnnouncedMs"] for e in each if e.get("trackAnnouncedMs")]),
                "connectedMs": spread([e["connectedMs"] for e in each if e.get("connectedMs")]),
                "attemptFailures": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:5])}

    return {
        "audiencePerNode": n, "planned": 3 * n, "joined": joined,
        "lossPercent": round(lost / (received + lost) * 100, 3) if received + lost else 0,
        "lossPercentBeforeKills": round(lost_steady / (got + lost_steady) * 100, 3) if got + lost_steady else None,
        "tracksWithMediaBeforeKills": [sum(1 for t in before if t["packets"] > 0), len(before)],
        "openTracksWithMediaAtEnd": [sum(1 for t in open_tracks if t["packets"] > 0), len(open_tracks)],
        "rosters": {"checked": sum(r.get("checked", 0) for r in rosters),
                    "mismatched": sum(r.get("mismatched", 0) for r in rosters),
                    "example": next((r.get("example") for r in rosters if r.get("example")), None)},
        "rampSeconds": round(ramped, 1),
        "fanout": fanout,
        "invites": {"sent": len(invites), "promotions": changes["promotions"], "failures": changes["failures"],
                    "changeModeMs": changes.get("changeModeMs"), "guestPublishingMs": changes.get("latencyMs"),
                    "firstPacketAtNodeMs": per_node},
        "edgeKill": {**reconnections(audience, edge_killed, origin_killed), "audienceBackSeconds": round(edge_back, 1)},
        "originKill": {"hosts": reconnections([reports["stage"]], origin_killed, 1e12),
                       "audience": reconnections(audience, origin_killed, 1e12),
                       "stageMovedAndEdgeSeconds": round(reattached, 1), "layout": moved,
                       "everyoneBackSeconds": round(everyone_back, 1)},
        "errors": {p: r.get("errors", [])[:5] for p, r in reports.items()},
    }


def ms(s: dict | None) -> str:
    if not s or not s.get("count"):
        return "—"
    return f"{s['p50']:.0f} / {s['p95']:.0f} / {s['max']:.0f} ms ({s['count']})"


def num(s: dict | None) -> str:
    if not s or not s.get("count"):
        return "—"
    return f"{s['p50']:g} / {s['p95']:g} / {s['max']:g}"


def markdown(s: dict) -> str:
    f = s["fanout"]
    n = s["audiencePerNode"]
    e, o = s["edgeKill"], s["originKill"]
    inv = s["invites"]
    cores = ", ".join(f"{k} {v:.2f}" for k, v in f["cpuCores"].items())
    audience = f["layout"].get("audience", {})
    rows = [
        f"| joined | {s['joined']} of {s['planned']} (ramp {s['rampSeconds']} s) |",
        f"| loss from the steady state to the first kill | {s['lossPercentBeforeKills']} % |",
        f"| loss over the whole run (the kills and failovers included) | {s['lossPercent']} % |",
        f"| tracks with media (announced 5 s or more before the first kill) | {s['tracksWithMediaBeforeKills'][0]} of "
        f"{s['tracksWithMediaBeforeKills'][1]} |",
        f"| open tracks with media at the end | {s['openTracksWithMediaAtEnd'][0]} of "
        f"{s['openTracksWithMediaAtEnd'][1]} |",
        f"| full roster at the end ({3 * n + 3} participants) | {s['rosters']['checked'] - s['rosters']['mismatched']}"
        f" of {s['rosters']['checked']} audience bots |",
        f"| origin over {f['seconds']} s: pipe / local packets | {f['pipePackets']} / {f['localPackets']} "
        f"({f['edges']} edges; audience {json.dumps(audience)}) |",
        f"| server CPU per node (cores, steady) | {cores} |",
        f"| invites: promoted / failed | {inv['promotions']} / {inv['failures']} ({inv['sent']} measured) |",
        f"| invite → changeMode answered (p50/p95/max) | {ms(inv['changeModeMs'])} |",
        f"| invite → guest publishing | {ms(inv['guestPublishingMs'])} |",
    ] + [f"| invite → guest's first packet at {node}'s bots | {ms(v)} |"
         for node, v in inv["firstPacketAtNodeMs"].items()] + [
        f"| kill -9 of an edge: its bots' loss → media again | {ms(e['mediaMs'])}, {e['failed']} failed |",
        f"| kill -9 of an edge: loss → rejoined | {ms(e['rejoinMs'])}; all {3 * n} back in /cluster after "
        f"{e['audienceBackSeconds']} s |",
        f"| kill -9 of an edge: attempts per bot; the successful one's start | {num(e.get('attempts'))}; "
        f"{ms(e.get('lastAttemptMs'))} |",
        f"| kill -9 of an edge: loss → socket open / join sent | {ms(e.get('socketMs'))} / {ms(e.get('joinSentMs'))} |",
        f"| kill -9 of an edge: loss → first track announced / subscribe connected | "
        f"{ms(e.get('trackAnnouncedMs'))} / {ms(e.get('connectedMs'))} |",
        f"| kill -9 of an edge: failed attempts | "
        f"{'; '.join(f'{c} × {w}' for w, c in (e.get('attemptFailures') or {}).items()) or 'none'} |",
        f"| kill -9 of the origin: hosts' loss → publishing again | {ms(o['hosts']['mediaMs'])}, "
        f"{o['hosts']['failed']} failed |",
        f"| kill -9 of the origin: stage on {o['layout'].get('origin')} with edge "
        f"{','.join(o['layout'].get('edges', []))} in /cluster | {o['stageMovedAndEdgeSeconds']} s |",
        f"| kill -9 of the origin: audience loss → media again | {ms(o['audience']['mediaMs'])}, "
        f"{o['audience']['failed']} failed; all {s['planned'] + 3} in the room again in /cluster after {o['everyoneBackSeconds']} s |",
    ]
    return "\n".join([
        f"## Cluster: the goal layout, 3 nodes × {n} audience (issue 38)",
        "",
        "| metric | measured |",
        "|---|---|",
        *rows,
        "",
        "Produced by `scripts/bench/cluster-goal.py` (`make bench-cluster-goal`, `CLUSTER_GOAL_N` per node):",
        "Redis and three `understudy serve --edge-audience N` processes on loopback in a network namespace, a",
        "stage of 1 simulcast VP8 + Opus host and 2 audio hosts on the origin, one `understudy load --reconnect`",
        "of N audience bots through each node (those of g1 invite one of their own every 10 s), then kill -9",
        "of the edge g2 (restarted empty), then kill -9 of the origin g0. Times are from each bot's loss of its",
        "signalling connection (p50 / p95 / max, samples). The generator runs beside the servers.",
        f"Run: {s.get('run', '?')}.",
    ])


if __name__ == "__main__":
    sys.exit(main())
