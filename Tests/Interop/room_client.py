"""A minimal room-protocol client (docs/protocol.md) with aiortc media, for the interop suite.

* ``RoomClient``: one signalling WebSocket (``websockets``): ``request()``, notifications queued
  per method, ``join()``.
* ``publish()``: a sendonly aiortc connection with the pattern video (VP8) and tone audio (Opus)
  of aiortc_endpoint.py, negotiated by one ``produce {tracks, sdp}`` request.
* ``Subscriber``: answers every ``subscriberOffer`` with an aiortc connection and counts the
  decoded frames of every track it receives.

aiortc gathers all candidates before ``setLocalDescription`` returns, so every SDP sent carries
them (no trickle), which is what the room protocol expects.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import defaultdict

import websockets
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from aiortc_endpoint import Counters, PatternVideoTrack, ToneAudioTrack, _preferred
from loopback import use_loopback_only


class RoomError(Exception):
    def __init__(self, error: dict):
        super().__init__(f"{error.get('code')} {error.get('name')}: {error.get('message')}")
        self.code = error.get("code")


class RoomClient:
    def __init__(self, ws):
        self.ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._notifications: dict[str, asyncio.Queue] = defaultdict(asyncio.Queue)
        self.texts: list[str] = []  # every text frame as it arrived (exact-bytes checks)
        self._reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, url: str, token: str) -> "RoomClient":
        ws = await websockets.connect(f"{url}?token={token}", max_size=2**22)
        return cls(ws)

    async def _read(self) -> None:
        try:
            async for text in self.ws:
                self.texts.append(text)
                msg = json.loads(text)
                if "id" in msg and "ok" in msg:
                    fut = self._pending.pop(msg["id"], None)
                    if fut and not fut.done():
                        if msg["ok"]:
                            fut.set_result(msg.get("data", {}))
                        else:
                            fut.set_exception(RoomError(msg.get("error", {})))
                elif "method" in msg:
                    self._notifications[msg["method"]].put_nowait(msg.get("data", {}))
        except websockets.ConnectionClosed:
            pass
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("signalling socket closed"))

    async def request(self, method: str, data: dict | None = None, timeout: float = 15) -> dict:
        rid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        await self.ws.send(json.dumps({"id": rid, "method": method, "data": data or {}}))
        return await asyncio.wait_for(fut, timeout)

    async def notification(self, method: str, timeout: float = 15) -> dict:
        return await asyncio.wait_for(self._notifications[method].get(), timeout)

    async def join(self, room: str, participant: str, **extra) -> dict:
        return await self.request(
            "join", {"roomId": room, "participantId": participant, "protocolVersion": 1, **extra}
        )

    async def close(self) -> None:
        self._reader.cancel()
        await self.ws.close()


async def publish(client: RoomClient, video: str = "vp8") -> tuple[RTCPeerConnection, dict, Counters]:
    """Publishes VP8 (or `video`: "h264") + Opus with one ``produce``; returns the connection, the
    response, counters."""
    use_loopback_only()
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    counters, totals = Counters(), Counters()
    pc.addTransceiver(PatternVideoTrack(counters, totals), direction="sendonly").setCodecPreferences(
        _preferred("video", video)
    )
    pc.addTransceiver(ToneAudioTrack(counters, totals), direction="sendonly").setCodecPreferences(
        _preferred("audio")
    )
    await pc.setLocalDescription(await pc.createOffer())
    response = await client.request(
        "produce",
        {"tracks": [{"kind": "webcam"}, {"kind": "mic"}], "sdp": pc.localDescription.sdp},
    )
    await pc.setRemoteDescription(RTCSessionDescription(sdp=response["sdp"], type="answer"))
    return pc, response, counters


class Subscriber:
    """Answers ``subscriberOffer`` notifications and counts decoded frames per kind."""

    def __init__(self, client: RoomClient):
        use_loopback_only()
        self.client = client
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.frames = {"video": 0, "audio": 0}
        self.answered: list[int] = []
        self.errors: list[str] = []
        self._tasks: list[asyncio.Task] = []

        @self.pc.on("track")
        def _on_track(track) -> None:
            self._tasks.append(asyncio.get_running_loop().create_task(self._drain(track)))

        self._tasks.append(asyncio.get_running_loop().create_task(self._answer_loop()))

    async def _drain(self, track) -> None:
        try:
            while True:
                await track.recv()
                self.frames[track.kind] += 1
        except MediaStreamError:
            pass

    async def _answer_loop(self) -> None:
        while True:
            offer = await self.client._notifications["subscriberOffer"].get()
            try:
                await self.pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type="offer"))
                await self.pc.setLocalDescription(await self.pc.createAnswer())
                await self.client.request(
                    "subscriberAnswer", {"sdp": self.pc.localDescription.sdp, "revision": offer["revision"]}
                )
                self.answered.append(offer["revision"])
            except Exception as error:  # recorded for the test's assertion message
                self.errors.append(f"revision {offer.get('revision')}: {error!r}")

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self.pc.close()
