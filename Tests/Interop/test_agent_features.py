"""`understudy join` features end to end on `understudy serve`: RTP relay played by ffmpeg, kill -9 and
SIGTERM during a recording, Ogg+IVF recording, the metrics endpoint, --max-video, --relay-room, and
the one-line failures (bad flag, unreachable server, refused token).

Each test starts its own server; a host that sends is `understudy join --mode SEND_AND_RECV` (it
publishes the synthetic test pattern and tone).
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from harness import decode_errors, free_port, kill_process, probe_frames, run_understudy
from test_agent_stage import SECRET, AgentProcess, join_args, manifest, start_server, wait_for_frames

CUES_ID = bytes.fromhex("1C53BB6B")


@contextmanager
def served_room(udp_low: int) -> Iterator[tuple[int, list[AgentProcess]]]:
    """A fresh `understudy serve`; yields its port and a list the test appends its agents to.
    Every agent, then the server, is stopped on the way out, whatever happened."""
    port = free_port()
    server = start_server(port, udp_low=udp_low)
    agents: list[AgentProcess] = []
    try:
        yield port, agents
    finally:
        for a in agents:
            a.stop()
        kill_process(server)


def _host(port: int, room: str, pid: str, tmp_path: Path) -> AgentProcess:
    host = AgentProcess(pid, join_args(port, room, pid, "--mode", "SEND_AND_RECV", "--consume", "none"), tmp_path)
    host.wait_for(rf"joined room {room} as {pid} \(SEND_AND_RECV\)")
    return host


def _one_line_failure(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("understudy: join: "), lines
    return lines[0]


def test_rtp_relay_plays_in_ffmpeg_from_the_generated_sdp(understudy, tmp_path):
    with served_room(43000) as (port, agents):
        agents.append(_host(port, "relay", "host", tmp_path))
        out = tmp_path / "relay"
        agent = AgentProcess("agent", join_args(
            port, "relay", "agent", "--consume", "all", "--relay", "rtp://127.0.0.1:47000", "--record", str(out)),
            tmp_path)
        agents.append(agent)
        agent.wait_for(r"relaying to rtp://127.0.0.1:47000")
        sdp = out / "relay.sdp"
        assert sdp.exists()
        assert "m=video 47000 RTP/AVP 96" in sdp.read_text(), sdp.read_text()
        # framecrc prints one line per decoded frame.
        ffmpeg = subprocess.run(
            ["ffmpeg", "-nostdin", "-v", "error", "-protocol_whitelist", "file,udp,rtp", "-i", str(sdp),
             "-map", "0:v:0", "-t", "6", "-f", "framecrc", "-"],
            capture_output=True, text=True, timeout=90)
        frames = [line for line in ffmpeg.stdout.splitlines() if line and not line.startswith("#")]
        print(f"relayed video frames decoded by ffmpeg: {len(frames)}; stderr: {ffmpeg.stderr[-500:]}")
        assert len(frames) >= 60, ffmpeg.stderr[-2000:]
        assert agent.terminate() == 0


def test_kill9_leaves_a_playable_file_and_sigterm_finalizes(understudy, tmp_path):
    with served_room(43200) as (port, agents):
        agents.append(_host(port, "kill", "host", tmp_path))
        killed_dir, finished_dir = tmp_path / "killed", tmp_path / "finished"
        killed = AgentProcess("killed", join_args(
            port, "kill", "killed", "--consume", "all", "--record", str(killed_dir)), tmp_path)
        finished = AgentProcess("finished", join_args(
            port, "kill", "finished", "--consume", "all", "--record", str(finished_dir)), tmp_path)
        killed_mp4_dir = tmp_path / "killed-mp4"
        killed_mp4 = AgentProcess("killed-mp4", join_args(
            port, "kill", "killed-mp4", "--consume", "all", "--record", str(killed_mp4_dir),
            "--record-format", "mp4"), tmp_path)
        agents += [killed, finished, killed_mp4]
        wait_for_frames(killed_dir / "host.webm", {"vp8": 90, "opus": 150})
        killed.kill9()
        # Fragmented MP4: a kill -9 leaves every fragment written so far playable.
        wait_for_frames(killed_mp4_dir / "host.mp4", {"vp8": 90, "opus": 150})
        killed_mp4.kill9()
        mp4_frames = probe_frames(killed_mp4_dir / "host.mp4")
        print(f"mp4 after kill -9: {mp4_frames}")
        assert mp4_frames.get("vp8", 0) >= 60 and mp4_frames.get("opus", 0) >= 100, mp4_frames
        assert decode_errors(killed_mp4_dir / "host.mp4") == ""
        assert manifest(killed_mp4_dir)["recordFormat"] == "mp4"
        frames = probe_frames(killed_dir / "host.webm")
        print(f"after kill -9: {frames}")
        assert frames.get("vp8", 0) >= 60 and frames.get("opus", 0) >= 100, frames
        assert decode_errors(killed_dir / "host.webm") == ""
        # The manifest already listed the file while recording.
        assert [f["participantId"] for f in manifest(killed_dir)["files"]] == ["host"]

        wait_for_frames(finished_dir / "host.webm", {"vp8": 60, "opus": 100})
        assert finished.terminate() == 0, finished.log()[-2000:]
        data = (finished_dir / "host.webm").read_bytes()
        assert CUES_ID in data, "SIGTERM did not finalize the WebM (no Cues)"
        assert decode_errors(finished_dir / "host.webm") == ""
        assert manifest(finished_dir)["files"][0]["complete"] is True


def test_ogg_ivf_recording_and_metrics_endpoint(understudy, tmp_path):
    with served_room(43400) as (port, agents):
        agents.append(_host(port, "formats", "host", tmp_path))
        out = tmp_path / "ogg"
        metrics_port = free_port()
        agent = AgentProcess("agent", join_args(
            port, "formats", "agent", "--consume", "all", "--record", str(out), "--record-format", "ogg+ivf",
            "--metrics", f"127.0.0.1:{metrics_port}", "--log-format", "json", "--accept-invites", "from:nobody"),
            tmp_path)
        agents.append(agent)
        agent.wait_for(r"metrics on http://127.0.0.1:\d+/metrics")
        agent.wait_for(r"listening for stage invites")
        invite = run_understudy(
            ["invite", "--server", f"http://127.0.0.1:{port}", "--room", "formats", "--secret", SECRET,
             "--participant", "agent"], timeout=60)
        assert invite.returncode == 0, invite.stderr
        agent.wait_for(r"refused invite from \S+ to SEND_AND_RECV")
        wait_for_frames(out / "host.ivf", {"vp8": 60})
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/plain")
            text = r.read().decode()
        print(text)
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        assert values["understudy_agent_participants"] == 1
        assert values["understudy_agent_stage_participants"] == 1
        assert values['understudy_agent_consumed_tracks{kind="video"}'] == 1
        assert values['understudy_agent_consumed_tracks{kind="audio"}'] == 1
        assert values['understudy_agent_frames_received_total{kind="video"}'] > 0
        assert values['understudy_agent_frames_recorded_total{kind="audio"}'] > 0
        assert values['understudy_agent_bytes_received_total{kind="video"}'] > 0
        assert values['understudy_agent_mode{mode="RECV_ONLY"}'] == 1
        assert values["understudy_agent_keyframes_received_total"] >= 1
        assert values["understudy_agent_uptime_seconds"] > 0
        assert values["understudy_agent_invites_refused_total"] == 1
        assert values["understudy_agent_invites_accepted_total"] == 0
        assert values['understudy_agent_mode{mode="SEND_AND_RECV"}'] == 0
        assert values["understudy_agent_reconnects_total"] == 0
        assert agent.terminate() == 0
        # JSON logs: one object per line.
        records = [json.loads(line) for line in agent.log().strip().splitlines()]
        assert all(r["room"] == "formats" and r["participant"] == "agent" and r["level"] in ("info", "warn")
                   and r["msg"] and r["time"] for r in records), records[:5]
        assert any(r["level"] == "warn" and r["msg"].startswith("refused invite") for r in records)

        ivf, ogg = probe_frames(out / "host.ivf"), probe_frames(out / "host.ogg")
        print(f"ivf {ivf} ogg {ogg}")
        assert ivf.get("vp8", 0) >= 60 and ogg.get("opus", 0) >= 100, (ivf, ogg)
        assert decode_errors(out / "host.ivf") == "" and decode_errors(out / "host.ogg") == ""
        assert manifest(out)["refusedInvites"] == 1
        files = {Path(f["path"]).name: f for f in manifest(out)["files"]}
        assert set(files) == {"host.ivf", "host.ogg"}, files
        assert files["host.ivf"]["kinds"] == ["video"] and files["host.ogg"]["kinds"] == ["audio"]


def test_max_video_consumes_one_webcam_and_moves_on_when_its_owner_leaves(understudy, tmp_path):
    with served_room(43600) as (port, agents):
        host1 = _host(port, "maxv", "host1", tmp_path)
        host2 = _host(port, "maxv", "host2", tmp_path)
        agents += [host1, host2]
        out = tmp_path / "maxv"
        agent = AgentProcess("agent", join_args(
            port, "maxv", "agent", "--consume", "stage", "--max-video", "1", "--record", str(out)), tmp_path)
        agents.append(agent)
        agent.wait_for(r"consuming host1 audio\+video")
        agent.wait_for(r"consuming host2 audio\n")
        wait_for_frames(out / "host1.webm", {"vp8": 30, "opus": 50})
        wait_for_frames(out / "host2.webm", {"opus": 50})
        assert probe_frames(out / "host2.webm").get("vp8", 0) == 0
        assert host1.terminate() == 0
        agent.wait_for(r"participant left: host1")
        agent.wait_for(r"consuming host2 video")
        wait_for_frames(out / "host2.webm", {"vp8": 30})
        assert agent.terminate() == 0
        for name in ("host1.webm", "host2.webm"):
            assert decode_errors(out / name) == "", name


def test_relay_room_republishes_the_consumed_participant(understudy, tmp_path):
    with served_room(43800) as (port, agents):
        agents.append(_host(port, "source-room", "host", tmp_path))
        relay = AgentProcess("relay", join_args(
            port, "source-room", "relayer", "--consume", "all", "--relay-room", "other-room"), tmp_path)
        agents.append(relay)
        relay.wait_for(r"relay-room: host republished in other-room as relay-host")
        out = tmp_path / "other"
        viewer = AgentProcess("viewer", join_args(
            port, "other-room", "viewer", "--consume", "stage", "--record", str(out)), tmp_path)
        agents.append(viewer)
        viewer.wait_for(r"consuming relay-host audio\+video")
        frames = wait_for_frames(out / "relay-host.webm", {"vp8": 60, "opus": 100}, timeout=90)
        print(f"relayed into other-room: {frames}")
        assert viewer.terminate() == 0
        assert relay.terminate() == 0
        assert decode_errors(out / "relay-host.webm") == ""
        assert any(p["id"] == "relay-host" for p in manifest(out)["participants"])


def test_bad_flag_unreachable_server_and_refused_token_fail_with_one_line(understudy, tmp_path):
    bad = run_understudy(["join", "--server", "http://127.0.0.1:1", "--room", "r", "--secret", "s",
                          "--mode", "BOGUS"], timeout=30)
    assert bad.returncode == 2
    assert "--mode" in _one_line_failure(bad)
    for flags in (["--max-video", "-1"], ["--record-format", "avi"], ["--metrics", "0.0.0.0:9100"],
                  ["--relay-room", "r"], ["--consume-kinds", "smell"], ["--frobnicate"]):
        result = run_understudy(["join", "--server", "http://127.0.0.1:1", "--room", "r", "--secret", "s",
                                 *flags], timeout=30)
        assert result.returncode == 2, (flags, result.stderr)
        _one_line_failure(result)

    unreachable = run_understudy(["join", "--server", f"http://127.0.0.1:{free_port()}", "--room", "r",
                                  "--secret", "s"], timeout=60)
    assert unreachable.returncode not in (0, 2), unreachable.stderr
    print(_one_line_failure(unreachable))

    port = free_port()
    server = start_server(port, udp_low=44000)
    try:
        refused = run_understudy(["join", "--server", f"http://127.0.0.1:{port}", "--room", "r",
                                  "--token", "not-a-token"], timeout=60)
        assert refused.returncode not in (0, 2), refused.stderr
        line = _one_line_failure(refused)
        print(line)
        wrong_secret = run_understudy(["join", "--server", f"http://127.0.0.1:{port}", "--room", "r",
                                       "--secret", "wrong-secret"], timeout=60)
        assert wrong_secret.returncode not in (0, 2), wrong_secret.stderr
        _one_line_failure(wrong_secret)

        # A clean end (--duration) exits 0.
        clean = run_understudy(["join", *join_args(port, "r", "brief", "--duration", "2")], timeout=60)
        assert clean.returncode == 0, clean.stderr
        assert "left room: MANUAL_LEAVE_CALLED (1101)" in clean.stderr, clean.stderr
    finally:
        kill_process(server)
