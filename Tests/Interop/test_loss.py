"""WHEP under 5 % deterministic packet loss (understudy's impairment hook):
NACK/RTX recovers, and the recording still decodes cleanly."""

from __future__ import annotations

from harness import decode_errors, timestamp_problems, probe_frames, run_understudy, summary_counters

TOKEN = "interop-token"
DURATION = 6


def test_whep_under_loss_records_clean_file(understudy, endpoint_factory, tmp_path):
    endpoint = endpoint_factory(token=TOKEN)
    out = tmp_path / "lossy.webm"
    result = run_understudy(
        ["whep", f"{endpoint.base_url}/whep", "--token", TOKEN,
         "--record", str(out), "--duration", str(DURATION)],
        timeout=DURATION + 30,
        env={"UNDERSTUDY_IMPAIR_DROP": "0.05", "UNDERSTUDY_IMPAIR_SEED": "7"},
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stderr}"

    stats = endpoint.stop()
    session = [s for s in stats["sessions"] if s["kind"] == "whep"][0]
    sent_video = session["video_frames_sent"]

    assert decode_errors(out) == ""
    assert timestamp_problems(out) == []
    frames = probe_frames(out)
    print(f"endpoint sent {sent_video} video frames; recorded {frames}; understudy stderr tail: {result.stderr[-300:]}")
    assert frames.get("vp8", 0) >= 0.8 * sent_video, f"recorded {frames}, endpoint sent {sent_video}"
    assert frames.get("opus", 0) > 0, frames

    counters = summary_counters(result.stderr)
    assert counters.get("nack_sent", 0) > 0, f"no NACKs in the summary line: {result.stderr[-500:]}"
    assert "pli_sent" in counters, counters
    assert counters.get("retransmissions_received", 0) > 0, counters
