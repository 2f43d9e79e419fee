"""`understudy whep|whip URL --token T ...` implemented with aiortc (harness self-check only)."""

import argparse
import asyncio
import sys

import aiohttp
from yarl import URL
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaRecorder

from common import Counters, _preferred, add_sending_transceivers


def fail(message: str) -> int:
    print(f"understudy: error: {message}", file=sys.stderr)
    return 1


async def run(args) -> int:
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    recorder = MediaRecorder(args.record) if args.command == "whep" and args.record else None
    counters = Counters()
    if args.command == "whep":
        pc.addTransceiver("audio", direction="recvonly").setCodecPreferences(_preferred("audio"))
        pc.addTransceiver("video", direction="recvonly").setCodecPreferences(_preferred("video"))
        if recorder:
            pc.on("track", recorder.addTrack)
    else:
        add_sending_transceivers(pc, "sendonly", counters)
    headers = {"Content-Type": "application/sdp"}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            await pc.setLocalDescription(await pc.createOffer())
            try:
                async with http.post(args.url, data=pc.localDescription.sdp, headers=headers) as r:
                    if r.status != 201:
                        return fail(f"{args.command.upper()} endpoint answered {r.status} {r.reason}")
                    answer = await r.text()
                    location = r.headers.get("Location", "")
            except aiohttp.ClientError as error:
                return fail(f"cannot reach {args.url}: {error}")
            await pc.setRemoteDescription(RTCSessionDescription(answer, "answer"))
            if recorder:
                await recorder.start()
            await asyncio.sleep(args.duration)
            resource = str(URL(args.url).join(URL(location)))
            async with http.delete(resource, headers=headers) as r:
                if r.status != 200:
                    return fail(f"DELETE {resource} answered {r.status}")
    finally:
        if recorder:
            await recorder.stop()
        await pc.close()
    print(f"understudy: done video_sent={counters.video_frames_sent} nack_sent=0 pli_sent=0 "
          "retransmissions_received=0", file=sys.stderr)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="understudy")
    parser.add_argument("command", choices=["whep", "whip"])
    parser.add_argument("url")
    parser.add_argument("--token")
    parser.add_argument("--record")
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--video", default="testsrc")
    parser.add_argument("--audio", default="tone")
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
