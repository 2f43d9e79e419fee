#!/usr/bin/env python3
"""Proves the interop harness works without any Swift code.

Run it inside a fresh network namespace:

    unshare -n sh -c 'ip link set lo up && exec .venv/bin/python Tests/Interop/selfcheck.py'

1. Starts aiortc_endpoint.py; an aiortc client plays WHEP (receives and decodes the
   endpoint's VP8 + Opus) and WHIP (sends the same synthetic tracks, which the
   endpoint decodes), then DELETEs both sessions.
2. Starts headless Chromium, then headless Firefox ESR (WebDriver BiDi); the page makes a recvonly
   offer, POSTs it to the endpoint's WHEP URL with fetch, and decodes the stream.

Exits 0 when frames flowed everywhere, and prints the numbers.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aiortc_endpoint import Counters, PatternVideoTrack, ToneAudioTrack, _preferred  # noqa: E402
from chromium import Chromium  # noqa: E402
from firefox import Firefox  # noqa: E402
from harness import AiortcEndpoint  # noqa: E402
from loopback import use_loopback_only  # noqa: E402

TOKEN = "selfcheck-token"
SECONDS = 5.0


async def post_sdp(http: aiohttp.ClientSession, url: str, sdp: str) -> tuple[str, str]:
    headers = {"Content-Type": "application/sdp", "Authorization": f"Bearer {TOKEN}"}
    async with http.post(url, data=sdp, headers=headers) as response:
        body = await response.text()
        if response.status != 201:
            raise RuntimeError(f"POST {url} -> {response.status}: {body}")
        return body, response.headers["Location"]


async def delete(http: aiohttp.ClientSession, base: str, location: str) -> int:
    async with http.delete(base + location, headers={"Authorization": f"Bearer {TOKEN}"}) as r:
        return r.status


async def aiortc_whep(base: str) -> dict:
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    counts = {"video": 0, "audio": 0}
    tasks = []

    async def pull(track):
        try:
            while True:
                await track.recv()
                counts[track.kind] += 1
        except (MediaStreamError, asyncio.CancelledError):
            pass

    pc.on("track", lambda track: tasks.append(asyncio.ensure_future(pull(track))))
    pc.addTransceiver("video", direction="recvonly")
    pc.addTransceiver("audio", direction="recvonly")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as http:
        try:
            await pc.setLocalDescription(await pc.createOffer())
            answer, location = await post_sdp(http, f"{base}/whep", pc.localDescription.sdp)
            await pc.setRemoteDescription(RTCSessionDescription(answer, "answer"))
            await asyncio.sleep(SECONDS)
            status = await delete(http, base, location)
        finally:
            await pc.close()
            for task in tasks:
                task.cancel()
    return {"decoded_video": counts["video"], "decoded_audio": counts["audio"], "delete_status": status}


async def aiortc_whip(base: str) -> dict:
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    sent = Counters()
    pc.addTransceiver(PatternVideoTrack(sent, Counters()), direction="sendonly").setCodecPreferences(_preferred("video"))
    pc.addTransceiver(ToneAudioTrack(sent, Counters()), direction="sendonly").setCodecPreferences(_preferred("audio"))
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as http:
        try:
            await pc.setLocalDescription(await pc.createOffer())
            answer, location = await post_sdp(http, f"{base}/whip", pc.localDescription.sdp)
            await pc.setRemoteDescription(RTCSessionDescription(answer, "answer"))
            await asyncio.sleep(SECONDS)
            status = await delete(http, base, location)
        finally:
            await pc.close()
    return {"sent_video": sent.video_frames_sent, "sent_audio": sent.audio_frames_sent, "delete_status": status}


async def browser_whep(base: str, browser_type=Chromium) -> dict:
    async with browser_type() as browser:
        page = await browser.open_peer_page()
        location = await page.call("whep", f"{base}/whep", TOKEN)
        state = await page.call("waitConnected", 10000, timeout=15)
        await asyncio.sleep(SECONDS)
        stats = await page.call("stats")
        stats.pop("log", None)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            stats["delete_status"] = await delete(http, base, location)
        stats["state_after_connect"] = state
        return stats


async def main() -> int:
    use_loopback_only()
    failures = []
    with tempfile.TemporaryDirectory(prefix="understudy-selfcheck-") as tmp:
        endpoint = AiortcEndpoint(Path(tmp), token=TOKEN).start()
        try:
            started = time.monotonic()
            whep = await asyncio.wait_for(aiortc_whep(endpoint.base_url), 30)
            print(f"aiortc WHEP client: {whep}")
            if whep["decoded_video"] < 60 or whep["decoded_audio"] < 100 or whep["delete_status"] != 200:
                failures.append("aiortc WHEP")

            whip = await asyncio.wait_for(aiortc_whip(endpoint.base_url), 30)
            stats = endpoint.stats()
            whip_session = [s for s in stats["sessions"] if s["kind"] == "whip"][-1]
            print(f"aiortc WHIP client: {whip}; endpoint decoded video={whip_session['video_frames_decoded']} "
                  f"audio={whip_session['audio_frames_decoded']} deleted={whip_session['deleted']}")
            if whip_session["video_frames_decoded"] < 60 or whip_session["audio_frames_decoded"] < 100 or not whip_session["deleted"]:
                failures.append("aiortc WHIP")

            for name, browser_type in (("Chromium", Chromium), ("Firefox", Firefox)):
                page = await asyncio.wait_for(browser_whep(endpoint.base_url, browser_type), 90)
                print(f"{name} WHEP page: {page}")
                if page["framesDecoded"] <= 0 or page["audioPacketsReceived"] <= 0 or (page["videoCodec"] or "").lower() != "video/vp8":
                    failures.append(f"{name} WHEP")

            unauthorized = await check_unauthorized(endpoint.base_url)
            print(f"POST without token -> {unauthorized}")
            if unauthorized != 401:
                failures.append("token check")
            print(f"endpoint totals: {dict((k, v) for k, v in endpoint.stats().items() if k != 'sessions')}")
            print(f"elapsed {time.monotonic() - started:.1f}s")
        finally:
            final = endpoint.stop()
            if failures:
                print(endpoint.log()[-3000:], file=sys.stderr)
        print(f"final stats written on SIGTERM: {final is not None}")
    print("selfcheck:", "FAILED " + ", ".join(failures) if failures else "ok")
    return 1 if failures else 0


async def check_unauthorized(base: str) -> int:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        async with http.post(f"{base}/whep", data="v=0\r\n", headers={"Content-Type": "application/sdp"}) as r:
            return r.status


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
