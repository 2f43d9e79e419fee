"""The browser page (`understudy serve` at /room/ROOM) with people in headless Chromium and the agent.

One room, played once (module fixture), judged by several tests:

1. a Chromium host (fake camera and mic) publishes; the agent (`understudy join --mode RECV_ONLY
   --consume stage --record DIR`) records it; ffprobe/ffmpeg judge the file;
2. the host clicks "Invite on stage" for the agent; the agent changes its own mode and publishes;
   the host's page lists it under Stage only and decodes its video (framesDecoded >= 60);
3. `understudy invite` invites a Chromium audience member (autoAcceptInvites=1); it goes on
   stage and the agent records it;
4. the host pins the agent (every page shows it) and then removes it: the agent exits with 1002;
5. screenshots of the stage and audience views (into $BROWSER_SCREENSHOT_DIR when set);
and, on the way: chat history for a late joiner, the stats overlay, mute / ask-for-mic moderation,
screen share, and leaving the stage (the page and the server close its publish connection) followed
by a page-to-page invite back over a new connection, which the host decodes.

The server runs in development mode (no secret), so the pages take their tokens from /dev/token.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import traceback
from pathlib import Path

import pytest

from browser_support import WINDOW, Agent, DevServer, RoomPage, action_selector, http_status
from chromium import Chromium
from harness import decode_errors, probe_frames, run_understudy

ROOM = "browser-stage"


async def _play(workdir: Path) -> dict:
    """Runs the whole room; each step records its findings (or its failure) in `results`."""
    results: dict = {"errors": {}}
    record = workdir / "agent"
    record.mkdir()
    results["record_dir"] = record
    shots = workdir / "screenshots"
    results["screenshots"] = shots
    server = DevServer(workdir, udp_low=45000).start()
    agent: Agent | None = None
    step = "start"
    try:
        await server.ready()
        results["dev_token_status"] = await asyncio.to_thread(
            http_status, f"{server.base}/dev/token?room={ROOM}&participant=x")
        async with Chromium(extra_flags=WINDOW) as host_browser, Chromium(extra_flags=WINDOW) as guest_browser:
            step = "host"
            host = await RoomPage.open(host_browser, server, ROOM, name="Host", id="host", mode="SEND_AND_RECV")
            await host.wait_until("host publishes", lambda s: {"webcam", "mic"} <= set(s["producing"]))
            await host.page.evaluate("window.understudyRoom.sendChat('hello from the host')")
            await host.wait_until("host sees its own chat", lambda s: any("hello from the host" in c for c in s["chat"]))

            step = "agent joins"
            agent = Agent(server, ROOM, record).start()
            await agent.wait_for(r"joined room", 30)
            await agent.wait_for(r"consuming host", 20)
            await host.wait_until("agent in the audience", lambda s: "agent" in s["audienceDom"])

            step = "guest joins"
            guest = await RoomPage.open(
                guest_browser, server, ROOM, name="Guest", id="guest", mode="RECV_ONLY", autoAcceptInvites="1")
            await guest.wait_until("guest sees the host on stage", lambda s: "host" in s["stageDom"])
            step = "chat"
            results["chat"] = await guest.wait_until(
                "chat history reaches the guest", lambda s: any("hello from the host" in c for c in s["chat"]))
            step = "guest joins"
            await guest.wait_frames("host", 30)
            await asyncio.sleep(2.5)  # one stats refresh for the overlay
            results["audience_png"] = await guest.screenshot(shots / "audience.png")

            step = "host invites agent"
            await host.click(action_selector("invite", "agent", "#audience-list"))
            await agent.wait_for(r"accepting invite from host to SEND_AND_RECV", 20)
            await agent.wait_for(r"changed own mode to SEND_AND_RECV", 20)
            listed = await host.wait_until(
                "agent listed on stage only",
                lambda s: "agent" in s["stageDom"] and "agent" not in s["audienceDom"]
                and "agent" in s["stage"] and "agent" not in s["audience"])
            video = await host.wait_frames("agent", 60, timeout=60)
            await asyncio.sleep(4.5)  # two refreshes of the stats overlay
            overlay = await host.page.evaluate("window.understudyRoom.tileStatsText('agent')")
            results["invite_agent"] = {"snapshot": listed, "video": video, "overlay": overlay}

            step = "pin"
            await host.click(action_selector("pin", "agent", "#stage-list"))
            pinned = {}
            for who, page in (("host", host), ("guest", guest)):
                pinned[who] = await page.wait_until(
                    "agent shown pinned", lambda s: "agent" in s["pinnedDom"] and s["pins"].get("agent", {}).get("cam"))
            results["pin"] = pinned
            await asyncio.sleep(2.5)
            results["stage_png"] = await host.screenshot(shots / "stage.png")

            step = "agent invites guest"
            invite = await asyncio.to_thread(
                run_understudy,
                ["invite", "--server", server.base, "--room", ROOM, "--participant", "guest",
                 "--secret", server.secret],
                40)
            assert invite.returncode == 0, f"invite failed: {invite.stdout}\n{invite.stderr}"
            on_stage = await guest.wait_until(
                "guest on stage and publishing",
                lambda s: s["mode"] == "SEND_AND_RECV" and {"webcam", "mic"} <= set(s["producing"]), timeout=30)
            seen = await host.wait_until(
                "host lists the guest on stage", lambda s: "guest" in s["stageDom"] and "guest" not in s["audienceDom"])
            await agent.wait_for(r"consuming guest", 20)
            await asyncio.sleep(8)  # let the agent record a few seconds of the guest
            results["invite_guest"] = {"guest": on_stage, "host": seen}

            step = "remove agent"
            await host.click(action_selector("remove", "agent", "#stage-list"))
            code = await agent.wait_exit(30)
            after = await host.wait_until(
                "agent gone from both lists", lambda s: "agent" not in s["stage"] + s["audience"])
            results["remove"] = {"exit": code, "log": agent.text(), "host": after}

            step = "moderate guest"
            await host.click(action_selector("disableMic", "guest", "#stage-list"))
            muted = await guest.wait_until("guest's mic turned off", lambda s: "mic" not in s["producing"])
            seen_off = await host.wait_until("host shows the guest muted", lambda s: "guest" in s["micOffDom"])
            await host.click(action_selector("requestMic", "guest", "#stage-list"))
            asked = await guest.wait_until("guest is asked for the mic", lambda s: s["prompt"])
            await guest.click("#prompt-accept")
            unmuted = await guest.wait_until("guest's mic back on", lambda s: "mic" in s["producing"])
            seen_on = await host.wait_until("host shows the guest unmuted", lambda s: "guest" not in s["micOffDom"])
            results["moderation"] = {
                "muted": muted, "seen_off": seen_off, "asked": asked, "unmuted": unmuted, "seen_on": seen_on}

            step = "screen share"
            await host.click("#btn-screen")
            sharing = await host.wait_until("host shares its screen", lambda s: "screen" in s["producing"])
            watched = await guest.wait_until(
                "guest receives the share", lambda s: s["presenter"] == "host" and "host:screen" in s["receiving"])
            await host.click("#btn-screen")
            stopped = await guest.wait_until("share stopped", lambda s: s["presenter"] is None)
            host_after = await host.wait_until("host stopped sharing", lambda s: "screen" not in s["producing"])
            results["screen"] = {"sharing": sharing, "watched": watched, "stopped": stopped, "host": host_after}

            step = "leave stage"
            await guest.click("#btn-stage")
            left = await guest.wait_until(
                "guest back in the audience", lambda s: s["mode"] == "RECV_ONLY" and not s["producing"])
            host_view = await host.wait_until(
                "host lists the guest in the audience",
                lambda s: "guest" in s["audienceDom"] and "guest" not in s["stageDom"])
            await host.click(action_selector("invite", "guest", "#audience-list"))
            back = await guest.wait_until(
                "guest back on stage with camera and mic, on a new publish connection",
                lambda s: s["mode"] == "SEND_AND_RECV" and {"webcam", "mic"} <= set(s["producing"])
                and s["publishConnection"] == "connected")
            # Chromium decodes the guest's video again, sent over that new connection.
            decoded = await host.wait_frames("guest", 30, timeout=40)
            results["leave_stage"] = {"left": left, "host": host_view, "back": back, "decoded": decoded}
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
    workdir = tmp_path_factory.mktemp("browser-stage")
    results = asyncio.run(asyncio.wait_for(_play(workdir), 210))
    print(f"steps failed: {list(results['errors'])}")
    print(f"agent log:\n{results.get('agent_log', '')[-2500:]}")
    target = os.environ.get("BROWSER_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for name in ("stage.png", "audience.png"):
            source = results["screenshots"] / name
            if source.exists():
                shutil.copy(source, Path(target) / name)
    return results


STEPS = ["start", "host", "agent joins", "chat", "guest joins", "host invites agent", "pin",
         "agent invites guest", "remove agent", "moderate guest", "screen share",
         "leave stage"]


def _no_error(room: dict, step: str) -> None:
    """Fails when `step`, or any step before it, failed."""
    for earlier in STEPS[: STEPS.index(step) + 1]:
        assert earlier not in room["errors"], f"step '{earlier}' failed:\n{room['errors'][earlier]}\n" \
            f"agent log:\n{room.get('agent_log', '')[-3000:]}\nserver log:\n{room.get('server_log', '')}"


def test_dev_mode_page_gets_tokens_from_dev_token(understudy, room):
    _no_error(room, "host")
    assert room["dev_token_status"] == 200


def test_browser_host_is_recorded_cleanly_by_agent(understudy, room):
    _no_error(room, "agent joins")
    path = room["record_dir"] / "host.webm"
    assert path.exists(), f"no recording of the host: {list(room['record_dir'].iterdir())}\n{room.get('agent_log')}"
    frames = probe_frames(path)
    assert frames.get("vp8", 0) >= 60, frames
    assert frames.get("opus", 0) >= 100, frames
    assert decode_errors(path) == ""


def test_host_invites_agent_on_stage(understudy, room):
    _no_error(room, "host invites agent")
    result = room["invite_agent"]
    assert "agent" in result["snapshot"]["stageDom"] and "agent" not in result["snapshot"]["audienceDom"]
    assert result["video"]["framesDecoded"] >= 60, result["video"]
    assert (result["video"]["codec"] or "").lower() == "video/vp8", result["video"]
    # The stats overlay of the agent's tile: bitrate, loss and the received layer.
    assert "kbps" in result["overlay"] and "loss" in result["overlay"] and "layer" in result["overlay"], result


def test_chat_history_reaches_a_late_joiner(understudy, room):
    _no_error(room, "chat")
    assert any("hello from the host" in line for line in room["chat"]["chat"]), room["chat"]


def test_moderator_mutes_and_asks_for_the_mic(understudy, room):
    _no_error(room, "moderate guest")
    moderation = room["moderation"]
    assert "guest" in moderation["seen_off"]["micOffDom"]
    assert "microphone" in moderation["asked"]["prompt"]
    assert "mic" in moderation["unmuted"]["producing"]


def test_agent_invites_browser_audience_member(understudy, room):
    _no_error(room, "agent invites guest")
    assert room["invite_guest"]["guest"]["mode"] == "SEND_AND_RECV"
    assert "inviteReceived" in room["invite_guest"]["guest"]["events"]
    path = room["record_dir"] / "guest.webm"
    assert path.exists(), list(room["record_dir"].iterdir())
    frames = probe_frames(path)
    assert frames.get("vp8", 0) >= 30, frames
    assert frames.get("opus", 0) >= 50, frames
    assert decode_errors(path) == ""


def test_pin_shows_on_every_page(understudy, room):
    _no_error(room, "pin")
    for who in ("host", "guest"):
        assert "agent" in room["pin"][who]["pinnedDom"], (who, room["pin"][who])


def test_host_removes_agent(understudy, room):
    _no_error(room, "remove agent")
    removal = room["remove"]
    assert removal["exit"] != 0, removal["log"][-2000:]
    assert "REMOVE_PEER" in removal["log"], removal["log"][-2000:]
    assert "1002" in removal["log"], f"the agent did not log the code 1002:\n{removal['log'][-2000:]}"


def test_screen_share_reaches_the_audience(understudy, room):
    _no_error(room, "screen share")
    assert room["screen"]["watched"]["presenter"] == "host"
    assert "host:screen" in room["screen"]["watched"]["receiving"]
    assert "host:screen" not in room["screen"]["stopped"]["receiving"]
    assert {"webcam", "mic"} <= set(room["screen"]["host"]["producing"])  # the camera stays on


def test_leave_the_stage_and_page_to_page_invite(understudy, room):
    _no_error(room, "leave stage")
    result = room["leave_stage"]
    assert result["left"]["mode"] == "RECV_ONLY" and result["left"]["producing"] == []
    # Leaving the stage closed the page's publish connection (the server closed its side too).
    assert result["left"]["publishConnection"] is None
    assert result["decoded"]["framesDecoded"] >= 30, result["decoded"]
    assert "guest" in result["host"]["audienceDom"] and "guest" not in result["host"]["stageDom"]
    assert {"webcam", "mic"} <= set(result["back"]["producing"])  # restored as before leaving


def test_screenshots_of_stage_and_audience(understudy, room):
    _no_error(room, "pin")
    for name in ("stage.png", "audience.png"):
        path = room["screenshots"] / name
        assert path.exists() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
        assert path.stat().st_size > 10_000, (path, path.stat().st_size)


async def _configured_secret(workdir: Path) -> dict:
    server = DevServer(workdir, udp_low=45100, secret="browser-page-secret").start()
    try:
        await server.ready()
        dev_token = await asyncio.to_thread(http_status, f"{server.base}/dev/token?room={ROOM}")
        made = await asyncio.to_thread(
            run_understudy,
            ["token", "--secret", "browser-page-secret", "--room", "secret-room", "--participant", "viewer",
             "--permissions", "allow_join"],
            20)
        assert made.returncode == 0, made.stderr
        async with Chromium(extra_flags=WINDOW) as browser:
            page = await RoomPage.open(
                browser, server, "secret-room", name="Viewer", mode="RECV_ONLY", token=made.stdout.strip())
            joined = await page.snapshot()
            # The same page without a token cannot get one from this server.
            blocked = await browser.open_page("about:blank")
            await blocked.send("Page.navigate", {"url": f"{server.base}/room/secret-room?autoJoin=1&name=Nobody"})
            deadline = asyncio.get_running_loop().time() + 15
            note = ""
            while asyncio.get_running_loop().time() < deadline and "token" not in note:
                await asyncio.sleep(0.2)
                try:
                    note = await blocked.evaluate("document.getElementById('join-note').textContent")
                except Exception:
                    note = ""
        return {"dev_token": dev_token, "joined": joined, "note": note}
    finally:
        server.stop()


def test_configured_secret_page_takes_token_from_url(understudy, tmp_path):
    result = asyncio.run(asyncio.wait_for(_configured_secret(tmp_path), 90))
    assert result["dev_token"] == 404, result
    joined = result["joined"]
    assert joined["joined"] and joined["me"] == "viewer" and joined["mode"] == "RECV_ONLY", joined
    assert joined["permissions"] == ["allow_join"], joined
    assert "token" in result["note"], result["note"]
