"""Interop with Janus 1.1.2 (Debian's `janus`): our stack publishes to and subscribes from a VideoRoom.

1. `interop-peer --role offer` publishes the test pattern and tone: its offer goes to Janus's
   `publish` request and Janus's answer comes back.
2. `interop-peer --role answer --record OUT.webm` subscribes to that feed: Janus offers on the
   subscriber `join`, our answer goes back with `start`.
3. The recording must hold decodable VP8 and Opus (ffprobe counts frames, ffmpeg decodes it
   without a word, timestamps increase, the 440 Hz tone is there), and Janus itself must
   report our feed as a VP8 + Opus publisher whose audio and video it receives.

Janus runs with a configuration of its own (janus_support.JanusServer) in this file's network
namespace, on 127.0.0.2 on a veth interface because libnice ignores loopback interfaces
(janus_support.add_janus_address explains the routing). Needs scripts/interop.sh's namespace.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from harness import InteropPeer, decode_errors, probe_frames, timestamp_problems, tone_power_ratio
from janus_support import ROOM, JanusServer, JanusSession, data_of, in_private_namespace, janus_binary

pytestmark = pytest.mark.skipif(
    janus_binary() is None, reason="janus is not installed (scripts/install-deps.sh installs it)")

# The publisher (counting from its connection) must outlast the subscriber's setup (about
# 1 s here, more on a loaded machine) plus its recording.
PUBLISH_SECONDS = 15
SUBSCRIBE_SECONDS = 8
MIN_VIDEO_FRAMES = 60
MIN_AUDIO_FRAMES = 100


def test_publish_and_subscribe_through_janus_videoroom(interop_peer: str, tmp_path: Path) -> None:
    if not in_private_namespace():
        pytest.skip("adds a veth pair for Janus, so it runs only in scripts/interop.sh's network namespace")
    janus_dir = tmp_path / "janus"
    janus_dir.mkdir()
    recording = tmp_path / "subscriber.webm"
    server = JanusServer(janus_dir)
    try:
        server.start()
        asyncio.run(asyncio.wait_for(_publish_and_subscribe(server, interop_peer, tmp_path, recording), 60))
    except Exception as error:
        detail = f"{type(error).__name__}: {error}\n--- janus log (tail) ---\n{server.log()}"
        raise AssertionError(detail) from error
    finally:
        server.stop()

    counts = probe_frames(recording)
    assert counts.get("vp8", 0) >= MIN_VIDEO_FRAMES, f"VP8 frames via Janus: {counts}"
    assert counts.get("opus", 0) >= MIN_AUDIO_FRAMES, f"Opus frames via Janus: {counts}"
    assert decode_errors(recording) == ""
    assert timestamp_problems(recording) == []
    # Our tone is 440 Hz with a 1 kHz beep every 2 s (which the off-tone probes hear, hence ~14
    # rather than hundreds); noise or silence would give about 1.
    assert tone_power_ratio(recording, 440.0) > 5


class Timeline:
    """Prints when each step finished (pytest shows it when the test fails)."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def mark(self, step: str) -> None:
        print(f"{time.monotonic() - self.start:6.2f} s  {step}", flush=True)


async def _publish_and_subscribe(server: JanusServer, binary: str, workdir: Path, recording: Path) -> None:
    timeline = Timeline()
    session = await asyncio.to_thread(JanusSession, server)
    publisher = InteropPeer("offer", workdir, duration=PUBLISH_SECONDS, binary=binary)
    subscriber = InteropPeer("answer", workdir, record=recording, duration=SUBSCRIBE_SECONDS,
                             video="none", audio="none", binary=binary)
    try:
        # --- publish ---------------------------------------------------------------
        await publisher.start()
        offer = await publisher.read("offer")
        pub_handle = await asyncio.to_thread(session.attach)
        await asyncio.to_thread(session.message, pub_handle, {
            "request": "join", "ptype": "publisher", "room": ROOM, "display": "understudy"})
        joined = await asyncio.to_thread(session.plugin_event, pub_handle, "videoroom", "joined")
        timeline.mark("publisher joined")
        feed = data_of(joined)["id"]
        assert data_of(joined).get("publishers") == [], f"the room was not empty: {data_of(joined)}"
        await asyncio.to_thread(session.message, pub_handle, {"request": "publish"},
                                {"type": "offer", "sdp": offer["sdp"]})
        await asyncio.to_thread(session.end_of_candidates, pub_handle)
        configured = await asyncio.to_thread(session.wait_event, pub_handle, lambda e: "jsep" in e)
        assert configured["jsep"]["type"] == "answer", configured
        assert data_of(configured).get("configured") == "ok", configured
        published = {s.get("type"): s.get("codec") for s in data_of(configured).get("streams", [])}
        assert published == {"audio": "opus", "video": "vp8"}, data_of(configured)
        answer_sdp = configured["jsep"]["sdp"]
        assert "a=setup:active" in answer_sdp
        await publisher.send({"type": "answer", "sdp": answer_sdp})
        timeline.mark("publisher has the answer")
        await asyncio.to_thread(session.wait_event, pub_handle, lambda e: e.get("janus") == "webrtcup")
        timeline.mark("publisher webrtcup")
        for kind in ("audio", "video"):
            await asyncio.to_thread(session.wait_event, pub_handle, lambda e, kind=kind: (
                e.get("janus") == "media" and e.get("type") == kind and e.get("receiving") is True))
            timeline.mark(f"Janus receives our {kind}")

        # Janus's own view: the room lists our feed as a publisher.
        listing = await asyncio.to_thread(session.message, pub_handle,
                                          {"request": "listparticipants", "room": ROOM})
        participants = data_of(listing).get("participants", [])
        assert any(p.get("id") == feed and p.get("publisher") for p in participants), participants

        # --- subscribe -------------------------------------------------------------
        await subscriber.start()
        sub_handle = await asyncio.to_thread(session.attach)
        await asyncio.to_thread(session.message, sub_handle, {
            "request": "join", "ptype": "subscriber", "room": ROOM, "streams": [{"feed": feed}]})
        attached = await asyncio.to_thread(session.plugin_event, sub_handle, "videoroom", "attached")
        assert attached.get("jsep", {}).get("type") == "offer", attached
        codecs = {s.get("type"): s.get("codec") for s in data_of(attached).get("streams", [])}
        assert codecs == {"audio": "opus", "video": "vp8"}, data_of(attached)
        await subscriber.send({"type": "offer", "sdp": attached["jsep"]["sdp"]})
        timeline.mark("subscriber has the offer")
        answer = await subscriber.read("answer")
        await asyncio.to_thread(session.message, sub_handle, {"request": "start"},
                                {"type": "answer", "sdp": answer["sdp"]})
        await asyncio.to_thread(session.end_of_candidates, sub_handle)
        await asyncio.to_thread(session.plugin_event, sub_handle, "started", "ok")
        await asyncio.to_thread(session.wait_event, sub_handle, lambda e: e.get("janus") == "webrtcup")
        timeline.mark("subscriber webrtcup")

        sub_done = await subscriber.finish(SUBSCRIBE_SECONDS + 25)
        assert sub_done.get("ok") is True and sub_done["exit_code"] == 0, f"{sub_done}\n{subscriber.log()}"
        last = subscriber.stats()[-1] if subscriber.stats() else {}
        timeline.mark("subscriber done")
        assert last.get("video_frames_received", 0) > 0 and last.get("audio_frames_received", 0) > 0, last

        pub_done = await publisher.finish(PUBLISH_SECONDS + 10)
        assert pub_done.get("ok") is True and pub_done["exit_code"] == 0, f"{pub_done}\n{publisher.log()}"
        timeline.mark("publisher done")
    finally:
        await subscriber.stop()
        await publisher.stop()
        await asyncio.to_thread(session.destroy)
