"""The agent and the load bots publish H.264 (issue 35, item 4): `--video-codec h264`.

`understudy join --mode SEND_AND_RECV --video-codec h264` publishes its test pattern encoded by
libx264 (constrained baseline, packetization mode 1). Headless Chromium in the audience subscribes
through the SFU and decodes it: getStats names the codec video/H264 and `framesDecoded` keeps
growing. A recording agent writes the same stream into Matroska, which ffmpeg decodes without error.
`understudy load --video-codec h264` publishes the loop (three simulcast layers) encoded once for every bot; the page
decodes a bot's webcam as H.264 too. A junk `--video-codec` is refused before anything connects.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from browser_support import WINDOW, Agent, DevServer, LogProcess, Publisher, RoomPage
from chromium import Chromium
from harness import decode_errors, probe_frames, run_understudy, understudy_bin

ROOM = "h264-publish"
UDP_LOW = 46700


def _load(server: DevServer, workdir: Path) -> LogProcess:
    return LogProcess(
        [understudy_bin(), "load", "--server", server.base, "--room", ROOM, "--secret", server.secret or "",
         "--publishers", "1", "--subscribers", "0", "--video-codec", "h264",
         "--id-prefix", "h264load", "--duration", "120"],
        workdir / "load.log")


async def _play(workdir: Path) -> dict:
    record = workdir / "agent"
    record.mkdir()
    out: dict = {"record": record}
    server = DevServer(workdir, udp_low=UDP_LOW).start()
    bot = recorder = load = None
    try:
        await server.ready()
        bot = Publisher(server, ROOM, workdir, "h264").start()
        await bot.wait_for(r"joined room", 30)
        async with Chromium(extra_flags=WINDOW) as browser:
            viewer = await RoomPage.open(browser, server, ROOM, name="Viewer", id="viewer", mode="RECV_ONLY")
            recorder = Agent(server, ROOM, record).start()
            await recorder.wait_for(r"holds H\.264 -> ", 40)
            first = await viewer.wait_frames("bot", 30)
            # Still decoding a few seconds on: the stream goes on, not only its first keyframe.
            out["bot"] = await viewer.wait_frames("bot", first["framesDecoded"] + 60)
            load = _load(server, workdir).start()
            match = await viewer.wait_until(
                "a load bot on stage", lambda s: any(p.startswith("h264load") for p in s["stage"]), timeout=60)
            name = next(p for p in match["stage"] if p.startswith("h264load"))
            out["load"] = await viewer.wait_frames(name, 30, timeout=60)
            recorder.stop()  # SIGTERM: the agent finishes its files
            await recorder.wait_exit(20)
    finally:
        for p in (load, recorder, bot):
            if p is not None:
                p.stop()
        server.stop()
    out["bot_log"] = bot.text() if bot else ""
    out["recorder_log"] = recorder.text() if recorder else ""
    out["load_log"] = load.text() if load else ""
    return out


def test_chromium_decodes_h264_from_the_agent_and_a_load_bot(tmp_path: Path) -> None:
    result = asyncio.run(_play(tmp_path))
    bot = result["bot"]
    print("viewer (agent):", bot, "viewer (load bot):", result["load"])
    assert bot["codec"] == "video/H264", bot
    assert result["load"]["codec"] == "video/H264", result["load"]
    path: Path = result["record"] / "bot.mkv"
    assert path.exists(), f"{sorted(p.name for p in result['record'].iterdir())}\n{result['recorder_log'][-3000:]}"
    frames = probe_frames(path)
    print("ffprobe:", frames)
    assert frames.get("h264", 0) >= 60, frames
    assert decode_errors(path) == ""
    # `understudy analyze` reads the H.264 Matroska recording (length-prefixed NAL units, avcC):
    # the frame numbers of the synthetic pattern read back and the pictures match their source.
    analysed = run_understudy(["analyze", str(path), "--json"], timeout=300)
    assert analysed.returncode == 0, analysed.stderr
    report = json.loads(analysed.stdout)
    print("analyze:", report["video"]["frames"], report["video"]["numbered"], report["video"].get("psnr"))
    assert report["videoCodec"] == "h264", report
    assert report["video"]["numbered"] >= 60 and report["video"]["undecodable"] == 0, report["video"]
    assert report["video"]["psnr"]["mean"] > 25, report["video"]["psnr"]


def test_unknown_video_codec_is_refused() -> None:
    for command in (["join", "--server", "http://127.0.0.1:9", "--room", "r", "--secret", "s"],
                    ["load", "--server", "http://127.0.0.1:9", "--room", "r", "--secret", "s"]):
        r = run_understudy([*command, "--video-codec", "vp7"], timeout=30)
        assert r.returncode == 2, (command, r.returncode, r.stderr)
        assert "--video-codec" in r.stderr and "'vp7' is not auto, vp8, h264, vp9 or av1" in r.stderr, r.stderr
