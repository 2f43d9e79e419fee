"""Simulcast from the room page (issue 33, item 5).

A Chromium host on the room page publishes its 1280x720 camera in three simulcast layers (RIDs q, h,
f at a quarter, half and full resolution, as the SDK's `multiStream`); a second host opens the page
with `?simulcast=0` and publishes one layer; a third, with the default 640x480 camera, publishes two
(h and f: libwebrtc sends no more than two layers below 960x540). Two agents record the stage: `understudy join --quality low`
and `--quality high`. The SFU must forward the browser's low layer to the first and its top layer to
the second, so the recordings differ in resolution (ffprobe, frame by frame), while the one-layer
host is recorded at full size by both (there is nothing to choose among).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import Counter
from pathlib import Path

from browser_support import Agent, DevServer, RoomPage
from chromium import Chromium
from harness import decode_errors

ROOM = "simulcast-page"


def _frame_sizes(path: Path) -> list[tuple[int, int]]:
    """Width and height of every decoded video frame of a recording, in order."""
    result = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=width,height",
         "-of", "csv=p=0", str(path)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"ffprobe failed on {path}: {result.stderr.strip()}"
    sizes = []
    for line in result.stdout.split():
        parts = line.strip().strip(",").split(",")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            sizes.append((int(parts[0]), int(parts[1])))
    return sizes


def _settled(sizes: list[tuple[int, int]]) -> tuple[int, int]:
    """The usual frame size of the last 60 frames (a recording may start on another layer)."""
    assert sizes, "no video frames"
    return Counter(sizes[-60:]).most_common(1)[0][0]


async def _wait_layers(page: RoomPage, count: int, timeout: float = 60) -> dict:
    """Waits until the page's publish connection sends `count` video encodings with bytes flowing."""
    deadline = time.monotonic() + timeout
    first: dict | None = None
    sample: dict = {}
    while time.monotonic() < deadline:
        sample = await page.page.evaluate("window.understudyRoom.publishStats()") or {}
        layers = sample.get("layers") or []
        if first is None and len(layers) == count:
            first = sample
        elif first is not None and len(layers) == count:
            before = {layer["rid"]: layer["bytes"] for layer in first["layers"]}
            if all(layer["bytes"] > before.get(layer["rid"], 0) for layer in layers):
                return sample
        await asyncio.sleep(1)
    raise AssertionError(f"{page.name}: not {count} video encodings sending within {timeout}s; last {sample}")


async def _play(workdir: Path) -> dict:
    server = DevServer(workdir, udp_low=47000).start()
    agents: list[Agent] = []
    try:
        await server.ready()
        async with Chromium() as browser:
            # The pages share Chromium's one fake camera, which starts at the size its first client
            # asks for: Single opens once Multi's 1280x720 layers flow. Opened together, the camera
            # could start at Single's 640x480, and Multi's frames never fed its third layer (a CI run:
            # 160x120 and 320x240 sent, 'f' never).
            multi = await RoomPage.open(
                browser, server, ROOM, name="Multi", id="multi", mode="SEND_AND_RECV", camera="1280x720")
            await multi.wait_until("Multi publishes", lambda s: {"webcam", "mic"} <= set(s["producing"]))
            multi_layers = await _wait_layers(multi, 3)
            single = await RoomPage.open(
                browser, server, ROOM, name="Single", id="single", mode="SEND_AND_RECV", simulcast="0")
            await single.wait_until("Single publishes", lambda s: {"webcam", "mic"} <= set(s["producing"]))
            single_layers = await _wait_layers(single, 1)
            checkbox = await single.page.evaluate("document.getElementById('join-simulcast').checked")
            # A 640x480 camera: two layers. Checked, then its camera goes off (one encoder less).
            vga = await RoomPage.open(browser, server, ROOM, name="VGA", id="vga", mode="SEND_AND_RECV")
            await vga.wait_until("VGA publishes", lambda s: "webcam" in s["producing"])
            vga_layers = await _wait_layers(vga, 2)
            await vga.page.evaluate("document.getElementById('btn-cam').click()")
            await vga.wait_until("VGA camera off", lambda s: "webcam" not in s["producing"])

            # Chromium drops its upper layers while it is short of CPU or bandwidth (a clean-clone run
            # sent q only while the VGA page encoded too): wait until all three flow again.
            await _wait_layers(multi, 3)
            for quality in ("low", "high"):
                record = workdir / quality
                record.mkdir()
                agents.append(Agent(server, ROOM, record, participant=f"agent-{quality}",
                                    extra=["--quality", quality]).start())
            for agent in agents:
                await agent.wait_for(r"consuming multi", 30)
                await agent.wait_for(r"consuming single", 30)
            # Ten seconds of media after the layer asked for settled (a key frame within 300 ms).
            await asyncio.sleep(12)
            for agent in agents:
                agent.stop()
            return {"multi": multi_layers, "single": single_layers, "vga": vga_layers, "checkbox": checkbox,
                    "logs": {a.args[a.args.index("--id") + 1]: a.tail() for a in agents}, "server": server.tail()}
    finally:
        for agent in agents:
            agent.stop()
        server.stop()


def test_page_publishes_three_layers_and_quality_selects_among_them(tmp_path: Path) -> None:
    result = asyncio.run(_play(tmp_path))
    rids = sorted(layer["rid"] for layer in result["multi"]["layers"])
    assert rids == ["f", "h", "q"], f"the page published {result['multi']}"
    widths = [layer["width"] for layer in result["multi"]["layers"]]
    assert widths[0] < widths[-1], f"the layers are all one size: {result['multi']}"
    assert [layer["rid"] for layer in result["single"]["layers"]] == [None], result["single"]
    vga = result["vga"]["layers"]
    assert [layer["rid"] for layer in vga] == ["h", "f"], f"a 640x480 camera published {vga}"
    assert vga[-1]["width"] == 640, f"a 640x480 camera's top layer is not full size: {vga}"
    assert result["checkbox"] is False, "?simulcast=0 does not show in the join form's checkbox"

    sizes = {}
    for quality in ("low", "high"):
        for host in ("multi", "single"):
            path = tmp_path / quality / f"{host}.webm"
            assert path.exists(), f"agent-{quality} recorded no {path.name}:\n{result['logs'][f'agent-{quality}']}"
            assert decode_errors(path) == "", f"{path} does not decode cleanly"
            sizes[(quality, host)] = _settled(_frame_sizes(path))
    print(f"sent {result['multi']['layers']}; recorded {sizes}")
    low, high = sizes[("low", "multi")], sizes[("high", "multi")]
    assert low[0] < high[0] and low[1] < high[1], f"--quality low recorded {low}, --quality high {high}"
    # Chromium may scale its layers down under CPU load: the recordings are judged against each other
    # and against the lowest layer sent.
    assert high[0] > widths[0], f"--quality high recorded {high}, the lowest layer is {widths[0]} wide"
    # One layer: both agents get it, whatever they asked for.
    assert sizes[("low", "single")] == sizes[("high", "single")], sizes
    assert sizes[("low", "single")][0] > low[0], sizes
