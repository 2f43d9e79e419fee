#!/usr/bin/env python3
"""An aiortc publisher for the SFU test (Tests/SFUTests/SFUAiortcTests.swift).

Driven over stdin/stdout with JSON lines:

* prints ``{"offer": SDP}`` (sendonly VP8 pattern video + Opus tone, all host candidates);
* reads ``{"answer": SDP}`` and applies it;
* prints ``{"state": S}`` on every connection state change;
* exits when stdin closes (or on ``{"stop": true}``), printing ``{"sent": {...}}`` first.
"""

from __future__ import annotations

import asyncio
import json
import sys

from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription

from aiortc_endpoint import Counters, PatternVideoTrack, ToneAudioTrack, _preferred
from loopback import use_loopback_only


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main() -> None:
    use_loopback_only()
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    counters = Counters()
    totals = Counters()

    @pc.on("connectionstatechange")
    async def _on_state() -> None:
        emit({"state": pc.connectionState})

    pc.addTransceiver(PatternVideoTrack(counters, totals), direction="sendonly").setCodecPreferences(
        _preferred("video")
    )
    pc.addTransceiver(ToneAudioTrack(counters, totals), direction="sendonly").setCodecPreferences(
        _preferred("audio")
    )
    await pc.setLocalDescription(await pc.createOffer())
    emit({"offer": pc.localDescription.sdp})

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            break
        msg = json.loads(line)
        if "answer" in msg:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=msg["answer"], type="answer"))
        if msg.get("stop"):
            break
    emit({"sent": counters.__dict__})
    await pc.close()


if __name__ == "__main__":
    asyncio.run(main())
