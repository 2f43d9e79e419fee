"""Pieces shared by the aiortc reference implementations."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiortc_endpoint import Counters, PatternVideoTrack, ToneAudioTrack, _preferred  # noqa: E402,F401
from loopback import use_loopback_only  # noqa: E402

use_loopback_only()
# Library logs would break the "one line of stderr on error" contract.
logging.basicConfig(level=logging.CRITICAL)


def add_sending_transceivers(pc, direction: str, counters: Counters) -> None:
    pc.addTransceiver(ToneAudioTrack(counters, Counters()), direction=direction).setCodecPreferences(_preferred("audio"))
    pc.addTransceiver(PatternVideoTrack(counters, Counters()), direction=direction).setCodecPreferences(_preferred("video"))
