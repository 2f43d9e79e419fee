"""GStreamer `webrtcbin` (a fourth WebRTC stack) publishes into a room through `POST /whip/ROOM`.

A small Python script (gst_whip_publisher.py, run with Debian's python3 for PyGObject) is
webrtcbin's WHIP signalling. An agent in the room records the publisher; ffprobe decodes it.
libnice skips loopback interfaces, so webrtcbin gathers on 127.0.0.2 on a veth pair of the test's
namespace (janus_support.add_janus_address, the same setup as the Janus tests).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness import decode_errors
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
