"""GStreamer `webrtcbin` (a fourth WebRTC stack) publishes into a room through `POST /whip/ROOM`.

A small Python script (gst_whip_publisher.py, run with Debian's python3 for PyGObject) is
webrtcbin's WHIP signalling. An agent in the room records the publisher; ffprobe decodes it.
libnice skips loopback interfaces, so webrtcbin gathers on 127.0.0.2 on a veth pair of the test's
namespace (janus_support.add_janus_address, the same setup as the Janus tests).

The H.264 variant publishes `x264enc` through `rtph264pay` (what OBS-like WHIP encoders send: SPS/PPS
in band, packetization mode 1) and the agent records it as fragmented MP4 (`--record-format mp4`).
The same agent relays it as plain RTP (`--relay`): once it logs the H.264 `relay.sdp`, ffmpeg opens
that file and decodes the relayed stream without an error.
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
        recorder = Recorder(port, tmp_path, record_format="mp4", extra=("--relay", "rtp://127.0.0.1:47100"))
        try:
            recorder.wait_log(f"joined room {ROOM} as recorder")
            publisher = subprocess.Popen(
                ["/usr/bin/python3", str(SCRIPT), f"http://127.0.0.1:{port}/whip/{ROOM}",
                 "--token", token("gst264"), "--seconds", "8", "--video-codec", "h264"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            try:
                recorder.wait_log("relaying H264/90000 video; rewrote ", timeout=40)
                sdp = (recorder.dir / "relay.sdp").read_text()
                relayed = subprocess.run(
                    ["ffmpeg", "-nostdin", "-v", "error", "-protocol_whitelist", "file,udp,rtp",
                     "-i", str(recorder.dir / "relay.sdp"), "-map", "0:v:0", "-t", "3", "-f", "framecrc", "-"],
                    capture_output=True, text=True, timeout=60)
                stdout, stderr = publisher.communicate(timeout=120)
            finally:
                if publisher.poll() is None:
                    publisher.kill()
            print(stdout, stderr[-3000:])
            report = json.loads(stdout.strip().splitlines()[-1])
            assert publisher.returncode == 0, report
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
    # The relay: H.264 with the stream's parameter sets in the .sdp, decoded by ffmpeg from it.
    assert "a=rtpmap:96 H264/90000" in sdp and "sprop-parameter-sets=" in sdp, sdp
    frames_relayed = [line for line in relayed.stdout.splitlines() if line and not line.startswith("#")]
    serious = [line for line in relayed.stderr.splitlines()
               if "max delay reached" not in line and "RTP: missed" not in line]
    print(f"relayed H.264 frames decoded by ffmpeg: {len(frames_relayed)}; stderr: {relayed.stderr[-500:]}")
    assert len(frames_relayed) >= 45 and serious == [], relayed.stderr[-2000:]
