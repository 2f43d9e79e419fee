"""`understudy load` through the CLI against `understudy serve`: media flows with no loss, the
JSON report carries the documented fields, and bad flags, a wrong secret and an unreachable
server each exit non-zero with one clear line."""

from __future__ import annotations

import json
import subprocess

import pytest

from harness import free_port, kill_process, run_understudy, start_room_server

SECRET = "interop-load-secret"


def start_server(port: int, udp_low: int) -> subprocess.Popen:
    return start_room_server(port, udp_low, SECRET)


def test_load_run_reports_media_and_json(understudy, tmp_path):
    port = free_port()
    server = start_server(port, 42000)
    try:
        report_path = tmp_path / "load.json"
        result = run_understudy(
            ["load", "--server", f"http://127.0.0.1:{port}", "--room", "interop-load", "--secret", SECRET,
             "--publishers", "2", "--subscribers", "8", "--duration", "10s", "--join-rate", "20/s",
             "--invite-every", "4s", "--json", str(report_path)],
            timeout=120,
        )
        assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
        assert "joined" in result.stderr  # the live progress line
        assert "e2e latency" in result.stdout
        report = json.loads(report_path.read_text())
        assert report["joinedParticipants"] == 10
        assert report["subscribedTracks"] >= 32
        assert report["lossPercent"] < 1.0
        assert report["latencyMs"]["count"] > 0
        assert report["joinLatencyMs"]["p50"] is not None
        assert report["modeChanges"]["promotions"] >= 1
        for track in report["tracks"]:
            for field in ("packets", "bitrateKbps", "lossPercent", "nacksSent", "plisSent",
                          "timeToFirstPacketMs", "latencyAvgMs"):
                assert field in track or track.get("packets", 0) == 0, (field, track)
    finally:
        kill_process(server)


def test_bad_flags_exit_2_with_one_line(understudy):
    result = run_understudy(["load", "--server", "http://127.0.0.1:1", "--room", "r", "--secret", "s",
                             "--layout", "7x3"], timeout=30)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--layout" in lines[0], result.stderr


@pytest.mark.parametrize("value", ["0", "-5s", "soon", "0ms"])
def test_a_bad_request_timeout_exits_2_with_one_line(understudy, value):
    result = run_understudy(["load", "--server", "http://127.0.0.1:1", "--room", "r", "--secret", "s",
                             "--request-timeout", value], timeout=30)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad value for --request-timeout" in lines[0], result.stderr


@pytest.mark.parametrize("flag,value", [("--reconnect", "0"), ("--reconnect", "-5s"), ("--reconnect", "soon"),
                                        ("--reconnect", "90000s"), ("--expect-participants", "0"),
                                        ("--expect-participants", "many")])
def test_a_bad_reconnect_window_or_participant_count_exits_2_with_one_line(understudy, flag, value):
    result = run_understudy(["load", "--server", "http://127.0.0.1:1", "--room", "r", "--secret", "s",
                             flag, value], timeout=30)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], result.stderr


def test_wrong_secret_and_unreachable_server_fail_with_one_line(understudy):
    port = free_port()
    server = start_server(port, 42200)
    try:
        refused = run_understudy(["load", "--server", f"http://127.0.0.1:{port}", "--room", "r",
                                  "--secret", "wrong", "--duration", "5s", "--quiet"], timeout=60)
        assert refused.returncode == 4, refused.stderr
        assert refused.stderr.strip().count("\n") == 0 and "4002" in refused.stderr
    finally:
        kill_process(server)
    unreachable = run_understudy(["load", "--server", f"http://127.0.0.1:{free_port()}", "--room", "r",
                                  "--secret", "s", "--duration", "5s", "--quiet"], timeout=60)
    assert unreachable.returncode == 3, unreachable.stderr
    assert unreachable.stderr.strip().count("\n") == 0 and "unreachable" in unreachable.stderr
