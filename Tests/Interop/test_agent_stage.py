"""`understudy join` end to end: two headless agents on `understudy serve` follow a stage invite.

A host (SEND_AND_RECV, consume stage) and an audience member (RECV_ONLY, consume stage) record each
other: the audience records the host at once; after `understudy invite` the audience member goes on
stage by changing its own mode, and the host starts recording it. The recordings are judged by
ffprobe/ffmpeg, the stage lists by both agents' manifests and logs.

The helpers here (server, agent processes) are shared with test_agent_features.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from harness import decode_errors, free_port, kill_process, probe_frames, run_understudy, understudy_bin, start_room_server

SECRET = "interop-agent-secret"


def start_server(port: int, udp_low: int) -> subprocess.Popen:
    """`understudy serve` on 127.0.0.1:port with this file's secret, healthy."""
    return start_room_server(port, udp_low, SECRET)


class AgentProcess:
    """One `understudy join` child; its stderr (the log) goes to a file the test polls."""

    def __init__(self, name: str, args: list[str], workdir: Path):
        self.name = name
        self.log_path = workdir / f"{name}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [understudy_bin(), "join", *args], stdout=subprocess.DEVNULL, stderr=log,
                start_new_session=True,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match:
        """Waits until the log matches `pattern` (a regex); fails with the log otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.log())
            if found:
                return found
            if self.proc.poll() is not None:
                found = re.search(pattern, self.log())
                if found:
                    return found
                raise AssertionError(
                    f"{self.name} exited {self.proc.returncode} before /{pattern}/:\n{self.log()[-4000:]}")
            time.sleep(0.1)
        raise AssertionError(f"{self.name}: no /{pattern}/ within {timeout} s:\n{self.log()[-4000:]}")

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM (a clean end) and the exit status."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_process(self.proc, grace=1)
            raise AssertionError(f"{self.name} did not exit within {timeout} s of SIGTERM:\n{self.log()[-4000:]}")

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        kill_process(self.proc, grace=5)


def join_args(port: int, room: str, pid: str, *extra: str) -> list[str]:
    return ["--server", f"http://127.0.0.1:{port}", "--room", room, "--secret", SECRET, "--id", pid,
            "--name", f"name-{pid}", *extra]


def manifest(directory: Path) -> dict:
    return json.loads((directory / "manifest.json").read_text())


def wait_for_frames(path: Path, kinds: dict[str, int], timeout: float = 60) -> dict[str, int]:
    """Waits until ffprobe reads at least these frame counts from a growing file."""
    deadline = time.monotonic() + timeout
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        if path.exists():
            try:
                counts = probe_frames(path)
            except AssertionError:
                counts = {}
            if all(counts.get(k, 0) >= n for k, n in kinds.items()):
                return counts
        time.sleep(1)
    raise AssertionError(f"{path}: {counts}, wanted {kinds}")


def test_audience_member_follows_a_stage_invite_and_both_record(understudy, tmp_path):
    port = free_port()
    server = start_server(port, udp_low=42000)
    room = "agent-stage"
    host_dir, audience_dir = tmp_path / "host", tmp_path / "audience"
    host = audience = None
    try:
        host = AgentProcess("host", join_args(
            port, room, "host", "--mode", "SEND_AND_RECV", "--consume", "stage", "--record", str(host_dir)),
            tmp_path)
        host.wait_for(r"joined room agent-stage as host \(SEND_AND_RECV\)")
        audience = AgentProcess("audience", join_args(
            port, room, "audience", "--mode", "RECV_ONLY", "--consume", "stage", "--record", str(audience_dir)),
            tmp_path)
        audience.wait_for(r"joined room agent-stage as audience \(RECV_ONLY\)")
        # Before the invite: one host on stage, one member in the audience, seen alike by both.
        for agent in (host, audience):
            agent.wait_for(r"stage: \[host\] audience: \[audience\]")
        audience.wait_for(r"recording host -> ")
        audience.wait_for(r"listening for stage invites on REQUEST_TO_JOIN_AS_HOST_audience")
        wait_for_frames(audience_dir / "host.webm", {"vp8": 30, "opus": 50})
        assert "recording audience" not in host.log(), "the host recorded someone in the audience"

        invite = run_understudy(
            ["invite", "--server", f"http://127.0.0.1:{port}", "--room", room, "--secret", SECRET,
             "--participant", "audience"], timeout=60)
        assert invite.returncode == 0, invite.stderr
        audience.wait_for(r"accepting invite from \S+ to SEND_AND_RECV")
        audience.wait_for(r"changed own mode to SEND_AND_RECV")
        host.wait_for(r"mode of audience is now SEND_AND_RECV")
        host.wait_for(r"recording audience -> ")
        for agent in (host, audience):
            agent.wait_for(r"stage: \[audience,host\] audience: \[\]")
        wait_for_frames(host_dir / "audience.webm", {"vp8": 30, "opus": 50})
        time.sleep(2)

        assert host.terminate() == 0, host.log()[-3000:]
        assert audience.terminate() == 0, audience.log()[-3000:]
        for agent in (host, audience):
            assert re.search(r"left room: MANUAL_LEAVE_CALLED \(1101\)", agent.log()), agent.log()[-2000:]

        for path in (audience_dir / "host.webm", host_dir / "audience.webm"):
            frames = probe_frames(path)
            print(f"{path}: {frames}")
            assert frames.get("vp8", 0) >= 30, (path, frames)
            assert frames.get("opus", 0) >= 50, (path, frames)
            assert decode_errors(path) == "", path

        host_manifest, audience_manifest = manifest(host_dir), manifest(audience_dir)
        for m in (host_manifest, audience_manifest):
            assert {"participantId": "audience", "mode": "SEND_AND_RECV"}.items() <= next(
                c for c in m["modeChanges"] if c["participantId"] == "audience").items(), m["modeChanges"]
            assert m["audience"] == [], m
        # The host stopped first: its last view has both on stage; the audience member then saw it leave.
        assert host_manifest["stage"] == ["audience", "host"], host_manifest
        assert audience_manifest["stage"] == ["audience"], audience_manifest
        seen_host = next(p for p in audience_manifest["participants"] if p["id"] == "host")
        assert seen_host["mode"] == "SEND_AND_RECV" and "leftAt" in seen_host, seen_host
        seen_audience = next(p for p in host_manifest["participants"] if p["id"] == "audience")
        assert seen_audience["mode"] == "SEND_AND_RECV" and "leftAt" not in seen_audience, seen_audience
        assert [f["participantId"] for f in host_manifest["files"]] == ["audience"]
        assert [f["participantId"] for f in audience_manifest["files"]] == ["host"]
        assert host_manifest["files"][0]["path"] == str(host_dir / "audience.webm")
        assert host_manifest["files"][0]["complete"] is True
        assert audience_manifest["mode"] == "SEND_AND_RECV"
    finally:
        for agent in (host, audience):
            if agent:
                agent.stop()
        kill_process(server)
