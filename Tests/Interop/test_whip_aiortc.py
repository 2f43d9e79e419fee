"""understudy publishes over WHIP to aiortc, which decodes the media."""

from __future__ import annotations

from harness import run_understudy

TOKEN = "interop-token"
DURATION = 6


def test_whip_publishes_decodable_media(understudy, endpoint_factory):
    endpoint = endpoint_factory(token=TOKEN)
    result = run_understudy(
        ["whip", f"{endpoint.base_url}/whip", "--token", TOKEN,
         "--video", "testsrc", "--audio", "tone", "--duration", str(DURATION)],
        timeout=DURATION + 30,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stderr}\n{endpoint.log()[-2000:]}"

    stats = endpoint.stop()
    sessions = [s for s in stats["sessions"] if s["kind"] == "whip"]
    assert len(sessions) == 1, stats
    session = sessions[0]
    print(f"endpoint session: {session}")
    assert session["video_frames_decoded"] >= 100, session
    assert session["audio_frames_decoded"] >= 100, session
    assert session["deleted"], "understudy did not DELETE its WHIP resource"
    assert stats["deleted"] == 1
