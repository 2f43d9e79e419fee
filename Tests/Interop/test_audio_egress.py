"""`understudy join --mix-audio FILE --transcribe ws://…` end to end (issue 37 items 1 and 4).

Two publishers (`understudy join --mode SEND_AND_RECV --audio FILE`) send distinct tones, 440 Hz and
1500 Hz (Ogg Opus files made by ffmpeg). An agent consumes both, mixes them into one Ogg Opus file and
pushes each speaker's PCM to a WebSocket server run here. Checked: ffprobe reads the mix as Opus
lasting as long as the agent ran; the mix holds both tones; the server got `start` and `join` events
and PCM frames (the documented header) naming both participants, at 16 kHz, with each participant's
own tone in its frames; the manifest has the speaker timeline. A second agent killed with -9 leaves a
mix that ffmpeg decodes without errors.
"""

from __future__ import annotations

import array
import json
import math
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness import decode_errors, free_port, kill_process
from test_agent_stage import AgentProcess, join_args, manifest, start_server

TONES = {"low": 440.0, "high": 1500.0}


def make_tone(path: Path, hz: float) -> None:
    subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", f"sine=frequency={hz}:sample_rate=48000:duration=4",
         "-af", "volume=0.5", "-ac", "1", "-c:a", "libopus", "-b:a", "48k", str(path)],
        check=True, timeout=60)


def goertzel(samples, hz: float, rate: int) -> float:
    """Magnitude of `hz` in `samples` (normalised by their count)."""
    coefficient = 2 * math.cos(2 * math.pi * hz / rate)
    s1 = s2 = 0.0
    for x in samples:
        s0 = x + coefficient * s1 - s2
        s2, s1 = s1, s0
    return math.sqrt(max(0.0, s1 * s1 + s2 * s2 - coefficient * s1 * s2)) / max(1, len(samples))


def decode_mono(path: Path, start: float, seconds: float) -> array.array:
    raw = subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-ss", str(start), "-t", str(seconds), "-i", str(path), "-ac", "1",
         "-ar", "48000", "-f", "s16le", "-"], capture_output=True, timeout=60).stdout
    samples = array.array("h")
    samples.frombytes(raw[: len(raw) // 2 * 2])
    if sys.byteorder != "little":
        samples.byteswap()
    return samples


def probe(path: Path) -> dict:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "stream=codec_name,sample_rate,channels:format=duration,format_name",
         "-of", "json", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def parse_pcm(frame: bytes) -> tuple[str, int, int, bytes]:
    """The documented header (docs/protocol.md, "Per-speaker PCM"): magic, version, id, ms, rate, count."""
    assert frame[:4] == b"UPCM" and frame[4] == 1, frame[:8]
    n = frame[5]
    pid = frame[6:6 + n].decode()
    ms, rate, count = struct.unpack_from("<QII", frame, 6 + n)
    body = frame[22 + n:]
    assert len(body) == 2 * count
    return pid, ms, rate, body


class Transcriber:
    """A WebSocket server that keeps what the agent pushes."""

    def __init__(self, port: int):
        from websockets.sync.server import serve

        self.events: list[dict] = []
        self.frames: dict[str, list[tuple[int, int, bytes]]] = {}
        self.connections = 0
        self.lock = threading.Lock()
        self.server = serve(self.handle, "127.0.0.1", port, max_size=None)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def handle(self, ws) -> None:
        with self.lock:
            self.connections += 1
        assert ws.request.path == "/stt"
        for message in ws:
            with self.lock:
                if isinstance(message, str):
                    self.events.append(json.loads(message))
                else:
                    pid, ms, rate, body = parse_pcm(message)
                    self.frames.setdefault(pid, []).append((ms, rate, body))

    def close(self) -> None:
        self.server.shutdown()


def wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {timeout} s")


def test_mix_and_per_speaker_pcm(understudy, tmp_path):
    port = free_port()
    server = start_server(port, udp_low=46600)
    ws_port = free_port()
    stt = Transcriber(ws_port)
    agents: list[AgentProcess] = []
    try:
        for name, hz in TONES.items():
            make_tone(tmp_path / f"{name}.ogg", hz)
        mix = tmp_path / "out.ogg"
        killed_mix = tmp_path / "killed.ogg"
        record = tmp_path / "rec"
        launched = time.monotonic()
        agent = AgentProcess("agent", join_args(
            port, "mix", "agent", "--consume", "all", "--consume-kinds", "audio", "--mix-audio", str(mix),
            "--transcribe", f"ws://127.0.0.1:{ws_port}/stt", "--record", str(record)), tmp_path)
        killed = AgentProcess("killed", join_args(
            port, "mix", "killed", "--consume", "all", "--consume-kinds", "audio", "--mix-audio", str(killed_mix)),
            tmp_path)
        agents += [agent, killed]
        agent.wait_for(r"joined room mix as agent")
        started = time.monotonic()
        hosts = {}
        for name in TONES:
            host = AgentProcess(name, join_args(
                port, "mix", name, "--mode", "SEND_AND_RECV", "--consume", "none", "--video", "none",
                "--audio", str(tmp_path / f"{name}.ogg")), tmp_path)
            agents.append(host)
            hosts[name] = host
            host.wait_for(rf"joined room mix as {name} \(SEND_AND_RECV\)")
        wait(lambda: all(len(stt.frames.get(n, [])) >= 150 for n in TONES), 60, "3 s of PCM from both publishers")
        killed.kill9()
        # The high tone leaves: its leave event arrives, and from then on the mix holds the low tone only.
        assert hosts["high"].terminate() == 0
        wait(lambda: any(e.get("type") == "leave" and e["participantId"] == "high" for e in stt.events), 30,
             "leave event of high")
        time.sleep(2.5)
        assert agent.terminate() == 0, agent.log()[-3000:]
        wall = time.monotonic() - started
        total = time.monotonic() - launched
        wait(lambda: any(e.get("type") == "end" for e in stt.events), 30, "end event")

        # The mix: Opus in Ogg, as long as the agent ran (from its start to its stop).
        info = probe(mix)
        print(f"mix: {info}, agent ran ≥ {wall:.2f} s after joining")
        assert info["streams"][0]["codec_name"] == "opus" and info["format"]["format_name"] == "ogg"
        duration = float(info["format"]["duration"])
        m = manifest(record)["mixedAudio"]
        assert m["complete"] is True and m["path"] == str(mix), m
        assert abs(duration - m["durationSeconds"]) < 0.1, (duration, m)
        # It runs from the agent's start (before the join) to its stop: between the time from the join
        # to the exit and the time from the launch to the exit (silence where nobody spoke, no gaps).
        assert wall - 0.1 <= duration <= total + 0.1, (duration, wall, total)
        assert decode_errors(mix) == ""
        # Both tones are in the mix while both publish, well above a frequency neither sends.
        high_left = max(e["timestampMs"] for e in stt.events if e["type"] == "leave" and e["participantId"] == "high")
        samples = decode_mono(mix, high_left / 1000 - 2, 1.5)
        low, high, off = (goertzel(samples, f, 48000) for f in (440, 1500, 900))
        print(f"mix tones: 440 Hz {low:.1f}, 1500 Hz {high:.1f}, 900 Hz {off:.1f}")
        assert low > 20 * off and high > 20 * off, (low, high, off)
        # After the leave: the low tone only.
        after = decode_mono(mix, high_left / 1000 + 0.5, 1.5)
        low, high = goertzel(after, 440, 48000), goertzel(after, 1500, 48000)
        print(f"after high left: 440 Hz {low:.1f}, 1500 Hz {high:.1f}")
        assert low > 20 * high, (low, high)

        # The socket: start first, joins for both, PCM frames at 16 kHz with each one's own tone.
        types = [e["type"] for e in stt.events]
        assert types[0] == "start" and stt.events[0]["sampleRate"] == 16000, stt.events[:3]
        joined = {e["participantId"]: e.get("name") for e in stt.events if e["type"] == "join"}
        assert joined == {"low": "name-low", "high": "name-high"}, stt.events
        assert types[-1] == "end" and [e["participantId"] for e in stt.events if e["type"] == "leave"] == ["high", "low"]
        assert {e["participantId"] for e in stt.events if e["type"] == "speaking" and e["speaking"]} >= set(TONES)
        for name, hz in TONES.items():
            frames = stt.frames[name]
            assert all(rate == 16000 for _, rate, _ in frames)
            times = [ms for ms, _, _ in frames]
            assert times == sorted(times), f"{name}: timestamps go back"
            pcm = array.array("h")
            for _, _, body in frames[-100:]:
                pcm.frombytes(body)
            own, other = goertzel(pcm, hz, 16000), goertzel(pcm, TONES["high" if name == "low" else "low"], 16000)
            print(f"{name}: {len(frames)} frames, own tone {own:.1f}, other {other:.1f}")
            assert own > 20 * other, (name, own, other)
        # The speaker timeline in the manifest names both.
        turns = manifest(record)["speakers"]
        assert {t["participantId"] for t in turns} == set(TONES), turns
        assert all(0 <= t["start"] < t["end"] <= duration + 0.5 for t in turns), turns

        # kill -9: the pages written so far play.
        assert killed_mix.stat().st_size > 1000
        assert decode_errors(killed_mix) == ""
        assert float(probe(killed_mix)["format"]["duration"]) > 2
    finally:
        for a in agents:
            a.stop()
        stt.close()
        kill_process(server)


def test_bad_transcribe_url_is_one_clear_line(understudy, tmp_path):
    from harness import run_understudy

    for url, why in [("http://127.0.0.1:9/x", "is not a ws://HOST:PORT/PATH URL"),
                     ("wss://example.com/x", "wss:// is not supported"),
                     ("ws://:80/x", "is not a ws://HOST:PORT/PATH URL")]:
        result = run_understudy(["join", "--server", "http://127.0.0.1:9", "--room", "r", "--secret", "s",
                                 "--transcribe", url], timeout=30)
        assert result.returncode != 0
        line = result.stderr.strip().splitlines()[-1]
        assert line.startswith("understudy: join: bad value for --transcribe") and why in line, result.stderr
    result = run_understudy(["join", "--server", "http://127.0.0.1:9", "--room", "r", "--secret", "s",
                             "--mix-audio", str(tmp_path / "mix.wav")], timeout=30)
    assert result.returncode != 0 and "bad value for --mix-audio" in result.stderr, result.stderr
