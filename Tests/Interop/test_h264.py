"""H.264 from a browser and from aiortc, recorded without transcoding (issue 35).

Headless Chromium publishes on the room page with `?codec=h264` (its video transceiver's codec
preferences list H.264 only, so the offer has no VP8); the server's SFU takes an H.264 producer;
`understudy join --record` consumes it and writes the participant's file. The agent names it `.mkv`
(Matroska, V_MPEG4/ISO/AVC with an avcC from the stream's SPS/PPS, Opus beside it) and its manifest
names the codecs. ffprobe and ffmpeg judge the file: H.264 and Opus streams, no decode error, and
about as many video frames as Chromium's getStats says it sent while the agent was there. The
agent's `--snapshot-every 1s` picture of the webcam (`captureImage` through libavcodec) is a JPEG
of a size the recorded stream has.

aiortc (its own libx264 through PyAV, packetization mode 1) publishes H.264 through the room
protocol the same way, and the agent records it too.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

from browser_support import WINDOW, Agent, DevServer, RoomPage
from chromium import Chromium
from harness import check_snapshot, decode_errors, probe_frames, run_understudy
from room_client import RoomClient, publish

ROOM = "h264-room"


async def _play(workdir: Path) -> dict:
    record = workdir / "agent"
    record.mkdir()
    out: dict = {"record": record}
    server = DevServer(workdir, udp_low=46200).start()
    agent = None
    try:
        await server.ready()
        async with Chromium(extra_flags=WINDOW) as browser:
            host = await RoomPage.open(
                browser, server, ROOM, name="Host", id="host", mode="SEND_AND_RECV", codec="h264",
                simulcast="0")  # one layer: getStats framesSent then counts the frames the agent records
            await host.wait_until("host publishes", lambda s: {"webcam", "mic"} <= set(s["producing"]), timeout=30)
            agent = Agent(server, ROOM, record, extra=["--snapshot-every", "1s"]).start()
            await agent.wait_for(r"joined room", 30)
            await agent.wait_for(r"recording host -> ", 30)
            await agent.wait_for(r"holds H\.264 -> ", 30)
            before = await host.page.evaluate("window.understudyRoom.publishStats()")
            await asyncio.sleep(8)
            after = await host.page.evaluate("window.understudyRoom.publishStats()")
            out["codec"] = after["codec"]
            out["sent_while_recording"] = after["framesSent"] - before["framesSent"]
            await agent.wait_for(r"snapshot host -> ", 30)
            # SIGKILL: the file must play up to its last whole cluster without a clean close.
            assert agent.proc is not None
            agent.proc.send_signal(signal.SIGKILL)
            await agent.wait_exit(10)
    finally:
        if agent is not None:
            agent.stop()
        server.stop()
    out["agent_log"] = agent.text() if agent else ""
    return out


def test_chromium_h264_is_recorded_as_matroska(tmp_path: Path) -> None:
    result = asyncio.run(_play(tmp_path))
    assert result["codec"] == "video/H264", result
    record: Path = result["record"]
    path = record / "host.mkv"
    assert path.exists(), f"{sorted(p.name for p in record.iterdir())}\n{result['agent_log'][-3000:]}"
    assert not (record / "host.webm").exists()
    manifest = json.loads((record / "manifest.json").read_text())
    entry = next(f for f in manifest["files"] if f["participantId"] == "host")
    assert entry["path"] == str(path) and entry["format"] == "mkv", entry
    assert entry["videoCodec"] == "h264" and entry["audioCodec"] == "opus", entry
    frames = probe_frames(path)
    print("ffprobe:", frames, "sent while recording:", result["sent_while_recording"])
    assert set(frames) == {"h264", "opus"}, frames
    errors = decode_errors(path)
    assert errors == "", errors
    # Killed 8 s after the first keyframe was written: the file holds at least the frames sent in
    # the 8 s window minus the last cluster (at most 1 s) that was still open, at Chromium's rate.
    sent = result["sent_while_recording"]
    assert sent > 40, result
    assert frames["h264"] >= sent * 0.75, (frames, sent)
    assert frames["h264"] <= sent * 1.6, (frames, sent)
    print("snapshot:", check_snapshot(record, "host", path))


async def _play_aiortc(workdir: Path) -> dict:
    record = workdir / "agent"
    record.mkdir()
    out: dict = {"record": record}
    server = DevServer(workdir, udp_low=46300).start()
    agent = None
    client = None
    pc = None
    try:
        await server.ready()
        token = run_understudy(
            ["token", "--secret", server.secret or "", "--room", ROOM, "--participant", "cam",
             "--permissions", "allow_join"], timeout=20)
        assert token.returncode == 0, token.stderr
        client = await RoomClient.connect(f"ws://127.0.0.1:{server.port}/v1/rtc", token.stdout.strip())
        await client.join(ROOM, "cam")
        pc, response, counters = await publish(client, video="h264")
        out["answer_h264"] = "H264/90000" in response["sdp"] and "VP8/90000" not in response["sdp"]
        agent = Agent(server, ROOM, record).start()
        await agent.wait_for(r"holds H\.264 -> ", 40)
        await asyncio.sleep(6)
        agent.stop()  # SIGTERM: the agent finishes its files
        await agent.wait_exit(20)
    finally:
        if agent is not None:
            agent.stop()
        if pc is not None:
            await pc.close()
        if client is not None:
            await client.close()
        server.stop()
    out["agent_log"] = agent.text() if agent else ""
    return out


def test_aiortc_h264_is_recorded_as_matroska(tmp_path: Path) -> None:
    result = asyncio.run(_play_aiortc(tmp_path))
    assert result["answer_h264"], result
    path: Path = result["record"] / "cam.mkv"
    assert path.exists(), result["agent_log"][-3000:]
    frames = probe_frames(path)
    print("ffprobe (aiortc):", frames)
    assert frames.get("h264", 0) >= 60, frames  # 6 s at aiortc's 30 fps, keyframe wait aside
    assert "opus" in frames, frames
    assert decode_errors(path) == ""
