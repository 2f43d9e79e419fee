"""interop-peer (our Swift stack) against headless Chromium, both offer directions.

The page and interop-peer exchange SDP through this driver (non-trickle, JSON lines).
Chromium judges what we send (its inbound stats); ffprobe judges what we received.
"""

from __future__ import annotations

import asyncio

from chromium import Chromium
from harness import InteropPeer, decode_errors, timestamp_problems, probe_frames

PEER_SECONDS = 9      # interop-peer's --duration
SAMPLE_AFTER = 6.0    # when the page's stats are read, while media still flows


def check_page_stats(stats: dict) -> None:
    assert stats["connectionState"] == "connected", stats
    assert (stats["videoCodec"] or "").lower() == "video/vp8", stats
    assert stats["framesDecoded"] >= 60, stats
    assert stats["audioPacketsReceived"] > 0, stats
    assert stats["dtlsState"] == "connected", stats
    assert stats["srtpCipher"], stats


def check_recording(path, peer: InteropPeer) -> None:
    assert path.exists() and path.stat().st_size > 0, f"no recording\n{peer.log()}"
    frames = probe_frames(path)
    print(f"recorded by interop-peer: {frames}")
    assert frames.get("vp8", 0) > 0, f"no VP8 in recording: {frames}"
    assert frames.get("opus", 0) > 0, f"no Opus in recording: {frames}"
    assert decode_errors(path) == ""
    assert timestamp_problems(path) == []


async def page_offers(peer_binary: str, workdir) -> tuple[dict, dict, InteropPeer]:
    record = workdir / "from-chromium.webm"
    peer = InteropPeer("answer", workdir, record=record, duration=PEER_SECONDS, binary=peer_binary)
    async with Chromium() as browser:
        page = await browser.open_peer_page()
        try:
            offer = await page.call("makeOffer", {"send": True, "recv": True})
            await peer.start()
            await peer.send({"type": "offer", "sdp": offer})
            answer = await peer.read("answer", timeout=20)
            await page.call("acceptAnswer", answer["sdp"])
            assert await page.call("waitConnected", 10000, timeout=15) == "connected", \
                f"{await page.call('stats')}\n{peer.log()}"
            await asyncio.sleep(SAMPLE_AFTER)
            stats = await page.call("stats")
            done = await peer.finish(timeout=PEER_SECONDS + 20)
            return stats, done, peer
        finally:
            await peer.stop()


async def peer_offers(peer_binary: str, workdir) -> tuple[dict, dict, InteropPeer]:
    record = workdir / "from-chromium.webm"
    peer = InteropPeer("offer", workdir, record=record, duration=PEER_SECONDS, binary=peer_binary)
    async with Chromium() as browser:
        page = await browser.open_peer_page()
        try:
            await peer.start()
            offer = await peer.read("offer", timeout=20)
            answer = await page.call("acceptOffer", offer["sdp"])
            await peer.send({"type": "answer", "sdp": answer})
            assert await page.call("waitConnected", 10000, timeout=15) == "connected", \
                f"{await page.call('stats')}\n{peer.log()}"
            await asyncio.sleep(SAMPLE_AFTER)
            stats = await page.call("stats")
            done = await peer.finish(timeout=PEER_SECONDS + 20)
            return stats, done, peer
        finally:
            await peer.stop()


def run(scenario, interop_peer: str, tmp_path) -> None:
    stats, done, peer = asyncio.run(asyncio.wait_for(scenario(interop_peer, tmp_path), 90))
    print(f"page stats: {stats}\ninterop-peer done: {done}; last stats: {peer.stats()[-1:]}")
    check_page_stats(stats)
    assert done.get("ok") is True and done["exit_code"] == 0, f"{done}\n{peer.log()}"
    check_recording(tmp_path / "from-chromium.webm", peer)


def test_chromium_offers_interop_peer_answers(interop_peer, tmp_path):
    run(page_offers, interop_peer, tmp_path)


def test_interop_peer_offers_chromium_answers(interop_peer, tmp_path):
    run(peer_offers, interop_peer, tmp_path)
