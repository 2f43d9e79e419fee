"""`understudy bench --quick`: the benchmark harness runs end to end and reports every figure.

This checks that each benchmark runs and that the report has every section and every
summary row with a number; it does not judge the figures (quick mode shrinks the
workloads, and this machine is shared).
"""

from __future__ import annotations

import re
import sys

from harness import REPO, run_understudy

SUMMARY_ROWS = [
    "full receive path per packet ÷ bare libsrtp unprotect",
    "subscribed tracks per core at < 0.5 % loss",
    "RSS per subscriber bot",
    "received-quality metrics cost: load tracks per core, on ÷ off",
    "RSS over a soak",
    "live stream: audience members per server core",
    "live stream: server memory per audience member",
    "live stream: server memory over a long stream (invites every 10 s)",
    "recording CPU, aiortc MediaRecorder ÷ ours, same stream",
    "concurrent 1 Mbit/s streams recorded per core (packet loop CPU)",
    "recording CPU per stream, H.264 ÷ VP8 (same bitrate, same window)",
    "join() → onRoomJoined p50",
    "join() → first recorded keyframe p50",
    "SFU forwarded packets/s per core (whole server process)",
    "bandwidth feedback cost: SFU packets/s per core, on ÷ off",
    "SFU loop thread alone: forwarded packets/s per core",
    "loopback send floor: datagrams/s per core with no SFU work",
    "cluster: join through a non-owner node, extra p50",
    "cluster: rooms per node as rooms are created",
]

SECTIONS = [
    "## Summary",
    "## Receive path per packet ÷ bare libsrtp unprotect",
    "## Load mode",
    "## What the received-quality metrics cost the load generator",
    "## Live stream",
    "### Live stream held for",
    "## Recording CPU: aiortc MediaRecorder ÷ ours, same stream",
    "## Concurrent recording: 1 Mbit/s streams per core",
    "## Recording cost per codec: H.264 ÷ VP8",
    "## join() → onRoomJoined; first recorded keyframe",
    "## SFU forwarded packets per second per core (whole server process)",
    "Where the CPU went (per forwarded packet; share of the process)",
    "## What bandwidth feedback costs (transport-cc, estimator, allocator)",
    "## Loopback send floor: datagrams per second per core with no SFU work",
    "## SFU loop thread alone: forwarded packets per second per core",
    "## Cluster: joins through a non-owner node; room balance",
]

NUMBER = re.compile(r"\d+(\.\d+)?")


def test_bench_quick_reports_every_figure(understudy, tmp_path):
    out = tmp_path / "benchmarks.md"
    result = run_understudy(
        ["bench", "--quick", "--out", str(out)],
        # A hang guard, not a figure: about 3 minutes quiet, over 7 at load 11 (a CI run beside four builds).
        timeout=900,
        env={"UNDERSTUDY_BENCH_PYTHON": sys.executable},
        cwd=REPO,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    report = out.read_text()
    assert "Quick mode" in report
    for section in SECTIONS:
        assert section in report, f"missing section {section!r}\n{report}"

    rows = {}
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4:
            rows[cells[0]] = cells
    for metric in SUMMARY_ROWS:
        assert metric in rows, f"summary row {metric!r} missing\n{report}"
        measured = rows[metric][2]
        assert NUMBER.search(measured), f"{metric}: no number in {measured!r}"
        assert "nan" not in measured.lower(), f"{metric}: {measured!r}"

    # The live row splits both processes' CPU per delivered packet into user and kernel time, and
    # prices the goal audience at the cost of the largest run that lost nothing.
    budget = re.search(
        r"Where the CPU goes.*?: (\d+): server ([\d.]+) \+ ([\d.]+), generator ([\d.]+) \+ ([\d.]+)", report)
    assert budget, f"no CPU budget line in the live row\n{report}"
    assert sum(float(budget.group(i)) for i in range(2, 6)) > 0, budget.group(0)

    # Progress lines go to stderr while the suite runs.
    assert "bench: [5/5]" in result.stderr, result.stderr[-2000:]
