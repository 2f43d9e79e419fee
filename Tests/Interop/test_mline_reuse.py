"""Guests come and go on a live stream's stage: the server puts each new guest's tracks on the m-lines
of the tracks a subscriber no longer receives instead of adding m-lines, so the subscribe session
stays the size of the stage. It recycles them as JSEP does (RFC 8829 §5.2.2): a closed consumer's
m-line is rejected (port 0), then taken over under a new mid with new SSRCs and track ids; the first
m-line (the BUNDLE tag) only goes inactive. Checked with an aiortc subscriber and a Chromium
subscriber: each guest's media is decoded on the recycled m-lines under new mids, and the session
holds at most three m-lines (the stage's two and the first) however many guests came and went."""

from __future__ import annotations

import asyncio
import time

from chromium import ROOM_ANSWER_JS, Chromium, answer_subscriber_offers
from harness import free_port, kill_process, run_understudy, start_room_server
from room_client import RoomClient, Subscriber, publish

SECRET = "interop-reuse-secret"
ROOM = "interop-reuse"
GUESTS = 3



def _token(participant: str) -> str:
    result = run_understudy(
        ["token", "--secret", SECRET, "--room", ROOM, "--participant", participant], timeout=20)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def _drain(client: RoomClient, method: str) -> list[dict]:
    """The notifications of `method` received so far."""
    queue = client._notifications[method]
    out = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


def _media_sections(sdp: str) -> int:
    return sum(1 for line in sdp.splitlines() if line.startswith("m="))


async def _guest_on_stage(url: str, name: str, decoded, minimum: int) -> tuple[int, str]:
    """Joins `name`, publishes webcam + mic until `decoded()` grew by `minimum` frames, then leaves.
    Returns the growth seen and the subscriber-side mids of the guest's tracks."""
    guest = await RoomClient.connect(url, _token(name))
    pc = None
    try:
        await guest.join(ROOM, name)
        start = await decoded()
        pc, _, _ = await publish(guest)
        deadline = time.monotonic() + 60
        grown = 0
        while time.monotonic() < deadline:
            grown = await decoded() - start
            if grown >= minimum:
                break
            await asyncio.sleep(0.2)
        return grown, name
    finally:
        if pc:
            await pc.close()
        try:
            await guest.request("leave")
        except Exception:
            pass
        await guest.close()


async def _aiortc_scenario(port: int) -> dict:
    url = f"ws://127.0.0.1:{port}/v1/rtc"
    bob = await RoomClient.connect(url, _token("bob"))
    subscriber = None
    try:
        await bob.join(ROOM, "bob", mode="RECV_ONLY")  # autoConsume: every guest's tracks
        subscriber = Subscriber(bob)

        async def decoded() -> int:
            return subscriber.frames["video"]

        grown: list[int] = []
        sections: list[int] = []
        mids: list[list[str]] = []
        for i in range(GUESTS):
            count, _ = await _guest_on_stage(url, f"guest-{i}", decoded, 30)
            grown.append(count)
            created = [c for c in _drain(bob, "consumerCreated") if c["participantId"] == f"guest-{i}"]
            mids.append(sorted(c["mid"] for c in created))
            # The guest's m-lines went inactive: wait for that answer before the next guest.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and len(subscriber.answered) < 2 * (i + 1):
                await asyncio.sleep(0.1)
            sections.append(_media_sections(subscriber.pc.remoteDescription.sdp))
        return {"grown": grown, "sections": sections, "mids": mids, "errors": subscriber.errors}
    finally:
        if subscriber:
            await subscriber.close()
        await bob.close()


def test_aiortc_subscriber_decodes_each_guest_on_reused_mlines(understudy):
    port = free_port()
    server = start_room_server(port, 44100, SECRET, udp_count=1)
    try:
        result = asyncio.run(asyncio.wait_for(_aiortc_scenario(port), 240))
        print(f"m-line reuse (aiortc): {result}")
        assert not result["errors"], result
        assert all(g >= 30 for g in result["grown"]), result
        mids = [mid for guest in result["mids"] for mid in guest]
        assert len(mids) == 2 * GUESTS and len(set(mids)) == len(mids), result  # a new mid per track
        assert max(result["sections"]) == 3, result
    finally:
        kill_process(server)


async def _chromium_scenario(port: int) -> dict:
    url = f"ws://127.0.0.1:{port}/v1/rtc"
    bob = await RoomClient.connect(url, _token("bob"))
    answered: list[int] = []
    errors: list[str] = []
    async with Chromium() as browser:
        page = await browser.open_peer_page()
        await page.evaluate(ROOM_ANSWER_JS)

        async def decoded() -> int:
            if not answered:
                return 0
            return (await page.call("stats"))["framesDecoded"]

        await bob.join(ROOM, "bob", mode="RECV_ONLY")
        answering = asyncio.get_running_loop().create_task(
            answer_subscriber_offers(page, bob, answered, errors))
        try:
            grown: list[int] = []
            transceivers: list[int] = []
            for i in range(GUESTS):
                count, _ = await _guest_on_stage(url, f"guest-{i}", decoded, 30)
                grown.append(count)
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and len(answered) < 2 * (i + 1):
                    await asyncio.sleep(0.1)
                transceivers.append(await page.evaluate("pc.getTransceivers().length"))
            return {"grown": grown, "transceivers": transceivers, "answered": answered, "errors": errors}
        finally:
            answering.cancel()
            await bob.close()


def test_chromium_subscriber_decodes_each_guest_on_reused_mlines(understudy):
    port = free_port()
    server = start_room_server(port, 44200, SECRET, udp_count=1)
    try:
        result = asyncio.run(asyncio.wait_for(_chromium_scenario(port), 240))
        print(f"m-line reuse (chromium): {result}")
        assert not result["errors"], result
        assert all(g >= 30 for g in result["grown"]), result
        assert max(result["transceivers"]) <= 3, result
    finally:
        kill_process(server)
