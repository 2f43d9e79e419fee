"""pytest setup for the interop suite (each test file runs in its own netns)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import AiortcEndpoint, interop_peer_bin, understudy_bin  # noqa: E402
from loopback import use_loopback_only  # noqa: E402

use_loopback_only()


def _terminate(signum, frame):
    # `timeout` in scripts/interop.sh sends SIGTERM: turn it into an exception so that
    # fixtures and `finally` blocks still stop Chromium and the peers.
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _terminate)


def _require_binary(path: str, what: str) -> str:
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"{what} binary not found at {path} (build it with `swift build`)")
    return path


@pytest.fixture
def understudy() -> str:
    return _require_binary(understudy_bin(), "understudy")


@pytest.fixture
def interop_peer() -> str:
    return _require_binary(interop_peer_bin(), "interop-peer")


@pytest.fixture
def endpoint_factory(tmp_path: Path):
    """Starts aiortc endpoints on demand; all are stopped when the test ends."""
    started: list[AiortcEndpoint] = []

    def start(token: str | None = None) -> AiortcEndpoint:
        workdir = tmp_path / f"endpoint{len(started)}"
        workdir.mkdir()
        endpoint = AiortcEndpoint(workdir, token=token)
        started.append(endpoint)
        return endpoint.start()

    yield start
    for endpoint in started:
        endpoint.stop()
