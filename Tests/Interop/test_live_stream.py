"""A live stream, scaled down (issue 11): `understudy serve` and `understudy load` side by side,
one simulcast host and two audio hosts on stage, 200 `RECV_ONLY` audience members joining at 50/s
(protocol 2), stage invites. Checks the properties of the benchmark row without timing thresholds:
everybody joined, every audience member consumed the stage and got media and key frames, nobody was
disconnected, every audience member learnt every join, leave and mode change, invites took effect.

On a busy machine media can take seconds to reach a late consumer, so the run goes on past its 40 s
(`--wait-for-media`) until every open track has received packets, for at most 200 s in all: the
check waits for what it checks instead of counting what arrived in a fixed window. A track whose
subscribe connection failed never gets media; the report names that (`subscribe-connection`)."""

from __future__ import annotations

import json

from harness import free_port, kill_process, run_understudy, start_room_server

SECRET = "interop-live-secret"
AUDIENCE = 200
STAGE = {"load-pub-1", "load-mic-1", "load-mic-2"}


def test_live_stream_of_200(understudy, tmp_path):
    port = free_port()
    server = start_room_server(port, 43000, SECRET, udp_count=1)  # one shared UDP port
    try:
        report_path = tmp_path / "live.json"
        result = run_understudy(
            ["load", "--server", f"http://127.0.0.1:{port}", "--room", "live", "--secret", SECRET,
             "--publishers", "1", "--audio-publishers", "2", "--subscribers", str(AUDIENCE),
             "--join-rate", "50/s", "--layout", "speaker", "--invite-every", "6s", "--duration", "40s",
             "--wait-for-media", "200s",
             # A debug server on a busy machine can take more than the default 15 s to finish an
             # invited guest's DTLS (its shared port is seconds behind): the check is that it happens.
             "--request-timeout", "40s",
             "--json", str(report_path), "--quiet"],
            timeout=400,
        )
        assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
        report = json.loads(report_path.read_text())
        summary = result.stdout[:2500]

        assert report["joinedParticipants"] == AUDIENCE + 3, summary
        assert report["joinFailures"] == 0, summary
        bad = [e for e in report["errors"]
               if e["kind"].startswith(("join", "consume", "subscriberAnswer", "subscribe-connection"))
               or e["kind"] == "disconnected"]
        assert not bad, bad

        # Every audience member consumed the whole stage (speaker layout: the host's webcam and every
        # mic) and received media on each track; every video track started with a key frame.
        stage_tracks = [t for t in report["tracks"] if t["publisher"] in STAGE]
        per_member: dict[str, set[tuple[str, str]]] = {}
        for t in stage_tracks:
            assert t["packets"] > 0, t
            if t["kind"] == "video":
                assert t["timeToFirstKeyframeMs"] is not None, t
            per_member.setdefault(t["subscriber"], set()).add((t["publisher"], t["kind"]))
        wanted = {("load-pub-1", "video"), ("load-pub-1", "audio"), ("load-mic-1", "audio"), ("load-mic-2", "audio")}
        missing = {m: wanted - got for m, got in per_member.items() if not wanted <= got}
        assert len(per_member) >= AUDIENCE - 1 and not missing, (len(per_member), list(missing.items())[:5])

        # Every audience member's view of the room matches the room (joins, leaves, mode changes).
        roster = report["rosterCheck"]
        assert roster["checked"] == AUDIENCE and roster["mismatched"] == 0, roster

        # Invites took effect: guests went on stage and back, and the others received them.
        modes = report["modeChanges"]
        assert modes["promotions"] >= 2 and modes["demotions"] >= 1 and modes["failures"] == 0, modes
        assert any(t["publisher"].startswith("load-sub-") and t["packets"] > 0 for t in report["tracks"])
    finally:
        kill_process(server)
