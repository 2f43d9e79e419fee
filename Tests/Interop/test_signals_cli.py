"""SIGTERM ends the long-running CLI commands cleanly: `pubsub subscribe` leaves the room and exits 0,
`serve` shuts down and exits 0. The signal wakes each command's wait itself (issue 16), so the
test waits on the events (a printed message, the exit), never on a fixed delay."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from harness import _readline_with_deadline, free_port, kill_process, run_understudy, start_room_server, understudy_bin

SECRET = "signals-secret"


def test_sigterm_ends_pubsub_subscribe_and_serve(understudy):
    port = free_port()
    server = start_room_server(port, free_port(), SECRET)
    url = f"http://127.0.0.1:{port}"
    subscriber = subprocess.Popen(
        [understudy_bin(), "pubsub", "subscribe", "--server", url, "--room", "sig", "--topic", "t",
         "--secret", SECRET],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        # The subscriber is in the room once a published message reaches it: publish until it does.
        deadline = time.monotonic() + 60
        line = ""
        while "hello" not in line and time.monotonic() < deadline:
            sent = run_understudy(["pubsub", "publish", "--server", url, "--room", "sig", "--topic", "t",
                                   "--message", "hello", "--secret", SECRET], timeout=60)
            assert sent.returncode == 0, sent.stderr
            line = _readline_with_deadline(subscriber, min(deadline, time.monotonic() + 5))
        assert "hello" in line, f"the subscriber printed {line!r}"
        os.kill(subscriber.pid, signal.SIGTERM)
        _, err = subscriber.communicate(timeout=30)
        assert subscriber.returncode == 0, f"subscribe exited {subscriber.returncode}: {err}"

        os.kill(server.pid, signal.SIGTERM)
        out, _ = server.communicate(timeout=30)
        assert server.returncode == 0, f"serve exited {server.returncode}: {out}"
        assert "serve: shutting down" in out, out
    finally:
        kill_process(subscriber)
        kill_process(server)
