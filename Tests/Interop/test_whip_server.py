"""WHIP and WHEP on `understudy serve` (docs/protocol.md, "WHIP and WHEP endpoints").

* `understudy whip` publishes into a room through `POST /whip/ROOM` while an agent in the room
  (`understudy join --record`) records it; ffprobe decodes the recording, and the room's roster
  (admin API) shows the publisher join and, after its DELETE, leave.
* aiortc publishes through WHIP (recorded by the agent), and a second aiortc plays that publisher
  through `POST /whep/ROOM/PARTICIPANT`, decoding what it receives.
* Bad input over HTTP gets the documented 4xx and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription

from aiortc_endpoint import Counters, PatternVideoTrack, ToneAudioTrack, _preferred
from harness import decode_errors, run_understudy
from loopback import use_loopback_only
from whip_server_support import ROOM, Recorder, http, room_participants, served, token, wait_participants


def test_understudy_whip_into_the_room_is_recorded_by_an_agent(understudy, tmp_path):
    with served(44100) as port:
        recorder = Recorder(port, tmp_path)
        try:
            recorder.wait_log(f"joined room {ROOM} as recorder")
            result = run_understudy(
                ["whip", f"http://127.0.0.1:{port}/whip/{ROOM}", "--token", token("whipper"),
                 "--video", "testsrc", "--audio", "tone", "--duration", "8"],
                timeout=60,
            )
            assert result.returncode == 0, f"{result.stderr}\n{recorder.log()[-2000:]}"
            counts = recorder.wait_frames("whipper", {"vp8": 90, "opus": 150})
            print(f"recorded from WHIP: {counts}")
            # `understudy whip` DELETEs its session at the end: the room saw it leave.
            wait_participants(port, lambda ids: "whipper" not in ids, "lost the WHIP publisher")
        finally:
            recorder.stop()
        assert decode_errors(recorder.dir / "whipper.webm") == ""


async def _aiortc_publish_and_view(port: int) -> dict:
    use_loopback_only()
    base = f"http://127.0.0.1:{port}"
    result: dict = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        # Publisher: VP8 + Opus through WHIP.
        pub = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        counters, totals = Counters(), Counters()
        pub.addTransceiver(PatternVideoTrack(counters, totals), direction="sendonly").setCodecPreferences(
            _preferred("video"))
        pub.addTransceiver(ToneAudioTrack(counters, totals), direction="sendonly").setCodecPreferences(
            _preferred("audio"))
        await pub.setLocalDescription(await pub.createOffer())
        headers = {"Content-Type": "application/sdp", "Authorization": f"Bearer {token('aio-pub')}"}
        async with session.post(f"{base}/whip/{ROOM}", data=pub.localDescription.sdp, headers=headers) as r:
            assert r.status == 201, await r.text()
            pub_location = r.headers["Location"]
            assert r.headers.get("ETag"), r.headers
            await pub.setRemoteDescription(RTCSessionDescription(sdp=await r.text(), type="answer"))
        result["roster_after_whip"] = await asyncio.to_thread(
            wait_participants, port, lambda ids: "aio-pub" in ids, "showed the WHIP publisher")

        # Trickle PATCH: acknowledged with 204 (the server is ICE-lite).
        ufrag = next(line.split(":", 1)[1] for line in pub.localDescription.sdp.splitlines()
                     if line.startswith("a=ice-ufrag:"))
        pwd = next(line.split(":", 1)[1] for line in pub.localDescription.sdp.splitlines()
                   if line.startswith("a=ice-pwd:"))
        frag = f"a=ice-ufrag:{ufrag}\r\na=ice-pwd:{pwd}\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=mid:0\r\n" \
               "a=candidate:1 1 udp 2130706431 127.0.0.1 9 typ host\r\n"
        async with session.patch(f"{base}{pub_location}", data=frag,
                                 headers={"Content-Type": "application/trickle-ice-sdpfrag"}) as r:
            result["patch_status"] = r.status

        # Viewer: plays the publisher through WHEP and decodes.
        view = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        frames = {"video": 0, "audio": 0}
        drains: list[asyncio.Task] = []

        @view.on("track")
        def _on_track(track) -> None:
            async def drain() -> None:
                try:
                    while True:
                        await track.recv()
                        frames[track.kind] += 1
                except Exception:
                    return
            drains.append(asyncio.ensure_future(drain()))

        view.addTransceiver("audio", direction="recvonly")
        view.addTransceiver("video", direction="recvonly")
        await view.setLocalDescription(await view.createOffer())
        headers = {"Content-Type": "application/sdp", "Authorization": f"Bearer {token('aio-view')}"}
        async with session.post(f"{base}/whep/{ROOM}/aio-pub", data=view.localDescription.sdp,
                                headers=headers) as r:
            assert r.status == 201, await r.text()
            view_location = r.headers["Location"]
            await view.setRemoteDescription(RTCSessionDescription(sdp=await r.text(), type="answer"))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 40
        while loop.time() < deadline and (frames["video"] < 90 or frames["audio"] < 150):
            await asyncio.sleep(0.5)
        result["viewer_frames"] = dict(frames)
        result["roster_with_viewer"] = room_participants(port)

        async with session.delete(f"{base}{view_location}") as r:
            result["view_delete"] = r.status
        async with session.delete(f"{base}{pub_location}") as r:
            result["pub_delete"] = r.status
        async with session.delete(f"{base}{pub_location}") as r:
            result["second_delete"] = r.status
        for task in drains:
            task.cancel()
        await view.close()
        await pub.close()
    return result


def test_aiortc_publishes_through_whip_and_aiortc_plays_it_through_whep(understudy, tmp_path):
    with served(44200) as port:
        recorder = Recorder(port, tmp_path)
        try:
            recorder.wait_log(f"joined room {ROOM} as recorder")
            result = asyncio.run(_aiortc_publish_and_view(port))
            print(json.dumps(result))
            assert result["patch_status"] == 204, result
            assert result["viewer_frames"]["video"] >= 90 and result["viewer_frames"]["audio"] >= 150, result
            assert "aio-view" in result["roster_with_viewer"], result
            assert result["view_delete"] == 200 and result["pub_delete"] == 200, result
            assert result["second_delete"] == 404, result
            wait_participants(port, lambda ids: "aio-pub" not in ids and "aio-view" not in ids,
                              "lost the WHIP publisher and the WHEP viewer")
            counts = recorder.wait_frames("aio-pub", {"vp8": 90, "opus": 150})
            print(f"recorded from aiortc over WHIP: {counts}")
        finally:
            recorder.stop()


def test_bad_input_gets_a_clear_4xx(understudy):
    with served(44300) as port:
        base = f"http://127.0.0.1:{port}"
        good = {"Content-Type": "application/sdp", "Authorization": f"Bearer {token('bad')}"}

        def code(status_body):
            status, _, body = status_body
            return status, (json.loads(body)["error"]["code"] if body.startswith(b"{") else None)

        assert code(http("POST", f"{base}/whip/{ROOM}", b"v=0\r\n",
                         {**good, "Content-Type": "text/plain"})) == (415, 3073)
        assert code(http("POST", f"{base}/whip/{ROOM}", b"v=0\r\n",
                         {"Content-Type": "application/sdp"}))[0] == 401
        assert code(http("POST", f"{base}/whip/{ROOM}", b"v=0\r\n",
                         {**good, "Authorization": "Bearer not-a-jwt"})) == (401, 4002)
        assert code(http("POST", f"{base}/whip/{ROOM}", b"this is not sdp", good)) == (400, 3073)
        assert code(http("POST", f"{base}/whip/{ROOM}", b"", good)) == (400, 3073)
        assert code(http("POST", f"{base}/whip/{ROOM}", b"v=0\r\n" + b"a=x\r\n" * 60000, good)) == (413, 3073)
        other_room = {**good, "Authorization": f"Bearer {token('bad', room='elsewhere')}"}
        assert code(http("POST", f"{base}/whip/{ROOM}", b"v=0\r\n", other_room))[0] == 403
        assert code(http("POST", f"{base}/whep/{ROOM}/nobody", b"v=0\r\n", good))[0] in (400, 404)
        assert code(http("DELETE", f"{base}/whip/{ROOM}/whipnosuchsession"))[0] == 404
        assert code(http("PATCH", f"{base}/whip/{ROOM}/whipnosuchsession", b"a=ice-ufrag:abcd\r\n",
                         {"Content-Type": "application/trickle-ice-sdpfrag"}))[0] == 404
        assert http("GET", f"{base}/whip/{ROOM}")[0] == 405
        assert http("OPTIONS", f"{base}/whip/{ROOM}")[0] == 204
        # Still serving, and nobody joined.
        assert http("GET", f"{base}/healthz")[0] == 200
        assert room_participants(port) == []


def test_understudy_whep_plays_an_understudy_whip_publisher(understudy, tmp_path):
    """Our own client on both ends, through the room: WHIP in, WHEP out, the recording decodes."""
    import subprocess

    from harness import kill_process, probe_frames, understudy_bin

    with served(44600) as port:
        log = open(tmp_path / "whip.log", "w")
        publisher = subprocess.Popen(
            [understudy_bin(), "whip", f"http://127.0.0.1:{port}/whip/{ROOM}", "--token", token("cam"),
             "--duration", "60"],
            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
        )
        try:
            wait_participants(port, lambda ids: "cam" in ids, "showed the WHIP publisher")
            out = tmp_path / "cam.webm"
            result = run_understudy(
                ["whep", f"http://127.0.0.1:{port}/whep/{ROOM}/cam", "--token", token("viewer"),
                 "--record", str(out), "--duration", "6"],
                timeout=60,
            )
            assert result.returncode == 0, result.stderr
            assert "deleted=true" in result.stderr, result.stderr
            counts = probe_frames(out)
            print(f"recorded through WHEP: {counts}")
            assert counts.get("vp8", 0) >= 90 and counts.get("opus", 0) >= 150, counts
            assert decode_errors(out) == ""
            wait_participants(port, lambda ids: "viewer" not in ids and "cam" in ids, "lost the WHEP viewer")
        finally:
            kill_process(publisher)
            log.close()
