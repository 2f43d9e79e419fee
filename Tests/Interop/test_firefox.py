"""The browser page (`understudy serve` at /room/ROOM) with people in headless Firefox ESR and the agent.

Firefox offers header extensions per section (abs-send-time for video only) and refuses an answer
that lists in a section an extension that section did not offer (RFC 8285 §5): these tests hold the
SFU's negotiation to that, with Firefox on both connections, as Chromium is held in
test_browser_stage.py. One room, played once (module fixture), judged by several tests:

1. a Firefox host (fake camera and mic, WebDriver BiDi) publishes; the agent (`understudy join
   --mode RECV_ONLY --consume stage --record DIR`) records it; ffprobe/ffmpeg judge the file;
2. a Firefox audience member (RECV_ONLY) decodes the Firefox host's video through the SFU;
3. the host clicks "Invite on stage" for the agent (a PubSub invite); the agent changes its own
   mode and publishes; the host's and the audience's Firefox decode its video (frames counted by
   getStats and presented frames by requestVideoFrameCallback).

The server runs in development mode (no secret), so the pages take their tokens from /dev/token.
"""

from __future__ import annotations

import asyncio
import traceback
from pathlib import Path

import pytest

from browser_support import Agent, DevServer, RoomPage, action_selector
from firefox import Firefox
from harness import decode_errors, probe_frames

ROOM = "firefox-stage"


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
            host = await RoomPage.open(host_browser, server, ROOM, name="Host", id="host", mode="SEND_AND_RECV")
            results["host"] = await host.wait_until(
                "Firefox publishes camera and mic",
                lambda s: {"webcam", "mic"} <= set(s["producing"]) and s["publishConnection"] == "connected",
                timeout=60)

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
                results["audience_host"] = {"decoded": decoded, "presented": presented}

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


def test_firefox_audience_decodes_firefox_host(understudy, room):
    _no_error(room, "audience")
    result = room["audience_host"]
    assert result["decoded"]["framesDecoded"] >= 60, result
    assert (result["decoded"]["codec"] or "").lower() == "video/vp8", result
    assert result["presented"] >= 30, result


def test_firefox_host_invites_agent_and_decodes_it(understudy, room):
    _no_error(room, "host invites agent")
    result = room["invite_agent"]
    assert "agent" in result["snapshot"]["stageDom"] and "agent" not in result["snapshot"]["audienceDom"]
    assert result["video"]["framesDecoded"] >= 60, result["video"]
    assert (result["video"]["codec"] or "").lower() == "video/vp8", result["video"]
    assert result["presented"] >= 30, result
    assert result["audience"]["framesDecoded"] >= 60, result["audience"]
