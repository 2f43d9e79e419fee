"""`understudy join` in the lobby (issue 32 item 3): an `ask_join` join waits as long as the server's
lobby, not the 30 s request timeout, and a join that stops waiting (`--lobby-wait`) withdraws its
request, which the moderator (a protocol client written from docs/protocol.md) is told.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import time
from pathlib import Path

from harness import free_port, kill_process, run_understudy, start_room_server, understudy_bin
from room_client import RoomClient

SECRET = "interop-lobby-secret"


def token(room: str, participant: str, permissions: str) -> str:
    result = run_understudy(
        ["token", "--secret", SECRET, "--room", room, "--participant", participant, "--permissions", permissions],
        timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def start_guest(port: int, room: str, log: Path, extra: list[str]) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            [understudy_bin(), "join", "--server", f"http://127.0.0.1:{port}", "--room", room,
             "--token", token(room, "guest", "ask_join"), "--id", "guest", "--consume", "none", *extra],
            stdout=subprocess.DEVNULL, stderr=out, start_new_session=True)


async def moderator(port: int, room: str) -> RoomClient:
    mod = await RoomClient.connect(f"ws://127.0.0.1:{port}/v1/rtc", token(room, "mod", "allow_join,allow_mod"))
    await mod.join(room, "mod", name="Mod", mode="SIGNALLING_ONLY")
    return mod


def test_a_lobby_join_outlasts_the_request_timeout(tmp_path):
    """The moderator lets the guest in 35 s after it asked: past the SDK's 30 s request timeout."""
    port = free_port()
    server = start_room_server(port, free_port(), SECRET)
    guest = None
    try:
        async def scenario():
            nonlocal guest
            mod = await moderator(port, "lobby-long")
            guest = start_guest(port, "lobby-long", tmp_path / "guest.log", [])
            requested = await mod.notification("entryRequested", timeout=60)
            assert requested["participantId"] == "guest"
            asked = time.monotonic()
            while time.monotonic() - asked < 35:
                assert guest.poll() is None, (tmp_path / "guest.log").read_text()
                await asyncio.sleep(0.5)
            await mod.request("respondEntry", {"participantId": "guest", "decision": "allowed"})
            joined = await mod.notification("participantJoined", timeout=60)
            assert joined["participantId"] == "guest"
            await mod.close()

        asyncio.run(scenario())
        deadline = time.monotonic() + 60
        while "joined room lobby-long" not in (tmp_path / "guest.log").read_text():
            assert time.monotonic() < deadline and guest.poll() is None, (tmp_path / "guest.log").read_text()
            time.sleep(0.2)
    finally:
        if guest:
            kill_process(guest)
        kill_process(server)


def test_lobby_wait_withdraws_the_request_and_the_moderator_is_told(tmp_path):
    port = free_port()
    server = start_room_server(port, free_port(), SECRET)
    guest = None
    try:
        async def scenario():
            nonlocal guest
            mod = await moderator(port, "lobby-short")
            started = time.monotonic()
            guest = start_guest(port, "lobby-short", tmp_path / "guest.log", ["--lobby-wait", "3s"])
            requested = await mod.notification("entryRequested", timeout=60)
            assert requested["participantId"] == "guest"
            responded = await mod.notification("entryResponded", timeout=60)
            assert responded == {"participantId": "guest", "decision": "withdrawn"}, responded
            assert time.monotonic() - started > 2.5
            try:
                await mod.request("respondEntry", {"participantId": "guest", "decision": "allowed"})
                raise AssertionError("a withdrawn request was answered")
            except Exception as error:  # RoomError 3073
                assert getattr(error, "code", None) == 3073, error
            await mod.close()

        asyncio.run(scenario())
        assert guest.wait(timeout=60) == 1
        log = (tmp_path / "guest.log").read_text()
        assert re.search(r"3079", log), log
    finally:
        if guest:
            kill_process(guest)
        kill_process(server)


def test_sigterm_in_the_lobby_withdraws_the_request_and_exits_cleanly(tmp_path):
    port = free_port()
    server = start_room_server(port, free_port(), SECRET)
    guest = None
    try:
        async def scenario():
            nonlocal guest
            mod = await moderator(port, "lobby-term")
            guest = start_guest(port, "lobby-term", tmp_path / "guest.log", [])
            requested = await mod.notification("entryRequested", timeout=60)
            assert requested["participantId"] == "guest"
            await asyncio.sleep(1)  # the guest has its entryPending by now
            guest.send_signal(signal.SIGTERM)
            responded = await mod.notification("entryResponded", timeout=60)
            assert responded == {"participantId": "guest", "decision": "withdrawn"}, responded
            await mod.close()

        asyncio.run(scenario())
        assert guest.wait(timeout=60) == 0, (tmp_path / "guest.log").read_text()
    finally:
        if guest:
            kill_process(guest)
        kill_process(server)
