"""The agent publishes VP9 and AV1 (issue 35, item 4): `--video-codec vp9|av1`.

`understudy join --mode SEND_AND_RECV --video-codec vp9` publishes its test pattern encoded by libvpx
(profile 0, RFC 9628 non-flexible mode with the scalability structure on key frames);
`--video-codec av1` by libaom (realtime usage, OBU aggregation of the AOM payload format). Headless
Chromium in the audience subscribes through the SFU and decodes it: getStats names the codec
video/VP9 or video/AV1, `framesDecoded` keeps growing and no freeze is counted. A recording agent
writes the same stream into WebM, which ffprobe reads as VP9 or AV1 and ffmpeg decodes without error.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from browser_support import WINDOW, Agent, DevServer, Publisher, RoomPage
from chromium import Chromium
from harness import decode_errors, probe_frames


async def _play(workdir: Path, codec: str, udp_low: int) -> dict:
    room = f"{codec}-publish"
    record = workdir / "agent"
    record.mkdir()
    out: dict = {"record": record}
    server = DevServer(workdir, udp_low=udp_low).start()
    bot = recorder = None
    try:
        await server.ready()
        bot = Publisher(server, room, workdir, codec).start()
        await bot.wait_for(r"joined room", 30)
        async with Chromium(extra_flags=WINDOW) as browser:
            viewer = await RoomPage.open(browser, server, room, name="Viewer", id="viewer", mode="RECV_ONLY")
            recorder = Agent(server, room, record).start()
            await recorder.wait_for(r"recording bot -> ", 40)
            first = await viewer.wait_frames("bot", 30)
            # Still decoding seconds later: the stream goes on past its first key frame.
            out["viewer"] = await viewer.wait_frames("bot", first["framesDecoded"] + 90)
            recorder.stop()  # SIGTERM: the agent finishes its files
            await recorder.wait_exit(20)
    finally:
        for p in (recorder, bot):
            if p is not None:
                p.stop()
        server.stop()
    out["bot_log"] = bot.text() if bot else ""
    out["recorder_log"] = recorder.text() if recorder else ""
    return out


@pytest.mark.parametrize(("codec", "mime", "udp_low"), [("vp9", "VP9", 46800), ("av1", "AV1", 46900)])
def test_chromium_decodes_the_agents_video_and_the_agent_records_it(
        tmp_path: Path, codec: str, mime: str, udp_low: int) -> None:
    result = asyncio.run(_play(tmp_path, codec, udp_low))
    viewer = result["viewer"]
    print(f"viewer ({codec}):", viewer)
    assert viewer["codec"] == f"video/{mime}", viewer
    assert viewer["width"] == 640 and viewer["height"] == 360, viewer
    assert viewer["freezeCount"] == 0, viewer
    path: Path = result["record"] / "bot.webm"
    assert path.exists(), f"{sorted(p.name for p in result['record'].iterdir())}\n{result['recorder_log'][-3000:]}"
    frames = probe_frames(path)
    print("ffprobe:", frames)
    assert frames.get(codec, 0) >= 60, frames
    assert decode_errors(path) == ""
