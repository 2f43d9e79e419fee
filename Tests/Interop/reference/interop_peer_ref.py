"""`interop-peer --role offer|answer ...` implemented with aiortc (harness self-check only)."""

import argparse
import asyncio
import json
import sys

from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaRecorder

from common import Counters, add_sending_transceivers


async def read_message(want: str) -> dict:
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    message = json.loads(line)
    if message.get("type") != want:
        raise ValueError(f"expected {want}, got {message.get('type')}")
    return message


def emit(message: dict) -> None:
    print(json.dumps(message), flush=True)


async def run(args) -> int:
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    recorder = MediaRecorder(args.record) if args.record else None
    if recorder:
        pc.on("track", recorder.addTrack)
    counters = Counters()
    try:
        add_sending_transceivers(pc, "sendrecv", counters)
        if args.role == "offer":
            await pc.setLocalDescription(await pc.createOffer())
            emit({"type": "offer", "sdp": pc.localDescription.sdp})
            answer = await read_message("answer")
            await pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], "answer"))
        else:
            offer = await read_message("offer")
            await pc.setRemoteDescription(RTCSessionDescription(offer["sdp"], "offer"))
            await pc.setLocalDescription(await pc.createAnswer())
            emit({"type": "answer", "sdp": pc.localDescription.sdp})
        if recorder:
            await recorder.start()
        for _ in range(int(args.duration)):
            await asyncio.sleep(1)
            emit({"type": "stats", "state": pc.connectionState,
                  "video_frames_sent": counters.video_frames_sent,
                  "audio_frames_sent": counters.audio_frames_sent})
    finally:
        if recorder:
            await recorder.stop()
        await pc.close()
    emit({"type": "done", "ok": True})
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="interop-peer")
    parser.add_argument("--role", choices=["offer", "answer"], required=True)
    parser.add_argument("--record")
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--video", default="testsrc")
    parser.add_argument("--audio", default="tone")
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
