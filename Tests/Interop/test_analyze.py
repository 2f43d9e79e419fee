"""`understudy analyze` on real recordings: a host publishes the synthetic media through `understudy
serve`, two agents record it at the same time, one of them behind a link with long dropouts
(`--impair`). On loopback the clean recording has every frame and a high PSNR; the impaired one
reports worse numbers (drops, freezes or lower PSNR). Bad files fail with one line and exit 1.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from harness import free_port, kill_process, run_understudy
from test_agent_stage import AgentProcess, join_args, start_server, wait_for_frames

ROOM = "analyze"
# Dropouts of ~330 datagrams (about 3 s of media) every ~500: longer than NACK repair waits (1 s), so
# frames are lost for good. lossy-wifi's shorter ones are repaired: its frames come late, not missing,
# and a recording (timed by RTP timestamps) shows no trace of lateness.
IMPAIR = '{"down": {"burst": {"p": 0.002, "r": 0.003}}, "seed": 3}'


def analyze(path: Path) -> dict:
    result = run_understudy(["analyze", str(path), "--json"], timeout=300)
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    return json.loads(result.stdout)


def summary(report: dict) -> str:
    v = report["video"]
    psnr = v.get("psnr") or {}
    return (f"frames {v['frames']} numbered {v['numbered']} dropped {v['dropped']} skipped {v['skipped']} repeated {v['repeated']} "
            f"freezes {len(v['freezes'])} ({sum(f['durationMs'] for f in v['freezes']):.0f} ms) "
            f"psnr mean {psnr.get('mean', 0):.2f} p5 {psnr.get('p5', 0):.2f} sizes {v['sizes']} "
            f"av {report.get('avOffsetMs')}")


def test_clean_and_impaired_recordings_analysed(understudy, tmp_path):
    port = free_port()
    server = start_server(port, udp_low=44000)
    agents: list[AgentProcess] = []
    try:
        host = AgentProcess("host", join_args(port, ROOM, "host", "--mode", "SEND_AND_RECV", "--consume", "none"),
                            tmp_path)
        agents.append(host)
        host.wait_for(rf"joined room {ROOM} as host \(SEND_AND_RECV\)")
        clean_dir, lossy_dir = tmp_path / "clean", tmp_path / "lossy"
        metrics_port = free_port()
        clean = AgentProcess("clean", join_args(port, ROOM, "clean", "--consume", "all", "--record", str(clean_dir),
                                                "--analyze", "--metrics", f"127.0.0.1:{metrics_port}"), tmp_path)
        lossy = AgentProcess("lossy", join_args(port, ROOM, "lossy", "--consume", "all", "--record", str(lossy_dir),
                                                "--analyze", "--impair", IMPAIR), tmp_path)
        agents += [clean, lossy]
        # 12 s of video in the clean file (the lossy one gets whatever its link let through meanwhile).
        wait_for_frames(clean_dir / "host.webm", {"vp8": 360, "opus": 300}, timeout=120)
        wait_for_frames(lossy_dir / "host.webm", {"vp8": 120}, timeout=120)
        # The live checks (--analyze) on /metrics, per consumed webcam.
        deadline = time.monotonic() + 30
        metrics = ""
        while time.monotonic() < deadline and 'understudy_agent_analyzed_psnr_db{participant="host",stat="mean"}' not in metrics:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
                metrics = r.read().decode()
            time.sleep(1)
        psnr_line = [line for line in metrics.splitlines()
                     if line.startswith('understudy_agent_analyzed_psnr_db{participant="host",stat="mean"}')]
        assert psnr_line and float(psnr_line[0].split()[-1]) >= 30, metrics[-3000:]
        assert clean.terminate() == 0, clean.log()[-2000:]
        assert lossy.terminate() == 0, lossy.log()[-2000:]

        good = analyze(clean_dir / "host.webm")
        bad = analyze(lossy_dir / "host.webm")
        print(f"clean: {summary(good)}\nlossy: {summary(bad)}")
        g, b = good["video"], bad["video"]
        assert g["numbered"] >= 0.95 * g["frames"], summary(good)
        assert g["dropped"] == 0 and g["freezes"] == [], summary(good)
        assert g["psnr"]["mean"] >= 30, summary(good)
        assert good["avOffsetMs"] is not None and abs(good["avOffsetMs"]) < 80, summary(good)
        # The same checks, live in the agents (manifest "analysis").
        live_good = json.loads((clean_dir / "manifest.json").read_text())["analysis"][0]
        live_bad = json.loads((lossy_dir / "manifest.json").read_text())["analysis"][0]
        print(f"live clean: {summary({'video': live_good['video']})}\nlive lossy: {summary({'video': live_bad['video']})}")
        assert live_good["participantId"] == "host" and live_good["video"]["numbered"] > 200, live_good
        assert live_good["video"]["psnr"]["mean"] >= 30 and live_good["video"]["dropped"] == 0, live_good
        # Live, the lossy link's late frames are frozen pictures, longer than any the clean agent saw.
        assert live_bad["framesNotAnalysed"] == 0, live_bad

        def frozen(v: dict) -> float:
            return sum(f["durationMs"] for f in v["freezes"])
        assert frozen(live_bad["video"]) > frozen(live_good["video"]), (live_good, live_bad)

        # The clean run had no drop and no freeze: the lossy link must show in one of them, or in PSNR.
        assert b["dropped"] + len(b["freezes"]) + b["undecodable"] > 0 or b["psnr"]["p5"] < g["psnr"]["p5"] - 3, \
            f"clean {summary(good)}\nlossy {summary(bad)}"
    finally:
        for a in agents:
            a.stop()
        kill_process(server)


def test_bad_files_fail_with_one_line(understudy, tmp_path):
    garbage = tmp_path / "garbage.webm"
    garbage.write_bytes(b"not a recording at all")
    for args, code in ((["analyze", str(garbage)], 1), (["analyze", str(tmp_path / "missing.webm")], 1),
                       (["analyze"], 2), (["analyze", str(garbage), "--fps", "0"], 2)):
        result = run_understudy(args, timeout=60)
        assert result.returncode == code, (args, result.returncode, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("understudy: analyze: "), result.stderr
