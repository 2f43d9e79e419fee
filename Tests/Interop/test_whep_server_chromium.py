"""Headless Chromium plays a room participant through the server's `POST /whep/ROOM/PARTICIPANT`.

The page (pages/whep_player.html) is plain `RTCPeerConnection` + `fetch`, served from another
origin than the room server (so the endpoints' CORS answers are exercised too). The participant it
plays is an ordinary WebSocket member, `understudy join --mode SEND_AND_RECV` (test pattern and
tone). The viewer shows up in the room's roster while it plays, restarts ICE through PATCH (media
goes on over a new candidate pair) and leaves the roster after its DELETE.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

from chromium import Chromium
from harness import kill_process, understudy_bin
from whip_server_support import ROOM, SECRET, room_participants, served, token, wait_participants


async def _play(port: int) -> dict:
    async with Chromium() as browser:
        page = await browser.open_page(f"{browser.page_base}/whep_player.html")
        deadline = time.monotonic() + 15
        while not await page.evaluate("typeof play === 'function'"):
            assert time.monotonic() < deadline, "the player page did not load"
            await asyncio.sleep(0.1)
        answer = await page.call("play", f"http://127.0.0.1:{port}/whep/{ROOM}/host", token("chromium"))
        assert answer["status"] == 201, answer
        stats: dict = {}
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            stats = await page.call("stats")
            if stats["video"].get("framesDecoded", 0) >= 90 and stats["audio"].get("totalSamplesReceived", 0) >= 48000:
                break
            await asyncio.sleep(0.5)
        roster = await asyncio.to_thread(room_participants, port)

        # ICE restart through PATCH: media keeps flowing on a new candidate pair.
        before = await page.call("transport")
        restart = await page.call("restartIce")
        after: dict = {}
        after_stats: dict = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            after = await page.call("transport")
            after_stats = await page.call("stats")
            if (after.get("pairId") != before.get("pairId") and after.get("responsesReceived", 0) > 0
                    and after_stats["video"].get("framesDecoded", 0) >= stats["video"]["framesDecoded"] + 60):
                break
            await asyncio.sleep(0.5)
        deleted = await page.call("stop")
        return {"answer": answer, "stats": stats, "roster": roster, "deleted": deleted, "restart": restart,
                "transport_before": before, "transport_after": after, "stats_after_restart": after_stats}


def test_chromium_plays_a_participant_through_whep(understudy, tmp_path):
    with served(44500) as port:
        log = open(tmp_path / "host.log", "w")
        host = subprocess.Popen(
            [understudy_bin(), "join", "--server", f"http://127.0.0.1:{port}", "--room", ROOM, "--secret", SECRET,
             "--id", "host", "--mode", "SEND_AND_RECV", "--consume", "none"],
            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 30
            while "joined room" not in (tmp_path / "host.log").read_text():
                assert host.poll() is None and time.monotonic() < deadline, (tmp_path / "host.log").read_text()
                time.sleep(0.2)
            result = asyncio.run(_play(port))
            print(json.dumps(result))
            stats = result["stats"]
            assert stats["video"]["framesDecoded"] >= 90, result
            assert stats["audio"]["totalSamplesReceived"] >= 48000, result
            assert stats["element"]["width"] > 0 and stats["element"]["height"] > 0, result
            assert "chromium" in result["roster"], result
            assert result["restart"]["status"] == 200, result
            assert result["restart"]["etag"] != result["answer"]["etag"], result
            assert result["transport_after"]["pairId"] != result["transport_before"]["pairId"], result
            assert result["transport_after"]["responsesReceived"] > 0, result
            assert (result["stats_after_restart"]["video"]["framesDecoded"]
                    >= stats["video"]["framesDecoded"] + 60), result
            assert result["deleted"] == 200, result
            wait_participants(port, lambda ids: "chromium" not in ids and "host" in ids, "lost the WHEP viewer")
        finally:
            kill_process(host)
            log.close()
