"""Janus (Debian's `janus` 1.1.2) as an interop peer: a private server and a small HTTP API client.

`JanusServer` runs Janus with a configuration of its own in a temporary folder: only the
VideoRoom plugin and the plain-HTTP transport (on 127.0.0.1 and a free port), no STUN, no
event handlers. libnice skips loopback interfaces when it gathers candidates, so the server
first puts 127.0.0.2 on a veth interface of the test's network namespace and gathers there
only (`ice_enforce_list`); `add_janus_address` explains how peers on 127.0.0.1 reach it.

`JanusSession` speaks the Janus HTTP API with `urllib`: requests are POSTs, and a thread
long-polls the session for asynchronous events (plugin replies carrying JSEP, `webrtcup`,
`media`), which callers pick out with `wait_event`.
"""

from __future__ import annotations

import http.client
import json
import queue
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Callable

from harness import free_port, kill_process

JANUS_LIB = Path("/usr/lib/x86_64-linux-gnu/janus")
JANUS_ADDRESS = "127.0.0.2"
JANUS_INTERFACE = "janus0"
PEER_INTERFACE = "janus1"
ROOM = 1234


def janus_binary() -> str | None:
    return shutil.which("janus")


def _module(kind: str, name: str) -> Path | None:
    """The installed plugin/transport library (the folder differs across architectures)."""
    candidates = [JANUS_LIB / kind / name]
    candidates += sorted(Path("/usr/lib").glob(f"*/janus/{kind}/{name}"))
    for candidate in candidates:
        if candidate.exists():
            return candidate
    return None


def in_private_namespace() -> bool:
    """True when the only interfaces are `lo` and our own pair (scripts/interop.sh's `unshare -n`).

    The address setup below must never touch a real host's network."""
    # if_nameindex asks the kernel about the current namespace (/sys/class/net shows the host's).
    names = {name for _, name in socket.if_nameindex()}
    return names <= {"lo", JANUS_INTERFACE, PEER_INTERFACE}


def add_janus_address() -> None:
    """Gives Janus 127.0.0.2 on a veth pair that peers on 127.0.0.1 can reach (idempotent).

    - libnice (and Janus) skip loopback interfaces, so the address lives on `janus0`, one end of
      a veth pair (this kernel has no `dummy` driver). It is a /32 so that the rest of 127/8
      stays on `lo`.
    - libnice pins its sockets to their interface (IP_UNICAST_IF = janus0), so its packets to
      127.0.0.1 leave through janus0 and come back in on janus1. The kernel refuses loopback
      addresses on a wire unless `route_localnet` is set, and a packet whose source is one of
      its own addresses unless `accept_local` is set; both are needed (checked by hand) and are
      set on both ends.
    """
    if not in_private_namespace():
        raise RuntimeError("refusing to add interfaces outside a private network namespace "
                           "(run this test through scripts/interop.sh)")
    show = subprocess.run(["ip", "-o", "addr", "show", "dev", JANUS_INTERFACE],
                          capture_output=True, text=True)
    if show.returncode != 0 or f"{JANUS_ADDRESS}/" not in show.stdout:
        for command in (
            ["ip", "link", "add", JANUS_INTERFACE, "type", "veth", "peer", "name", PEER_INTERFACE],
            ["ip", "addr", "add", f"{JANUS_ADDRESS}/32", "dev", JANUS_INTERFACE],
            ["ip", "link", "set", JANUS_INTERFACE, "up"],
            ["ip", "link", "set", PEER_INTERFACE, "up"],
        ):
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0 and "File exists" not in result.stderr:
                raise RuntimeError(f"{' '.join(command)} failed: {result.stderr.strip()}")
    for interface in (JANUS_INTERFACE, PEER_INTERFACE):
        for setting in ("route_localnet", "accept_local"):
            Path(f"/proc/sys/net/ipv4/conf/{interface}/{setting}").write_text("1\n")


class JanusServer:
    """A Janus process with only VideoRoom + HTTP, configured in `workdir`."""

    def __init__(self, workdir: Path, session_timeout: int = 120, videocodec: str = "vp8"):
        self.workdir = Path(workdir)
        self.session_timeout = session_timeout
        # The room's `videocodec`: the codecs Janus accepts from publishers, in preference order.
        self.videocodec = videocodec
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_file = self.workdir / "janus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/janus"

    def _write_config(self) -> Path:
        conf = self.workdir / "conf"
        plugins = self.workdir / "plugins"
        transports = self.workdir / "transports"
        empty = self.workdir / "empty"
        for folder in (conf, plugins, transports, empty):
            folder.mkdir(parents=True, exist_ok=True)
        videoroom = _module("plugins", "libjanus_videoroom.so")
        http = _module("transports", "libjanus_http.so")
        if videoroom is None or http is None:
            raise RuntimeError("janus is installed but its videoroom plugin or http transport is missing")
        # Folders holding only the two modules we want: Janus loads every library it finds.
        (plugins / videoroom.name).symlink_to(videoroom)
        (transports / http.name).symlink_to(http)
        (conf / "janus.jcfg").write_text(f"""general: {{
    configs_folder = "{conf}"
    plugins_folder = "{plugins}"
    transports_folder = "{transports}"
    events_folder = "{empty}"
    loggers_folder = "{empty}"
    debug_level = 4
    session_timeout = {self.session_timeout}
}}
certificates: {{
}}
media: {{
    ipv6 = false
    rtp_port_range = "20000-40000"
}}
nat: {{
    nice_debug = false
    ice_enforce_list = "{JANUS_INTERFACE}"
    ignore_mdns = true
}}
plugins: {{
}}
transports: {{
}}
events: {{
    broadcast = false
}}
loggers: {{
}}
""")
        (conf / "janus.transport.http.jcfg").write_text(f"""general: {{
    json = "plain"
    base_path = "/janus"
    http = true
    port = {self.port}
    ip = "127.0.0.1"
    https = false
}}
admin: {{
    admin_http = false
    admin_https = false
}}
""")
        # fir_freq: Janus asks the publisher for a keyframe every 2 s, so a subscriber that
        # joins late still gets a decodable stream soon.
        (conf / "janus.plugin.videoroom.jcfg").write_text(f"""general: {{
}}
room-{ROOM}: {{
    description = "understudy interop"
    publishers = 4
    bitrate = 1000000
    fir_freq = 2
    audiocodec = "opus"
    videocodec = "{self.videocodec}"
    record = false
}}
""")
        return conf

    def start(self, timeout: float = 20.0) -> "JanusServer":
        binary = janus_binary()
        if binary is None:
            raise RuntimeError("janus is not installed")
        add_janus_address()
        self.port = free_port()
        conf = self._write_config()
        log = open(self.log_file, "w")
        self.proc = subprocess.Popen(
            [binary, "-F", str(conf), "-C", str(conf / "janus.jcfg"), "-o"],
            stdout=log, stderr=subprocess.STDOUT, cwd=str(self.workdir), start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"janus exited {self.proc.returncode}\n{self.log()}")
            try:
                info = _request("GET", f"{self.url}/info", timeout=1)
                if info.get("janus") == "server_info":
                    return self
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"janus did not answer /janus/info within {timeout:.0f} s\n{self.log()}")

    def stop(self) -> None:
        if self.proc is not None:
            kill_process(self.proc, grace=5)
            self.proc = None

    def log(self, chars: int = 4000) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def __enter__(self) -> "JanusServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _request(method: str, url: str, body: dict | None = None, timeout: float = 10) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


class JanusError(AssertionError):
    pass


class JanusSession:
    """One Janus API session, with a long-poll thread collecting its events."""

    def __init__(self, server: JanusServer):
        self.base = server.url
        created = self._post(self.base, {"janus": "create"})
        self.session_id = created["data"]["id"]
        self.session_url = f"{self.base}/{self.session_id}"
        self.events: queue.Queue[dict] = queue.Queue()
        self.seen: list[dict] = []
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="janus-poll", daemon=True)
        self._poller.start()

    def _post(self, url: str, body: dict, timeout: float = 10) -> dict:
        body = dict(body, transaction=uuid.uuid4().hex)
        reply = _request("POST", url, body, timeout)
        if reply.get("janus") == "error":
            raise JanusError(f"janus error for {body.get('janus')}: {reply.get('error')}")
        return reply

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                reply = _request("GET", f"{self.session_url}?maxev=10&rid={time.time_ns()}", timeout=35)
            except (OSError, ValueError, http.client.HTTPException):
                # Includes the long poll cut short when the session is destroyed.
                if self._stop.wait(0.2):
                    return
                continue
            for event in reply if isinstance(reply, list) else [reply]:
                if event.get("janus") != "keepalive":
                    self.events.put(event)

    def attach(self, plugin: str = "janus.plugin.videoroom") -> int:
        return self._post(self.session_url, {"janus": "attach", "plugin": plugin})["data"]["id"]

    def message(self, handle: int, body: dict, jsep: dict | None = None) -> dict:
        """Sends a plugin message; returns the synchronous reply (`success` or `ack`)."""
        request: dict = {"janus": "message", "body": body}
        if jsep is not None:
            request["jsep"] = jsep
        reply = self._post(f"{self.session_url}/{handle}", request)
        if reply.get("janus") == "success":
            data = reply.get("plugindata", {}).get("data", {})
            if "error" in data:
                raise JanusError(f"{body.get('request')} failed: {data}")
        return reply

    def keepalive(self) -> None:
        # Janus drops a session that sends nothing for `session_timeout`; a long poll does not count.
        self._post(self.session_url, {"janus": "keepalive"})

    def end_of_candidates(self, handle: int) -> None:
        # Our candidates are all in the SDP: tell Janus there will be no more.
        self._post(f"{self.session_url}/{handle}", {"janus": "trickle", "candidate": {"completed": True}})

    def wait_event(self, handle: int, matches: Callable[[dict], bool], timeout: float = 20) -> dict:
        """The first event from `handle` (seen before or arriving within `timeout`) that `matches`.

        A `hangup` of the handle (ICE or DTLS failed) ends the wait at once."""
        def check(event: dict) -> bool:
            if event.get("sender") != handle:
                return False
            if matches(event):
                return True
            if event.get("janus") == "hangup":
                raise JanusError(f"janus hung up handle {handle}: {event.get('reason')}")
            return False

        for event in self.seen:
            if check(event):
                return event
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise JanusError(f"no matching event from handle {handle} within {timeout:.0f} s; "
                                 f"events so far: {json.dumps(self.seen)[-3000:]}")
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(event)
            if check(event):
                return event

    def plugin_event(self, handle: int, key: str, value: object | None = None,
                     timeout: float = 20) -> dict:
        """The next VideoRoom event whose data has `key` (equal to `value` when given)."""
        def matches(event: dict) -> bool:
            data = event.get("plugindata", {}).get("data", {})
            if "error" in data:
                raise JanusError(f"videoroom error: {data}")
            return key in data and (value is None or data[key] == value)
        return self.wait_event(handle, matches, timeout)

    def destroy(self) -> None:
        self._stop.set()
        try:
            self._post(self.session_url, {"janus": "destroy"}, timeout=3)
        except (OSError, ValueError, JanusError):
            pass
        self._poller.join(timeout=5)


def data_of(event: dict) -> dict:
    return event.get("plugindata", {}).get("data", {})
