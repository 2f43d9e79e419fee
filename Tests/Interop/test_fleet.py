"""Bot fleets over Redis (docs/fleet.md): `understudy worker` processes take recording jobs from a
Redis Stream; a worker killed with -9 in the middle of its jobs has them re-claimed and finished by
another worker, every file plays in ffprobe, and each job's manifest lists every file.

A throw-away `redis-server` and `understudy serve` run inside this test's network namespace; the hosts
are `understudy join --mode SEND_AND_RECV` (synthetic pattern and tone).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness import decode_errors, free_port, kill_process, probe_frames, run_understudy, understudy_bin
from test_agent_stage import SECRET, AgentProcess, join_args, start_server

REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"


def start_redis(tmp_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"redis://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if jobs(url, check=False) is not None:
            return proc, url
        time.sleep(0.1)
    kill_process(proc)
    raise AssertionError("redis-server did not start")


def jobs(url: str, check: bool = True) -> list[dict] | None:
    result = run_understudy(["jobs", "list", "--redis", url, "--json"], timeout=30)
    if result.returncode != 0:
        if check:
            raise AssertionError(result.stderr)
        return None
    return json.loads(result.stdout)


class Worker:
    def __init__(self, name: str, url: str, capacity: int, out: Path, workdir: Path):
        self.name = name
        self.log_path = workdir / f"{name}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [understudy_bin(), "worker", "--redis", url, "--capacity", str(capacity), "--out", str(out),
                 "--id", name, "--claim-timeout", "3s"],
                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def wait_until(predicate, timeout: float, what: str, detail=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"no {what} within {timeout} s\n{detail()}")


def test_jobs_survive_a_killed_worker_and_every_file_plays(understudy, tmp_path):
    redis, url = start_redis(tmp_path)
    port = free_port()
    server = start_server(port, udp_low=44000)
    hosts: list[AgentProcess] = []
    workers: list[Worker] = []
    try:
        for room in ("fleet-a", "fleet-b"):
            host = AgentProcess(f"host-{room}", join_args(
                port, room, f"host-{room}", "--mode", "SEND_AND_RECV", "--consume", "none"), tmp_path)
            hosts.append(host)
            host.wait_for(rf"joined room {room} as host-{room}")
        out = tmp_path / "jobs"
        # w1 has room for two jobs, w2 for four: both must take jobs, and w2 can take over all of w1's.
        workers.append(Worker("w1", url, 4, out, tmp_path))
        workers.append(Worker("w2", url, 8, out, tmp_path))
        for i, room in enumerate(("fleet-a", "fleet-a", "fleet-b", "fleet-b")):
            result = run_understudy(
                ["jobs", "submit", "--redis", url, "--job-id", f"rec-{i}", "--cost", "2",
                 *join_args(port, room, f"rec-{i}", "--consume", "all", "--duration", "25s")], timeout=30)
            assert result.returncode == 0, result.stderr
            assert result.stdout.strip() == f"rec-{i}"
        running = wait_until(
            lambda: (lambda js: js if js and all(j["state"] == "running" for j in js) else None)(jobs(url)),
            90, "four running jobs", lambda: "\n".join(w.log()[-2000:] for w in workers))
        owners = {j["worker"] for j in running}
        assert owners == {"w1", "w2"}, running
        w1_jobs = [j["spec"]["id"] for j in running if j["worker"] == "w1"]
        # Let w1 record for a while, then kill it without warning.
        first_files: dict[str, list[str]] = {}
        def w1_has_recorded():
            listed = {j["spec"]["id"]: j["attempts"][-1]["files"] for j in jobs(url) if j["spec"]["id"] in w1_jobs}
            ready = all(any(f.endswith(".webm") and Path(f).exists() and Path(f).stat().st_size > 50_000
                            for f in files) for files in listed.values())
            if ready:
                first_files.update(listed)
            return ready
        wait_until(w1_has_recorded, 60, "w1 recordings", lambda: workers[0].log()[-3000:])
        os.killpg(workers[0].proc.pid, signal.SIGKILL)
        workers[0].proc.wait(timeout=10)
        # Every job ends done; w1's jobs have two attempts, the second on w2.
        final = wait_until(
            lambda: (lambda js: js if js and all(j["state"] == "done" for j in js) else None)(jobs(url)),
            150, "four finished jobs", lambda: workers[1].log()[-4000:] + json.dumps(jobs(url), indent=1)[-4000:])
        by_id = {j["spec"]["id"]: j for j in final}
        for job_id in w1_jobs:
            attempts = by_id[job_id]["attempts"]
            assert [a["worker"] for a in attempts] == ["w1", "w2"], attempts
            assert attempts[0]["end"].startswith("lost"), attempts
            assert attempts[1]["end"] == "done", attempts
            assert attempts[0]["directory"] != attempts[1]["directory"]
            # Nothing recorded before the kill is lost: the first attempt's files are still listed,
            # and so is the agent's manifest as it was last written there.
            for f in first_files[job_id]:
                assert f in attempts[0]["files"], (f, attempts)
            assert json.loads(attempts[0]["manifest"])["room"] == by_id[job_id]["spec"]["room"], attempts[0]
        for job in final:
            listed = [f for a in job["attempts"] for f in a["files"]]
            webms = [f for f in listed if f.endswith(".webm")]
            assert webms, job
            # Every file the job lists exists, and every recording plays.
            for f in listed:
                assert Path(f).exists(), f
            for f in webms:
                frames = probe_frames(f)
                assert frames.get("vp8", 0) >= 30 and frames.get("opus", 0) >= 50, (f, frames)
                assert decode_errors(f) == "", f
            # The files on disk under the job's directory are exactly those its manifest lists.
            on_disk = {str(p) for p in (out / job["spec"]["id"]).rglob("*.webm")}
            assert on_disk == set(webms), (on_disk, webms)
    finally:
        for w in workers:
            kill_process(w.proc, grace=10)
        for h in hosts:
            h.stop()
        kill_process(server)
        kill_process(redis)


def test_sigterm_hands_jobs_back_and_stop_finishes_them(understudy, tmp_path):
    redis, url = start_redis(tmp_path)
    port = free_port()
    server = start_server(port, udp_low=44200)
    host = AgentProcess("host", join_args(port, "handback", "host", "--mode", "SEND_AND_RECV", "--consume", "none"),
                        tmp_path)
    workers: list[Worker] = []
    try:
        host.wait_for(r"joined room handback as host")
        out = tmp_path / "jobs"
        workers.append(Worker("first", url, 4, out, tmp_path))
        result = run_understudy(["jobs", "submit", "--redis", url, "--job-id", "long", "--cost", "2",
                                 *join_args(port, "handback", "rec", "--consume", "all")], timeout=30)
        assert result.returncode == 0, result.stderr
        wait_until(lambda: (jobs(url) or [{}])[0].get("state") == "running", 60, "a running job")
        wait_until(lambda: any(f.endswith(".webm") and Path(f).exists()
                               for f in jobs(url)[0]["attempts"][-1]["files"]), 60, "a recording")
        time.sleep(2)
        os.killpg(workers[0].proc.pid, signal.SIGTERM)
        assert workers[0].proc.wait(timeout=60) == 0, workers[0].log()
        job = jobs(url)[0]
        assert job["state"] == "queued", job
        assert job["attempts"][0]["end"] == "handed back", job
        # A second worker picks it up; `jobs stop` ends it cleanly.
        workers.append(Worker("second", url, 4, out, tmp_path))
        wait_until(lambda: jobs(url)[0]["state"] == "running" and jobs(url)[0]["worker"] == "second", 60,
                   "the job running on the second worker", lambda: workers[1].log()[-3000:])
        wait_until(lambda: any(f.endswith(".webm") and Path(f).exists()
                               for f in jobs(url)[0]["attempts"][-1]["files"]), 60, "a second recording")
        stop = run_understudy(["jobs", "stop", "long", "--redis", url], timeout=30)
        assert stop.returncode == 0, stop.stderr
        job = wait_until(lambda: (lambda j: j if j["state"] == "stopped" else None)(jobs(url)[0]), 60, "a stopped job")
        assert [a["end"] for a in job["attempts"]] == ["handed back", "stopped"], job
        for f in [f for a in job["attempts"] for f in a["files"] if f.endswith(".webm")]:
            assert probe_frames(f).get("vp8", 0) > 0, f
            assert decode_errors(f) == "", f
        missing = run_understudy(["jobs", "stop", "nope", "--redis", url], timeout=30)
        assert missing.returncode == 1 and "no job 'nope'" in missing.stderr
    finally:
        for w in workers:
            kill_process(w.proc, grace=10)
        host.stop()
        kill_process(server)
        kill_process(redis)


@pytest.mark.parametrize("args,message", [
    (["worker"], "option --redis needs a value"),
    (["worker", "--redis", "http://x"], "must start with redis://"),
    (["worker", "--redis", "redis://127.0.0.1:1", "--capacity", "0"], "not a positive whole number"),
    (["jobs", "submit", "--redis", "redis://127.0.0.1:1", "--server", "http://h:1", "--room", "r", "--secret", "s",
      "--record", "x"], "a worker chooses it"),
    (["jobs", "submit", "--redis", "redis://127.0.0.1:1", "--room", "r"], "--server"),
    (["jobs", "frobnicate"], "not submit, list, stop or workers"),
    (["load", "--workers", "http://x", "--server", "http://127.0.0.1:1", "--room", "r", "--secret", "s"],
     "must start with redis://"),
    (["load", "--workers", "redis://127.0.0.1:1", "--server", "http://127.0.0.1:1", "--room", "r", "--secret", "s",
      "--id-prefix", "x"], "each worker gets its own"),
])
def test_bad_flags_exit_2_with_one_line(understudy, args, message):
    result = run_understudy(args, timeout=30)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_unreachable_redis_is_one_clear_line(understudy):
    result = run_understudy(["jobs", "list", "--redis", f"redis://127.0.0.1:{free_port()}"], timeout=30)
    assert result.returncode == 1
    assert "Redis connection" in result.stderr, result.stderr


def load_report(url: str, port: int, room: str, out: Path) -> dict:
    result = run_understudy(
        ["load", "--workers", url, "--server", f"http://127.0.0.1:{port}", "--room", room, "--secret", SECRET,
         "--publishers", "2", "--subscribers", "8", "--duration", "12s", "--join-rate", "20/s", "--layout", "3x3",
         "--json", str(out)], timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(out.read_text())


def test_distributed_load_gives_the_totals_of_one_worker(understudy, tmp_path):
    redis, url = start_redis(tmp_path)
    port = free_port()
    server = start_server(port, udp_low=44400)
    workers: list[Worker] = []
    try:
        workers.append(Worker("lw1", url, 10, tmp_path / "jobs", tmp_path))
        workers.append(Worker("lw2", url, 10, tmp_path / "jobs", tmp_path))
        # Both workers must be registered before the controller splits the test.
        def registered() -> bool:
            return _live_workers(url) == {"lw1", "lw2"}
        wait_until(registered, 60, "two registered workers", lambda: "\n".join(w.log() for w in workers))
        two = load_report(url, port, "dist-two", tmp_path / "two.json")
        rows = {w["worker"]: w for w in two["workers"]}
        assert set(rows) == {"lw1", "lw2"} and all(r["status"] == "ok" for r in rows.values()), rows
        # Both took part: 10 bots split by equal capacity.
        assert all(r["plannedParticipants"] == 5 for r in rows.values()), rows
        # One worker alone runs the same test.
        kill_process(workers[1].proc, grace=20)
        wait_until(lambda: _live_workers(url) == {"lw1"}, 30, "one live worker")
        one = load_report(url, port, "dist-one", tmp_path / "one.json")
        assert [w["worker"] for w in one["workers"]] == ["lw1"], one["workers"]
        for report in (two, one):
            assert report["plannedParticipants"] == 10 and report["joinedParticipants"] == 10, report["errors"]
            assert report["joinFailures"] == 0, report["errors"]
            # 8 subscribers × 2 publishers × (video + audio).
            assert report["subscribedTracks"] == 32, report["subscribedTracks"]
            assert report["joinLatencyMs"]["count"] == 10
        # The same media within noise: the same tracks for the same duration.
        ratio = two["packets"] / max(1, one["packets"])
        assert 0.7 < ratio < 1.4, (two["packets"], one["packets"])
    finally:
        for w in workers:
            kill_process(w.proc, grace=10)
        kill_process(server)
        kill_process(redis)


def _live_workers(url: str) -> set[str]:
    result = run_understudy(["jobs", "workers", "--redis", url, "--json"], timeout=30)
    assert result.returncode == 0, result.stderr
    return {w["id"] for w in json.loads(result.stdout)}


def test_a_worker_that_dies_during_a_load_test_is_reported_with_its_bots(understudy, tmp_path):
    redis, url = start_redis(tmp_path)
    port = free_port()
    server = start_server(port, udp_low=44600)
    workers = [Worker("dw1", url, 10, tmp_path / "jobs", tmp_path), Worker("dw2", url, 10, tmp_path / "jobs", tmp_path)]
    try:
        wait_until(lambda: _live_workers(url) == {"dw1", "dw2"}, 60, "two registered workers")
        out = tmp_path / "died.json"
        controller = subprocess.Popen(
            [understudy_bin(), "load", "--workers", url, "--server", f"http://127.0.0.1:{port}", "--room", "died",
             "--secret", SECRET, "--publishers", "2", "--subscribers", "8", "--duration", "20s", "--join-rate", "20/s",
             "--json", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        # Kill dw2 once its bots run: its share is accepted, the start barrier (2 s) passed and the
        # bots joined at 10/s; the 20 s test is then far from over.
        wait_until(lambda: "accepted" in workers[1].log(), 60, "dw2 accepting its share", lambda: workers[1].log())
        time.sleep(8)
        assert controller.poll() is None, controller.communicate()
        os.killpg(workers[1].proc.pid, signal.SIGKILL)
        stdout, stderr = controller.communicate(timeout=240)
        assert controller.returncode == 0, stdout + stderr
        report = json.loads(out.read_text())
        rows = {w["worker"]: w for w in report["workers"]}
        assert rows["dw1"]["status"] == "ok" and rows["dw2"]["status"] == "died", rows
        assert rows["dw2"]["plannedParticipants"] == 5 and rows["dw2"]["joinFailures"] == 5, rows
        assert report["plannedParticipants"] == 10 and report["joinedParticipants"] == 5, report["workers"]
        assert any(e["kind"] == "worker lost" and e["count"] == 5 and "dw2 died" in e["example"]
                   for e in report["errors"]), report["errors"]
        assert "dw2" in stdout and "died" in stdout, stdout
    finally:
        for w in workers:
            kill_process(w.proc, grace=10)
        kill_process(server)
        kill_process(redis)


def _post(url: str, body: dict | None, token: str | None) -> tuple[int, dict]:
    import urllib.error
    import urllib.request
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else b"{"
    request = urllib.request.Request(url, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=20) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_room_server_queues_a_recording_of_its_room(understudy, tmp_path):
    redis, url = start_redis(tmp_path)
    port = free_port()
    server = subprocess.Popen(
        [understudy_bin(), "serve", "--listen", f"127.0.0.1:{port}", "--secret", SECRET, "--udp-port", "44800",
         "--jobs", url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    host = None
    worker = None
    try:
        wait_until(lambda: run_understudy(["jobs", "list", "--redis", url], timeout=10).returncode == 0, 30, "redis")
        host = AgentProcess("host", join_args(port, "admin-rec", "host", "--mode", "SEND_AND_RECV", "--consume", "none"),
                            tmp_path)
        host.wait_for(r"joined room admin-rec as host")
        worker = Worker("aw", url, 4, tmp_path / "jobs", tmp_path)
        admin = run_understudy(["token", "--secret", SECRET, "--permissions", "allow_join,allow_mod"], timeout=30)
        token = admin.stdout.strip()
        base = f"http://127.0.0.1:{port}/admin/jobs"
        # Refusals: no token, a body without a room, options the server owns, bad options.
        assert _post(base, {"roomId": "admin-rec"}, None)[0] == 401
        assert _post(base, {"options": []}, token)[0] == 400
        status, body = _post(base, {"roomId": "admin-rec", "options": ["--record", "/tmp/x"]}, token)
        assert status == 400 and "chosen by the server" in body["error"]["message"], body
        status, body = _post(base, {"roomId": "admin-rec", "options": ["--consume-kinds", "smell"]}, token)
        assert status == 400 and body["error"]["code"] == 3073, body
        status, body = _post(base, {"roomId": "admin-rec", "jobId": "from-server",
                                    "options": ["--consume", "all", "--duration", "10s"]}, token)
        assert status == 201 and body["jobId"] == "from-server", body
        job = wait_until(lambda: (lambda js: js[0] if js and js[0]["state"] == "done" else None)(jobs(url)), 90,
                         "the server's job done", worker.log)
        webms = [f for a in job["attempts"] for f in a["files"] if f.endswith(".webm")]
        assert webms, job
        for f in webms:
            assert probe_frames(f).get("vp8", 0) >= 60, f
            assert decode_errors(f) == "", f
    finally:
        if worker:
            kill_process(worker.proc, grace=10)
        if host:
            host.stop()
        kill_process(server)
        kill_process(redis)


def _get(url: str, token: str) -> tuple[int, dict, str]:
    import urllib.error
    import urllib.request
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=20) as r:
            text = r.read().decode()
            return r.status, json.loads(text), text
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        return e.code, json.loads(text), text


def test_hostile_jobs_hang_neither_the_server_nor_the_fleet(understudy, tmp_path):
    """Issue 31, items 1, 4, 5, 6 and 14, against a real serve, redis-server and worker."""
    from concurrent.futures import ThreadPoolExecutor
    redis, url = start_redis(tmp_path)
    port = free_port()
    server = subprocess.Popen(
        [understudy_bin(), "serve", "--listen", f"127.0.0.1:{port}", "--secret", SECRET, "--udp-port", "45000",
         "--jobs", url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    host = None
    worker = None
    try:
        wait_until(lambda: run_understudy(["jobs", "list", "--redis", url], timeout=10).returncode == 0, 30, "redis")
        host = AgentProcess("host", join_args(port, "hostile", "host", "--mode", "SEND_AND_RECV", "--consume", "none"),
                            tmp_path)
        host.wait_for(r"joined room hostile as host")
        token = run_understudy(["token", "--secret", SECRET, "--permissions", "allow_join,allow_mod"],
                               timeout=30).stdout.strip()
        base = f"http://127.0.0.1:{port}"
        # 1. Media paths are not the server's business: 40 jobs whose --video blocks on read are all
        # queued at once, and the server's other routes go on answering.
        def blocking_job(i: int) -> tuple[int, dict]:
            return _post(f"{base}/admin/jobs", {"roomId": "hostile", "jobId": f"ptmx-{i}", "cost": 1,
                                                "options": ["--video", "/dev/ptmx", "--duration", "5s"]}, token)
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=40) as pool:
            answers = list(pool.map(blocking_job, range(40)))
        assert all(status == 201 for status, _ in answers), answers
        assert time.monotonic() - started < 60
        status, rooms, _ = _get(f"{base}/v1/rooms", token)
        assert status == 200 and "host" in rooms["rooms"][0]["participants"], rooms
        # 6. One job id grammar at every edge: the HTTP API, the CLI.
        for bad in ("..", ".", "a/b", "x" * 65):
            status, body = _post(f"{base}/admin/jobs", {"roomId": "hostile", "jobId": bad, "options": []}, token)
            assert status == 400 and body["error"]["code"] == 3073, (bad, body)
        cli = run_understudy(["jobs", "submit", "--redis", url, "--job-id", "..",
                              *join_args(port, "hostile", "x")], timeout=30)
        assert cli.returncode == 2 and "job id '..'" in cli.stderr, cli.stderr
        # `--record` is the worker's, but `--record-format` (the documented example) is the job's.
        cli = run_understudy(["jobs", "submit", "--redis", url, "--job-id", "webm-format", "--cost", "1",
                              *join_args(port, "hostile", "fmt", "--record-format", "webm", "--duration", "3s")],
                             timeout=30)
        assert cli.returncode == 0, cli.stderr
        assert _post(f"{base}/admin/jobs/webm-format/stop", {}, token)[0] == 200
        # 4. A job that asks for the host's id is queued, but no token is ever shown.
        status, body = _post(f"{base}/admin/jobs", {"roomId": "hostile", "jobId": "impostor", "cost": 1,
                                                    "options": ["--id", "host", "--duration", "5s"]}, token)
        assert status == 201, body
        status, listed, text = _get(f"{base}/admin/jobs", token)
        assert status == 200 and len(listed["jobs"]) == 42, listed
        assert "eyJ" not in text and "[redacted]" in text, text[:2000]
        assert "eyJ" not in run_understudy(["jobs", "list", "--redis", url, "--json"], timeout=30).stdout
        # Keep two blocking jobs for the worker; stop the others before any worker exists.
        for i in range(2, 40):
            assert _post(f"{base}/admin/jobs/ptmx-{i}/stop", {}, token)[0] == 200
        # 14. One malformed status record (a hostile Redis writer) hides nothing else.
        subprocess.run(["redis-cli", "-u", url, "ZADD", "understudy:fleet:jobs:index", "0", "garbage"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["redis-cli", "-u", url, "HSET", "understudy:fleet:job:garbage", "status", '{"spec": 7}'],
                       check=True, stdout=subprocess.DEVNULL)
        status, listed, _ = _get(f"{base}/admin/jobs", token)
        assert status == 200 and len(listed["jobs"]) == 42 and listed["skipped"] == 1, listed
        assert [s["jobId"] for s in listed["skippedJobs"]] == ["garbage"], listed
        listing = run_understudy(["jobs", "list", "--redis", url], timeout=30)
        assert listing.returncode == 0 and "skipped job 'garbage'" in listing.stderr, listing
        # 5. The worker fails the blocking jobs within its deadline and goes on: the impostor is
        # refused by the room (its token is bound to no id, so it cannot replace the host), and a
        # job submitted after all of them records the host.
        worker = Worker("hw", url, 4, tmp_path / "jobs", tmp_path)
        status, body = _post(f"{base}/admin/jobs", {"roomId": "hostile", "jobId": "after", "cost": 1,
                                                    "options": ["--consume", "all", "--duration", "8s"]}, token)
        assert status == 201, body

        def states() -> dict[str, dict]:
            return {j["spec"]["id"]: j for j in jobs(url)}
        final = wait_until(
            lambda: (lambda js: js if all(js[k]["state"] in ("failed", "done") for k in
                                          ("ptmx-0", "ptmx-1", "impostor", "after")) else None)(states()),
            120, "the hostile jobs ended and the later one done", worker.log)
        for k in ("ptmx-0", "ptmx-1"):
            assert final[k]["state"] == "failed" and "took longer than" in final[k]["error"], final[k]
        assert final["impostor"]["state"] == "failed" and "4005" in final["impostor"]["error"], final["impostor"]
        assert final["after"]["state"] == "done", final["after"]
        webms = [f for a in final["after"]["attempts"] for f in a["files"] if f.endswith(".webm")]
        assert webms and all(probe_frames(f).get("vp8", 0) >= 30 for f in webms), webms
        assert all(final[f"ptmx-{i}"]["state"] == "stopped" for i in range(2, 40))
        # The host was never replaced.
        assert host.proc.poll() is None, host.log()[-2000:]
        status, rooms, _ = _get(f"{base}/v1/rooms", token)
        assert "host" in rooms["rooms"][0]["participants"], rooms
        # Nothing was written outside the worker's --out.
        assert not (tmp_path / "attempt-1").exists()
    finally:
        if worker:
            kill_process(worker.proc, grace=10)
        if host:
            host.stop()
        kill_process(server)
        kill_process(redis)
