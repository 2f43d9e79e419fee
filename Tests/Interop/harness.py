"""Shared plumbing for the interop suite: processes, ports, media judges.

Everything here has a timeout and cleans up in `finally`; a test that fails must
never leave a peer running behind it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
VENV_PYTHON = str(REPO / ".venv" / "bin" / "python")
PYTHON = VENV_PYTHON if os.path.exists(VENV_PYTHON) else sys.executable


def understudy_bin() -> str:
    return os.environ.get("UNDERSTUDY_BIN", str(REPO / ".build" / "debug" / "understudy"))


def interop_peer_bin() -> str:
    return os.environ.get(
        "INTEROP_PEER_BIN", str(REPO / ".build" / "debug" / "interop-peer")
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kill_process(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM, wait `grace` seconds, then SIGKILL; the whole process group."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=5)


# ---- aiortc endpoint ------------------------------------------------------


class AiortcEndpoint:
    """The WHIP/WHEP reference endpoint (aiortc_endpoint.py) as a child process."""

    def __init__(self, workdir: Path, token: str | None = None):
        self.workdir = Path(workdir)
        self.token = token
        self.stats_file = self.workdir / "endpoint-stats.json"
        self.log_file = self.workdir / "endpoint.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.final_stats: dict | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> "AiortcEndpoint":
        args = [PYTHON, str(HERE / "aiortc_endpoint.py"), "--port", "0",
                "--stats-file", str(self.stats_file)]
        if self.token:
            args += ["--token", self.token]
        log = open(self.log_file, "w")
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=log, text=True,
            cwd=str(HERE), start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        line = _readline_with_deadline(self.proc, deadline)
        try:
            self.port = int(json.loads(line)["listening"])
        except (ValueError, KeyError, TypeError):
            self.stop()
            raise RuntimeError(f"endpoint did not start: {line!r}\n{self.log()}")
        return self

    def stats(self, timeout: float = 5.0) -> dict:
        with urllib.request.urlopen(f"{self.base_url}/stats", timeout=timeout) as r:
            return json.loads(r.read())

    def stop(self) -> dict | None:
        if self.proc is not None:
            kill_process(self.proc, grace=10)
            self.proc = None
            if self.stats_file.exists():
                self.final_stats = json.loads(self.stats_file.read_text())
        return self.final_stats

    def log(self) -> str:
        return self.log_file.read_text() if self.log_file.exists() else ""

    def __enter__(self) -> "AiortcEndpoint":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()



def start_room_server(port: int, udp_low: int, secret: str, udp_count: int = 1,
                      timeout: float = 30, extra_args: list[str] | None = None,
                      preexec_fn=None) -> subprocess.Popen:
    """`understudy serve` on 127.0.0.1:port with `secret`, once /healthz answers 200.

    Media goes through one shared UDP port (`udp_low`, the server's default mode) unless
    `udp_count` > 1 asks for a range with one port per connection. Its output goes to a pipe,
    read only when it exits early (for the failure message)."""
    ports = (["--udp-port", str(udp_low)] if udp_count == 1
             else ["--udp-ports", f"{udp_low}-{udp_low + udp_count - 1}"])
    proc = subprocess.Popen(
        [understudy_bin(), "serve", "--listen", f"127.0.0.1:{port}", "--secret", secret, *ports,
         *(extra_args or [])],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        preexec_fn=preexec_fn,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"understudy serve exited {proc.returncode}: {proc.stdout.read()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    kill_process(proc)
    raise AssertionError(f"understudy serve did not become healthy within {timeout:.0f} s")


def _readline_with_deadline(proc: subprocess.Popen, deadline: float) -> str:
    """Reads one stdout line without blocking forever (select on the pipe)."""
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return proc.stdout.readline()
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            return proc.stdout.readline()
    return ""


# ---- understudy CLI ---------------------------------------------------------


def run_understudy(args: list[str], timeout: float, env: dict | None = None,
                   cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs the understudy CLI to completion (killed after `timeout`)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.Popen(
        [understudy_bin(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=full_env, cwd=str(cwd) if cwd else None, start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_process(proc, grace=3)
        out, err = proc.communicate()
        raise AssertionError(
            f"understudy {' '.join(args)} did not exit within {timeout}s\n"
            f"stdout:\n{out}\nstderr:\n{err}"
        )
    finally:
        kill_process(proc, grace=1)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


COUNTER_RE = re.compile(r"\b([a-z_]+)=(\d+)\b")


def summary_counters(stderr: str) -> dict[str, int]:
    """`key=N` pairs of the last stderr line that has any (the final summary)."""
    for line in reversed(stderr.strip().splitlines()):
        found = COUNTER_RE.findall(line)
        if found:
            return {key: int(value) for key, value in found}
    return {}


# ---- media judges (ffprobe / ffmpeg) --------------------------------------


def probe_frames(path: Path | str, timeout: float = 60) -> dict[str, int]:
    """Codec name -> decoded frame count, as ffprobe -count_frames sees the file."""
    result = subprocess.run(
        ["ffprobe", "-v", "error", "-count_frames", "-show_entries",
         "stream=codec_name,nb_read_frames", "-of", "json", str(path)],
        capture_output=True, text=True, timeout=timeout,
    )
    if result.returncode != 0:
        raise AssertionError(f"ffprobe failed on {path}: {result.stderr.strip()}")
    counts: dict[str, int] = {}
    for stream in json.loads(result.stdout).get("streams", []):
        name = stream.get("codec_name", "?")
        try:
            frames = int(stream.get("nb_read_frames", 0))
        except ValueError:
            frames = 0
        counts[name] = counts.get(name, 0) + frames
    return counts


def decode_errors(path: Path | str, timeout: float = 60) -> str:
    """Whatever `ffmpeg -v error` prints while decoding the whole file ('' = clean)."""
    # -enc_time_base -1 keeps the input time base for the null output: otherwise ffmpeg
    # re-times a variable-frame-rate track (Chromium's camera) to its guessed CFR rate
    # and complains about its own rounding ("non monotonically increasing dts"),
    # which says nothing about the file. Timestamps are checked by `timestamp_problems`.
    result = subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-i", str(path), "-enc_time_base", "-1",
         "-f", "null", "-"],
        capture_output=True, text=True, timeout=timeout,
    )
    text = (result.stdout + result.stderr).strip()
    if result.returncode != 0 and not text:
        text = f"ffmpeg exited {result.returncode}"
    return text


@contextmanager
def running(proc: subprocess.Popen, grace: float = 5.0) -> Iterator[subprocess.Popen]:
    try:
        yield proc
    finally:
        kill_process(proc, grace)


# ---- interop-peer (JSON lines over stdin/stdout) ----------------------------


class InteropPeer:
    """Drives `interop-peer --role offer|answer ...` over its JSON-lines stdio contract.

    Offer role: it prints {"type":"offer"}; we send {"type":"answer"}.
    Answer role: we send {"type":"offer"}; it prints {"type":"answer"}.
    Then it prints {"type":"stats",...} lines and finally {"type":"done","ok":true}.
    """

    def __init__(self, role: str, workdir: Path, record: Path | None = None,
                 duration: float = 8, video: str = "testsrc", audio: str = "tone",
                 binary: str | None = None):
        self.args = [binary or interop_peer_bin(), "--role", role,
                     "--duration", str(duration), "--video", video, "--audio", audio]
        if record is not None:
            self.args += ["--record", str(record)]
        self.stderr_path = Path(workdir) / f"interop-peer-{role}.log"
        self.proc = None
        self.messages: list[dict] = []

    async def start(self) -> "InteropPeer":
        self._stderr = open(self.stderr_path, "w")
        self.proc = await asyncio.create_subprocess_exec(
            *self.args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=self._stderr, start_new_session=True, limit=1 << 22,
        )
        return self

    async def read(self, want_type: str, timeout: float = 20) -> dict:
        """Next message of `want_type`; other messages are kept in `messages`."""
        assert self.proc is not None and self.proc.stdout is not None
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError(f"interop-peer sent no {want_type!r} within {timeout}s\n{self.log()}")
            line = await asyncio.wait_for(self.proc.stdout.readline(), remaining)
            if not line:
                await self.wait(5)
                raise AssertionError(
                    f"interop-peer closed stdout (exit {self.proc.returncode}) "
                    f"before {want_type!r}\n{self.log()}")
            try:
                message = json.loads(line)
            except ValueError:
                raise AssertionError(f"interop-peer printed a non-JSON line: {line!r}")
            self.messages.append(message)
            if message.get("type") == want_type:
                return message

    async def send(self, message: dict) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        await self.proc.stdin.drain()

    async def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return await asyncio.wait_for(self.proc.wait(), timeout)

    async def finish(self, timeout: float) -> dict:
        """Waits for {"type":"done"} and the exit; returns the done message."""
        done = await self.read("done", timeout)
        code = await self.wait(10)
        done["exit_code"] = code
        return done

    def stats(self) -> list[dict]:
        return [m for m in self.messages if m.get("type") == "stats"]

    def log(self, chars: int = 3000) -> str:
        try:
            return self.stderr_path.read_text()[-chars:]
        except OSError:
            return ""

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                await asyncio.wait_for(self.proc.wait(), 5)
            except (ProcessLookupError, asyncio.TimeoutError):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                await self.proc.wait()
        if getattr(self, "_stderr", None) is not None:
            self._stderr.close()
            self._stderr = None


def timestamp_problems(path: Path | str, timeout: float = 60) -> list[str]:
    """Packets whose timestamp goes backwards (or repeats, for video) within a stream."""
    result = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "packet=stream_index,pts",
         "-show_entries", "stream=index,codec_type", "-of", "json", str(path)],
        capture_output=True, text=True, timeout=timeout,
    )
    data = json.loads(result.stdout or "{}")
    kinds = {s.get("index"): s.get("codec_type") for s in data.get("streams", [])}
    last: dict[int, int] = {}
    problems = []
    for number, packet in enumerate(data.get("packets", [])):
        stream, pts = packet.get("stream_index"), packet.get("pts")
        if pts is None:
            problems.append(f"packet {number} of stream {stream} has no pts")
            continue
        previous = last.get(stream)
        if previous is not None and (pts < previous or (pts == previous and kinds.get(stream) == "video")):
            problems.append(f"stream {stream} ({kinds.get(stream)}): pts {pts} after {previous}")
        last[stream] = pts
    return problems


def video_size(path: Path | str, timeout: float = 30) -> tuple[int, int]:
    """(width, height) of the first video stream."""
    result = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
         "stream=width,height", "-of", "json", str(path)],
        capture_output=True, text=True, timeout=timeout,
    )
    streams = json.loads(result.stdout or "{}").get("streams", [])
    if not streams:
        return (0, 0)
    return (int(streams[0].get("width", 0)), int(streams[0].get("height", 0)))


def tone_power_ratio(path: Path | str, frequency: float, seconds: float = 2.0,
                     timeout: float = 30) -> float:
    """How much stronger `frequency` is than off-tone probes in the decoded audio.

    Decodes the middle of the file's audio to 48 kHz mono and runs the Goertzel
    filter at `frequency` and at a few frequencies well away from it.
    """
    result = subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-i", str(path), "-vn", "-ac", "1",
         "-ar", "48000", "-f", "s16le", "-"],
        capture_output=True, timeout=timeout,
    )
    raw = result.stdout
    count = len(raw) // 2
    if count < 4800:
        return 0.0
    import array

    samples = array.array("h")
    samples.frombytes(raw[: count * 2])
    if sys.byteorder != "little":
        samples.byteswap()
    take = min(count, int(48000 * seconds))
    start = (count - take) // 2
    window = samples[start : start + take]

    def goertzel(freq: float) -> float:
        import math

        coefficient = 2 * math.cos(2 * math.pi * freq / 48000)
        s_prev = s_prev2 = 0.0
        for x in window:
            s = x + coefficient * s_prev - s_prev2
            s_prev2, s_prev = s_prev, s
        return s_prev2 ** 2 + s_prev ** 2 - coefficient * s_prev * s_prev2

    target = goertzel(frequency)
    off = max(goertzel(f) for f in (frequency * 0.5, frequency * 1.7, 1000.0, 3000.0))
    return target / off if off > 0 else float("inf") if target > 0 else 0.0


def video_frame_sizes(path: Path | str, timeout: float = 60) -> set[tuple[int, int]]:
    """Every distinct (width, height) of the decoded frames of a file's first video stream (or of
    an image)."""
    result = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=width,height",
         "-of", "csv=p=0", str(path)],
        capture_output=True, text=True, timeout=timeout,
    )
    if result.returncode != 0:
        raise AssertionError(f"ffprobe failed on {path}: {result.stderr.strip()}")
    sizes = set()
    for line in result.stdout.split():
        w, _, h = line.partition(",")
        if w.isdigit() and h.isdigit():
            sizes.add((int(w), int(h)))
    return sizes


def check_snapshot(record: Path, participant: str, recording: Path) -> tuple[int, int]:
    """The agent's `--snapshot-every` picture of `participant` (captureImage through the SDK) is a
    JPEG of a size the recorded stream has; returns that size."""
    jpeg = record / f"{participant}.jpg"
    assert jpeg.exists(), sorted(p.name for p in record.iterdir())
    codec = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_name", "-of", "csv=p=0",
                            str(jpeg)], capture_output=True, text=True, timeout=30).stdout.strip()
    assert codec == "mjpeg", codec
    (size,) = video_frame_sizes(jpeg)
    recorded = video_frame_sizes(recording)
    assert size in recorded, (size, recorded)
    return size
