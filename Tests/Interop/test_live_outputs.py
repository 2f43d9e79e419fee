"""`understudy join --composite x.m3u8 --composite rtmp://…` end to end (issue 37 item 3: HLS and RTMP).

One publisher sends a VP8 picture; one agent composites the room (H.264, 640x360) into an HLS playlist
and an RTMP push to a real server, `ffmpeg -listen 1` (which writes what it receives to an FLV file).
Checked while it runs: the live playlist has no end yet and ffmpeg reads it. Mid-run the RTMP server is
killed and a new one listens on the same port: the agent keeps compositing, reconnects, and the second
server's file plays. At the end: the VOD playlist (`#EXT-X-ENDLIST`) decodes without errors with h264 +
aac and lasts as long as the agent composed; both FLV files hold h264 + aac.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

from harness import decode_errors, free_port, probe_frames
from test_agent_stage import AgentProcess, join_args, manifest, start_server
from test_composite import duration, make_video


def rtmp_server(url: str, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        ["ffmpeg", "-nostdin", "-v", "error", "-analyzeduration", "1000000", "-listen", "1", "-i", url,
         "-c", "copy", "-flush_packets", "1", "-y", str(out)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def codecs(path: Path) -> list[str]:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_name", "-of", "csv=p=0",
                          str(path)], capture_output=True, text=True, timeout=60)
    return sorted(line.strip() for line in out.stdout.splitlines() if line.strip())


def wait_for_size(path: Path, size: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.stat().st_size >= size):
        assert time.monotonic() < deadline, f"{path} never reached {size} bytes"
        time.sleep(0.1)


def test_hls_and_rtmp_with_a_server_restart(understudy, tmp_path):
    port = free_port()
    rtmp_port = free_port()
    url = f"rtmp://127.0.0.1:{rtmp_port}/live/room"
    server = start_server(port, udp_low=47200)
    processes: list[AgentProcess] = []
    servers: list[subprocess.Popen] = []
    try:
        make_video(tmp_path / "p1.ivf", 0xE0E0E0)
        hls = tmp_path / "hls"
        hls.mkdir()
        playlist = hls / "room.m3u8"
        first, second = tmp_path / "first.flv", tmp_path / "second.flv"
        servers.append(rtmp_server(url, first))
        record = tmp_path / "rec"
        launched = time.monotonic()
        agent = AgentProcess("live", join_args(
            port, "live", "live", "--consume", "all", "--size", "640x360", "--composite-preset", "ultrafast",
            "--composite", str(playlist), "--composite", url, "--record", str(record)), tmp_path)
        processes.append(agent)
        agent.wait_for(r"compositing 640x360 30 fps")
        agent.wait_for(r"joined room live as live")
        joined = time.monotonic()
        host = AgentProcess("p1", join_args(
            port, "live", "p1", "--mode", "SEND_AND_RECV", "--consume", "none",
            "--video", str(tmp_path / "p1.ivf")), tmp_path)
        processes.append(host)
        host.wait_for(r"joined room live as p1 \(SEND_AND_RECV\)")

        # The live playlist: segments listed, no end, and ffmpeg plays a second of it.
        deadline = time.monotonic() + 30
        while not (playlist.exists() and playlist.read_text().count("#EXTINF") >= 2):
            assert time.monotonic() < deadline, "the live playlist never listed two segments"
            time.sleep(0.2)
        live = playlist.read_text()
        assert "#EXT-X-ENDLIST" not in live and "#EXT-X-MAP:URI=\"room-init.mp4\"" in live, live
        played = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-live_start_index", "0", "-i", str(playlist),
                                 "-t", "1", "-f", "null", "-"], capture_output=True, text=True, timeout=60)
        assert played.returncode == 0 and played.stderr == "", played.stderr

        # RTMP: the first server gets data; then it dies and a new one takes the port.
        wait_for_size(first, 100_000)
        servers[0].send_signal(signal.SIGKILL)
        servers[0].wait(timeout=30)
        servers.append(rtmp_server(url, second))
        wait_for_size(second, 100_000)
        agent.wait_for(rf"RTMP output: publishing to 127.0.0.1:{rtmp_port}/live again \(2\)")
        time.sleep(1)
        wall = time.monotonic() - joined
        assert agent.terminate() == 0, agent.log()[-3000:]
        total = time.monotonic() - launched
        servers[1].wait(timeout=30)

        vod = playlist.read_text()
        assert "#EXT-X-PLAYLIST-TYPE:VOD" in vod and vod.endswith("#EXT-X-ENDLIST\n"), vod
        assert "#EXT-X-MEDIA-SEQUENCE:0" in vod
        assert decode_errors(playlist) == "", decode_errors(playlist)
        counts = probe_frames(playlist)
        d = duration(playlist)
        print(f"HLS: {d:.3f} s, {vod.count('#EXTINF')} segments, frames {counts}; joined→stop {wall:.2f} s, "
              f"launch→exit {total:.2f} s")
        assert counts.get("h264", 0) >= 30 * 4 and counts.get("aac", 0) >= 40 * 4, counts
        assert wall - 0.3 <= d <= total + 0.3, (d, wall, total)
        m = manifest(record)["composite"]
        assert abs(d - m["durationSeconds"]) <= 0.01 * m["durationSeconds"] + 0.1, (d, m)
        assert [o["destination"] for o in m["outputs"]] == [str(playlist), url], m
        for path in (first, second):
            assert codecs(path) == ["aac", "h264"], (path, codecs(path))
        assert decode_errors(second) == "", decode_errors(second)
        print(f"RTMP: first {probe_frames(first)}, second {probe_frames(second)}")
    finally:
        for p in processes:
            p.stop()
        for s in servers:
            if s.poll() is None:
                s.kill()
                s.wait(timeout=30)
        server.terminate()
        server.wait(timeout=30)


def test_bad_live_outputs_are_refused(understudy, tmp_path):
    base = ["join", "--server", "http://127.0.0.1:9", "--room", "r", "--secret", "s"]
    for extra, message in [
        (["--composite", str(tmp_path / "x.m3u8"), "--composite-codec", "vp8"], "HLS and RTMP carry H.264"),
        (["--composite", "rtmp://127.0.0.1/live"], "invalid URL"),
        (["--composite", "rtmp://127.0.0.1:99999/live/x"], "out of range"),
        (["--composite", str(tmp_path / "missing" / "x.m3u8")], "does not exist"),
    ]:
        result = subprocess.run([understudy, *base, *extra], capture_output=True, text=True, timeout=60)
        assert result.returncode != 0 and message in result.stderr, (extra, result.returncode, result.stderr)
        assert not re.search(r"Fatal error|Trace/breakpoint", result.stderr), result.stderr


NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
load_module /usr/lib/nginx/modules/ngx_rtmp_module.so;
events {{ worker_connections 64; }}
rtmp {{
    server {{
        listen 127.0.0.1:{port};
        application live {{
            live on;
            record all;
            record_path {dir};
        }}
    }}
}}
"""


def test_ts_hls_and_rtmp_to_nginx(understudy, tmp_path):
    """MPEG-TS segments (`--hls-segment ts`, a 3-segment live window) read by ffmpeg while the agent runs, and
    an RTMP push to nginx-rtmp (Debian's libnginx-mod-rtmp): ffprobe plays the stream back from nginx, and
    the FLV nginx recorded holds h264 + aac."""
    port = free_port()
    rtmp_port = free_port()
    url = f"rtmp://127.0.0.1:{rtmp_port}/live/x"
    nginx_dir = tmp_path / "nginx"
    nginx_dir.mkdir()
    (nginx_dir / "nginx.conf").write_text(NGINX_CONF.format(dir=nginx_dir, port=rtmp_port))
    nginx = subprocess.Popen(["nginx", "-e", str(nginx_dir / "error.log"), "-p", str(nginx_dir), "-c",
                              str(nginx_dir / "nginx.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = start_server(port, udp_low=47210)
    processes: list[AgentProcess] = []
    try:
        make_video(tmp_path / "p1.ivf", 0xE0E0E0)
        hls = tmp_path / "hls"
        hls.mkdir()
        playlist = hls / "room.m3u8"
        agent = AgentProcess("ts", join_args(
            port, "ts", "ts", "--consume", "all", "--size", "640x360", "--composite-preset", "ultrafast",
            "--composite", str(playlist), "--hls-segment", "ts", "--hls-window", "3", "--composite", url), tmp_path)
        processes.append(agent)
        agent.wait_for(r"joined room ts as ts")
        host = AgentProcess("p1", join_args(
            port, "ts", "p1", "--mode", "SEND_AND_RECV", "--consume", "none",
            "--video", str(tmp_path / "p1.ivf")), tmp_path)
        processes.append(host)
        host.wait_for(r"joined room ts as p1 \(SEND_AND_RECV\)")
        agent.wait_for(rf"RTMP output: publishing to 127.0.0.1:{rtmp_port}/live")

        # The live playlist rolls a 3-segment window of .ts segments; ffmpeg plays it while it is written.
        deadline = time.monotonic() + 60
        while not (playlist.exists() and "#EXT-X-MEDIA-SEQUENCE:1" in playlist.read_text()):
            assert time.monotonic() < deadline, "the live playlist never rolled its window"
            time.sleep(0.2)
        live = playlist.read_text()
        assert "#EXT-X-ENDLIST" not in live and "EXT-X-MAP" not in live and live.count("#EXTINF") == 3, live
        assert "room-00001.ts" in live, live
        played = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-live_start_index", "0", "-i", str(playlist),
                                 "-t", "2", "-f", "null", "-"], capture_output=True, text=True, timeout=60)
        assert played.returncode == 0 and played.stderr == "", played.stderr

        # nginx plays the stream back to a reader.
        back = subprocess.run(["ffprobe", "-v", "error", "-rw_timeout", "20000000", "-show_entries",
                               "stream=codec_name", "-of", "csv=p=0", url],
                              capture_output=True, text=True, timeout=60)
        assert sorted(back.stdout.split()) == ["aac", "h264"], (back.stdout, back.stderr)
        time.sleep(1)
        assert agent.terminate() == 0, agent.log()[-3000:]

        vod = playlist.read_text()
        assert "#EXT-X-PLAYLIST-TYPE:VOD" in vod and vod.endswith("#EXT-X-ENDLIST\n"), vod
        assert decode_errors(playlist) == "", decode_errors(playlist)
        counts = probe_frames(playlist)
        assert counts.get("h264", 0) >= 30 * 4 and counts.get("aac", 0) >= 40 * 4, counts
        recorded = nginx_dir / "x.flv"
        deadline = time.monotonic() + 30
        while not (recorded.exists() and recorded.stat().st_size > 50_000):
            assert time.monotonic() < deadline, f"nginx recorded nothing: {(nginx_dir / 'error.log').read_text()}"
            time.sleep(0.2)
        assert codecs(recorded) == ["aac", "h264"], codecs(recorded)
        frames = probe_frames(recorded)
        assert frames.get("h264", 0) >= 30 * 2, frames
        print(f"TS HLS: {vod.count('#EXTINF')} segments, {counts}; nginx recorded {frames}")
    finally:
        for p in processes:
            p.stop()
        nginx.terminate()
        nginx.wait(timeout=30)
        server.terminate()
        server.wait(timeout=30)
