"""consume → stopConsuming → consume of the same webcam, three times (issue 32, item 1).

A subscriber written from docs/protocol.md keys each remote track by the `mid` of its
`consumerCreated`: every round must bring frames on the m-line that consumerCreated names. The server
recycles m-lines as JSEP does (RFC 8829 §5.2.2): a closed consumer's m-line is rejected (port 0),
and a later consumer takes it over with a new mid, so every stack sees a new transceiver. aiortc
ends a receiver's track for good and raises no new track for an m-line that goes from inactive back
to sendonly, so reusing the mid starved it. Checked with an aiortc subscriber and a Chromium one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from chromium import ROOM_ANSWER_JS, Chromium, answer_subscriber_offers
from harness import free_port, kill_process, run_understudy, start_room_server
from room_client import RoomClient, publish
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from loopback import use_loopback_only

SECRET = "interop-reconsume-secret"
ROOM = "interop-reconsume"
ROUNDS = 3
FRAMES = 20


def _token(participant: str) -> str:
    result = run_understudy(
        ["token", "--secret", SECRET, "--room", ROOM, "--participant", participant], timeout=20)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


class MidSubscriber:
    """Answers every `subscriberOffer` with aiortc and counts decoded video frames per mid (the mid
    of the transceiver whose track delivered them), as a client keyed by consumerCreated's mid does."""

    def __init__(self, client: RoomClient):
        use_loopback_only()
        self.client = client
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.frames: dict[str, int] = {}
        self.answered: list[int] = []
        self.errors: list[str] = []
        self._tasks: list[asyncio.Task] = []

        @self.pc.on("track")
        def _on_track(track) -> None:
            mid = next((t.mid for t in self.pc.getTransceivers() if t.receiver.track is track), "?")
            self._tasks.append(asyncio.get_running_loop().create_task(self._drain(track, mid)))

        self._tasks.append(asyncio.get_running_loop().create_task(self._answer_loop()))

    async def _drain(self, track, mid: str) -> None:
        try:
            while True:
                await track.recv()
                if track.kind == "video":
                    self.frames[mid] = self.frames.get(mid, 0) + 1
        except MediaStreamError:
            pass

    async def _answer_loop(self) -> None:
        while True:
            offer = await self.client._notifications["subscriberOffer"].get()
            try:
                await self.pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type="offer"))
                await self.pc.setLocalDescription(await self.pc.createAnswer())
                await self.client.request(
                    "subscriberAnswer", {"sdp": self.pc.localDescription.sdp, "revision": offer["revision"]})
                self.answered.append(offer["revision"])
            except Exception as error:  # recorded for the test's assertion message
                self.errors.append(f"revision {offer.get('revision')}: {error!r}")

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self.pc.close()


async def _rounds(bob: RoomClient, frames_on) -> list[dict]:
    """Consumes alice's webcam, waits for FRAMES new frames on the mid consumerCreated names, stops
    consuming; ROUNDS times. Returns per round the mid and the frames seen on it."""
    rounds = []
    for _ in range(ROUNDS):
        await bob.request("consume", {"participantId": "alice", "kind": "webcam"})
        created = await bob.notification("consumerCreated", timeout=30)
        mid = created["mid"]
        start = await frames_on(mid)
        deadline = time.monotonic() + 60
        grown = 0
        while time.monotonic() < deadline:
            grown = await frames_on(mid) - start
            if grown >= FRAMES:
                break
            await asyncio.sleep(0.2)
        rounds.append({"mid": mid, "frames": grown})
        await bob.request("stopConsuming", {"participantId": "alice", "kind": "webcam"})
        await bob.notification("consumerClosed", timeout=30)
    return rounds


async def _aiortc_scenario(port: int) -> dict:
    url = f"ws://127.0.0.1:{port}/v1/rtc"
    alice = await RoomClient.connect(url, _token("alice"))
    bob = await RoomClient.connect(url, _token("bob"))
    pub_pc = subscriber = None
    try:
        await alice.join(ROOM, "alice")
        await bob.join(ROOM, "bob", mode="RECV_ONLY", autoConsume=False)
        subscriber = MidSubscriber(bob)
        pub_pc, _, _ = await publish(alice)

        async def frames_on(mid: str) -> int:
            return subscriber.frames.get(mid, 0)

        rounds = await _rounds(bob, frames_on)
        return {"rounds": rounds, "errors": subscriber.errors, "answered": subscriber.answered}
    finally:
        if subscriber:
            await subscriber.close()
        if pub_pc:
            await pub_pc.close()
        await alice.close()
        await bob.close()


def test_aiortc_subscriber_receives_each_time_it_consumes_the_same_webcam_again(understudy):
    port = free_port()
    server = start_room_server(port, 44300, SECRET, udp_count=4)
    try:
        result = asyncio.run(asyncio.wait_for(_aiortc_scenario(port), 300))
        print(f"re-consume (aiortc): {result}")
        assert not result["errors"], result
        assert all(r["frames"] >= FRAMES for r in result["rounds"]), result
    finally:
        kill_process(server)


# Frames Chromium decoded on the inbound stream of one mid.
MID_FRAMES_JS = """
window.midFrames = async (mid) => {
  if (!pc) return 0;
  let n = 0;
  (await pc.getStats()).forEach((s) => {
    if (s.type === 'inbound-rtp' && s.kind === 'video' && s.mid === mid) n += s.framesDecoded || 0;
  });
  return n;
};
true
"""


async def _chromium_scenario(port: int) -> dict:
    url = f"ws://127.0.0.1:{port}/v1/rtc"
    alice = await RoomClient.connect(url, _token("alice"))
    bob = await RoomClient.connect(url, _token("bob"))
    answered: list[int] = []
    errors: list[str] = []
    pub_pc = None
    async with Chromium() as browser:
        page = await browser.open_peer_page()
        await page.evaluate(ROOM_ANSWER_JS)
        await page.evaluate(MID_FRAMES_JS)
        await alice.join(ROOM, "alice")
        await bob.join(ROOM, "bob", mode="RECV_ONLY", autoConsume=False)
        answering = asyncio.get_running_loop().create_task(answer_subscriber_offers(page, bob, answered, errors))
        try:
            pub_pc, _, _ = await publish(alice)

            async def frames_on(mid: str) -> int:
                return await page.evaluate(f"midFrames({mid!r})")

            rounds = await _rounds(bob, frames_on)
            transceivers = await page.evaluate("pc.getTransceivers().length")
            # A copy: the renegotiation the last stopConsuming starts may still be in flight when the
            # browser closes below, and that is not an answer the rounds needed.
            return {"rounds": rounds, "errors": list(errors), "answered": list(answered),
                    "transceivers": transceivers}
        finally:
            answering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await answering
            if pub_pc:
                await pub_pc.close()
            await alice.close()
            await bob.close()


def test_chromium_subscriber_receives_each_time_it_consumes_the_same_webcam_again(understudy):
    port = free_port()
    server = start_room_server(port, 44400, SECRET, udp_count=4)
    try:
        result = asyncio.run(asyncio.wait_for(_chromium_scenario(port), 300))
        print(f"re-consume (chromium): {result}")
        assert not result["errors"], result
        assert all(r["frames"] >= FRAMES for r in result["rounds"]), result
    finally:
        kill_process(server)
