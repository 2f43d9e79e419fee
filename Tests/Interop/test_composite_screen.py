"""A screen share takes the composite's stage (issue 37, composite video): a Chromium host (fake camera,
fake screen capture) publishes its webcam, two agents composite the room (`--layout speaker` and
`--layout grid`, 640x360), the host shares its screen and stops: each agent consumes the share, puts it
first and largest (the speaker layout's big tile; the grid's first tile), then goes back to the webcam
alone. Both MP4s decode without errors. UDP ports 45300-45359.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from browser_support import WINDOW, Agent, DevServer, RoomPage
from chromium import Chromium
from harness import decode_errors, probe_frames

ROOM = "composite-screen"


def layouts(agent: Agent) -> list[str]:
    return re.findall(r"composite layout: (.*)", agent.text())


def area(tile: str) -> int:
    width, height = re.search(r"(\d+)x(\d+)\+", tile).groups()
    return int(width) * int(height)


async def _play(workdir: Path) -> dict[str, Agent]:
    server = DevServer(workdir, udp_low=45300).start()
    agents: dict[str, Agent] = {}
    try:
        await server.ready()
        async with Chromium(extra_flags=WINDOW) as browser:
            host = await RoomPage.open(browser, server, ROOM, name="Host", id="host", mode="SEND_AND_RECV")
            await host.wait_until("host publishes", lambda s: {"webcam", "mic"} <= set(s["producing"]))
            for layout in ("speaker", "grid"):
                record = workdir / layout
                record.mkdir()
                agents[layout] = Agent(server, ROOM, record, participant=f"agent-{layout}", extra=[
                    "--composite", str(workdir / f"{layout}.mp4"), "--layout", layout, "--size", "640x360",
                    "--composite-preset", "ultrafast"]).start()
            for agent in agents.values():
                await agent.wait_for(r"composite layout: host 640x360\+0\+0", 40)
            await asyncio.sleep(2)
            await host.click("#btn-screen")
            await host.wait_until("host shares its screen", lambda s: "screen" in s["producing"])
            for agent in agents.values():
                await agent.wait_for(r"composite layout: host\(screen\) ", 40)
            await asyncio.sleep(3)
            await host.click("#btn-screen")
            await host.wait_until("host stopped sharing", lambda s: "screen" not in s["producing"])
            for agent in agents.values():
                await agent.wait_for(r"composite layout: host\(screen\) .*\n(.|\n)*composite layout: host 640x360\+0\+0",
                                     40)
            await asyncio.sleep(1)
    finally:
        for agent in agents.values():
            agent.stop()
        server.stop()
    return agents


def test_screen_share_takes_the_stage_in_both_layouts(understudy, tmp_path):
    agents = asyncio.run(_play(tmp_path))
    for layout, agent in agents.items():
        shared = next(line for line in layouts(agent) if "(screen)" in line)
        tiles = shared.split(", ")
        # The share is the first tile, beside the host's webcam.
        assert tiles[0].startswith("host(screen) ") and any(t.startswith("host ") for t in tiles[1:]), shared
        if layout == "speaker":
            # The stage: the share's tile is the large one.
            assert area(tiles[0]) > 2 * max(area(t) for t in tiles[1:]), shared
        else:
            assert area(tiles[0]) == area(tiles[1]), shared
        mp4 = tmp_path / f"{layout}.mp4"
        assert probe_frames(mp4).get("h264", 0) >= 30 * 4, (mp4, probe_frames(mp4))
        assert decode_errors(mp4) == "", decode_errors(mp4)
