"""A recording survives the ways a daemon stops: SIGTERM finishes the file (and releases the WHEP
resource), SIGKILL leaves a file that plays up to the kill."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from harness import decode_errors, probe_frames, understudy_bin

TOKEN = "interop-token"


def start_whep(endpoint, out):
    return subprocess.Popen(
        [understudy_bin(), "whep", f"{endpoint.base_url}/whep", "--token", TOKEN,
         "--record", str(out), "--duration", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def wait_for_recording(out, proc, seconds=20.0):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"understudy exited early: {proc.returncode}\n{proc.stderr.read()}")
        if out.exists() and out.stat().st_size > 50_000:
            return
        time.sleep(0.2)
    raise AssertionError("recording did not grow")


def has_cues(path) -> bool:
    # Matroska Cues element id 0x1C53BB6B: written only by a clean close.
    return bytes.fromhex("1C53BB6B") in path.read_bytes()


def test_sigterm_finishes_file_and_deletes_resource(understudy, endpoint_factory, tmp_path):
    endpoint = endpoint_factory(token=TOKEN)
    out = tmp_path / "term.webm"
    proc = start_whep(endpoint, out)
    try:
        wait_for_recording(out, proc)
        time.sleep(2)
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, f"exit {proc.returncode}: {err}"
    assert "whep done" in err, err
    frames = probe_frames(out)
    assert frames.get("vp8", 0) >= 60, frames
    assert frames.get("opus", 0) >= 100, frames
    assert decode_errors(out) == ""
    assert has_cues(out), "a SIGTERM-stopped recording must be finalized (Cues written)"
    stats = endpoint.stop()
    assert any(s["kind"] == "whep" and s["deleted"] for s in stats["sessions"]), stats


def test_sigkill_leaves_playable_file(understudy, endpoint_factory, tmp_path):
    endpoint = endpoint_factory(token=TOKEN)
    out = tmp_path / "kill.webm"
    proc = start_whep(endpoint, out)
    try:
        wait_for_recording(out, proc)
        time.sleep(2.5)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    frames = probe_frames(out)
    assert frames.get("vp8", 0) >= 60, frames
    assert frames.get("opus", 0) >= 100, frames
    assert decode_errors(out) == "", "a killed recording must still decode cleanly up to the kill"
