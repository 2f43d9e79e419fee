"""`understudy demo`: the main job on the embedded server, judged by ffprobe/ffmpeg."""

from __future__ import annotations

import re
import subprocess
import sys
from contextlib import contextmanager
from typing import Iterator

from harness import decode_errors, probe_frames, run_understudy


@contextmanager
def cpu_burners(count: int) -> Iterator[None]:
    """`count` CPU-bound processes running beside the test (a busy machine)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for b in burners:
            b.kill()
            b.wait(timeout=10)


def test_demo_stage_flow_records_both_ways_on_a_busy_machine(understudy, tmp_path):
    """Run beside two CPU-bound processes: the A/V offset must hold whatever the scheduling."""
    out = tmp_path / "demo"
    with cpu_burners(2):
        result = run_understudy(["demo", "--duration", "12", "--out", str(out)], timeout=180)
    print(result.stdout)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    assert "demo: ok" in result.stdout
    assert "participantModeChanged: agent → SEND_AND_RECV" in result.stdout
    for path in (out / "agent" / "host.webm", out / "host" / "agent.webm"):
        frames = probe_frames(path)
        assert frames.get("vp8", 0) >= 60, (path, frames)
        assert frames.get("opus", 0) >= 100, (path, frames)
        assert decode_errors(path) == "", path
    offsets = [float(m) for m in re.findall(r"A/V offset ([+-][0-9.]+) ms", result.stdout)]
    assert len(offsets) == 2, result.stdout
    assert all(abs(o) <= 40 for o in offsets), offsets
    assert (out / "agent" / "manifest.json").exists()
