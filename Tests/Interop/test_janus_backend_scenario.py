"""`understudy scenario --server janus://HOST:PORT/ROOM`: the part of a scenario a Janus VideoRoom has.

examples/janus-stage.json runs in Janus (Debian's `janus` 1.1.2): two publishing bots and a recording
viewer see each other on Janus's stage (its publisher list), frames flow, a publisher leaves and its
frames stop. Scenarios that use room features Janus lacks (manual consume, pins, invites) are refused
before anything runs, with exit 2 and one line naming the file, line and field; so are `invite` and
`pubsub` with a janus:// server. Janus runs as in test_janus.py: needs scripts/interop.sh's namespace.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness import decode_errors, probe_frames, understudy_bin
from janus_support import ROOM, JanusServer, in_private_namespace, janus_binary

pytestmark = pytest.mark.skipif(
    janus_binary() is None, reason="janus is not installed (scripts/install-deps.sh installs it)")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_janus_scenario_example_passes(understudy: str, tmp_path: Path) -> None:
    if not in_private_namespace():
        pytest.skip("adds a veth pair for Janus, so it runs only in scripts/interop.sh's network namespace")
    folder = tmp_path / "janus"
    folder.mkdir()
    server = JanusServer(folder)
    out = tmp_path / "out"
    try:
        server.start()
        done = subprocess.run(
            [understudy_bin(), "scenario", str(EXAMPLES / "janus-stage.json"),
             "--server", f"janus://127.0.0.1:{server.port}/{ROOM}", "--out", str(out)],
            capture_output=True, text=True, timeout=240)
    finally:
        server.stop()
    detail = f"{done.stdout}\n{done.stderr[:6000]}\n...\n{done.stderr[-3000:]}\n--- janus log ---\n{server.log()}"
    assert done.returncode == 0, detail
    assert "scenario 'Janus VideoRoom" in done.stdout and ": ok (" in done.stdout, detail
    recordings = sorted((out / "viewer").glob("*.webm"))
    assert [p.name.split("-")[0] for p in recordings] == ["alice", "bob"], detail
    for path in recordings:
        counts = probe_frames(path)
        assert counts.get("vp8", 0) >= 30 and counts.get("opus", 0) >= 50, (path, counts)
        assert decode_errors(path) == "", path


def test_scenario_with_room_only_features_is_refused(understudy: str) -> None:
    # seed003 consumes manually, pins and removes: none of it exists in a VideoRoom.
    done = subprocess.run(
        [understudy, "scenario", str(EXAMPLES / "seed003-consume.json"), "--server", "janus://127.0.0.1:9/1234"],
        capture_output=True, text=True, timeout=30)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "seed003-consume.json:" in lines[0] and "no Janus counterpart" in lines[0], lines[0]


@pytest.mark.parametrize("command", [
    ["invite", "--room", "r", "--participant", "p", "--secret", "s"],
    ["pubsub", "publish", "--room", "r", "--topic", "t", "--message", "m", "--secret", "s"],
])
def test_pubsub_commands_refuse_janus(understudy: str, command: list[str]) -> None:
    done = subprocess.run([understudy, *command[:2], "--server", "janus://127.0.0.1:9/1234", *command[2:]]
                          if command[0] == "pubsub" else
                          [understudy, command[0], "--server", "janus://127.0.0.1:9/1234", *command[1:]],
                          capture_output=True, text=True, timeout=30)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "janus://" in lines[0], done.stderr
