"""`understudy join --server janus://HOST:PORT/ROOM`: the agent in a Janus VideoRoom (Debian's `janus` 1.1.2).

1. Two publishers that we did not write the signalling of: `interop-peer` publishes before the
   agent joins (the agent finds it in the `joined` reply's publisher list), headless Chromium
   publishes after (the agent learns of it from the long-poll `publishers` event). The agent
   records both; ffprobe counts VP8 and Opus frames in each file and ffmpeg decodes them cleanly.
   On SIGTERM the agent detaches and destroys its session and exits 0: Janus no longer lists it
   as a participant.
2. Flags for room features that Janus has no counterpart for are refused with exit 2 and one line.
3. Chromium publishes H.264 into a room whose `videocodec` is "vp8,h264": the agent records it as
   Matroska (H.264 + Opus) and ffmpeg decodes it cleanly.

Janus runs as in test_janus.py (janus_support.JanusServer, a veth pair holding 127.0.0.2): needs
scripts/interop.sh's network namespace.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from browser_support import LogProcess
from chromium import Chromium
from harness import InteropPeer, decode_errors, probe_frames, understudy_bin
from janus_support import ROOM, JanusServer, JanusSession, data_of, in_private_namespace, janus_binary

pytestmark = pytest.mark.skipif(
    janus_binary() is None, reason="janus is not installed (scripts/install-deps.sh installs it)")

# How long the agent records once both publishers are subscribed, before it gets SIGTERM.
RECORD_SECONDS = 8
MIN_VIDEO_FRAMES = 60
MIN_AUDIO_FRAMES = 100


def _janus(tmp_path: Path) -> JanusServer:
    if not in_private_namespace():
        pytest.skip("adds a veth pair for Janus, so it runs only in scripts/interop.sh's network namespace")
    folder = tmp_path / "janus"
    folder.mkdir()
    return JanusServer(folder)


async def _publish_peer(session: JanusSession, peer: InteropPeer) -> int:
    """Publishes `interop-peer --role offer` as display `peer`; returns its feed id."""
    await peer.start()
    offer = await peer.read("offer")
    handle = await asyncio.to_thread(session.attach)
    await asyncio.to_thread(session.message, handle, {
        "request": "join", "ptype": "publisher", "room": ROOM, "display": "peer"})
    joined = await asyncio.to_thread(session.plugin_event, handle, "videoroom", "joined")
    await asyncio.to_thread(session.message, handle, {"request": "publish"}, {"type": "offer", "sdp": offer["sdp"]})
    await asyncio.to_thread(session.end_of_candidates, handle)
    configured = await asyncio.to_thread(session.wait_event, handle, lambda e: "jsep" in e)
    await peer.send({"type": "answer", "sdp": configured["jsep"]["sdp"]})
    await asyncio.to_thread(session.wait_event, handle, lambda e: e.get("janus") == "webrtcup")
    return data_of(joined)["id"]


async def _publish_chromium(session: JanusSession, browser: Chromium, video_codec: str = "vp8") -> int:
    """Publishes Chromium's fake camera (offering only `video_codec`) and microphone as display
    `chromium`; returns its feed id once Janus has taken the codec."""
    page = await browser.open_peer_page()
    offer = await page.call("makeOffer", {"send": True, "recv": False, "videoCodec": video_codec})
    handle = await asyncio.to_thread(session.attach)
    await asyncio.to_thread(session.message, handle, {
        "request": "join", "ptype": "publisher", "room": ROOM, "display": "chromium"})
    joined = await asyncio.to_thread(session.plugin_event, handle, "videoroom", "joined")
    await asyncio.to_thread(session.message, handle, {"request": "publish"}, {"type": "offer", "sdp": offer})
    await asyncio.to_thread(session.end_of_candidates, handle)
    configured = await asyncio.to_thread(session.wait_event, handle, lambda e: "jsep" in e)
    published = {s.get("type"): s.get("codec") for s in data_of(configured).get("streams", [])}
    assert published == {"audio": "opus", "video": video_codec}, data_of(configured)
    await page.call("acceptAnswer", configured["jsep"]["sdp"])
    await asyncio.to_thread(session.wait_event, handle, lambda e: e.get("janus") == "webrtcup", 30)
    return data_of(joined)["id"]


async def _record_two_publishers(server: JanusServer, tmp_path: Path, record: Path) -> dict:
    session = await asyncio.to_thread(JanusSession, server)
    peer = InteropPeer("offer", tmp_path, duration=120)
    agent = LogProcess(
        [understudy_bin(), "join", "--server", f"janus://127.0.0.1:{server.port}/{ROOM}", "--name", "agent",
         "--record", str(record)],
        tmp_path / "agent.log")
    try:
        async with Chromium() as browser:
            peer_feed = await _publish_peer(session, peer)
            agent.start()
            await agent.wait_for(r"joined Janus room", 30)
            await agent.wait_for(rf"subscribed to {peer_feed} ", 30)
            chromium_feed = await _publish_chromium(session, browser)
            await agent.wait_for(rf"subscribed to {chromium_feed} ", 30)
            await asyncio.sleep(RECORD_SECONDS)
            assert agent.proc is not None
            agent.proc.send_signal(signal.SIGTERM)
            code = await agent.wait_exit(30)
            # The agent detached and destroyed its session: Janus lists only the two publishers.
            probe = await asyncio.to_thread(session.attach)
            listing = await asyncio.to_thread(session.message, probe, {"request": "listparticipants", "room": ROOM})
            names = sorted(p.get("display", "") for p in data_of(listing).get("participants", []))
            return {"code": code, "log": agent.text(), "peer": peer_feed, "chromium": chromium_feed,
                    "participants_after": names}
    finally:
        agent.stop()
        await peer.stop()
        await asyncio.to_thread(session.destroy)


def test_agent_records_two_janus_publishers(understudy: str, tmp_path: Path) -> None:
    server = _janus(tmp_path)
    record = tmp_path / "rec"
    try:
        server.start()
        result = asyncio.run(asyncio.wait_for(_record_two_publishers(server, tmp_path, record), 150))
    except Exception as error:
        raise AssertionError(f"{type(error).__name__}: {error}\n--- janus log ---\n{server.log()}") from error
    finally:
        server.stop()
    assert result["code"] == 0, result["log"]
    assert "left Janus room" in result["log"], result["log"]
    assert result["participants_after"] == ["chromium", "peer"], result

    manifest = json.loads((record / "manifest.json").read_text())
    assert manifest["backend"] == "janus" and manifest["room"] == str(ROOM), manifest
    paths = {f["display"]: Path(f["path"]) for f in manifest["files"]}
    assert set(paths) == {"peer", "chromium"}, manifest
    assert paths["peer"].name == f"peer-{result['peer']}.webm", manifest
    for display, path in paths.items():
        counts = probe_frames(path)
        assert counts.get("vp8", 0) >= MIN_VIDEO_FRAMES, f"{display}: {counts}\n{result['log']}"
        assert counts.get("opus", 0) >= MIN_AUDIO_FRAMES, f"{display}: {counts}\n{result['log']}"
        assert decode_errors(path) == "", display


async def _record_h264_publisher(server: JanusServer, tmp_path: Path, record: Path) -> dict:
    session = await asyncio.to_thread(JanusSession, server)
    agent = LogProcess(
        [understudy_bin(), "join", "--server", f"janus://127.0.0.1:{server.port}/{ROOM}", "--name", "agent",
         "--record", str(record)],
        tmp_path / "agent-h264.log")
    try:
        async with Chromium() as browser:
            agent.start()
            await agent.wait_for(r"joined Janus room", 30)
            feed = await _publish_chromium(session, browser, video_codec="h264")
            await agent.wait_for(rf"subscribed to {feed} ", 30)
            await asyncio.sleep(RECORD_SECONDS)
            assert agent.proc is not None
            agent.proc.send_signal(signal.SIGTERM)
            return {"code": await agent.wait_exit(30), "log": agent.text(), "feed": feed}
    finally:
        agent.stop()
        await asyncio.to_thread(session.destroy)


def test_agent_records_an_h264_janus_publisher(understudy: str, tmp_path: Path) -> None:
    # A room that takes VP8 or H.264; Chromium offers H.264 only, Janus forwards it as is and the
    # agent (Janus's subscriber) records it without transcoding: Matroska, H.264 + Opus.
    server = _janus(tmp_path)
    server.videocodec = "vp8,h264"
    record = tmp_path / "rec"
    try:
        server.start()
        result = asyncio.run(asyncio.wait_for(_record_h264_publisher(server, tmp_path, record), 120))
    except Exception as error:
        raise AssertionError(f"{type(error).__name__}: {error}\n--- janus log ---\n{server.log()}") from error
    finally:
        server.stop()
    assert result["code"] == 0, result["log"]
    manifest = json.loads((record / "manifest.json").read_text())
    [entry] = manifest["files"]
    path = Path(entry["path"])
    assert path.name == f"chromium-{result['feed']}.mkv", manifest
    assert entry["videoCodec"] == "h264" and entry["audioCodec"] == "opus", entry
    counts = probe_frames(path)
    print(f"ffprobe {path.name}: {counts}")
    assert set(counts) == {"h264", "opus"}, counts
    assert counts["h264"] >= MIN_VIDEO_FRAMES and counts["opus"] >= MIN_AUDIO_FRAMES, f"{counts}\n{result['log']}"
    assert decode_errors(path) == ""


@pytest.mark.parametrize("extra, option", [
    (["--room", "demo"], "--room"),
    (["--secret", "s"], "--secret"),
    (["--accept-invites", "yes"], "--accept-invites"),
    (["--relay-room", "other"], "--relay-room"),
    (["--mode", "SIGNALLING_ONLY"], "--mode"),
    (["--agent"], "--agent"),
    (["--video", "testsrc"], "--video"),
])
def test_join_refuses_room_features_janus_lacks(understudy: str, extra: list[str], option: str) -> None:
    done = subprocess.run([understudy, "join", "--server", "janus://127.0.0.1:9/1234", *extra],
                          capture_output=True, text=True, timeout=30)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert option in lines[0] and ("janus" in lines[0] or "SEND_AND_RECV" in lines[0]), lines[0]


@pytest.mark.parametrize("url", ["janus://127.0.0.1:9/", "janus://127.0.0.1:9/room", "janus://127.0.0.1:9"])
def test_join_refuses_a_bad_janus_url(understudy: str, url: str) -> None:
    done = subprocess.run([understudy, "join", "--server", url], capture_output=True, text=True, timeout=30)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "janus://HOST:PORT/ROOM_NUMBER" in lines[0], done.stderr


def test_join_without_janus_fails_cleanly(understudy: str) -> None:
    # Nothing listens on port 9: one clear line, exit 1, no crash.
    done = subprocess.run([understudy, "join", "--server", "janus://127.0.0.1:9/1234"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "Janus HTTP API" in done.stderr, done.stderr


async def _outlive_session_timeout(server: JanusServer, tmp_path: Path, seconds: float) -> dict:
    session = await asyncio.to_thread(JanusSession, server)
    peer = InteropPeer("offer", tmp_path, duration=seconds + 60)
    agent = LogProcess(
        [understudy_bin(), "join", "--server", f"janus://127.0.0.1:{server.port}/{ROOM}", "--name", "agent"],
        tmp_path / "agent-keepalive.log")
    try:
        peer_feed = await _publish_peer(session, peer)
        agent.start()
        await agent.wait_for(rf"subscribed to {peer_feed} ", 30)
        # The test's own session (the publisher's) needs keepalives too.
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await asyncio.to_thread(session.keepalive)
            await asyncio.sleep(1)
        probe = await asyncio.to_thread(session.attach)
        listing = await asyncio.to_thread(session.message, probe, {"request": "listparticipants", "room": ROOM})
        names = sorted(p.get("display", "") for p in data_of(listing).get("participants", []))
        alive = agent.proc is not None and agent.proc.poll() is None
        assert agent.proc is not None
        agent.proc.send_signal(signal.SIGTERM)
        code = await agent.wait_exit(30)
        return {"names": names, "alive": alive, "code": code, "log": agent.text()}
    finally:
        agent.stop()
        await peer.stop()
        await asyncio.to_thread(session.destroy)


def test_agent_keeps_its_session_alive_past_the_session_timeout(understudy: str, tmp_path: Path) -> None:
    # Janus drops a session that sends nothing for `session_timeout` seconds; the agent sends a
    # keepalive every third of it (read from /janus/info), so it stays for three timeouts and more.
    timeout = 6
    folder = tmp_path / "janus"
    if not in_private_namespace():
        pytest.skip("adds a veth pair for Janus, so it runs only in scripts/interop.sh's network namespace")
    folder.mkdir()
    server = JanusServer(folder, session_timeout=timeout)
    try:
        server.start()
        result = asyncio.run(asyncio.wait_for(_outlive_session_timeout(server, tmp_path, 3.5 * timeout), 120))
    except Exception as error:
        raise AssertionError(f"{type(error).__name__}: {error}\n--- janus log ---\n{server.log()}") from error
    finally:
        server.stop()
    assert result["alive"] and result["names"] == ["agent", "peer"], result
    assert result["code"] == 0 and "lost the Janus session" not in result["log"], result["log"]


async def _agent_publishes(server: JanusServer, tmp_path: Path, record: Path) -> dict:
    url = f"janus://127.0.0.1:{server.port}/{ROOM}"
    publisher = LogProcess(
        [understudy_bin(), "join", "--server", url, "--name", "bot", "--mode", "SEND_AND_RECV", "--consume", "none"],
        tmp_path / "publisher.log")
    # Only `bot`'s video: a filter by display name and by kind; relayed as plain RTP too.
    relay = _even_udp_socket()
    recorder = LogProcess(
        [understudy_bin(), "join", "--server", url, "--name", "recorder", "--consume", "bot",
         "--consume-kinds", "video", "--record", str(record),
         "--relay", f"rtp://127.0.0.1:{relay.getsockname()[1]}"],
        tmp_path / "recorder.log")
    try:
        publisher.start()
        await publisher.wait_for(r"publishing into Janus room", 30)
        recorder.start()
        await recorder.wait_for(r"subscribed to \d+ \(bot\): video", 30)
        await recorder.wait_for(r"recording \d+ \(bot\)", 30)
        await asyncio.sleep(RECORD_SECONDS)
        relayed = _drain(relay)
        for process in (recorder, publisher):
            assert process.proc is not None
            process.proc.send_signal(signal.SIGTERM)
        codes = [await recorder.wait_exit(30), await publisher.wait_exit(30)]
        # A room number Janus does not have: one clear line, exit 1.
        missing = subprocess.run([understudy_bin(), "join", "--server", f"janus://127.0.0.1:{server.port}/999"],
                                 capture_output=True, text=True, timeout=60)
        return {"codes": codes, "log": recorder.text() + "\n" + publisher.text(), "missing": missing,
                "relayed": relayed}
    finally:
        recorder.stop()
        publisher.stop()
        relay.close()


def _even_udp_socket() -> socket.socket:
    """A UDP socket on an even port (RTPOutput, `--relay`, sends video to an even base port)."""
    while True:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        if sock.getsockname()[1] % 2 == 0 and sock.getsockname()[1] < 65000:
            sock.setblocking(False)
            return sock
        sock.close()


def _drain(sock: socket.socket) -> list[bytes]:
    packets = []
    while True:
        try:
            packets.append(sock.recv(2048))
        except BlockingIOError:
            return packets


def test_agent_publishes_into_janus_and_filters_what_it_consumes(understudy: str, tmp_path: Path) -> None:
    server = _janus(tmp_path)
    record = tmp_path / "rec"
    try:
        server.start()
        result = asyncio.run(asyncio.wait_for(_agent_publishes(server, tmp_path, record), 120))
    except Exception as error:
        raise AssertionError(f"{type(error).__name__}: {error}\n--- janus log ---\n{server.log()}") from error
    finally:
        server.stop()
    assert result["codes"] == [0, 0], result["log"]
    files = sorted(record.glob("*.webm"))
    assert len(files) == 1 and files[0].name.startswith("bot-"), files
    counts = probe_frames(files[0])
    assert counts.get("vp8", 0) >= MIN_VIDEO_FRAMES and counts.get("opus", 0) == 0, counts
    assert decode_errors(files[0]) == ""
    # RTP version 2, VP8 payload type 96 (relay.sdp says so).
    relayed = result["relayed"]
    assert len(relayed) > 50 and all(p[0] >> 6 == 2 and p[1] & 0x7F == 96 for p in relayed), len(relayed)
    assert "m=video" in (record / "relay.sdp").read_text()
    missing = result["missing"]
    lines = missing.stderr.strip().splitlines()
    assert missing.returncode == 1 and len(lines) == 1 and "No such room" in lines[0], missing.stderr
