"""Composite jobs on a fleet (docs/fleet.md, docs/protocol.md "Job kinds"): `jobs submit … --composite room.mp4`
runs a room composite on a worker; a worker killed with SIGKILL mid-job has the job re-claimed by another,
whose attempt writes new files in its own directory: both attempts' MP4s and HLS playlists play in ffprobe
and the job's record lists both. On a full disk (a tmpfs with `size=`) a composite job and a recording job
fail with the OS's reason in the signed `job_failed` webhook, and what they wrote before plays.

`serve --auto-record "… --composite room.mp4"` starts a composite job when a room is created, and
auto-stop ends it when the room empties.

One Redis, one `understudy serve` (with the webhook receiver) and one publishing host serve the whole file
(the auto-record test runs a second server on the same Redis). UDP ports 49310 and 49311.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from harness import decode_errors, free_port, kill_process, probe_frames, run_understudy, start_room_server
from test_agent_stage import SECRET, AgentProcess, join_args
from test_fleet import Worker, jobs, start_redis, wait_until
from test_lifecycle import WEBHOOK_SECRET, Receiver

ROOM = "comp-jobs"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Redis, a server with webhooks on it, and a host on stage publishing the test pattern and tone."""
    workdir = tmp_path_factory.mktemp("composite-jobs")
    redis, url = start_redis(workdir)
    receiver = Receiver(failures=0)
    port = free_port()
    server = start_room_server(
        port, 49310, SECRET, extra_args=["--jobs", url, "--webhook", receiver.url, "--webhook-secret", WEBHOOK_SECRET])
    host = AgentProcess("host", join_args(port, ROOM, "host", "--mode", "SEND_AND_RECV", "--consume", "none"),
                        workdir)
    try:
        host.wait_for(rf"joined room {ROOM} as host")
        yield {"url": url, "port": port, "receiver": receiver, "workdir": workdir}
    finally:
        host.stop()
        kill_process(server)
        kill_process(redis)
        receiver.server.shutdown()


def job(url: str, job_id: str) -> dict:
    return next(j for j in jobs(url) if j["spec"]["id"] == job_id)


def submit(fleet: dict, job_id: str, *options: str) -> None:
    result = run_understudy(
        ["jobs", "submit", "--redis", fleet["url"], "--job-id", job_id,
         *join_args(fleet["port"], ROOM, f"rec-{job_id}", "--consume", "all", *options)], timeout=30)
    assert result.returncode == 0, result.stderr


def video_frames(path: str) -> int:
    try:
        return probe_frames(path).get("h264", 0)
    except AssertionError:
        return 0


def hls_frames(playlist: Path, workdir: Path) -> int:
    """Video frames of the segments a playlist lists, joined after its init segment (ffprobe would wait
    for more on a live playlist, which the killed attempt's stays)."""
    lines = playlist.read_text().splitlines()
    names = [line for line in lines if line and not line.startswith("#")]
    init = next(line.split('"')[1] for line in lines if line.startswith("#EXT-X-MAP"))
    joined = workdir / f"{playlist.parent.name}-joined.mp4"
    joined.write_bytes(b"".join((playlist.parent / n).read_bytes() for n in [init, *names]))
    assert decode_errors(joined) == "", joined
    return video_frames(str(joined))


def test_killed_composite_worker_is_continued_by_another(understudy, fleet, tmp_path):
    url = fleet["url"]
    out = tmp_path / "jobs"
    first = Worker("cw1", url, 60, out, tmp_path)
    second = None
    try:
        submit(fleet, "comp", "--composite", "room.mp4", "--composite", "live.m3u8", "--size", "320x240",
               "--fps", "15")
        assert job(url, "comp")["spec"]["kind"] == "composite"
        detail = lambda: first.log()[-3000:] + json.dumps(jobs(url), indent=1)[-3000:]
        wait_until(lambda: job(url, "comp")["state"] == "running", 60, "the composite job running", detail)

        def first_mp4():
            files = job(url, "comp")["attempts"][0]["files"]
            mp4 = next((f for f in files if f.endswith("room.mp4")), None)
            # The live playlist appears with the first segment.
            listed = any(f.endswith("live.m3u8") for f in files)
            return mp4 if mp4 and listed and video_frames(mp4) >= 30 else None
        first_file = wait_until(first_mp4, 60, "two seconds of composite on the first worker", detail)
        second = Worker("cw2", url, 60, out, tmp_path)
        os.killpg(first.proc.pid, signal.SIGKILL)
        first.proc.wait(timeout=10)

        def second_mp4():
            attempts = job(url, "comp")["attempts"]
            if len(attempts) < 2:
                return None
            mp4 = next((f for f in attempts[1]["files"] if f.endswith("room.mp4")), None)
            return mp4 if mp4 and video_frames(mp4) >= 30 else None
        second_file = wait_until(second_mp4, 90, "the composite continued on the second worker",
                                 lambda: second.log()[-3000:] + json.dumps(jobs(url), indent=1)[-3000:])
        stop = run_understudy(["jobs", "stop", "comp", "--redis", url], timeout=30)
        assert stop.returncode == 0, stop.stderr
        final = wait_until(lambda: (lambda j: j if j["state"] == "stopped" else None)(job(url, "comp")), 60,
                           "the stopped job", lambda: second.log()[-3000:])
        attempts = final["attempts"]
        assert [a["worker"] for a in attempts] == ["cw1", "cw2"], attempts
        assert attempts[0]["end"].startswith("lost") and attempts[1]["end"] == "stopped", attempts
        assert first_file in attempts[0]["files"] and second_file in attempts[1]["files"], attempts
        assert Path(first_file).parent != Path(second_file).parent
        for attempt in attempts:
            files = attempt["files"]
            # A composite job writes the composite and the manifest, no per-participant recordings.
            assert not [f for f in files if f.endswith(".webm")], files
            playlist = Path(next(f for f in files if f.endswith("live.m3u8")))
            assert hls_frames(playlist, tmp_path) >= 15, playlist
            # The manifest as last written (the killed worker's too) names the composite's outputs.
            outputs = [o["destination"] for o in json.loads(attempt["manifest"])["composite"]["outputs"]]
            assert any(o.endswith("room.mp4") for o in outputs), outputs
        for mp4 in (first_file, second_file):
            frames = probe_frames(mp4)
            assert frames.get("h264", 0) >= 30 and frames.get("opus", 0) >= 50, (mp4, frames)
            assert decode_errors(mp4) == "", mp4
        # The second attempt ended cleanly: its playlist is the VOD one.
        vod = Path(next(f for f in attempts[1]["files"] if f.endswith("live.m3u8"))).read_text()
        assert "#EXT-X-ENDLIST" in vod, vod
    finally:
        for w in (first, second):
            if w:
                kill_process(w.proc, grace=10)


def test_full_disk_fails_jobs_with_the_reason_and_keeps_what_was_written(understudy, fleet, tmp_path):
    url = fleet["url"]
    receiver = fleet["receiver"]
    out = tmp_path / "small"
    out.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200k", "tmpfs", str(out)], check=True)
    worker = None
    try:
        worker = Worker("dw", url, 60, out, tmp_path)
        submit(fleet, "full-comp", "--composite", "room.mp4", "--size", "640x360", "--composite-bitrate", "3M")
        submit(fleet, "full-rec", "--cost", "2")
        detail = lambda: f"{receiver.types()}\n{worker.log()[-3000:]}\n{json.dumps(jobs(url), indent=1)[-3000:]}"
        failed = {}
        for job_id in ("full-comp", "full-rec"):
            failed[job_id] = wait_until(
                lambda: (lambda j: j if j["state"] == "failed" else None)(job(url, job_id)), 90,
                f"{job_id} failed on the full disk", detail)
        assert "No space left on device" in failed["full-comp"]["error"], failed["full-comp"]
        assert "composite output" in failed["full-comp"]["error"], failed["full-comp"]
        assert "No space left on device" in failed["full-rec"]["error"], failed["full-rec"]
        assert "recording of" in failed["full-rec"]["error"], failed["full-rec"]
        # The signed job_failed webhook carries the same reason.
        for job_id in ("full-comp", "full-rec"):
            event = wait_until(
                lambda: next((e for e in receiver.events()
                              if e["event"] == "job_failed" and e["job"]["spec"]["id"] == job_id), None),
                60, f"{job_id}'s job_failed webhook", detail)
            assert event["reason"] == failed[job_id]["error"], event
        # Nothing crashed: the worker is still running, and what was written plays.
        assert worker.proc.poll() is None, worker.log()[-3000:]
        mp4 = next(f for f in failed["full-comp"]["attempts"][-1]["files"] if f.endswith("room.mp4"))
        assert probe_frames(mp4).get("h264", 0) >= 1, mp4
        assert decode_errors(mp4) == "", mp4
        webms = [f for f in failed["full-rec"]["attempts"][-1]["files"] if f.endswith(".webm")]
        assert webms, failed["full-rec"]
        for webm in webms:
            assert sum(probe_frames(webm).values()) >= 1, webm
            assert decode_errors(webm) == "", webm
    finally:
        if worker:
            kill_process(worker.proc, grace=10)
        subprocess.run(["umount", "-l", str(out)], check=False)


def test_auto_started_composite_job_stops_when_the_room_empties(understudy, fleet, tmp_path):
    """`serve --auto-record "… --composite room.mp4"`: the room's first member starts a composite job, and
    auto-stop ends it once the room is empty; its MP4 plays."""
    url = fleet["url"]
    port = free_port()
    server = start_room_server(port, 49311, SECRET, extra_args=[
        "--jobs", url, "--auto-record", "--consume all --composite room.mp4 --size 320x240 --fps 15",
        "--auto-stop-empty", "2s"])
    worker = Worker("aw", url, 60, tmp_path / "jobs", tmp_path)
    host = AgentProcess("auto-host", join_args(port, "auto-comp", "auto-host", "--mode", "SEND_AND_RECV",
                                               "--consume", "none"), tmp_path)
    try:
        host.wait_for(r"joined room auto-comp as auto-host")
        detail = lambda: worker.log()[-3000:] + json.dumps(jobs(url), indent=1)[-3000:]
        auto = lambda: next((j for j in jobs(url) if j["spec"]["room"] == "auto-comp"), None)

        def recording():
            j = auto()
            mp4 = next((f for f in (j["attempts"][-1]["files"] if j and j["attempts"] else [])
                        if f.endswith("room.mp4")), None)
            return j if mp4 and video_frames(mp4) >= 15 else None
        started = wait_until(recording, 60, "the auto-started composite job writing", detail)
        assert started["spec"]["kind"] == "composite" and started["state"] == "running", started
        host.stop()
        ended = wait_until(lambda: (lambda j: j if j["state"] == "stopped" else None)(auto()), 60,
                           "auto-stop of the composite job", detail)
        mp4 = next(f for f in ended["attempts"][-1]["files"] if f.endswith("room.mp4"))
        assert probe_frames(mp4).get("h264", 0) >= 15 and decode_errors(mp4) == "", mp4
    finally:
        host.stop()
        kill_process(worker.proc, grace=10)
        kill_process(server)
