"""The agent publishes VP9 and AV1 (issue 35, item 4): `--video-codec vp9|av1`.

`understudy join --mode SEND_AND_RECV --video-codec vp9` publishes its test pattern encoded by libvpx
(profile 0, RFC 9628 non-flexible mode with the scalability structure on key frames);
`--video-codec av1` by libaom (realtime usage, OBU aggregation of the AOM payload format). Headless
Chromium in the audience subscribes through the SFU and decodes it: getStats names the codec
video/VP9 or video/AV1, `framesDecoded` keeps growing and no freeze is counted. A recording agent
writes the same stream into WebM, which ffprobe reads as VP9 or AV1 and ffmpeg decodes without error.

The third case publishes an AV1 IVF file that ffmpeg made (libaom) with `--video FILE --video-codec
av1`: its temporal units are sent as the file holds them, without re-encoding, and decode the same way.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from browser_support import WINDOW, Agent, DevServer, Publisher, RoomPage
from chromium import Chromium
from harness import decode_errors, probe_frames


def _encode_file(workdir: Path, codec: str, container: str) -> str:
    """Ten seconds of a 640x360 test pattern encoded by ffmpeg (a key frame every second)."""
    path = workdir / f"source.{container}"
    encoder = (["-c:v", "libaom-av1", "-usage", "realtime", "-cpu-used", "8"] if codec == "av1"
               else ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8"])
    subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-t", "10",
         "-pix_fmt", "yuv420p", *encoder, "-lag-in-frames", "0", "-g", "30", "-b:v", "600k", str(path)],
        check=True, timeout=300)
    return str(path)


async def _play(workdir: Path, codec: str, udp_low: int, container: str | None) -> dict:
    room = f"{codec}-publish"
    record = workdir / "agent"
    record.mkdir()
    out: dict = {"record": record}
    server = DevServer(workdir, udp_low=udp_low).start()
    bot = recorder = None
    try:
        await server.ready()
        video = _encode_file(workdir, codec, container) if container else None
        bot = Publisher(server, room, workdir, codec, video=video).start()
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


@pytest.mark.parametrize(("codec", "mime", "udp_low", "container"),
                         [("vp9", "VP9", 46800, None), ("av1", "AV1", 46900, None), ("av1", "AV1", 47000, "ivf")])
def test_chromium_decodes_the_agents_video_and_the_agent_records_it(
        tmp_path: Path, codec: str, mime: str, udp_low: int, container: str | None) -> None:
    result = asyncio.run(_play(tmp_path, codec, udp_low, container))
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
