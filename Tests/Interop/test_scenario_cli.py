"""`understudy scenario`: the examples pass through the CLI with --junit, failures exit 1,
malformed files exit 2 with FILE:LINE: field '…' errors, and the recordings decode cleanly."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from harness import decode_errors, probe_frames, run_understudy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_examples_pass_and_write_junit(understudy, tmp_path):
    junit = tmp_path / "junit.xml"
    out = tmp_path / "out"
    result = run_understudy(
        ["scenario", str(EXAMPLES / "seed000-stage-invite.json"), str(EXAMPLES / "seed003-consume.json"),
         "--junit", str(junit), "--out", str(out), "--quiet"],
        timeout=300,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 2
    assert root.get("failures") == "0" and root.get("skipped") == "0"
    assert int(root.get("tests")) == len(root.findall(".//testcase")) > 20
    # The host's recording of the invited viewer, and the viewer's manual consumption of the host.
    for path in (out / "0" / "host" / "viewer.webm", out / "1" / "viewer" / "host.webm"):
        frames = probe_frames(path)
        assert frames.get("vp8", 0) >= 30, (path, frames)
        assert frames.get("opus", 0) >= 25, (path, frames)
        assert decode_errors(path) == "", path


def test_failing_scenario_exits_1_with_junit_failure(understudy, tmp_path):
    scenario = tmp_path / "fail.json"
    scenario.write_text(
        """{
  "name": "nobody invites the viewer",
  "bots": [{"id": "host"}, {"id": "viewer", "mode": "RECV_ONLY"}],
  "steps": [
    {"action": "join", "bot": "host"},
    {"action": "join", "bot": "viewer"},
    {"expect": "onStage", "participant": "viewer", "timeout": 2}
  ]
}
""")
    junit = tmp_path / "junit.xml"
    result = run_understudy(["scenario", str(scenario), "--junit", str(junit), "--quiet"], timeout=120)
    assert result.returncode == 1, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    assert "FAIL steps[2] viewer on stage" in result.stdout
    cases = ET.parse(junit).getroot().findall(".//testcase")
    failures = [c for c in cases if c.find("failure") is not None]
    assert len(failures) == 1
    assert "steps[2] (line 7)" in failures[0].find("failure").get("message")


def test_malformed_file_exits_2_naming_file_line_and_field(understudy, tmp_path):
    scenario = tmp_path / "bad.json"
    scenario.write_text(
        """{
  "name": "typo",
  "bots": [{"id": "host"}],
  "steps": [
    {"action": "join", "bot": "host"},
    {"action": "jump", "bot": "host"}
  ]
}
""")
    result = run_understudy(["scenario", str(scenario)], timeout=60)
    assert result.returncode == 2
    assert f"{scenario}:6: field 'steps[1].action': unknown action 'jump' (expected one of join," in result.stderr

    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "name": "x",\n  "bots": [{"id": "a"}]\n  "steps": []\n}\n')
    result = run_understudy(["scenario", str(broken)], timeout=60)
    assert result.returncode == 2
    assert f"{broken}:4: invalid JSON:" in result.stderr


def _lossy_viewer_scenario(path: Path, impair: str | None) -> Path:
    """A host and a viewer; the viewer's media crosses `impair` (a preset) when given."""
    viewer = {"id": "viewer", "mode": "RECV_ONLY"}
    if impair:
        viewer["impair"] = impair
    path.write_text(json.dumps({
        "name": f"a viewer on {impair or 'a clean link'}",
        "timeout": 30,
        "bots": [{"id": "host", "mode": "SEND_AND_RECV"}, viewer],
        "steps": [
            {"action": "join", "bot": "host"},
            {"action": "join", "bot": "viewer"},
            {"expect": "frames", "bot": "viewer", "participant": "host", "kind": "video", "atLeast": 30},
            {"expect": "frames", "bot": "viewer", "participant": "host", "kind": "video", "more": 150},
        ],
        "expect": [
            {"expect": "freezes", "bot": "viewer", "participant": "host", "atMost": 0},
            {"expect": "quality", "metric": "fps", "bot": "viewer", "atLeast": 5},
        ],
    }, indent=2))
    return path


def test_lossy_wifi_viewer_fails_freezes_and_passes_without_it(understudy, tmp_path):
    """Issue 36's "Useful" goal: the `lossy-wifi` preset on one viewer (its dropouts last tens of
    datagrams each way, NACKs included) fails `expect freezes <= 0 for viewer`, and the JUnit
    failure names the metric and the viewer; the same scenario on a clean link passes."""
    lossy = _lossy_viewer_scenario(tmp_path / "lossy.json", "lossy-wifi")
    junit = tmp_path / "lossy.xml"
    result = run_understudy(["scenario", str(lossy), "--junit", str(junit), "--quiet"], timeout=180)
    assert result.returncode == 1, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    assert "FAIL expect[0] freezes ≤ 0 for video tracks from host at viewer" in result.stdout, result.stdout
    failures = [c.find("failure").get("message") for c in ET.parse(junit).getroot().findall(".//testcase")
                if c.find("failure") is not None]
    assert len(failures) == 1, failures
    assert "viewer: freezes " in failures[0] and "wants ≤ 0" in failures[0], failures[0]

    clean = _lossy_viewer_scenario(tmp_path / "clean.json", None)
    junit = tmp_path / "clean.xml"
    result = run_understudy(["scenario", str(clean), "--junit", str(junit), "--quiet"], timeout=180)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    assert ET.parse(junit).getroot().get("failures") == "0"


def test_bad_impairment_exits_2_naming_the_field(understudy, tmp_path):
    bad = tmp_path / "bad-impair.json"
    bad.write_text(
        """{
  "name": "bad link",
  "bots": [{"id": "viewer", "impair": {"down": {"loss": 2}}}],
  "steps": [{"action": "join", "bot": "viewer"}]
}
""")
    result = run_understudy(["scenario", str(bad)], timeout=60)
    assert result.returncode == 2
    assert f"{bad}:3: field 'bots[0].impair.down.loss': expected a number in [0, 1], found 2" in result.stderr
    result = run_understudy(["join", "--server", "http://127.0.0.1:9", "--room", "r", "--secret", "s",
                             "--impair", "dial-up"], timeout=60)
    assert result.returncode == 2
    assert "--impair" in result.stderr and "unknown preset 'dial-up'" in result.stderr, result.stderr
