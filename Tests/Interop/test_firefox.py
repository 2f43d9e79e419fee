"""The browser page (`understudy serve` at /room/ROOM) with people in headless Firefox ESR and the agent.

Firefox offers header extensions per section (abs-send-time for video only) and refuses an answer
that lists in a section an extension that section did not offer (RFC 8285 §5): these tests hold the
SFU's negotiation to that, with Firefox on both connections, as Chromium is held in
test_browser_stage.py. One room, played once (module fixture), judged by several tests:

1. a Firefox host (fake camera and mic, WebDriver BiDi) publishes its 640x480 camera in two
   simulcast layers (`?simulcast=1`, rids h and f: Firefox lists their rid header extensions
   `a=extmap:N/sendonly`, which the answer must keep, answered `recvonly`); the agent (`understudy join
   --mode RECV_ONLY --consume stage --record DIR`) records it; ffprobe/ffmpeg judge the file;
2. a Firefox audience member (RECV_ONLY) decodes the Firefox host's video through the SFU;
3. the host clicks "Invite on stage" for the agent (a PubSub invite); the agent changes its own
   mode and publishes; the host's and the audience's Firefox decode its video (frames counted by
   getStats and presented frames by requestVideoFrameCallback).

And the server's WHIP and WHEP endpoints with Firefox on both ends (pages/peer.html publishes,
pages/whep_player.html plays): the agent records the WHIP publisher, and Firefox decodes it through
WHEP.

The server runs in development mode (no secret), so the pages take their tokens from /dev/token.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from pathlib import Path

import pytest

from browser_support import Agent, DevServer, RoomPage, action_selector
from firefox import Firefox
from harness import decode_errors, probe_frames, timestamp_problems
from whip_server_support import ROOM as WHIP_ROOM
from whip_server_support import Recorder, http, served, token, wait_participants

ROOM = "firefox-stage"


async def _wait_two_layers(page: RoomPage, timeout: float = 60) -> dict:
    """The page's publish getStats once both simulcast layers (h, f) sent more bytes than a first
    sample of them: Firefox sends both, and the server's answer lets it (rid extensions kept)."""
    deadline = time.monotonic() + timeout
    first: dict | None = None
    sample: dict = {}
    while time.monotonic() < deadline:
        sample = await page.page.evaluate("window.understudyRoom.publishStats()") or {}
        layers = sample.get("layers") or []
        if len(layers) == 2:
            if first is None:
                first = sample
            else:
                before = {layer["rid"]: layer["bytes"] for layer in first["layers"]}
                if all(layer["bytes"] > before.get(layer["rid"], 0) for layer in layers):
                    return sample
        await asyncio.sleep(0.5)
    raise AssertionError(f"the Firefox host did not send two growing layers within {timeout}s: {sample}")


async def _forwarded_layers(page: RoomPage, timeout: float = 30) -> list:
    """The simulcast layers the server's getStats says it forwards to the page's video consumers
    (refreshed by the page every 2 s)."""
    deadline = time.monotonic() + timeout
    layers: list = []
    while time.monotonic() < deadline:
        stats = await page.page.evaluate("window.understudyRoom.serverStats()") or {}
        layers = [c.get("currentLayer") for c in stats.get("consumers", []) if c.get("kind") == "webcam"]
        if any(layers):
            break
        await asyncio.sleep(0.5)
    return layers


async def _play(workdir: Path) -> dict:
    """Runs the whole room; each step records its findings (or its failure) in `results`."""
    results: dict = {"errors": {}}
    record = workdir / "agent"
    record.mkdir()
    results["record_dir"] = record
    server = DevServer(workdir, udp_low=45200).start()
    agent: Agent | None = None
    step = "start"
    try:
        await server.ready()
        async with Firefox() as host_browser:
            step = "host"
            started = time.monotonic()
            host = await RoomPage.open(
                host_browser, server, ROOM, name="Host", id="host", mode="SEND_AND_RECV", simulcast="1")
            results["host"] = await host.wait_until(
                "Firefox publishes camera and mic",
                lambda s: {"webcam", "mic"} <= set(s["producing"]) and s["publishConnection"] == "connected",
                timeout=60)
            results["publish_seconds"] = round(time.monotonic() - started, 2)
            results["host_layers"] = await _wait_two_layers(host)

            step = "agent joins"
            agent = Agent(server, ROOM, record).start()
            await agent.wait_for(r"joined room", 40)
            await agent.wait_for(r"consuming host", 30)
            await host.wait_until("agent in the audience", lambda s: "agent" in s["audienceDom"], timeout=40)

            step = "audience"
            async with Firefox() as audience_browser:
                audience = await RoomPage.open(
                    audience_browser, server, ROOM, name="Viewer", id="viewer", mode="RECV_ONLY")
                await audience.wait_until(
                    "audience sees the host on stage", lambda s: "host" in s["stageDom"], timeout=40)
                decoded = await audience.wait_frames("host", 60, timeout=90)
                presented = await audience.wait_rendered_frames("host", 30, timeout=60)
                results["audience_host"] = {
                    "decoded": decoded, "presented": presented, "layers": await _forwarded_layers(audience)}

                step = "host invites agent"
                await host.click(action_selector("invite", "agent", "#audience-list"))
                await agent.wait_for(r"accepting invite from host to SEND_AND_RECV", 30)
                await agent.wait_for(r"changed own mode to SEND_AND_RECV", 30)
                listed = await host.wait_until(
                    "agent listed on stage only",
                    lambda s: "agent" in s["stageDom"] and "agent" not in s["audienceDom"], timeout=40)
                video = await host.wait_frames("agent", 60, timeout=90)
                presented = await host.wait_rendered_frames("agent", 30, timeout=60)
                seen = await audience.wait_frames("agent", 60, timeout=90)
                results["invite_agent"] = {
                    "snapshot": listed, "video": video, "presented": presented, "audience": seen}
            # The agent has recorded the host all along; stopping it closes the file.
            step = "agent stops"
            agent.stop(grace=20)
            results["agent_exit"] = agent.proc.returncode if agent.proc else None
    except BaseException as error:  # noqa: BLE001 - reported per step to the tests
        results["errors"][step] = "".join(traceback.format_exception(error))[-4000:]
        if not isinstance(error, Exception):
            raise
    finally:
        if agent is not None:
            agent.stop()
            results["agent_log"] = agent.text()
        server.stop()
        results["server_log"] = server.tail(60)
    return results


@pytest.fixture(scope="module")
def room(tmp_path_factory) -> dict:
    workdir = tmp_path_factory.mktemp("firefox-stage")
    results = asyncio.run(asyncio.wait_for(_play(workdir), 400))
    print(f"steps failed: {list(results['errors'])}")
    print(f"page open to publishing: {results.get('publish_seconds')} s; audience of the host: "
          f"{results.get('audience_host')}; agent on stage: {results.get('invite_agent', {}).get('video')}, "
          f"presented {results.get('invite_agent', {}).get('presented')}")
    print(f"agent log:\n{results.get('agent_log', '')[-2500:]}")
    return results


STEPS = ["start", "host", "agent joins", "audience", "host invites agent", "agent stops"]


def _no_error(room: dict, step: str) -> None:
    """Fails when `step`, or any step before it, failed."""
    for earlier in STEPS[: STEPS.index(step) + 1]:
        assert earlier not in room["errors"], f"step '{earlier}' failed:\n{room['errors'][earlier]}\n" \
            f"agent log:\n{room.get('agent_log', '')[-3000:]}\nserver log:\n{room.get('server_log', '')}"


def test_firefox_host_publishes_and_agent_records_it(understudy, room):
    _no_error(room, "agent stops")
    assert room["host"]["publishConnection"] == "connected", room["host"]
    path = room["record_dir"] / "host.webm"
    assert path.exists(), f"no recording of the host: {list(room['record_dir'].iterdir())}\n{room.get('agent_log')}"
    frames = probe_frames(path)
    assert frames.get("vp8", 0) >= 60, frames
    assert frames.get("opus", 0) >= 100, frames
    assert decode_errors(path) == ""
    assert timestamp_problems(path) == []


def test_firefox_host_publishes_two_simulcast_layers(understudy, room):
    _no_error(room, "host")
    layers = room["host_layers"]["layers"]
    assert sorted(layer["rid"] for layer in layers) == ["f", "h"], layers
    assert layers[0]["width"] < layers[-1]["width"], layers


def test_firefox_audience_decodes_firefox_host(understudy, room):
    _no_error(room, "audience")
    result = room["audience_host"]
    assert result["decoded"]["framesDecoded"] >= 60, result
    assert (result["decoded"]["codec"] or "").lower() == "video/vp8", result
    assert result["presented"] >= 30, result
    # The SFU knows the host's layers by rid, and forwards one of them.
    assert set(result["layers"]) & {"h", "f"}, result


def test_firefox_host_invites_agent_and_decodes_it(understudy, room):
    _no_error(room, "host invites agent")
    result = room["invite_agent"]
    assert "agent" in result["snapshot"]["stageDom"] and "agent" not in result["snapshot"]["audienceDom"]
    assert result["video"]["framesDecoded"] >= 60, result["video"]
    assert (result["video"]["codec"] or "").lower() == "video/vp8", result["video"]
    assert result["presented"] >= 30, result
    assert result["audience"]["framesDecoded"] >= 60, result["audience"]


async def _whip_and_whep(port: int, recorder: Recorder) -> dict:
    """Firefox publishes through WHIP (one tab) and plays that publisher through WHEP (another)."""
    base = f"http://127.0.0.1:{port}"
    result: dict = {}
    async with Firefox() as publisher_browser, Firefox() as viewer_browser:
        publisher = await publisher_browser.open_peer_page()
        offer = await publisher.call("makeOffer", {"send": True, "recv": False}, timeout=60)
        status, headers, body = await asyncio.to_thread(
            http, "POST", f"{base}/whip/{WHIP_ROOM}", offer.encode(),
            {"Content-Type": "application/sdp", "Authorization": f"Bearer {token('firefox')}"})
        assert status == 201, body
        result["publisher"] = await publisher.call("acceptAnswer", body.decode())
        result["publisher_connected"] = await publisher.call("waitConnected", 30000, timeout=40)
        result["recorded_live"] = await asyncio.to_thread(
            recorder.wait_frames, "firefox", {"vp8": 90, "opus": 150}, 90)

        viewer = await viewer_browser.open_page(f"{viewer_browser.page_base}/whep_player.html")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not await viewer.evaluate("typeof play === 'function'"):
            assert loop.time() < deadline, "the player page did not load"
            await asyncio.sleep(0.1)
        result["whep"] = await viewer.call("play", f"{base}/whep/{WHIP_ROOM}/firefox", token("ff-viewer"))
        assert result["whep"]["status"] == 201, result["whep"]
        stats: dict = {}
        deadline = loop.time() + 90
        while loop.time() < deadline:
            stats = await viewer.call("stats")
            if stats["video"].get("framesDecoded", 0) >= 90 and stats["audio"].get("packetsReceived", 0) >= 150:
                break
            await asyncio.sleep(0.5)
        result["viewer"] = stats
        result["whep_delete"] = await viewer.call("stop")
        status, _, _ = await asyncio.to_thread(http, "DELETE", base + headers["Location"])
        result["whip_delete"] = status
    return result


def test_firefox_publishes_through_whip_and_plays_through_whep(understudy, tmp_path):
    with served(44600) as port:
        recorder = Recorder(port, tmp_path)
        try:
            recorder.wait_log(f"joined room {WHIP_ROOM} as recorder")
            result = asyncio.run(asyncio.wait_for(_whip_and_whep(port, recorder), 300))
            print(result)
            # The WHIP session's DELETE takes the publisher out of the room.
            wait_participants(port, lambda ids: "firefox" not in ids, "dropped the WHIP publisher", timeout=60)
        finally:
            recorder.stop()
    assert result["publisher_connected"] == "connected", result
    assert result["viewer"]["video"]["framesDecoded"] >= 90, result["viewer"]
    assert result["viewer"]["audio"]["packetsReceived"] >= 150, result["viewer"]
    assert result["viewer"]["element"]["width"] > 0, result["viewer"]
    assert result["whep_delete"] == 200 and result["whip_delete"] == 200, result
    path = recorder.dir / "firefox.webm"
    frames = probe_frames(path)
    assert frames.get("vp8", 0) >= 90 and frames.get("opus", 0) >= 150, frames
    assert decode_errors(path) == ""
