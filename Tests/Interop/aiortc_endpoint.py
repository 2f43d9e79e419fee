#!/usr/bin/env python3
"""A WHIP + WHEP endpoint built on aiortc: the reference peer for the interop suite.

    python aiortc_endpoint.py --port 0 [--token T] [--stats-file stats.json]

Prints one JSON line ``{"listening": PORT}`` on stdout when ready.

* ``POST /whip`` (application/sdp offer) -> 201 + Location + answer. Every received
  track is pulled (``track.recv()`` returns *decoded* frames) and counted.
* ``POST /whep`` (recvonly offer) -> 201 + Location + answer. Sends a synthetic
  VP8 video track (320x240, 30 fps, moving pattern) and an Opus 440 Hz tone
  (48 kHz, 20 ms frames), counting frames handed to the encoders.
* ``DELETE <Location>`` -> 200 and the session is closed.
* ``GET /stats`` -> JSON counters; on SIGTERM/SIGINT the same JSON is written to
  ``--stats-file`` before exit.

Only VP8 (+RTX) and Opus are negotiated. With ``--token`` every POST/DELETE must carry
``Authorization: Bearer <token>`` (401 otherwise). CORS is open so that a page served
from another loopback port can POST to it.
"""

from __future__ import annotations

import argparse
import asyncio
import fractions
import json
import logging
import math
import signal
import struct
import sys
import time
import uuid
from dataclasses import dataclass, field

import av
from aiohttp import web
from aiortc import (
    MediaStreamTrack,
    RTCConfiguration,
    RTCPeerConnection,
    RTCRtpSender,
    RTCSessionDescription,
    VideoStreamTrack,
)
from aiortc.mediastreams import MediaStreamError

from loopback import use_loopback_only

log = logging.getLogger("aiortc_endpoint")

AUDIO_RATE = 48000
AUDIO_PTIME = 0.020
AUDIO_SAMPLES = int(AUDIO_RATE * AUDIO_PTIME)
VIDEO_WIDTH, VIDEO_HEIGHT = 320, 240


@dataclass
class Counters:
    video_frames_sent: int = 0
    audio_frames_sent: int = 0
    video_frames_decoded: int = 0
    audio_frames_decoded: int = 0


@dataclass
class Session:
    id: str
    kind: str  # "whip" or "whep"
    pc: RTCPeerConnection
    counters: Counters = field(default_factory=Counters)
    created: float = field(default_factory=time.monotonic)
    deleted: bool = False
    connection_state: str = "new"
    tasks: list = field(default_factory=list)

    def as_json(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "deleted": self.deleted,
            "connection_state": self.connection_state,
            "age_s": round(time.monotonic() - self.created, 3),
            **self.counters.__dict__,
        }


class PatternVideoTrack(VideoStreamTrack):
    """320x240 yuv420p frames at 30 fps; a moving gradient so every frame differs."""

    def __init__(self, counters: Counters, global_counters: Counters):
        super().__init__()
        self._counters = counters
        self._global = global_counters
        self._index = 0
        # Two periods of a gradient row so that a rotation is just a slice.
        row = bytes((x * 255) // VIDEO_WIDTH for x in range(VIDEO_WIDTH))
        self._row2 = row + row
        self._chroma_u = bytes([128]) * (VIDEO_WIDTH // 2 * VIDEO_HEIGHT // 2)

    async def recv(self) -> av.VideoFrame:
        pts, time_base = await self.next_timestamp()
        shift = (self._index * 4) % VIDEO_WIDTH
        y_row = self._row2[shift : shift + VIDEO_WIDTH]
        # A bright horizontal bar that moves down gives vertical motion too.
        bar = (self._index * 2) % VIDEO_HEIGHT
        bright = bytes([235]) * VIDEO_WIDTH
        y_plane = b"".join(
            bright if bar <= y < bar + 8 else y_row for y in range(VIDEO_HEIGHT)
        )
        v_value = (self._index * 3) % 256
        frame = av.VideoFrame(VIDEO_WIDTH, VIDEO_HEIGHT, "yuv420p")
        frame.planes[0].update(_fit(y_plane, frame.planes[0]))
        frame.planes[1].update(_fit(self._chroma_u, frame.planes[1]))
        frame.planes[2].update(
            _fit(bytes([v_value]) * len(self._chroma_u), frame.planes[2])
        )
        frame.pts = pts
        frame.time_base = time_base
        self._index += 1
        self._counters.video_frames_sent += 1
        self._global.video_frames_sent += 1
        return frame


def _fit(data: bytes, plane) -> bytes:
    """Pads rows to the plane's line size (PyAV may align lines)."""
    width = plane.width
    if plane.line_size == width:
        return data
    pad = bytes(plane.line_size - width)
    rows = [data[i : i + width] + pad for i in range(0, len(data), width)]
    return b"".join(rows)


class ToneAudioTrack(MediaStreamTrack):
    """A 440 Hz sine, mono s16 at 48 kHz, in 20 ms frames, paced in real time."""

    kind = "audio"

    def __init__(self, counters: Counters, global_counters: Counters):
        super().__init__()
        self._counters = counters
        self._global = global_counters
        # One second holds exactly 440 periods, so the table loops seamlessly.
        samples = [
            int(8000 * math.sin(2 * math.pi * 440 * n / AUDIO_RATE))
            for n in range(AUDIO_RATE)
        ]
        self._table = struct.pack(f"<{AUDIO_RATE}h", *samples)
        self._timestamp = 0
        self._start: float | None = None

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.time()
        else:
            self._timestamp += AUDIO_SAMPLES
            wait = self._start + self._timestamp / AUDIO_RATE - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
        offset = (self._timestamp % AUDIO_RATE) * 2
        chunk = self._table[offset : offset + AUDIO_SAMPLES * 2]
        frame = av.AudioFrame(format="s16", layout="mono", samples=AUDIO_SAMPLES)
        frame.planes[0].update(chunk)
        frame.sample_rate = AUDIO_RATE
        frame.pts = self._timestamp
        frame.time_base = fractions.Fraction(1, AUDIO_RATE)
        self._counters.audio_frames_sent += 1
        self._global.audio_frames_sent += 1
        return frame


def _preferred(kind: str, video: str = "vp8"):
    codecs = RTCRtpSender.getCapabilities(kind).codecs
    wanted = {"video": (f"video/{video}", "video/rtx"), "audio": ("audio/opus",)}[kind]
    return [c for c in codecs if c.mimeType.lower() in wanted]


class Endpoint:
    def __init__(self, token: str | None):
        self.token = token
        self.sessions: dict[str, Session] = {}
        self.totals = Counters()
        self.whip_sessions = 0
        self.whep_sessions = 0
        self.deleted = 0
        self.rejected = 0

    # ---- helpers -------------------------------------------------------
    def _authorized(self, request: web.Request) -> bool:
        if self.token is None:
            return True
        return request.headers.get("Authorization", "") == f"Bearer {self.token}"

    def stats(self) -> dict:
        return {
            **self.totals.__dict__,
            "whip_sessions": self.whip_sessions,
            "whep_sessions": self.whep_sessions,
            "deleted": self.deleted,
            "rejected": self.rejected,
            "sessions": [s.as_json() for s in self.sessions.values()],
        }

    async def _negotiate(self, request: web.Request, kind: str) -> web.Response:
        if not self._authorized(request):
            self.rejected += 1
            return web.Response(status=401, text="unauthorized\n", headers=CORS)
        ctype = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/sdp":
            return web.Response(
                status=415, text="expected application/sdp\n", headers=CORS
            )
        offer_sdp = await request.text()
        if "m=" not in offer_sdp:
            return web.Response(status=400, text="bad offer\n", headers=CORS)

        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        session = Session(id=uuid.uuid4().hex[:12], kind=kind, pc=pc)

        @pc.on("connectionstatechange")
        async def _on_state() -> None:
            session.connection_state = pc.connectionState
            log.info("%s %s connection %s", kind, session.id, pc.connectionState)

        if kind == "whep":
            video = PatternVideoTrack(session.counters, self.totals)
            audio = ToneAudioTrack(session.counters, self.totals)
            pc.addTransceiver(video, direction="sendonly").setCodecPreferences(
                _preferred("video")
            )
            pc.addTransceiver(audio, direction="sendonly").setCodecPreferences(
                _preferred("audio")
            )
        else:
            pc.addTransceiver("video", direction="recvonly").setCodecPreferences(
                _preferred("video")
            )
            pc.addTransceiver("audio", direction="recvonly").setCodecPreferences(
                _preferred("audio")
            )

            @pc.on("track")
            def _on_track(track: MediaStreamTrack) -> None:
                log.info("whip %s got %s track", session.id, track.kind)
                session.tasks.append(
                    asyncio.ensure_future(self._consume(session, track))
                )

        try:
            await pc.setRemoteDescription(
                RTCSessionDescription(sdp=offer_sdp, type="offer")
            )
            answer = await pc.createAnswer()
            await pc.setLocalDescription(answer)  # gathers every candidate
        except Exception as error:  # a bad offer must not kill the endpoint
            log.warning("%s negotiation failed: %s", kind, error)
            await pc.close()
            return web.Response(
                status=400, text=f"negotiation failed: {error}\n", headers=CORS
            )

        self.sessions[session.id] = session
        if kind == "whep":
            self.whep_sessions += 1
        else:
            self.whip_sessions += 1
        location = f"/{kind}/{session.id}"
        log.info("%s session %s created", kind, session.id)
        return web.Response(
            status=201,
            body=pc.localDescription.sdp.encode(),
            headers={
                **CORS,
                "Content-Type": "application/sdp",
                "Location": location,
            },
        )

    async def _consume(self, session: Session, track: MediaStreamTrack) -> None:
        try:
            while True:
                await track.recv()
                if track.kind == "video":
                    session.counters.video_frames_decoded += 1
                    self.totals.video_frames_decoded += 1
                else:
                    session.counters.audio_frames_decoded += 1
                    self.totals.audio_frames_decoded += 1
        except (MediaStreamError, asyncio.CancelledError):
            pass

    # ---- routes ---------------------------------------------------------
    async def whip(self, request: web.Request) -> web.Response:
        return await self._negotiate(request, "whip")

    async def whep(self, request: web.Request) -> web.Response:
        return await self._negotiate(request, "whep")

    async def delete(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            self.rejected += 1
            return web.Response(status=401, text="unauthorized\n", headers=CORS)
        session = self.sessions.get(request.match_info["id"])
        if session is None or session.deleted:
            return web.Response(status=404, text="no such session\n", headers=CORS)
        await self._close(session)
        self.deleted += 1
        log.info("%s session %s deleted", session.kind, session.id)
        return web.Response(status=200, headers=CORS)

    async def patch(self, request: web.Request) -> web.Response:
        return web.Response(status=405, headers=CORS)

    async def options(self, request: web.Request) -> web.Response:
        return web.Response(status=204, headers=CORS)

    async def get_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats(), headers=CORS)

    async def _close(self, session: Session) -> None:
        session.deleted = True
        await session.pc.close()
        for task in session.tasks:
            task.cancel()

    async def close_all(self) -> None:
        for session in self.sessions.values():
            if not session.deleted:
                await session.pc.close()
                for task in session.tasks:
                    task.cancel()


CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, DELETE, PATCH, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type",
    "Access-Control-Expose-Headers": "Location",
}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token")
    parser.add_argument("--stats-file")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        stream=sys.stderr,
        format="endpoint %(levelname)s %(message)s",
    )
    for noisy in ("aioice", "aiortc", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    use_loopback_only()

    endpoint = Endpoint(args.token)
    app = web.Application()
    app.router.add_post("/whip", endpoint.whip)
    app.router.add_post("/whep", endpoint.whep)
    app.router.add_delete("/whip/{id}", endpoint.delete)
    app.router.add_delete("/whep/{id}", endpoint.delete)
    app.router.add_patch("/whip/{id}", endpoint.patch)
    app.router.add_patch("/whep/{id}", endpoint.patch)
    app.router.add_route("OPTIONS", "/{tail:.*}", endpoint.options)
    app.router.add_get("/stats", endpoint.get_stats)

    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(json.dumps({"listening": port}), flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()

    stats = endpoint.stats()
    if args.stats_file:
        with open(args.stats_file, "w") as out:
            json.dump(stats, out)
    try:
        await asyncio.wait_for(endpoint.close_all(), timeout=5)
    except asyncio.TimeoutError:
        pass
    await runner.cleanup()
    print(json.dumps({"stats": stats}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
