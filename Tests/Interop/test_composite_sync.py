"""The composite's A/V offset (issue 37, goal "A/V offset within ±40 ms").

A host publishes the synthetic media (`understudy join --mode SEND_AND_RECV`: a test pattern with a
white flash frame every 2 s and a 1 kHz beep at the same media instants). An agent composites the
room (one tile, so the flash lights most of the canvas) into WebM, VP8 (analyze reads WebM and
Matroska with Annex B video; the timing is the compositor's whatever the codec) and the mixed Opus
audio. `understudy analyze` pairs the flashes with the beeps in that file; the median offset must be
within ±40 ms, as the demo measures it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness import free_port, run_understudy
from test_agent_stage import AgentProcess, join_args, start_server

ROOM = "compsync"


def test_composite_av_offset_within_40ms(understudy, tmp_path):
    port = free_port()
    server = start_server(port, udp_low=47700)
    processes: list[AgentProcess] = []
    out = tmp_path / "room.webm"
    try:
        host = AgentProcess("host", join_args(port, ROOM, "host", "--mode", "SEND_AND_RECV", "--consume", "none"),
                            tmp_path)
        processes.append(host)
        host.wait_for(rf"joined room {ROOM} as host \(SEND_AND_RECV\)")
        agent = AgentProcess("comp", join_args(
            port, ROOM, "comp", "--consume", "all", "--size", "640x360", "--composite-codec", "vp8",
            "--composite", str(out)), tmp_path)
        processes.append(agent)
        agent.wait_for(rf"joined room {ROOM} as comp")
        agent.wait_for(r"composite layout: host ")
        # About five flash/beep pairs after the first picture (a flash every 2 s).
        time.sleep(11)
        assert agent.terminate() == 0, agent.log()[-3000:]
        result = run_understudy(["analyze", str(out), "--json"], timeout=300)
        assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
        report = json.loads(result.stdout)
        print(f"composite analyze: offset {report.get('avOffsetMs')} ms, pairs {report['syncPairs']}, "
              f"flashes {report['video']['flashTimesMs']}, beeps {report['beepOnsetsMs']}")
        assert report["syncPairs"] >= 3, report
        assert abs(report["avOffsetMs"]) <= 40, report
    finally:
        for p in processes:
            p.stop()
        server.terminate()
        server.wait(timeout=30)
