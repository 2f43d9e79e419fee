"""H.264 from a browser, recorded without transcoding (issue 35).

Headless Chromium publishes on the room page with `?codec=h264` (its video transceiver's codec
preferences list H.264 only, so the offer has no VP8); the server's SFU takes an H.264 producer;
`understudy join --record` consumes it and writes the participant's file. The agent names it `.mkv`
(Matroska, V_MPEG4/ISO/AVC with an avcC from the stream's SPS/PPS, Opus beside it) and its manifest
names the codecs. ffprobe and ffmpeg judge the file: H.264 and Opus streams, no decode error, and
about as many video frames as Chromium's getStats says it sent while the agent was there.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

from browser_support import WINDOW, Agent, DevServer, RoomPage
from chromium import Chromium
from harness import decode_errors, probe_frames

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
                browser, server, ROOM, name="Host", id="host", mode="SEND_AND_RECV", codec="h264")
            await host.wait_until("host publishes", lambda s: {"webcam", "mic"} <= set(s["producing"]), timeout=30)
            agent = Agent(server, ROOM, record).start()
            await agent.wait_for(r"joined room", 30)
            await agent.wait_for(r"recording host -> ", 30)
            await agent.wait_for(r"holds H\.264 -> ", 30)
            before = await host.page.evaluate("window.understudyRoom.publishStats()")
            await asyncio.sleep(8)
            after = await host.page.evaluate("window.understudyRoom.publishStats()")
            out["codec"] = after["codec"]
            out["sent_while_recording"] = after["framesSent"] - before["framesSent"]
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
