"""A composite's tiles receive the simulcast layer that fits them, in a live room (issue 37, "Each tile
consumes the simulcast layer that fits its size").

Four publishers (`understudy join --mode SEND_AND_RECV --simulcast`: the test pattern in three layers,
640x360, 320x180 and 160x90) join a room; an agent composites it at 640x360 (a 2x2 grid of 320x180
tiles) and records what it receives (`--record`). The compositor sends each tile's size to the server
(`setViewPort`), and the SFU forwards the smallest layer that covers it: checked on the frames the agent
received last (its per-participant recordings), which must be 320x180, not the top layer.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from harness import free_port
from test_agent_stage import AgentProcess, join_args, start_server

ROOM = "complayers"
PUBLISHERS = ["p1", "p2", "p3", "p4"]


def last_frame_sizes(path: Path, count: int = 30) -> list[tuple[int, int]]:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "frame=width,height", "-of", "csv=p=0",
         str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    sizes = [tuple(int(v) for v in line.split(",")[:2]) for line in out.stdout.split() if line.strip()]
    return sizes[-count:]


def test_composite_tiles_receive_the_layer_that_fits(understudy, tmp_path):
    port = free_port()
    server = start_server(port, udp_low=47900)
    processes: list[AgentProcess] = []
    record = tmp_path / "rec"
    try:
        for name in PUBLISHERS:
            host = AgentProcess(name, join_args(
                port, ROOM, name, "--mode", "SEND_AND_RECV", "--simulcast", "--consume", "none"), tmp_path)
            processes.append(host)
            host.wait_for(rf"joined room {ROOM} as {name} \(SEND_AND_RECV\)")
        agent = AgentProcess("comp", join_args(
            port, ROOM, "comp", "--consume", "all", "--size", "640x360", "--composite-preset", "ultrafast",
            "--composite", str(tmp_path / "room.mp4"), "--record", str(record)), tmp_path)
        processes.append(agent)
        agent.wait_for(rf"joined room {ROOM} as comp")
        agent.wait_for(r"composite layout: p1 320x180\+0\+0, p2 320x180\+320\+0, p3 320x180\+0\+180, "
                       r"p4 320x180\+320\+180", timeout=60)
        # The switch to the fitting layer waits for its key frame; then a few seconds of it.
        time.sleep(8)
        assert agent.terminate() == 0, agent.log()[-3000:]
        assert "setViewPort(" not in agent.log(), agent.log()[-3000:]
        for name in PUBLISHERS:
            files = sorted(record.glob(f"*{name}*.webm")) + sorted(record.glob(f"*{name}*.mkv"))
            assert files, (name, sorted(p.name for p in record.iterdir()))
            sizes = last_frame_sizes(files[0])
            print(f"{name}: last frames received {set(sizes)}")
            assert len(sizes) >= 20 and set(sizes) == {(320, 180)}, (name, sizes)
    finally:
        for p in processes:
            p.stop()
        server.terminate()
        server.wait(timeout=30)
