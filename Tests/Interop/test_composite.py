"""`understudy join --composite OUT` end to end (issue 37 items 2 and 3: composite video into MP4/WebM).

Three publishers (`understudy join --mode SEND_AND_RECV --video FILE`) send solid pictures of distinct
brightness (VP8 IVF files made by ffmpeg). Three agents composite the room at 640x360, 30 fps:
- `vp8`: `--composite-codec vp8` into `.mp4` and `.webm`;
- `h264`: the default codec (libx264) into `.mp4` and `.mkv`, with `--record` for the manifest;
- `killed`: H.264 into `.mp4`, killed with SIGKILL mid-run.
Checked: ffmpeg decodes every file without errors; each lasts as long as its agent composed (the
manifest's own count of wall time, within 1 %, and between the time from the join to SIGTERM and
the time from the launch to the exit); a decoded frame shows each publisher's tile in its place
(sampled luma); after one publisher leaves, the last frame shows the two others filling the new
grid; the killed agent's MP4 is read by ffprobe up to its last fragment.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from harness import decode_errors, free_port, probe_frames
from test_agent_stage import AgentProcess, join_args, manifest, start_server

# Luma (BT.601 limited range) of each publisher's picture, and the colour ffmpeg paints it with.
PUBLISHERS = {"p1": (0xE0E0E0, 208), "p2": (0x808080, 126), "p3": (0xFF0000, 81)}
W, H = 640, 360


def make_video(path: Path, rgb: int) -> None:
    subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", f"color=c=0x{rgb:06X}:s=640x360:r=30:d=4",
         "-c:v", "libvpx", "-b:v", "200k", "-g", "30", "-deadline", "realtime", "-pix_fmt", "yuv420p", str(path)],
        check=True, timeout=60)


def luma_frame(path: Path, at: float | None) -> bytes:
    """One decoded frame's luma plane as coded (`at` seconds, or the last one): raw I420, no range conversion."""
    seek = ["-sseof", "-0.3"] if at is None else ["-ss", str(at)]
    out = subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", *seek, "-i", str(path), "-frames:v", "1", "-f", "rawvideo",
         "-pix_fmt", "yuv420p", "-"], capture_output=True, timeout=60)
    assert out.returncode == 0 and len(out.stdout) == W * H * 3 // 2, (path, out.stderr[-500:], len(out.stdout))
    return out.stdout[: W * H]


def duration(path: Path) -> float:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "json", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return float(json.loads(out.stdout)["format"]["duration"])


def near(value: int, expected: int) -> bool:
    return abs(value - expected) <= 15


def check_tiles(frame: bytes, expected: dict[tuple[int, int], int], what: str) -> None:
    for (x, y), luma in expected.items():
        got = frame[y * W + x]
        assert near(got, luma), f"{what}: luma {got} at ({x},{y}), expected {luma}"


def test_composite_into_mp4_and_webm(understudy, tmp_path):
    port = free_port()
    server = start_server(port, udp_low=46800)
    processes: list[AgentProcess] = []
    try:
        for name, (rgb, _) in PUBLISHERS.items():
            make_video(tmp_path / f"{name}.ivf", rgb)
        common = ["--consume", "all", "--size", f"{W}x{H}", "--composite-preset", "ultrafast"]
        out = {k: tmp_path / k for k in ("vp8.mp4", "vp8.webm", "h264.mp4", "h264.mkv", "killed.mp4")}
        record = tmp_path / "rec"
        launched = time.monotonic()
        vp8 = AgentProcess("vp8", join_args(
            port, "comp", "vp8", *common, "--composite-codec", "vp8", "--composite", str(out["vp8.mp4"]),
            "--composite", str(out["vp8.webm"])), tmp_path)
        h264 = AgentProcess("h264", join_args(
            port, "comp", "h264", *common, "--composite", str(out["h264.mp4"]), "--composite", str(out["h264.mkv"]),
            "--record", str(record)), tmp_path)
        killed = AgentProcess("killed", join_args(
            port, "comp", "killed", *common, "--composite", str(out["killed.mp4"])), tmp_path)
        processes += [vp8, h264, killed]
        for agent in (vp8, h264, killed):
            agent.wait_for(r"compositing 640x360 30 fps")
            agent.wait_for(rf"joined room comp as {agent.name}")
        joined = time.monotonic()
        hosts = {}
        for name in PUBLISHERS:
            host = AgentProcess(name, join_args(
                port, "comp", name, "--mode", "SEND_AND_RECV", "--consume", "none",
                "--video", str(tmp_path / f"{name}.ivf")), tmp_path)
            processes.append(host)
            hosts[name] = host
            host.wait_for(rf"joined room comp as {name} \(SEND_AND_RECV\)")
        # Three tiles in join order: a 2x2 grid whose last row is centred.
        three = {(160, 90): PUBLISHERS["p1"][1], (480, 90): PUBLISHERS["p2"][1], (320, 270): PUBLISHERS["p3"][1]}
        for agent in (vp8, h264, killed):
            agent.wait_for(r"composite layout: p1 320x180\+0\+0, p2 320x180\+320\+0, p3 320x180\+160\+180")
        # Pictures flow (a few seconds of all three), then the kill -9 mid-run.
        time.sleep(4)
        three_at = time.monotonic() - joined
        killed.kill9()
        # p3 leaves: the grid becomes two tiles side by side.
        assert hosts["p3"].terminate() == 0
        for agent in (vp8, h264):
            agent.wait_for(r"composite layout: p1 320x360\+0\+0, p2 320x360\+320\+0")
        time.sleep(2)
        wall = time.monotonic() - joined
        for agent in (vp8, h264):
            assert agent.terminate() == 0, agent.log()[-3000:]
        total = time.monotonic() - launched

        for agent in (vp8, h264):
            # Each tile's size went to the server (setViewPort) without a refusal.
            assert "setViewPort(" not in agent.log(), agent.log()[-3000:]
        m = manifest(record)["composite"]
        print(f"manifest composite: {m}")
        assert [o["destination"] for o in m["outputs"]] == [str(out["h264.mp4"]), str(out["h264.mkv"])]
        assert all(o["complete"] is True for o in m["outputs"]), m
        assert (m["width"], m["height"], m["fps"], m["videoCodec"], m["layout"]) == (W, H, 30, "h264", "grid")
        for key in ("vp8.mp4", "vp8.webm", "h264.mp4", "h264.mkv"):
            path = out[key]
            assert decode_errors(path) == "", (key, decode_errors(path))
            counts = probe_frames(path)
            codec = key.split(".")[0]
            assert counts.get(codec, 0) >= 30 * 6 and counts.get("opus", 0) >= 50 * 6, (key, counts)
            d = duration(path)
            print(f"{key}: {d:.3f} s, frames {counts}; agent joined→stop {wall:.2f} s, launch→exit {total:.2f} s")
            # Composed from the agent's start (before its join) to its stop.
            assert wall - 0.2 <= d <= total + 0.2, (key, d, wall, total)
            if key.startswith("h264"):
                # The agent's own clock: within 1 % of the time it composed.
                assert abs(d - m["durationSeconds"]) <= 0.01 * m["durationSeconds"] + 0.05, (key, d, m)
            # Every publisher's tile while all three were on stage, and the two-tile grid at the end.
            check_tiles(luma_frame(path, three_at + (joined - launched) - 1.0), three, f"{key} three tiles")
            check_tiles(luma_frame(path, None), {(160, 180): PUBLISHERS["p1"][1], (480, 180): PUBLISHERS["p2"][1]},
                        f"{key} after p3 left")

        # kill -9: the fragments written so far play.
        counts = probe_frames(out["killed.mp4"])
        print(f"killed.mp4 after SIGKILL: {counts}")
        assert counts.get("h264", 0) >= 30 * 3, counts
        assert decode_errors(out["killed.mp4"]) == "", decode_errors(out["killed.mp4"])
    finally:
        for p in processes:
            p.stop()
        server.terminate()
        server.wait(timeout=30)


def test_bad_composite_options_are_refused(understudy, tmp_path):
    base = ["join", "--server", "http://127.0.0.1:9", "--room", "r", "--secret", "s"]
    for extra, message in [
        (["--composite", str(tmp_path / "x.mp4"), "--size", "13x7"], "--size"),
        (["--composite", str(tmp_path / "x.avi")], "--composite"),
        (["--composite", str(tmp_path / "x.webm")], "WebM holds VP8"),
        (["--composite", str(tmp_path / "x.mp4"), "--layout", "pip"], "--layout"),
        (["--composite", str(tmp_path / "x.mp4"), "--fps", "0"], "--fps"),
        (["--layout", "grid"], "needs --composite"),
    ]:
        result = subprocess.run([understudy, *base, *extra], capture_output=True, text=True, timeout=60)
        assert result.returncode != 0 and message in result.stderr, (extra, result.returncode, result.stderr)
        assert not re.search(r"Fatal error|Trace/breakpoint", result.stderr), result.stderr
