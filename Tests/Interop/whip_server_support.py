"""Shared pieces of the tests of the room server's own WHIP/WHEP endpoints (test_whip_server*.py)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from harness import free_port, kill_process, probe_frames, run_understudy, start_room_server

SECRET = "interop-whip-server-secret"
ROOM = "whiproom"


def token(participant: str | None = None, permissions: str = "allow_join", room: str = ROOM) -> str:
    args = ["token", "--secret", SECRET, "--room", room, "--permissions", permissions]
    if participant:
        args += ["--participant", participant]
    result = run_understudy(args, timeout=20)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@contextmanager
def served(udp_low: int) -> Iterator[int]:
    """A fresh `understudy serve` with this file's secret; yields its HTTP port."""
    port = free_port()
    server = start_room_server(port, udp_low, SECRET)
    try:
        yield port
    finally:
        kill_process(server)


def http(method: str, url: str, body: bytes | None = None, headers: dict | None = None,
         timeout: float = 20) -> tuple[int, dict, bytes]:
    """One request; returns (status, headers, body) for every status, 4xx and 5xx included."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def room_participants(port: int, room: str = ROOM) -> list[str]:
    """Participant ids of `room` from the admin API ([] when the room is not open)."""
    status, _, body = http("GET", f"http://127.0.0.1:{port}/v1/rooms",
                           headers={"Authorization": f"Bearer {token(permissions='allow_mod')}"})
    assert status == 200, body
    for r in json.loads(body)["rooms"]:
        if r["roomId"] == room:
            return r["participants"]
    return []


def wait_participants(port: int, predicate, what: str, timeout: float = 30) -> list[str]:
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        seen = room_participants(port)
        if predicate(seen):
            return seen
        time.sleep(0.3)
    raise AssertionError(f"room never {what}: participants {seen}")


class Recorder:
    """`understudy join --consume all --record DIR`: an agent in the room that records everyone.

    `record_format` is the agent's `--record-format`: `webm` writes PARTICIPANT.webm (an H.264
    participant: .mkv), `mp4` writes PARTICIPANT.mp4.
    """

    def __init__(self, port: int, workdir: Path, pid: str = "recorder", record_format: str = "webm",
                 extra: tuple[str, ...] = ()):
        self.extension = record_format
        self.dir = workdir / f"{pid}-rec"
        self.log_path = workdir / f"{pid}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [*_understudy(), "join", "--server", f"http://127.0.0.1:{port}", "--room", ROOM,
                 "--secret", SECRET, "--id", pid, "--consume", "all", "--record", str(self.dir),
                 "--record-format", record_format, *extra],
                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_log(self, needle: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"recorder never logged {needle!r}:\n{self.log()[-3000:]}")

    def path(self, participant: str) -> Path:
        """The recording of `participant`."""
        return self.dir / f"{participant}.{self.extension}"

    def wait_frames(self, participant: str, kinds: dict[str, int], timeout: float = 60) -> dict[str, int]:
        """Waits until ffprobe decodes at least these frame counts from the growing recording."""
        path = self.path(participant)
        deadline = time.monotonic() + timeout
        counts: dict[str, int] = {}
        while time.monotonic() < deadline:
            if path.exists():
                try:
                    counts = probe_frames(path)
                except AssertionError:
                    counts = {}
                if all(counts.get(k, 0) >= n for k, n in kinds.items()):
                    return counts
            time.sleep(1)
        raise AssertionError(f"{path}: {counts}, wanted {kinds}\n{self.log()[-3000:]}")

    def stop(self) -> None:
        kill_process(self.proc, grace=10)


def _understudy() -> list[str]:
    from harness import understudy_bin

    return [understudy_bin()]
