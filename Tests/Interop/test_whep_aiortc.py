"""understudy plays WHEP against aiortc and records a WebM that ffmpeg accepts."""

from __future__ import annotations

from harness import decode_errors, timestamp_problems, free_port, probe_frames, run_understudy, tone_power_ratio, video_size

TOKEN = "interop-token"
DURATION = 6


def session_of(stats: dict, kind: str) -> dict:
    sessions = [s for s in stats["sessions"] if s["kind"] == kind]
    assert len(sessions) == 1, f"expected one {kind} session, endpoint saw {stats}"
    return sessions[0]


def test_whep_records_playable_webm(understudy, endpoint_factory, tmp_path):
    endpoint = endpoint_factory(token=TOKEN)
    out = tmp_path / "out.webm"
    result = run_understudy(
        ["whep", f"{endpoint.base_url}/whep", "--token", TOKEN,
         "--record", str(out), "--duration", str(DURATION)],
        timeout=DURATION + 30,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stderr}\n{endpoint.log()[-2000:]}"

    session = session_of(endpoint.stop(), "whep")
    assert session["deleted"], "understudy did not DELETE its WHEP resource"
    sent_video = session["video_frames_sent"]
    assert sent_video >= 30 * (DURATION - 2), f"endpoint sent too few frames: {session}"

    assert out.exists() and out.stat().st_size > 0, "no recording written"
    frames = probe_frames(out)
    print(f"endpoint sent {sent_video} video frames; recorded {frames}; understudy stderr tail: {result.stderr[-300:]}")
    assert frames.get("vp8", 0) >= 0.8 * sent_video, f"recorded {frames}, endpoint sent {sent_video} video frames"
    assert frames.get("opus", 0) > 0, f"no Opus frames recorded: {frames}"
    assert decode_errors(out) == ""
    assert timestamp_problems(out) == []
    assert video_size(out) == (320, 240)
    # The endpoint sends a 440 Hz sine: it must be what the recording plays.
    assert tone_power_ratio(out, 440.0) > 100


def test_whep_bad_token_fails_with_one_line(understudy, endpoint_factory, tmp_path):
    endpoint = endpoint_factory(token=TOKEN)
    out = tmp_path / "out.webm"
    result = run_understudy(
        ["whep", f"{endpoint.base_url}/whep", "--token", "wrong-token",
         "--record", str(out), "--duration", "3"],
        timeout=20,
    )
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line of stderr, got:\n{result.stderr}"
    assert "401" in lines[0] or "unauthor" in lines[0].lower(), lines[0]
    assert endpoint.stats()["rejected"] >= 1


def test_whep_unreachable_url_fails_fast(understudy, tmp_path):
    port = free_port()  # nothing listens there
    out = tmp_path / "out.webm"
    result = run_understudy(
        ["whep", f"http://127.0.0.1:{port}/whep", "--token", TOKEN,
         "--record", str(out), "--duration", "3"],
        timeout=20,
    )
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line of stderr, got:\n{result.stderr}"
