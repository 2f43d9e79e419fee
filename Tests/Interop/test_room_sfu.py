"""Media through `understudy serve`, negotiated over the room protocol.

An aiortc publisher joins (SEND_AND_RECV) and publishes VP8 + Opus with `produce {tracks, sdp}`;
* an aiortc subscriber joins RECV_ONLY with autoConsume off, asks for the tracks with `consume`,
  answers the server's `subscriberOffer` and counts the frames it decodes;
* a headless Chromium subscriber (RECV_ONLY, autoConsume on; its signalling relayed by this test)
  receives without asking and reports what it decoded through getStats().
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import urllib.request

from chromium import ROOM_ANSWER_JS, Chromium, answer_subscriber_offers
from harness import free_port, kill_process, run_understudy, start_room_server
from room_client import RoomClient, RoomError, Subscriber, publish

SECRET = "interop-room-secret"
ROOM = "interop-room"


def _start_server(port: int, udp_low: int) -> subprocess.Popen:
    return start_room_server(port, udp_low, SECRET, udp_count=50, timeout=20)


def _token(participant: str) -> str:
    result = run_understudy(
        ["token", "--secret", SECRET, "--room", ROOM, "--participant", participant,
         "--permissions", "allow_join"],
        timeout=20,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def _metric(port: int, name: str) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return int(line.split()[-1])
    return -1


async def _scenario(port: int) -> dict:
    url = f"ws://127.0.0.1:{port}/v1/rtc"
    alice = await RoomClient.connect(url, _token("alice"))
    bob = await RoomClient.connect(url, _token("bob"))
    pub_pc = None
    subscriber = None
    try:
        await alice.join(ROOM, "alice")
        await bob.join(ROOM, "bob", mode="RECV_ONLY", autoConsume=False)
        subscriber = Subscriber(bob)

        # RECV_ONLY may not publish.
        try:
            await bob.request("produce", {"kind": "webcam", "sdp": "v=0\r\n"})
            refused = None
        except RoomError as error:
            refused = error.code

        pub_pc, response, sent = await publish(alice)
        producers = response["producers"]
        assert sorted(p["kind"] for p in producers) == ["mic", "webcam"], response
        await asyncio.sleep(2)
        before_consume = dict(subscriber.frames)

        await bob.request("consume", {"participantId": "alice", "kind": "webcam"})
        await bob.request("consume", {"participantId": "alice", "kind": "mic"})
        deadline = time.monotonic() + 20
        while not subscriber.answered and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        start = dict(subscriber.frames)
        await asyncio.sleep(5)
        during = {k: subscriber.frames[k] - start[k] for k in start}
        forwarded = await asyncio.to_thread(_metric, port, "understudy_rtp_packets_forwarded_total")
        # aiortc estimates on the receive side and sends REMB (it has no transport-cc): the
        # subscribe connection's send-side estimate takes it (issue 33).
        remb = await asyncio.to_thread(_metric, port, "understudy_sfu_remb_received_total")
        return {
            "refused": refused, "before_consume": before_consume, "during": during,
            "answered": list(subscriber.answered), "errors": list(subscriber.errors),
            "sent": dict(sent.__dict__), "forwarded": forwarded, "remb": remb,
            "pub_state": pub_pc.connectionState, "sub_state": subscriber.pc.connectionState,
        }
    finally:
        if subscriber:
            await subscriber.close()
        if pub_pc:
            await pub_pc.close()
        await alice.close()
        await bob.close()


def test_aiortc_publisher_to_aiortc_subscriber_through_room_sfu(understudy):
    port = free_port()
    server = _start_server(port, udp_low=41000)
    try:
        result = asyncio.run(asyncio.wait_for(_scenario(port), 90))
        print(f"room sfu scenario: {result}")
        assert result["refused"] == 3066, result
        assert result["before_consume"] == {"video": 0, "audio": 0}, "media before consume"
        assert result["answered"], f"no subscriberOffer was answered: {result}"
        assert not result["errors"], result
        assert result["during"]["video"] >= 60, result
        assert result["during"]["audio"] >= 100, result
        assert result["forwarded"] > 100, result
        assert result["remb"] > 0, f"no REMB from the aiortc subscriber reached the SFU: {result}"
    finally:
        kill_process(server)
        if server.stdout:
            tail = server.stdout.read()[-3000:]
            print(f"understudy serve output:\n{tail}")




async def _chromium_scenario(port: int) -> dict:
    url = f"ws://127.0.0.1:{port}/v1/rtc"
    alice = await RoomClient.connect(url, _token("alice"))
    bob = await RoomClient.connect(url, _token("bob"))
    pub_pc = None
    answered: list[int] = []
    errors: list[str] = []
    try:
        async with Chromium() as browser:
            page = await browser.open_peer_page()
            await page.evaluate(ROOM_ANSWER_JS)

            await alice.join(ROOM, "alice")
            await bob.join(ROOM, "bob", mode="RECV_ONLY")  # autoConsume defaults to true
            answering = asyncio.get_running_loop().create_task(
                answer_subscriber_offers(page, bob, answered, errors))
            try:
                pub_pc, _, _ = await publish(alice)
                # The page has a peer connection only once the first subscriber offer is answered.
                for _ in range(150):
                    if answered or errors:
                        break
                    await asyncio.sleep(0.1)
                assert answered, f"no subscriber offer was answered: {errors}"
                connected = await page.call("waitConnected", 15000, timeout=20)
                await asyncio.sleep(5)
                stats = await page.call("stats")
                # Chromium's transport-cc feedback on what the SFU forwards feeds the subscribe
                # connection's send-side estimate (issue 33).
                feedback = await asyncio.to_thread(_metric, port, "understudy_sfu_transport_feedback_received_total")
                estimates = await asyncio.to_thread(_metric, port, "understudy_sfu_subscriber_estimates")
            finally:
                answering.cancel()
            return {"connected": connected, "answered": answered, "errors": errors, "stats": stats,
                    "feedback": feedback, "estimates": estimates}
    finally:
        if pub_pc:
            await pub_pc.close()
        await alice.close()
        await bob.close()


def test_aiortc_publisher_to_chromium_subscriber_with_auto_consume(understudy):
    port = free_port()
    server = _start_server(port, udp_low=42000)
    try:
        result = asyncio.run(asyncio.wait_for(_chromium_scenario(port), 120))
        print(f"chromium room scenario: {result}")
        stats = result["stats"]
        assert result["answered"] and not result["errors"], result
        assert result["connected"] == "connected", result
        assert (stats["videoCodec"] or "").lower() == "video/vp8", stats
        assert stats["framesDecoded"] >= 60, stats
        assert stats["audioPacketsReceived"] > 100, stats
        assert result["feedback"] > 0 and result["estimates"] >= 1, result
    finally:
        kill_process(server)
