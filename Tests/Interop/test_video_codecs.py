"""VP9 and AV1 from a browser, forwarded by the SFU and recorded without transcoding (issue 35).

Headless Chromium publishes on the room page with `?codec=vp9` or `?codec=av1` (its video
transceiver offers that codec only); the SFU takes the producer and offers the agent's subscribe
connection exactly that codec; `understudy join --record` writes the participant's WebM (V_VP9, or
V_AV1 with its av1C, beside Opus) and its manifest names the codec. ffprobe and ffmpeg judge the file: VP9 and Opus, no decode error, about as many frames as
Chromium's getStats says it sent while the agent recorded. A second page in the audience decodes
the same stream through the SFU. The window of frames counted starts when the agent logs the
file's first video key frame. The agent also takes `--snapshot-every 1s` pictures of the webcam
(`captureImage`, decoded by libavcodec/libdav1d): a JPEG of a size the recorded stream has.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from browser_support import WINDOW, Agent, DevServer, RoomPage
from chromium import Chromium
from harness import check_snapshot, decode_errors, probe_frames



async def _play(workdir: Path, codec: str, udp_low: int) -> dict:
    record = workdir / "agent"
    record.mkdir()
    out: dict = {"record": record}
    server = DevServer(workdir, udp_low=udp_low).start()
    agent = None
    try:
        await server.ready()
        async with Chromium(extra_flags=WINDOW) as browser:
            host = await RoomPage.open(
                browser, server, f"{codec}-room", name="Host", id="host", mode="SEND_AND_RECV", codec=codec,
                simulcast="0")
            await host.wait_until("host publishes", lambda s: {"webcam", "mic"} <= set(s["producing"]), timeout=30)
            viewer = await RoomPage.open(browser, server, f"{codec}-room", name="Viewer", id="viewer", mode="RECV_ONLY")
            agent = Agent(server, f"{codec}-room", record, extra=["--snapshot-every", "1s"]).start()
            await agent.wait_for(r"joined room", 30)
            await agent.wait_for(r"recording host -> ", 30)
            opened = await host.page.evaluate("window.understudyRoom.publishStats()")
            # The window starts once the file's video has (its first key frame, which the SFU
            # forwards a new consumer only after asking the publisher for one: 0.2-0.5 s after the
            # file opened with the first audio frame); what was sent before cannot be in the file.
            await agent.wait_for(rf"recording host: {codec} video from its first key frame", 30)
            before = await host.page.evaluate("window.understudyRoom.publishStats()")
            await asyncio.sleep(8)
            after = await host.page.evaluate("window.understudyRoom.publishStats()")
            out["codec"] = after["codec"]
            out["sent_while_recording"] = after["framesSent"] - before["framesSent"]
            out["sent_before_video"] = before["framesSent"] - opened["framesSent"]
            out["viewer"] = await viewer.page.evaluate("window.understudyRoom.videoStats('host')")
            await agent.wait_for(r"snapshot host -> ", 30)
            agent.stop()  # SIGTERM: the agent finishes its files
            await agent.wait_exit(20)
    finally:
        if agent is not None:
            agent.stop()
        server.stop()
    out["agent_log"] = agent.text() if agent else ""
    return out


@pytest.mark.parametrize(("codec", "mime", "udp_low"), [("vp9", "VP9", 46400), ("av1", "AV1", 46500)])
def test_chromium_codec_is_forwarded_and_recorded_as_webm(tmp_path: Path, codec: str, mime: str, udp_low: int) -> None:
    result = asyncio.run(_play(tmp_path, codec, udp_low))
    assert result["codec"] == f"video/{mime}", result
    record: Path = result["record"]
    path = record / "host.webm"
    assert path.exists(), f"{sorted(p.name for p in record.iterdir())}\n{result['agent_log'][-3000:]}"
    manifest = json.loads((record / "manifest.json").read_text())
    entry = next(f for f in manifest["files"] if f["participantId"] == "host")
    assert entry["videoCodec"] == codec and entry["audioCodec"] == "opus", entry
    frames = probe_frames(path)
    print("ffprobe:", frames, "sent while recording:", result["sent_while_recording"],
          "sent between the file's opening and its first key frame:", result["sent_before_video"],
          "viewer:", result["viewer"])
    print("recording:", {k: entry.get(k) for k in ("videoFrames", "droppedFrames", "framesNotWritten")},
          next(t["quality"] for t in manifest["tracks"] if t["participantId"] == "host" and t["kind"] == "video"))
    assert set(frames) == {codec, "opus"}, frames
    assert decode_errors(path) == ""
    sent = result["sent_while_recording"]
    assert sent > 40, result
    # The window starts after the file's first key frame, so the file holds at least the window's
    # frames (issue 35: within 5 %). When the window started at the file's opening instead, AV1
    # came out up to 6 % short: the frames Chromium sent before the SFU forwarded the agent its
    # first key frame (0-11 of them, printed above) cannot be in any recording.
    assert frames[codec] >= sent * 0.95, (frames, sent)
    viewer = result["viewer"]
    assert viewer["codec"] == f"video/{mime}" and viewer["framesDecoded"] > 30, viewer
    print("snapshot:", check_snapshot(record, "host", path))
