"""GStreamer `webrtcbin` (a fourth WebRTC stack) publishes into a room through `POST /whip/ROOM`.

A small Python script (gst_whip_publisher.py, run with Debian's python3 for PyGObject) is
webrtcbin's WHIP signalling. An agent in the room records the publisher; ffprobe decodes it.
libnice skips loopback interfaces, so webrtcbin gathers on 127.0.0.2 on a veth pair of the test's
namespace (janus_support.add_janus_address, the same setup as the Janus tests).

The H.264 variant publishes `x264enc` through `rtph264pay` (what OBS-like WHIP encoders send: SPS/PPS
in band, packetization mode 1) and the agent records it as fragmented MP4 (`--record-format mp4`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness import decode_errors, probe_frames
from janus_support import add_janus_address
from whip_server_support import ROOM, Recorder, served, token, wait_participants

SCRIPT = Path(__file__).resolve().parent / "gst_whip_publisher.py"


def test_gstreamer_webrtcbin_publishes_through_whip(understudy, tmp_path):
    add_janus_address()
    with served(44400) as port:
        recorder = Recorder(port, tmp_path)
        try:
            recorder.wait_log(f"joined room {ROOM} as recorder")
            result = subprocess.run(
                ["/usr/bin/python3", str(SCRIPT), f"http://127.0.0.1:{port}/whip/{ROOM}",
                 "--token", token("gst"), "--seconds", "10"],
                capture_output=True, text=True, timeout=120,
            )
            print(result.stdout, result.stderr[-3000:])
            report = json.loads(result.stdout.strip().splitlines()[-1])
            assert result.returncode == 0, report
            assert report["seconds_connected"] >= 9, report
            counts = recorder.wait_frames("gst", {"vp8": 90, "opus": 150})
            print(f"recorded from GStreamer over WHIP: {counts}")
            wait_participants(port, lambda ids: "gst" not in ids, "lost the GStreamer publisher")
        finally:
            recorder.stop()
        assert decode_errors(recorder.dir / "gst.webm") == ""


def test_gstreamer_x264enc_over_whip_is_recorded_as_h264_mp4(understudy, tmp_path):
    add_janus_address()
    with served(44440) as port:
        recorder = Recorder(port, tmp_path, record_format="mp4")
        try:
            recorder.wait_log(f"joined room {ROOM} as recorder")
            result = subprocess.run(
                ["/usr/bin/python3", str(SCRIPT), f"http://127.0.0.1:{port}/whip/{ROOM}",
                 "--token", token("gst264"), "--seconds", "8", "--video-codec", "h264"],
                capture_output=True, text=True, timeout=120,
            )
            print(result.stdout, result.stderr[-3000:])
            report = json.loads(result.stdout.strip().splitlines()[-1])
            assert result.returncode == 0, report
            assert report["seconds_connected"] >= 7, report
            counts = recorder.wait_frames("gst264", {"h264": 90, "opus": 150})
            print(f"recorded x264enc over WHIP: {counts}")
            wait_participants(port, lambda ids: "gst264" not in ids, "lost the GStreamer publisher")
        finally:
            recorder.stop()
    path = recorder.path("gst264")
    frames = probe_frames(path)
    print(f"ffprobe {path.name}: {frames}")
    assert set(frames) == {"h264", "opus"}, frames
    # 30 fps while connected (8 s, plus media before "connected" and until the DELETE, about 1 s);
    # the agent starts at the first IDR, at most 1 s in.
    assert 150 <= frames["h264"] <= 30 * (report["seconds_connected"] + 3), frames
    assert decode_errors(path) == ""
