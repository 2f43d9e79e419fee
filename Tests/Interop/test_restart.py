"""Surviving a server restart: `understudy serve` is killed (-9) while `understudy join` records a
publishing host, and comes back on the same port 10 seconds later. Both joins stay in the room
(RECONNECTING, retrying with backoff within `--reconnect-for`), rejoin, the recorder consumes the
host again and records on; the recording (one file, or several listed in the manifest) is judged
by ffprobe/ffmpeg.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from harness import decode_errors, free_port, kill_process, probe_frames
from test_agent_stage import AgentProcess, join_args, manifest, start_server, wait_for_frames

OUTAGE_SECONDS = 10


def _frames(paths: list[Path]) -> dict[str, int]:
    total: dict[str, int] = {}
    for path in paths:
        for codec, n in probe_frames(path).items():
            total[codec] = total.get(codec, 0) + n
    return total


def _host_files(directory: Path) -> list[Path]:
    return [Path(f["path"]) for f in manifest(directory)["files"] if f["participantId"] == "host"]


def _first_host_file(directory: Path, timeout: float = 60) -> Path:
    """The agent logs "recording host ->" before its manifest writer (a queue of its own) lists the
    file, so the manifest is read until it does."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            files = _host_files(directory)
        except (FileNotFoundError, json.JSONDecodeError):
            files = []
        if files:
            return files[0]
        assert time.monotonic() < deadline, f"the manifest in {directory} never listed a file of host"
        time.sleep(0.1)


def test_a_recording_agent_rides_out_a_10_second_server_restart(understudy, tmp_path):
    port = free_port()
    server = start_server(port, udp_low=43800)
    room = "restart"
    out = tmp_path / "rec"
    agents: list[AgentProcess] = []
    try:
        host = AgentProcess("host", join_args(
            port, room, "host", "--mode", "SEND_AND_RECV", "--consume", "none", "--reconnect-for", "60s"), tmp_path)
        agents.append(host)
        host.wait_for(rf"joined room {room} as host")
        recorder = AgentProcess("rec", join_args(
            port, room, "rec", "--consume", "all", "--record", str(out), "--reconnect-for", "60s"), tmp_path)
        agents.append(recorder)
        recorder.wait_for(r"recording host ->")
        first = _first_host_file(out)
        wait_for_frames(first, {"vp8": 60, "opus": 100})

        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
        recorder.wait_for(r"connection lost; reconnecting")
        host.wait_for(r"connection lost; reconnecting")
        time.sleep(OUTAGE_SECONDS)
        # Still in the room after the outage: retrying, not gone with 1102.
        assert recorder.proc.poll() is None, recorder.log()
        assert host.proc.poll() is None, host.log()
        assert "WEBSOCKET_CONNECTION_ATTEMPTS_EXHAUSTED" not in recorder.log()
        before = _frames(_host_files(out))
        print(f"frames before the restart: {before}")

        server = start_server(port, udp_low=43800)
        recorder.wait_for(rf"reconnected to room {room}", timeout=60)
        host.wait_for(rf"reconnected to room {room}", timeout=60)
        # The recorder consumes the host again and records on (same file or a new one).
        deadline = time.monotonic() + 60
        after: dict[str, int] = {}
        while time.monotonic() < deadline:
            after = _frames(_host_files(out))
            if after.get("vp8", 0) >= before.get("vp8", 0) + 90 and after.get("opus", 0) >= before.get("opus", 0) + 150:
                break
            time.sleep(1)
        print(f"frames after the restart: {after}; files: {_host_files(out)}")
        assert after.get("vp8", 0) >= before.get("vp8", 0) + 90, (before, after, recorder.log()[-3000:])
        assert after.get("opus", 0) >= before.get("opus", 0) + 150, (before, after)
        assert recorder.proc.poll() is None and host.proc.poll() is None

        # A clean stop finalizes every file; each decodes without errors.
        os.killpg(recorder.proc.pid, signal.SIGTERM)
        assert recorder.proc.wait(timeout=30) == 0, recorder.log()[-3000:]
        for path in _host_files(out):
            assert decode_errors(path) == "", path
        assert manifest(out)["files"], manifest(out)
    finally:
        for a in agents:
            kill_process(a.proc)
        kill_process(server)
