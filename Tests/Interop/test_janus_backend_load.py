"""`understudy load --server janus://HOST:PORT/ROOM`: 2 publishers and 20 subscribers in a Janus VideoRoom.

Every subscriber receives the audio and video of both publishers (80 tracks) through Janus (Debian's
`janus` 1.1.2) and the report shows no loss. Flags for room features Janus lacks are refused.
Janus runs as in test_janus.py (a veth pair holding 127.0.0.2): needs scripts/interop.sh's namespace.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from harness import understudy_bin
from janus_support import ROOM, JanusServer, in_private_namespace, janus_binary

pytestmark = pytest.mark.skipif(
    janus_binary() is None, reason="janus is not installed (scripts/install-deps.sh installs it)")


def test_load_two_publishers_twenty_subscribers_through_janus(understudy: str, tmp_path: Path) -> None:
    if not in_private_namespace():
        pytest.skip("adds a veth pair for Janus, so it runs only in scripts/interop.sh's network namespace")
    folder = tmp_path / "janus"
    folder.mkdir()
    server = JanusServer(folder)
    report_path = tmp_path / "load.json"
    try:
        server.start()
        done = subprocess.run(
            [understudy_bin(), "load", "--server", f"janus://127.0.0.1:{server.port}/{ROOM}",
             "--publishers", "2", "--subscribers", "20", "--duration", "10s", "--join-rate", "20/s",
             "--json", str(report_path)],
            capture_output=True, text=True, timeout=240)
    finally:
        server.stop()
    detail = f"{done.stdout}\n{done.stderr[-3000:]}\n--- janus log ---\n{server.log()}"
    assert done.returncode == 0, detail
    print(done.stdout)
    report = json.loads(report_path.read_text())
    assert report["server"] == f"janus://127.0.0.1:{server.port}/{ROOM}", report["server"]
    assert report["joinedParticipants"] == 22 and report["joinFailures"] == 0, detail
    # Every subscriber receives both kinds of both publishers.
    assert report["subscribedTracks"] == 80 and report["announcedTracks"] == 80, detail
    assert report["videoTracks"] == 40 and report["audioTracks"] == 40, detail
    assert {t["publisher"] for t in report["tracks"]} == {"load-pub-0", "load-pub-1"}, detail
    for track in report["tracks"]:
        assert track["packets"] > 50, track
    assert report["packetsLost"] == 0 and report["lossPercent"] == 0, detail
    # The progress lines show the media rate while it flows.
    rates = [float(m) for m in re.findall(r"tracks 80 +([0-9.]+) Mbps", done.stderr)]
    assert rates and max(rates) > 1, done.stderr[-2000:]
    assert report["timeToFirstPacketMs"]["count"] == 80, detail
    assert len(report["publishers"]) == 4 and all(p["packetsSent"] > 0 for p in report["publishers"]), detail


@pytest.mark.parametrize("extra, option", [
    (["--room", "demo"], "--room"),
    (["--secret", "s"], "--secret"),
    (["--layout", "speaker"], "--layout"),
    (["--invite-every", "5s"], "--invite-every"),
    (["--rooms", "2"], "--rooms"),
    (["--workers", "redis://127.0.0.1:6379"], "--workers"),
])
def test_load_refuses_room_features_janus_lacks(understudy: str, extra: list[str], option: str) -> None:
    done = subprocess.run([understudy, "load", "--server", "janus://127.0.0.1:9/1234", *extra],
                          capture_output=True, text=True, timeout=30)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert option in lines[0] and "janus" in lines[0], lines[0]


def test_load_without_janus_is_unreachable(understudy: str) -> None:
    done = subprocess.run([understudy, "load", "--server", "janus://127.0.0.1:9/1234", "--publishers", "1",
                           "--subscribers", "1", "--duration", "2s", "--quiet"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "unreachable" in done.stderr, done.stderr
