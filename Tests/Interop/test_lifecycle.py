"""Recording-job lifecycle (docs/protocol.md §17a): `serve --auto-record` starts a fleet job when a room
gets its first member, auto-stop ends it once the room is empty, and every event reaches a Python
webhook receiver signed with HMAC-SHA256 (checked with Python's hmac); a receiver that answers 500
twice gets the event on the third try. With two servers on one job fleet (a cluster's case), each job
event reaches the receiver once. UDP ports 49200 and 49201 (no other test uses them)."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import free_port, kill_process, run_understudy, understudy_bin
from test_agent_stage import SECRET, AgentProcess, join_args
from test_fleet import Worker, start_redis, wait_until

WEBHOOK_SECRET = "whsec-lifecycle"


class Receiver:
    """Keeps every POST; answers the first event 500 `failures` times (other events meanwhile 200)."""

    def __init__(self, failures: int = 2):
        self.lock = threading.Lock()
        self.requests: list[tuple[bytes, dict]] = []
        self.failures = failures
        self.first: str | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                event_id = json.loads(body)["id"]
                with outer.lock:
                    outer.requests.append((body, dict(self.headers)))
                    outer.first = outer.first or event_id
                    failing = event_id == outer.first and outer.failures > 0
                    outer.failures -= failing
                status = 500 if failing else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def events(self) -> list[dict]:
        """Each verified event once (in arrival order), with how many tries it took."""
        seen: dict[str, dict] = {}
        with self.lock:
            requests = list(self.requests)
        for body, headers in requests:
            expected = "sha256=" + hmac.new(WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
            assert hmac.compare_digest(expected, headers["X-Understudy-Signature"]), headers
            event = json.loads(body)
            assert headers["X-Understudy-Timestamp"] == str(event["timestamp"])
            seen.setdefault(event["id"], {**event, "tries": 0})["tries"] += 1
        return list(seen.values())

    def types(self) -> list[str]:
        return [e["event"] for e in self.events()]


def test_auto_recording_started_and_ended_with_signed_webhooks(understudy, tmp_path):
    redis, url = start_redis(tmp_path)
    receiver = Receiver(failures=2)
    port = free_port()
    log = open(tmp_path / "serve.log", "w")
    server = subprocess.Popen(
        [understudy_bin(), "serve", "--listen", f"127.0.0.1:{port}", "--secret", SECRET, "--udp-port", "49200",
         "--jobs", url, "--webhook", receiver.url, "--webhook-secret", WEBHOOK_SECRET,
         "--auto-record", "--consume all", "--auto-stop-empty", "2s"],
        stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    host = None
    worker = None
    try:
        wait_until(lambda: run_understudy(["jobs", "list", "--redis", url], timeout=10).returncode == 0, 30, "redis")
        worker = Worker("lw", url, 4, tmp_path / "jobs", tmp_path)
        host = AgentProcess("host", join_args(port, "auto-rec", "host", "--mode", "SEND_AND_RECV", "--consume", "none"),
                            tmp_path)
        host.wait_for(r"joined room auto-rec as host")
        detail = lambda: f"events: {receiver.types()}\n{(tmp_path / 'serve.log').read_text()}\n{worker.log()}"
        wait_until(lambda: "job_started" in receiver.types(), 60, "job_started", detail)
        # The room_started event met two 500s and arrived on its third try, signed the same each time.
        wait_until(lambda: any(e["event"] == "room_started" and e["tries"] >= 3 for e in receiver.events()), 60,
                   "room_started's third try", detail)
        started = [e for e in receiver.events() if e["event"] == "room_started"]
        assert started[0]["roomId"] == "auto-rec" and started[0]["tries"] == 3, started
        wait_until(lambda: "job_updated" in receiver.types(), 60, "job_updated (files opened)", detail)
        host.stop()
        host = None
        wait_until(lambda: "job_ended" in receiver.types(), 60, "job_ended after the room emptied", detail)
        ended = [e for e in receiver.events() if e["event"] == "job_ended"][0]
        assert ended["roomId"] == "auto-rec" and ended["job"]["state"] == "stopped", ended
        assert ended["job"]["attempts"][-1]["files"], ended
        assert "[redacted]" in json.dumps(ended["job"]) and SECRET not in json.dumps(ended["job"])
        wait_until(lambda: "room_finished" in receiver.types(), 60, "room_finished", detail)
        types = receiver.types()
        assert types.index("room_started") < types.index("job_started") < types.index("job_ended"), types
    finally:
        if host:
            host.stop()
        if worker:
            kill_process(worker.proc, grace=10)
        kill_process(server)
        kill_process(redis)
        receiver.server.shutdown()
        log.close()


def _sent_elsewhere(port: int) -> int:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith('understudy_webhook_events_total{result="sent_elsewhere"}'):
            return int(float(line.split()[-1]))
    return -1


def test_two_servers_on_one_fleet_send_each_job_event_once(understudy, tmp_path):
    """Both servers read the same job records once a second; the first to claim an event in Redis sends
    it, the other counts it under `sent_elsewhere`. Each job event arrives once."""
    redis, url = start_redis(tmp_path)
    receiver = Receiver(failures=0)
    ports = [free_port(), free_port()]
    logs = [open(tmp_path / f"serve{i}.log", "w") for i in range(2)]
    servers = []
    host = None
    worker = None
    try:
        for i, extra in enumerate([["--auto-record", "--consume all", "--auto-stop-empty", "2s"], []]):
            servers.append(subprocess.Popen(
                [understudy_bin(), "serve", "--listen", f"127.0.0.1:{ports[i]}", "--secret", SECRET,
                 "--udp-port", str(49200 + i), "--jobs", url, "--webhook", receiver.url,
                 "--webhook-secret", WEBHOOK_SECRET, *extra],
                stdout=subprocess.DEVNULL, stderr=logs[i], start_new_session=True))
        wait_until(lambda: run_understudy(["jobs", "list", "--redis", url], timeout=10).returncode == 0, 30, "redis")
        worker = Worker("lw2", url, 4, tmp_path / "jobs", tmp_path)
        host = AgentProcess("host", join_args(ports[0], "two-servers", "host", "--mode", "SEND_AND_RECV",
                                              "--consume", "none"), tmp_path)
        host.wait_for(r"joined room two-servers as host")
        detail = lambda: (f"events: {receiver.types()}\n{(tmp_path / 'serve0.log').read_text()}\n"
                          f"{(tmp_path / 'serve1.log').read_text()}\n{worker.log()}")
        wait_until(lambda: "job_updated" in receiver.types(), 60, "job_updated (files opened)", detail)
        host.stop()
        host = None
        wait_until(lambda: "job_ended" in receiver.types(), 60, "job_ended after the room emptied", detail)
        # Both servers saw job_ended; wait until the one that did not send it has counted it, so the
        # receiver's list below is final for this job (no window to guess).
        wait_until(lambda: _sent_elsewhere(ports[0]) + _sent_elsewhere(ports[1]) >= 3, 30,
                   "the other server's claims (started, updated, ended)", detail)
        jobs = [e for e in receiver.events() if e["event"].startswith("job_")]
        keys = [(e["event"], e["jobId"], len(e["job"]["attempts"]), json.dumps(e["job"]["attempts"][-1],
                                                                              sort_keys=True))
                for e in jobs]
        assert len(keys) == len(set(keys)), jobs
        assert [e["event"] for e in jobs].count("job_started") == 1, [e["event"] for e in jobs]
        assert [e["event"] for e in jobs].count("job_ended") == 1, [e["event"] for e in jobs]
    finally:
        if host:
            host.stop()
        if worker:
            kill_process(worker.proc, grace=10)
        for server in servers:
            kill_process(server)
        kill_process(redis)
        receiver.server.shutdown()
        for log in logs:
            log.close()


def test_bad_webhook_settings_exit_2_with_the_documented_line(understudy):
    for args, message in [
        (["--webhook", "https://hooks.example/x", "--webhook-secret", "w"],
         "bad value for --webhook: webhook URL 'https://hooks.example/x' is not an http:// URL"),
        (["--webhook", "http://127.0.0.1:9/x"], "bad value for --webhook-secret: webhooks need a secret"),
        (["--auto-record", "--consume stage"], "bad value for --auto-record: needs a job fleet"),
    ]:
        result = run_understudy(["serve", "--listen", "127.0.0.1:0", *args], timeout=30)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
