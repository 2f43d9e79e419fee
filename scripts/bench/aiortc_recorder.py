#!/usr/bin/env python3
"""The aiortc side of `understudy bench`'s recording benchmark.

    python aiortc_recorder.py --out FILE.webm

A line protocol over stdin/stdout (one JSON object per line):

* prints ``{"ready": true}`` once imported and listening on stdin;
* reads ``{"offer": SDP}`` and answers ``{"answer": SDP}`` (non-trickle, loopback
  candidates only); every received track goes to ``aiortc.contrib.media.MediaRecorder``
  writing ``FILE.webm``, exactly as an aiortc application records a participant;
* reads ``{"stats": true}`` and answers ``{"frames": {...}}``: frames the recorder has
  pulled so far, per kind;
* reads ``{"stop": true}``, stops the recorder (finishing the file), closes the
  connection and prints ``{"stopped": true, "frames": {...}}``.

The benchmark reads this process's CPU time from /proc/PID/stat, so nothing here
measures itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

import aioice.ice
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaRecorder


def _loopback_only(use_ipv4: bool = True, use_ipv6: bool = False) -> list[str]:
    # aioice skips 127.0.0.1 when gathering; the benchmark runs on loopback only.
    return ["127.0.0.1"] if use_ipv4 else []


aioice.ice.get_host_addresses = _loopback_only


class CountingTrack:
    """Counts frames that the recorder pulls from a received track."""

    def __init__(self, track, counts: dict, key: str):
        self._track = track
        self._counts = counts
        self._key = key
        self.kind = track.kind

    async def recv(self):
        frame = await self._track.recv()
        self._counts[self._key] = self._counts.get(self._key, 0) + 1
        return frame

    def __getattr__(self, name):
        return getattr(self._track, name)


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    recorder = MediaRecorder(args.out)
    counts: dict[str, int] = {}

    @pc.on("track")
    def on_track(track) -> None:
        recorder.addTrack(CountingTrack(track, counts, f"{track.kind}_frames_decoded"))

    emit({"ready": True})
    while True:
        line = await reader.readline()
        if not line:
            break
        message = json.loads(line)
        if "offer" in message:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=message["offer"], type="offer"))
            await pc.setLocalDescription(await pc.createAnswer())
            await recorder.start()
            emit({"answer": pc.localDescription.sdp})
        elif message.get("stats"):
            emit({"frames": dict(counts)})
        elif message.get("stop"):
            await recorder.stop()
            await pc.close()
            emit({"stopped": True, "frames": counts})
            break


if __name__ == "__main__":
    asyncio.run(main())
