#!/usr/bin/python3
"""GStreamer `webrtcbin` publishing VP8 (or H.264) + Opus through WHIP; this script is its signalling.

    /usr/bin/python3 gst_whip_publisher.py URL --token T [--seconds 10] [--video-codec vp8|h264]

`--video-codec h264` encodes with `x264enc` (tune=zerolatency, constrained baseline, a key frame
each second) and packs with `rtph264pay` (packetization mode 1, SPS/PPS in band before each IDR).

Runs with Debian's python3 (PyGObject and the GStreamer typelibs are system packages, not in the
venv). It POSTs webrtcbin's offer (candidates included: no trickle), applies the 201 answer,
streams for `--seconds` once the connection is up, DELETEs the session URL and prints one JSON
line: {"location", "connection_state", "seconds_connected", "deleted"}. Exit 0 on success.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstWebRTC", "1.0")
gi.require_version("GstSdp", "1.0")
from gi.repository import GLib, Gst, GstSdp, GstWebRTC  # noqa: E402

VIDEO = {
    "vp8": """vp8enc deadline=1 keyframe-max-dist=30 target-bitrate=400000 ! rtpvp8pay pt=96
  ! application/x-rtp,media=video,encoding-name=VP8,payload=96""",
    "h264": """x264enc tune=zerolatency speed-preset=ultrafast key-int-max=30 bitrate=400
  ! video/x-h264,profile=constrained-baseline ! rtph264pay pt=102 config-interval=-1 aggregate-mode=zero-latency
  ! application/x-rtp,media=video,encoding-name=H264,payload=102""",
}
ELEMENTS = {"vp8": ["vp8enc", "rtpvp8pay"], "h264": ["x264enc", "rtph264pay"]}

PIPELINE = """
webrtcbin name=send bundle-policy=max-bundle
videotestsrc is-live=true pattern=ball ! video/x-raw,width=320,height=240,framerate=30/1
  ! {video} ! send.
audiotestsrc is-live=true wave=sine freq=440 ! audioconvert ! audioresample ! opusenc
  ! rtpopuspay pt=111 ! application/x-rtp,media=audio,encoding-name=OPUS,payload=111 ! send.
"""


class Publisher:
    def __init__(self, url: str, token: str, seconds: float, video_codec: str = "vp8"):
        self.url, self.token, self.seconds = url, token, seconds
        self.loop = GLib.MainLoop()
        self.pipeline = Gst.parse_launch(PIPELINE.format(video=VIDEO[video_codec]))
        self.webrtc = self.pipeline.get_by_name("send")
        self.location: str | None = None
        self.error: str | None = None
        self.connected_at: float | None = None
        self.state = "new"
        self.deleted = False
        self.offer_set = False
        self.offer_attempts = 0
        self.webrtc.connect("on-negotiation-needed", self._on_negotiation_needed)
        self.webrtc.connect("notify::ice-gathering-state", self._on_gathering)
        self.webrtc.connect("notify::connection-state", self._on_connection_state)
        bus = self.pipeline.get_bus()
        bus.add_signal_watch()
        bus.connect("message::error", self._on_bus_error)

    def fail(self, why: str) -> None:
        self.error = self.error or why
        self.loop.quit()

    def _on_bus_error(self, _bus, message) -> None:
        error, debug = message.parse_error()
        self.fail(f"pipeline error: {error.message} ({debug})")

    def _on_negotiation_needed(self, element) -> None:
        promise = Gst.Promise.new_with_change_func(self._on_offer_created, element, None)
        element.emit("create-offer", None, promise)

    def _on_offer_created(self, promise, element, _data) -> None:
        promise.wait()
        reply = promise.get_reply()
        offer = reply.get_value("offer") if reply is not None else None
        if offer is None:
            # Seen once here: a reply without an offer (negotiation-needed fires per
            # linked pad). Ask again, a few times, unless an offer is already set.
            print(f"create-offer gave no offer: {reply.to_string() if reply is not None else 'no reply'}",
                  file=sys.stderr)
            self.offer_attempts += 1
            if self.offer_attempts > 5:
                GLib.idle_add(lambda: self.fail("create-offer failed 5 times") or False)
            elif not self.offer_set:
                GLib.timeout_add(200, lambda: self._on_negotiation_needed(element) or False)
            return
        if self.offer_set:
            return
        self.offer_set = True
        element.emit("set-local-description", offer, Gst.Promise.new())

    def _on_gathering(self, element, _param) -> None:
        # Non-trickle WHIP: POST once every candidate is in the local description.
        if element.get_property("ice-gathering-state") == GstWebRTC.WebRTCICEGatheringState.COMPLETE:
            GLib.idle_add(self._post_offer)

    def _post_offer(self) -> bool:
        if self.location is not None:
            return False
        offer = self.webrtc.get_property("local-description").sdp.as_text()
        request = urllib.request.Request(self.url, data=offer.encode(), method="POST", headers={
            "Content-Type": "application/sdp", "Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                if response.status != 201:
                    self.fail(f"POST answered {response.status}")
                    return False
                self.location = urllib.parse.urljoin(self.url, response.headers["Location"])
                answer_text = response.read().decode()
        except urllib.error.HTTPError as e:
            self.fail(f"POST answered {e.code}: {e.read()[:300]!r}")
            return False
        except OSError as e:
            self.fail(f"POST failed: {e}")
            return False
        result, sdp = GstSdp.SDPMessage.new_from_text(answer_text)
        if result != GstSdp.SDPResult.OK:
            self.fail("the answer does not parse as SDP")
            return False
        answer = GstWebRTC.WebRTCSessionDescription.new(GstWebRTC.WebRTCSDPType.ANSWER, sdp)
        self.webrtc.emit("set-remote-description", answer, Gst.Promise.new())
        return False

    def _on_connection_state(self, element, _param) -> None:
        state = element.get_property("connection-state")
        self.state = state.value_nick
        if state == GstWebRTC.WebRTCPeerConnectionState.CONNECTED and self.connected_at is None:
            self.connected_at = time.monotonic()
            GLib.timeout_add(int(self.seconds * 1000), self._finish)
        elif state == GstWebRTC.WebRTCPeerConnectionState.FAILED:
            self.fail("connection failed")

    def _finish(self) -> bool:
        self.loop.quit()
        return False

    def delete(self) -> None:
        if not self.location:
            return
        request = urllib.request.Request(self.location, method="DELETE",
                                         headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                self.deleted = 200 <= response.status < 300
        except OSError as e:
            self.error = self.error or f"DELETE failed: {e}"

    def run(self, deadline: float) -> int:
        GLib.timeout_add(int(deadline * 1000), lambda: self.fail(f"not done within {deadline:.0f} s") or False)
        self.pipeline.set_state(Gst.State.PLAYING)
        self.loop.run()
        seconds = time.monotonic() - self.connected_at if self.connected_at else 0.0
        self.delete()
        self.pipeline.set_state(Gst.State.NULL)
        print(json.dumps({"location": self.location, "connection_state": self.state,
                          "seconds_connected": round(seconds, 2), "deleted": self.deleted,
                          "error": self.error}), flush=True)
        return 0 if self.error is None and self.deleted else 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--token", required=True)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--video-codec", choices=sorted(VIDEO), default="vp8")
    args = parser.parse_args()
    Gst.init(None)
    missing = [name for name in ("webrtcbin", "nicesrc", "opusenc", "rtpopuspay", *ELEMENTS[args.video_codec])
               if Gst.ElementFactory.find(name) is None]
    if missing:
        print(json.dumps({"error": f"missing GStreamer elements: {missing}"}), flush=True)
        return 2
    return Publisher(args.url, args.token, args.seconds, args.video_codec).run(deadline=args.seconds + 40)


if __name__ == "__main__":
    sys.exit(main())
