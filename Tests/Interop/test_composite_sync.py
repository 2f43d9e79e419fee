"""The composite's A/V offset (issue 37, goal "A/V offset within ±40 ms").

A host publishes the synthetic media (`understudy join --mode SEND_AND_RECV`: a test pattern with a
white flash frame every 2 s and a 1 kHz beep at the same media instants). An agent composites the
room (one tile, so the flash lights most of the canvas) into WebM, VP8 (analyze reads WebM and
Matroska with Annex B video; the timing is the compositor's whatever the codec) and the mixed Opus
audio. `understudy analyze` pairs the flashes with the beeps in that file; the median offset must be
within ±40 ms, as the demo measures it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness import free_port, run_understudy
from test_agent_stage import SECRET, AgentProcess, join_args, start_server

ROOM = "compsync"


def test_composite_av_offset_within_40ms(understudy, tmp_path):
    port = free_port()
    server = start_server(port, udp_low=47700)
    processes: list[AgentProcess] = []
    out = tmp_path / "room.webm"
    try:
        host = AgentProcess("host", join_args(port, ROOM, "host", "--mode", "SEND_AND_RECV", "--consume", "none"),
                            tmp_path)
        processes.append(host)
        host.wait_for(rf"joined room {ROOM} as host \(SEND_AND_RECV\)")
        agent = AgentProcess("comp", join_args(
            port, ROOM, "comp", "--consume", "all", "--size", "640x360", "--composite-codec", "vp8",
            "--composite", str(out)), tmp_path)
        processes.append(agent)
        agent.wait_for(rf"joined room {ROOM} as comp")
        agent.wait_for(r"composite layout: host ")
        # The window starts at the host's first decoded picture, however long a busy machine took
        # to get there: then about five flash/beep pairs (a flash every 2 s of the source's clock).
        agent.wait_for(r"composite: first picture from host", timeout=60)
        time.sleep(11)
        assert agent.terminate() == 0, agent.log()[-3000:]
        result = run_understudy(["analyze", str(out), "--json"], timeout=300)
        assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
        report = json.loads(result.stdout)
        print(f"composite analyze: offset {report.get('avOffsetMs')} ms, pairs {report['syncPairs']}, "
              f"flashes {report['video']['flashTimesMs']}, beeps {report['beepOnsetsMs']}")
        assert report["syncPairs"] >= 3, report
        assert abs(report["avOffsetMs"]) <= 40, report
    finally:
        for p in processes:
            p.stop()
        server.terminate()
        server.wait(timeout=30)


# --- Through our SFU from a publisher whose audio leaves 150 ms after its video (issue 37) ---------

SKEW_ROOM = "compskew"
AUDIO_LATE = 0.150  # seconds the publisher's audio leaves after the video captured with it
MARKER_EVERY = 2.0  # a flash and a beep at the same capture instants, as the synthetic media
VIDEO_FPS = 30
AUDIO_RATE = 48_000
AUDIO_SAMPLES = 960


class _Clock:
    """The publisher's capture clock: both tracks count from one start."""

    def __init__(self) -> None:
        self.start: float | None = None

    def begin(self) -> float:
        if self.start is None:
            self.start = time.time()
        return self.start


def _marker_tracks(clock: _Clock):
    import asyncio
    import fractions
    import math
    import struct

    import av
    from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

    class MarkerVideo(MediaStreamTrack):
        """320x180 (the canvas' shape, so the tile fills it) at 30 fps: mid grey with a moving bar, all
        white on every marker frame."""

        kind = "video"

        def __init__(self) -> None:
            super().__init__()
            self.index = 0

        async def recv(self):
            if self.readyState != "live":
                raise MediaStreamError
            start = clock.begin()
            wait = start + self.index / VIDEO_FPS - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            flash = self.index % int(MARKER_EVERY * VIDEO_FPS) == 0
            bar = (self.index * 4) % 180
            rows = [bytes([235 if flash else (160 if bar <= y < bar + 12 else 90)]) * 320 for y in range(180)]
            frame = av.VideoFrame(320, 180, "yuv420p")
            frame.planes[0].update(_fit(b"".join(rows), frame.planes[0]))
            frame.planes[1].update(_fit(bytes([128]) * (160 * 90), frame.planes[1]))
            frame.planes[2].update(_fit(bytes([128]) * (160 * 90), frame.planes[2]))
            frame.pts = self.index * 3000
            frame.time_base = fractions.Fraction(1, 90_000)
            self.index += 1
            return frame

    class MarkerAudio(MediaStreamTrack):
        """Mono 48 kHz: a quiet 440 Hz tone, a 100 ms 1 kHz beep at every marker; each 20 ms frame
        leaves AUDIO_LATE after its capture instant."""

        kind = "audio"

        def __init__(self) -> None:
            super().__init__()
            self.sample = 0

        async def recv(self):
            if self.readyState != "live":
                raise MediaStreamError
            start = clock.begin()
            wait = start + self.sample / AUDIO_RATE + AUDIO_LATE - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            period = int(MARKER_EVERY * AUDIO_RATE)
            values = []
            for n in range(self.sample, self.sample + AUDIO_SAMPLES):
                if n % period < 4_800:
                    values.append(int(16_000 * math.sin(2 * math.pi * 1_000 * n / AUDIO_RATE)))
                else:
                    values.append(int(1_500 * math.sin(2 * math.pi * 440 * n / AUDIO_RATE)))
            frame = av.AudioFrame(format="s16", layout="mono", samples=AUDIO_SAMPLES)
            frame.planes[0].update(struct.pack(f"<{AUDIO_SAMPLES}h", *values))
            frame.sample_rate = AUDIO_RATE
            frame.pts = self.sample
            frame.time_base = fractions.Fraction(1, AUDIO_RATE)
            self.sample += AUDIO_SAMPLES
            return frame

    return MarkerVideo(), MarkerAudio()


def _fit(data: bytes, plane) -> bytes:
    width = plane.width
    if plane.line_size == width:
        return data
    pad = bytes(plane.line_size - width)
    return b"".join(data[i : i + width] + pad for i in range(0, len(data), width))


def _honest_sender_reports(transport, clock: _Clock, rates: dict[int, int], rewritten_count: dict) -> None:
    """Rewrites every SR the publisher sends as a publisher that stamps capture times does
    (Chromium): the NTP time it leaves, with the RTP time of that instant on the capture clock (the
    clock's start plus the time since, from the stream's first RTP timestamp). aiortc's own reports
    pair the last packet's RTP time with when it left, which for the late audio is 150 ms after its
    capture."""
    first: dict[int, int] = {}
    send = transport._send_rtp

    async def rewritten(data: bytes) -> None:
        if len(data) >= 12 and not 192 <= data[1] <= 223:
            ssrc = int.from_bytes(data[8:12], "big")
            first.setdefault(ssrc, int.from_bytes(data[4:8], "big"))
        elif len(data) >= 28 and data[1] == 200:
            ssrc = int.from_bytes(data[4:8], "big")
            if ssrc in first and ssrc in rates and clock.start is not None:
                now = time.time()
                rtp = (first[ssrc] + round((now - clock.start) * rates[ssrc])) & 0xFFFF_FFFF
                ntp = int((now + 2_208_988_800) * (1 << 32))
                data = data[:8] + ntp.to_bytes(8, "big") + rtp.to_bytes(4, "big") + data[20:]
                rewritten_count[ssrc] = rewritten_count.get(ssrc, 0) + 1
        await send(data)

    transport._send_rtp = rewritten


async def _publish_skewed(port: int, token: str) -> tuple:
    from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription

    from aiortc_endpoint import _preferred
    from loopback import use_loopback_only
    from room_client import RoomClient

    use_loopback_only()
    client = await RoomClient.connect(f"ws://127.0.0.1:{port}/v1/rtc", token)
    await client.join(SKEW_ROOM, "pub")
    clock = _Clock()
    video, audio = _marker_tracks(clock)
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    v = pc.addTransceiver(video, direction="sendonly")
    v.setCodecPreferences(_preferred("video"))
    a = pc.addTransceiver(audio, direction="sendonly")
    a.setCodecPreferences(_preferred("audio"))
    await pc.setLocalDescription(await pc.createOffer())
    response = await client.request(
        "produce", {"tracks": [{"kind": "webcam"}, {"kind": "mic"}], "sdp": pc.localDescription.sdp})
    await pc.setRemoteDescription(RTCSessionDescription(sdp=response["sdp"], type="answer"))
    rates = {v.sender._ssrc: 90_000, a.sender._ssrc: AUDIO_RATE}
    rewritten: dict[int, int] = {}
    transports = {id(t.sender.transport): t.sender.transport for t in (v, a)}
    for transport in transports.values():
        _honest_sender_reports(transport, clock, rates, rewritten)
    return client, pc, rewritten


def test_composite_keeps_a_publishers_av_relation_through_our_sfu(understudy, tmp_path):
    """A publisher whose audio leaves 150 ms after the video captured with it, with sender reports
    that say so (capture times), through `understudy serve`'s SFU to an agent's composite: the SFU's
    reports to the agent carry the publisher's relation, so the flash and the beep line up (±40 ms);
    reports written from the forwarding time put the beep 150 ms late."""
    import asyncio

    port = free_port()
    server = start_server(port, udp_low=47720)
    out = tmp_path / "skew.webm"
    agent = None
    rewritten: dict[int, int] = {}
    try:
        token = run_understudy(
            ["token", "--secret", SECRET, "--room", SKEW_ROOM, "--participant", "pub",
             "--permissions", "allow_join"], timeout=20).stdout.strip()

        async def scenario() -> None:
            nonlocal agent
            nonlocal rewritten
            client, pc, rewritten = await _publish_skewed(port, token)
            try:
                agent = AgentProcess("comp", join_args(
                    port, SKEW_ROOM, "comp", "--consume", "all", "--size", "640x360", "--composite-codec", "vp8",
                    "--composite", str(out)), tmp_path)
                await asyncio.to_thread(agent.wait_for, r"composite layout: pub ")
                # Five or six markers after the first picture (the SFU's first reports come within
                # a second of its first packets).
                await asyncio.sleep(12)
                assert await asyncio.to_thread(agent.terminate) == 0, agent.log()[-3000:]
            finally:
                await pc.close()
                await client.close()

        asyncio.run(asyncio.wait_for(scenario(), 120))
        result = run_understudy(["analyze", str(out), "--json"], timeout=300)
        assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
        report = json.loads(result.stdout)
        print(f"skewed publisher through the SFU: offset {report.get('avOffsetMs')} ms, pairs {report['syncPairs']}, "
              f"flashes {report['video']['flashTimesMs']}, beeps {report['beepOnsetsMs']}, "
              f"publisher SRs rewritten per SSRC {rewritten}")
        assert len(rewritten) == 2, f"the publisher's reports of both streams carry capture times: {rewritten}"
        assert report["syncPairs"] >= 3, report
        assert abs(report["avOffsetMs"]) <= 40, report
    finally:
        if agent is not None:
            agent.stop()
        server.terminate()
        server.wait(timeout=30)
