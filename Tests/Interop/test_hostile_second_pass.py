"""Hostile input, second pass (issue 31), against real `understudy serve`, `join`, `whip` and `whep`.

* item 7: one room token may open only its share of the WHIP/WHEP sessions (429), a room only its
  share (503); another room still gets sessions.
* item 9: a participant with `allow_join` only that puts itself on stage with `changeMode` is not
  trusted by the agent's default `--accept-invites trusted`; a moderator (`understudy invite`) is.
* item 15: `understudy whip` and `understudy whep` against an endpoint that drips its answer a byte
  a second give up at their request deadline instead of hanging.
* item 16: an agent whose recording hits a file size limit (RLIMIT_FSIZE, EFBIG) or a full disk
  (a small tmpfs in a private mount namespace, ENOSPC) reports it while it runs (log, /metrics,
  manifest), and counts only what reached the file: the counts equal what ffprobe reads.

Every wait is bounded and waits for the event it checks.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

from aiortc import RTCConfiguration, RTCPeerConnection

from harness import free_port, kill_process, probe_frames, run_understudy, start_room_server, understudy_bin
from room_client import RoomClient
from test_agent_stage import AgentProcess
from whip_server_support import http

SECRET = "hostile-second-pass-secret"


def cli_token(room: str, participant: str | None = None, permissions: str = "allow_join",
              ttl: str | None = None) -> str:
    args = ["token", "--secret", SECRET, "--room", room, "--permissions", permissions]
    if participant:
        args += ["--participant", participant]
    if ttl:
        args += ["--ttl", ttl]
    result = run_understudy(args, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def join_args(port: int, room: str, pid: str, *extra: str) -> list[str]:
    return ["--server", f"http://127.0.0.1:{port}", "--room", room, "--secret", SECRET, "--id", pid,
            "--name", f"name-{pid}", *extra]


def metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def wait_until(what: str, condition, timeout: float = 60, interval: float = 0.3):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"never {what} within {timeout} s")


# ---- item 7 ---------------------------------------------------------------------------------


def whip_offer() -> str:
    """A send-only audio + video offer from aiortc (never answered: no media is needed here)."""

    async def make() -> str:
        from aiortc_endpoint import PatternVideoTrack, ToneAudioTrack, Counters

        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        counters, totals = Counters(), Counters()
        pc.addTransceiver(ToneAudioTrack(counters, totals), direction="sendonly")
        pc.addTransceiver(PatternVideoTrack(counters, totals), direction="sendonly")
        await pc.setLocalDescription(await pc.createOffer())
        sdp = pc.localDescription.sdp
        await pc.close()
        return sdp

    return asyncio.run(make())


def test_one_token_or_one_room_cannot_take_every_whip_session(understudy, tmp_path):
    config = tmp_path / "server.json"
    # A room share below the default so the test stays short; the token share is the default (20).
    # Sessions are not reaped during the test (no ICE ever completes).
    config.write_text(json.dumps({"maxHTTPSessionsPerRoom": 30, "httpSessionICETimeoutSeconds": 300}))
    port = free_port()
    server = start_room_server(port, 45100, SECRET, extra_args=["--config", str(config)])
    try:
        base = f"http://127.0.0.1:{port}"
        offer = whip_offer().encode()
        first = cli_token("busy")
        second = cli_token("busy", ttl="3h")
        assert first != second

        def post(room: str, token: str) -> tuple[int, dict, dict]:
            status, headers, body = http("POST", f"{base}/whip/{room}", offer,
                                         {"Content-Type": "application/sdp", "Authorization": f"Bearer {token}"},
                                         timeout=60)
            return status, headers, (json.loads(body) if body.startswith(b"{") else {})

        for i in range(20):
            status, _, body = post("busy", first)
            assert status == 201, (i, status, body)
        status, headers, body = post("busy", first)
        assert status == 429 and body["error"]["code"] == 4009, (status, body)
        assert "maxHTTPSessionsPerToken" in body["error"]["message"], body
        assert headers.get("Retry-After") == "30", headers

        for i in range(10):
            status, _, body = post("busy", second)
            assert status == 201, (i, status, body)
        status, _, body = post("busy", second)
        assert status == 503 and body["error"]["code"] == 4009, (status, body)
        assert "maxHTTPSessionsPerRoom" in body["error"]["message"], body

        # Another room, another token: served.
        status, headers, body = post("quiet", cli_token("quiet"))
        assert status == 201, (status, body)
        assert http("DELETE", base + headers["Location"])[0] == 200
        assert http("GET", f"{base}/healthz")[0] == 200
    finally:
        kill_process(server)


# ---- item 9 ---------------------------------------------------------------------------------


def test_a_self_promoted_participant_cannot_invite_the_agent(understudy, tmp_path):
    port = free_port()
    server = start_room_server(port, 45200, SECRET)
    agent = None
    try:
        agent = AgentProcess("agent", join_args(port, "trust", "agent", "--consume", "none"), tmp_path)
        agent.wait_for(r"listening for stage invites on REQUEST_TO_JOIN_AS_HOST_agent")

        async def climb_and_invite() -> None:
            client = await RoomClient.connect(f"ws://127.0.0.1:{port}/v1/rtc", cli_token("trust", "climber"))
            try:
                joined = await client.join("trust", "climber", mode="RECV_ONLY", autoConsume=False)
                assert joined["permissions"] == ["allow_join"], joined
                # The server lets any participant change its own mode.
                await client.request("changeMode", {"mode": "SEND_AND_RECV"})
                agent.wait_for(r"mode of climber is now SEND_AND_RECV")
                await client.request("publish", {"topic": "REQUEST_TO_JOIN_AS_HOST_agent",
                                                 "message": "SEND_AND_RECV"})
                await asyncio.get_running_loop().run_in_executor(
                    None, lambda: agent.wait_for(r"refused invite from climber to SEND_AND_RECV"))
            finally:
                await client.close()

        asyncio.run(climb_and_invite())
        assert "accepting invite" not in agent.log(), agent.log()[-2000:]
        assert "changed own mode" not in agent.log(), agent.log()[-2000:]

        # A moderator's invite (understudy invite signs with allow_mod) is followed.
        invite = run_understudy(["invite", "--server", f"http://127.0.0.1:{port}", "--room", "trust", "--secret",
                                 SECRET, "--participant", "agent"], timeout=60)
        assert invite.returncode == 0, invite.stderr
        agent.wait_for(r"accepting invite from \S+ to SEND_AND_RECV")
        agent.wait_for(r"changed own mode to SEND_AND_RECV")
        assert agent.terminate() == 0
    finally:
        if agent:
            agent.stop()
        kill_process(server)


# ---- item 15 --------------------------------------------------------------------------------


class DrippingEndpoint:
    """Answers every request with a 201 whose head and body come one byte a second."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.requests += 1
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        answer = (b"HTTP/1.1 201 Created\r\nContent-Type: application/sdp\r\nContent-Length: 4000\r\n\r\n"
                  + b"v" * 4000)
        try:
            conn.settimeout(5)
            conn.recv(65536)
            for i in range(len(answer)):
                if self.stopped.is_set():
                    break
                conn.sendall(answer[i:i + 1])
                time.sleep(1)
        except OSError:
            pass
        finally:
            conn.close()

    def stop(self) -> None:
        self.stopped.set()
        self.sock.close()


def test_whip_and_whep_give_up_on_a_dripping_endpoint(understudy, tmp_path):
    endpoint = DrippingEndpoint()
    try:
        for args in (["whip", f"http://127.0.0.1:{endpoint.port}/whip/room", "--duration", "3"],
                     ["whep", f"http://127.0.0.1:{endpoint.port}/whep/room/host", "--duration", "3",
                      "--record", str(tmp_path / "whep.webm")]):
            started = time.monotonic()
            # Before the fix the client was still waiting after 30 s (and would be for 4000 s).
            result = run_understudy(args, timeout=45)
            took = time.monotonic() - started
            print(args[0], f"{took:.1f} s", result.stderr.strip())
            assert result.returncode == 1, (args[0], result.returncode, result.stderr)
            assert "timed out" in result.stderr, result.stderr
            assert took < 30, f"{args[0]} took {took:.1f} s"
        assert endpoint.requests == 2
    finally:
        endpoint.stop()


# ---- item 16 --------------------------------------------------------------------------------

FILE_LIMIT = 400_000


def _limit_file_size() -> None:
    # In the child before exec: a file size limit, and SIGXFSZ ignored so that a write past it fails
    # with EFBIG (understudy ignores SIGXFSZ itself too).
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_a_write_error_is_reported_when_it_happens_and_counts_are_what_the_file_holds(understudy, tmp_path):
    port = free_port()
    server = start_room_server(port, 45300, SECRET)
    host = None
    recorder = None
    out = tmp_path / "rec"
    metrics_port = free_port()
    log_path = tmp_path / "recorder.log"
    try:
        host = AgentProcess("host", join_args(port, "full", "host", "--mode", "SEND_AND_RECV", "--consume", "none"),
                            tmp_path)
        host.wait_for(r"joined room full as host \(SEND_AND_RECV\)")
        with open(log_path, "w") as log:
            recorder = subprocess.Popen(
                [understudy_bin(), "join", *join_args(port, "full", "recorder", "--consume", "all", "--record",
                                                      str(out), "--metrics", f"127.0.0.1:{metrics_port}")],
                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True, preexec_fn=_limit_file_size)

        def log_text() -> str:
            return log_path.read_text(errors="replace")

        wait_until("the recorder records the host", lambda: "recording host -> " in log_text(), timeout=60)
        # Reported while the agent runs: the log line ...
        failed = wait_until(
            "the recorder reports the write error",
            lambda: re.search(r"recording of host failed: write to (\S+) failed: File too large \(errno 27\); "
                              r"\S+ holds (\d+) video, (\d+) audio frames", log_text()),
            timeout=120)
        assert recorder.poll() is None, log_text()[-3000:]
        in_file = {"vp8": int(failed.group(2)), "opus": int(failed.group(3))}
        assert in_file["vp8"] > 0 and in_file["opus"] > 0, failed.group(0)
        # ... /metrics ...
        values = metrics(metrics_port)
        assert values["understudy_agent_recording_write_errors_total"] == 1, values
        recorded = {"vp8": values['understudy_agent_frames_recorded_total{kind="video"}'],
                    "opus": values['understudy_agent_frames_recorded_total{kind="audio"}']}
        assert recorded == in_file, (recorded, in_file)
        # ... and the manifest.
        entry = wait_until("the manifest names the error", lambda: next(
            (f for f in json.loads((out / "manifest.json").read_text())["files"] if "error" in f), None), timeout=30)
        assert "File too large" in entry["error"] and entry["failedAt"], entry
        assert (entry["videoFrames"], entry["audioFrames"]) == (in_file["vp8"], in_file["opus"]), entry
        # Media goes on arriving; nothing more is counted as recorded.
        received = values['understudy_agent_frames_received_total{kind="video"}']
        wait_until("more video arrives",
                   lambda: metrics(metrics_port)['understudy_agent_frames_received_total{kind="video"}']
                   > received + 30, timeout=60)
        later = metrics(metrics_port)
        assert later['understudy_agent_frames_recorded_total{kind="video"}'] == in_file["vp8"], later

        os.killpg(recorder.pid, signal.SIGTERM)
        recorder.wait(timeout=60)
        text = log_text()
        final = re.search(r"recorded host: (\d+) video, (\d+) audio frames", text)
        assert final, text[-3000:]
        assert (int(final.group(1)), int(final.group(2))) == (in_file["vp8"], in_file["opus"]), final.group(0)

        path = Path(failed.group(1))
        assert path.stat().st_size <= FILE_LIMIT
        probed = probe_frames(path)
        print("in file", in_file, "ffprobe", probed)
        assert probed.get("vp8", 0) == in_file["vp8"] and probed.get("opus", 0) == in_file["opus"], (probed, in_file)
        files = json.loads((out / "manifest.json").read_text())["files"]
        assert len(files) == 1 and files[0]["complete"] is False, files
        assert (files[0]["videoFrames"], files[0]["audioFrames"]) == (in_file["vp8"], in_file["opus"]), files
        assert files[0]["framesNotWritten"] > 0, files
    finally:
        if recorder and recorder.poll() is None:
            kill_process(recorder)
        if host:
            host.stop()
        kill_process(server)


def test_a_full_disk_is_reported_when_it_happens(understudy, tmp_path):
    """The same on a real full disk: a 400 KiB tmpfs, mounted in a private mount namespace
    (`unshare -m`) around the recording agent, so writes fail with ENOSPC. The shell copies the
    recording out once the agent has exited (the tmpfs ends with the namespace)."""
    port = free_port()
    server = start_room_server(port, 45400, SECRET)
    host = None
    shell = None
    disk, out, pid_file = tmp_path / "disk", tmp_path / "copied", tmp_path / "agent.pid"
    disk.mkdir()
    metrics_port = free_port()
    log_path = tmp_path / "recorder.log"
    args = join_args(port, "fulldisk", "recorder", "--consume", "all", "--record", str(disk / "rec"),
                     "--metrics", f"127.0.0.1:{metrics_port}")
    script = (
        'mount -t tmpfs -o size=400k tmpfs "$0" || exit 3\n'
        '"$1" join "${@:4}" 2>"$2" &\n'
        'echo $! > "$3"\n'
        'wait $!; status=$?\n'
        'cp -r "$0/rec" "$3.out"; exit $status\n')
    try:
        host = AgentProcess("host", join_args(port, "fulldisk", "host", "--mode", "SEND_AND_RECV", "--consume",
                                              "none"), tmp_path)
        host.wait_for(r"joined room fulldisk as host \(SEND_AND_RECV\)")
        shell = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "bash", "-c", script, str(disk), understudy_bin(),
             str(log_path), str(pid_file), *args], start_new_session=True)

        def log_text() -> str:
            return log_path.read_text(errors="replace") if log_path.exists() else ""

        wait_until("the recorder records the host", lambda: "recording host -> " in log_text(), timeout=60)
        failed = wait_until(
            "the recorder reports the full disk",
            lambda: re.search(r"recording of host failed: write to \S+ failed: No space left on device "
                              r"\(errno 28\); \S+ holds (\d+) video, (\d+) audio frames", log_text()),
            timeout=120)
        agent_pid = int(pid_file.read_text())
        os.kill(agent_pid, 0)  # still running: reported while it records, not at close
        in_file = {"vp8": int(failed.group(1)), "opus": int(failed.group(2))}
        assert in_file["vp8"] > 0 and in_file["opus"] > 0, failed.group(0)
        values = metrics(metrics_port)
        assert values["understudy_agent_recording_write_errors_total"] == 1, values
        assert values['understudy_agent_frames_recorded_total{kind="video"}'] == in_file["vp8"], values

        os.kill(agent_pid, signal.SIGTERM)
        shell.wait(timeout=60)
        final = re.search(r"recorded host: (\d+) video, (\d+) audio frames", log_text())
        assert final, log_text()[-3000:]
        assert (int(final.group(1)), int(final.group(2))) == (in_file["vp8"], in_file["opus"]), final.group(0)
        probed = probe_frames(Path(str(pid_file) + ".out") / "host.webm")
        print("in file", in_file, "ffprobe", probed)
        assert probed.get("vp8", 0) == in_file["vp8"] and probed.get("opus", 0) == in_file["opus"], (probed, in_file)
    finally:
        if shell and shell.poll() is None:
            kill_process(shell)
        if host:
            host.stop()
        kill_process(server)
