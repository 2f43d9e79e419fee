"""TURN relaying end to end, with direct UDP between the clients and the room server blocked.

coturn (Debian `coturn`, a TURN server nobody here wrote) listens on 127.0.0.2 and relays from
127.0.0.2. nftables rules in this test's own network namespace drop every UDP datagram to or from
the room server's media port unless it comes from or goes to 127.0.0.2, so ICE can only succeed
through a relayed candidate. A counter on the relay's accept rule proves that media really went
through coturn, and ffprobe/ffmpeg judge the agent's recording.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from harness import decode_errors, free_port, kill_process, probe_frames, run_understudy, start_room_server
from test_agent_stage import SECRET, AgentProcess, join_args, wait_for_frames

TURN_IP = "127.0.0.2"
TURN_USER, TURN_PASSWORD, TURN_REALM = "bot", "s3cret-relay", "understudy.test"
NFT_TABLE = "understudy_turn_test"


def _nft(*args: str, input_text: str | None = None) -> str:
    result = subprocess.run(["nft", *args], input=input_text, capture_output=True, text=True, timeout=10)
    assert result.returncode == 0, f"nft {' '.join(args)}: {result.stderr}"
    return result.stdout


@contextmanager
def udp_blocked_except_relay(media_port: int, turn_udp_port: int = 0) -> Iterator[None]:
    """Drops UDP to/from the room server's media port unless the other end is the TURN relay;
    with `turn_udp_port`, also every UDP datagram to the TURN server's port (so TURN over TCP or
    TLS is the only way left)."""
    turn_rule = (f'ip daddr {TURN_IP} udp dport {turn_udp_port} counter drop comment "turn-udp"'
                 if turn_udp_port else "")
    _nft("-f", "-", input_text=f"""
table inet {NFT_TABLE} {{
    chain output {{
        type filter hook output priority 0; policy accept;
        {turn_rule}
        ip daddr 127.0.0.1 udp dport {media_port} ip saddr {TURN_IP} counter accept comment "relayed-in"
        ip daddr 127.0.0.1 udp dport {media_port} counter drop comment "direct-in"
        udp sport {media_port} ip daddr != {TURN_IP} counter drop comment "direct-out"
    }}
}}
""")
    try:
        yield
    finally:
        subprocess.run(["nft", "delete", "table", "inet", NFT_TABLE], capture_output=True, timeout=10)


def rule_packets(comment: str) -> int:
    ruleset = json.loads(_nft("-j", "list", "table", "inet", NFT_TABLE))
    for item in ruleset.get("nftables", []):
        rule = item.get("rule")
        if rule and rule.get("comment") == comment:
            for expression in rule.get("expr", []):
                if "counter" in expression:
                    return int(expression["counter"]["packets"])
    raise AssertionError(f"no nft rule {comment}: {ruleset}")


def make_certificate(workdir: Path) -> tuple[Path, Path]:
    """A self-signed certificate for TURN_IP (subjectAltName IP), which the clients trust through
    SSL_CERT_FILE: the TLS link verifies the server like any other."""
    cert, key = workdir / "turn-cert.pem", workdir / "turn-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=understudy turn test",
         "-addext", f"subjectAltName=IP:{TURN_IP}"],
        check=True, capture_output=True, timeout=30)
    return cert, key


@contextmanager
def coturn(workdir: Path, port: int, tls_port: int, extra: list[str] | None = None) -> Iterator[subprocess.Popen]:
    """turnserver with long-term credentials on TURN_IP: UDP and TCP on `port`, TLS on `tls_port`."""
    log = workdir / "turnserver.log"
    cert, key = make_certificate(workdir)
    proc = subprocess.Popen(
        ["turnserver", "-n", "--no-cli", "--listening-ip", TURN_IP, "--relay-ip", TURN_IP,
         "--listening-port", str(port), "--tls-listening-port", str(tls_port),
         "--min-port", "50000", "--max-port", "50200",
         "--lt-cred-mech", "--user", f"{TURN_USER}:{TURN_PASSWORD}", "--realm", TURN_REALM,
         "--cert", str(cert), "--pkey", str(key),
         "--allow-loopback-peers", "--no-dtls", "--no-multicast-peers",
         "--log-file", str(log), "--simple-log", "--no-stdout-log", "--pidfile", str(workdir / "turnserver.pid"),
         *(extra or [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"turnserver exited {proc.returncode}: {log.read_text(errors='replace')[-2000:]}"
            udp = subprocess.run(["ss", "-Hlun", f"src {TURN_IP}:{port}"], capture_output=True, text=True)
            tls = subprocess.run(["ss", "-Hltn", f"src {TURN_IP}:{tls_port}"], capture_output=True, text=True)
            if udp.stdout.strip() and tls.stdout.strip():
                break
            time.sleep(0.1)
        else:
            raise AssertionError("turnserver did not listen within 20 s")
        yield proc
    finally:
        kill_process(proc)


def _require_tools() -> None:
    for tool in ("turnserver", "nft", "ffprobe"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing (scripts/install-deps.sh installs it)")


def _record_through_turn(tmp_path: Path, server_extra: list[str], client_extra: list[str], room: str,
                         block_turn_udp: bool = False) -> None:
    _require_tools()
    turn_port, tls_port, port, media_port = free_port(), free_port(), free_port(), 44100

    def ports(args: list[str]) -> list[str]:
        return [a.replace("TURNPORT", str(turn_port)).replace("TLSPORT", str(tls_port)) for a in args]

    with coturn(tmp_path, turn_port, tls_port), \
            udp_blocked_except_relay(media_port, turn_port if block_turn_udp else 0):
        server = start_room_server(port, media_port, SECRET, extra_args=ports(server_extra))
        agents: list[AgentProcess] = []
        try:
            extra = ports(client_extra)
            host = AgentProcess("host", join_args(
                port, room, "host", "--mode", "SEND_AND_RECV", "--consume", "none", *extra), tmp_path)
            agents.append(host)
            host.wait_for(rf"joined room {room} as host \(SEND_AND_RECV\)")
            out = tmp_path / "rec"
            agent = AgentProcess("agent", join_args(
                port, room, "agent", "--consume", "all", "--record", str(out), *extra), tmp_path)
            agents.append(agent)
            counts = wait_for_frames(out / "host.webm", {"vp8": 60, "opus": 100}, timeout=90)
            print(f"recorded through TURN: {counts}")
            assert agent.terminate() == 0, agent.log()[-3000:]
            assert decode_errors(out / "host.webm") == ""
            frames = probe_frames(out / "host.webm")
            assert frames.get("vp8", 0) >= 60 and frames.get("opus", 0) >= 100, frames
            relayed, direct_in, direct_out = rule_packets("relayed-in"), rule_packets("direct-in"), rule_packets("direct-out")
            print(f"nft: relayed-in={relayed} direct-in={direct_in} direct-out={direct_out}")
            # Media and checks reached the server only from the relay; the direct checks were dropped.
            assert relayed >= 200, relayed
            assert direct_in > 0, "the clients never tried their host candidates: the block proves nothing"
        finally:
            for a in agents:
                a.stop()
            kill_process(server)


@pytest.mark.parametrize("url", [
    "turn:{auth}@{ip}:TURNPORT?transport=udp",
    "turn:{auth}@{ip}:TURNPORT?transport=tcp",
    "turns:{auth}@{ip}:TLSPORT?transport=tcp",
], ids=["udp", "tcp", "tls"])
def test_turn_from_the_ice_servers_flag(understudy, tmp_path, monkeypatch, url):
    # The clients verify coturn's self-signed certificate through the OpenSSL trust path.
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "turn-cert.pem"))
    ice = url.format(auth=f"{TURN_USER}:{TURN_PASSWORD}", ip=TURN_IP)
    # Over TCP and TLS no UDP may reach coturn at all: the stream is the only way out.
    _record_through_turn(tmp_path, [], ["--ice-servers", ice], "turn-flag", block_turn_udp="transport=tcp" in url)


def test_turns_refuses_a_certificate_it_cannot_verify(understudy, tmp_path):
    """Without the test certificate in the trust store the TLS link fails and says why."""
    _require_tools()
    turn_port, tls_port, port, media_port = free_port(), free_port(), free_port(), 44200
    with coturn(tmp_path, turn_port, tls_port), udp_blocked_except_relay(media_port):
        server = start_room_server(port, media_port, SECRET)
        agent = AgentProcess("host", join_args(
            port, "turns-bad", "host", "--mode", "SEND_AND_RECV", "--consume", "none", "--ice-servers",
            f"turns:{TURN_USER}:{TURN_PASSWORD}@{TURN_IP}:{tls_port}"), tmp_path)
        try:
            found = agent.wait_for(r"TURN: 0 of 1 allocated \(turns:[^)]*certificate: ([^)]*)\)", timeout=90)
            print(f"refused: {found.group(0)}")
            assert "self-signed" in found.group(1), found.group(0)
        finally:
            agent.stop()
            kill_process(server)


def test_turn_udp_handed_out_by_the_room_server(understudy, tmp_path):
    # The clients have no flag: the join response's iceServers tell them where to relay.
    ice = f"turn:{TURN_USER}:{TURN_PASSWORD}@{TURN_IP}:TURNPORT?transport=udp"
    _record_through_turn(tmp_path, ["--ice-servers", ice], [], "turn-handout")


def test_without_turn_the_block_stops_media(understudy, tmp_path):
    """The control: with the same rules and no TURN server the agent records nothing."""
    _require_tools()
    port, media_port = free_port(), 44300
    with udp_blocked_except_relay(media_port):
        server = start_room_server(port, media_port, SECRET)
        agents: list[AgentProcess] = []
        try:
            host = AgentProcess("host", join_args(
                port, "blocked", "host", "--mode", "SEND_AND_RECV", "--consume", "none"), tmp_path)
            agents.append(host)
            host.wait_for(r"joined room blocked as host \(SEND_AND_RECV\)")
            out = tmp_path / "rec"
            agent = AgentProcess("agent", join_args(
                port, "blocked", "agent", "--consume", "all", "--record", str(out)), tmp_path)
            agents.append(agent)
            agent.wait_for(r"joined room blocked as agent")
            # ICE gives up after its checks time out (about 13 s); wait for the publisher's failure.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and rule_packets("direct-in") < 10:
                time.sleep(0.5)
            time.sleep(5)
            assert rule_packets("direct-in") >= 10
            assert rule_packets("relayed-in") == 0
            recorded = out / "host.webm"
            counts = probe_frames(recorded) if recorded.exists() and recorded.stat().st_size > 0 else {}
            assert counts.get("vp8", 0) == 0 and counts.get("opus", 0) == 0, counts
        finally:
            for a in agents:
                a.stop()
            kill_process(server)


@contextmanager
def all_udp_blocked(media_port: int) -> Iterator[None]:
    """Drops every UDP datagram to or from the room server's media port (no TURN either)."""
    _nft("-f", "-", input_text=f"""
table inet {NFT_TABLE} {{
    chain output {{
        type filter hook output priority 0; policy accept;
        udp dport {media_port} counter drop comment "direct-in"
        udp sport {media_port} counter drop comment "direct-out"
        tcp dport {media_port} counter accept comment "tcp-in"
    }}
}}
""")
    try:
        yield
    finally:
        subprocess.run(["nft", "delete", "table", "inet", NFT_TABLE], capture_output=True, timeout=10)


def test_ice_tcp_connects_when_udp_is_dropped(understudy, tmp_path):
    """`serve --ice-tcp` advertises a passive TCP candidate on the media port's number; the
    clients open active ICE-TCP connections (RFC 6544, RFC 4571 framing) and media flows over TCP."""
    _require_tools()
    port, media_port = free_port(), 44400
    with all_udp_blocked(media_port):
        server = start_room_server(port, media_port, SECRET, extra_args=["--ice-tcp"])
        agents: list[AgentProcess] = []
        try:
            host = AgentProcess("host", join_args(
                port, "icetcp", "host", "--mode", "SEND_AND_RECV", "--consume", "none"), tmp_path)
            agents.append(host)
            host.wait_for(r"joined room icetcp as host \(SEND_AND_RECV\)")
            out = tmp_path / "rec"
            agent = AgentProcess("agent", join_args(
                port, "icetcp", "agent", "--consume", "all", "--record", str(out)), tmp_path)
            agents.append(agent)
            counts = wait_for_frames(out / "host.webm", {"vp8": 60, "opus": 100}, timeout=90)
            print(f"recorded over ICE-TCP: {counts}")
            assert agent.terminate() == 0, agent.log()[-3000:]
            assert decode_errors(out / "host.webm") == ""
            established = subprocess.run(
                ["ss", "-Htn", "state", "established", f"sport = :{media_port}"], capture_output=True, text=True)
            direct_in, tcp_in = rule_packets("direct-in"), rule_packets("tcp-in")
            print(f"nft: udp dropped={direct_in} tcp segments in={tcp_in}; established: {established.stdout!r}")
            assert direct_in > 0, "the clients never tried UDP: the block proves nothing"
            assert tcp_in >= 200, tcp_in
            assert rule_packets("direct-out") == 0
        finally:
            for a in agents:
                a.stop()
            kill_process(server)


def test_load_bots_relay_through_turn_tcp(understudy, tmp_path):
    """`understudy load --ice-servers`: every bot's publish and subscribe connection relays through
    coturn over TCP (UDP to the room server and to coturn dropped) with no loss."""
    _require_tools()
    turn_port, tls_port, port, media_port = free_port(), free_port(), free_port(), 44500
    with coturn(tmp_path, turn_port, tls_port), udp_blocked_except_relay(media_port, turn_port):
        server = start_room_server(port, media_port, SECRET)
        try:
            report_path = tmp_path / "load.json"
            result = run_understudy(
                ["load", "--server", f"http://127.0.0.1:{port}", "--room", "turn-load", "--secret", SECRET,
                 "--publishers", "1", "--subscribers", "4", "--duration", "8s", "--json", str(report_path),
                 "--ice-servers", f"turn:{TURN_USER}:{TURN_PASSWORD}@{TURN_IP}:{turn_port}?transport=tcp"],
                timeout=120)
            assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
            report = json.loads(report_path.read_text())
            relayed = rule_packets("relayed-in")
            print(f"load through TURN-TCP: joined={report['joinedParticipants']} tracks={report['subscribedTracks']} "
                  f"loss={report['lossPercent']}% relayed-in={relayed}")
            assert report["joinedParticipants"] == 5
            assert report["subscribedTracks"] >= 4
            assert report["lossPercent"] < 1.0
            assert relayed >= 200
        finally:
            kill_process(server)


def test_allocation_is_refreshed_through_stale_nonces(understudy, tmp_path):
    """coturn grants 6 s allocations and lets nonces go stale after 2 s: the client must refresh
    before expiry (every 3 s here), answer each 438 Stale Nonce with the new nonce (a dozen times in
    a row: the retry limit is per request), keep the media flowing, and release on close."""
    _require_tools()
    turn_port, tls_port, port, media_port = free_port(), free_port(), free_port(), 44800
    extra = ["--stale-nonce=2", "--max-allocate-lifetime=6", "--verbose"]
    with coturn(tmp_path, turn_port, tls_port, extra), udp_blocked_except_relay(media_port):
        server = start_room_server(port, media_port, SECRET)
        agents: list[AgentProcess] = []
        try:
            ice = ["--ice-servers", f"turn:{TURN_USER}:{TURN_PASSWORD}@{TURN_IP}:{turn_port}?transport=udp"]
            host = AgentProcess("host", join_args(
                port, "refresh", "host", "--mode", "SEND_AND_RECV", "--consume", "none", *ice), tmp_path)
            agents.append(host)
            host.wait_for(r"joined room refresh as host \(SEND_AND_RECV\)")
            out = tmp_path / "rec"
            agent = AgentProcess("agent", join_args(
                port, "refresh", "agent", "--consume", "all", "--record", str(out), *ice), tmp_path)
            agents.append(agent)
            # 45 s of audio: seven allocation lifetimes, each refreshed through a stale nonce.
            counts = wait_for_frames(out / "host.webm", {"opus": 45 * 50}, timeout=150)
            print(f"recorded across refreshes: {counts}")
            assert agent.terminate() == 0, agent.log()[-3000:]
            assert decode_errors(out / "host.webm") == ""
            log = (tmp_path / "turnserver.log").read_text(errors="replace")
            refreshed = [line for line in log.splitlines() if "REFRESH" in line and "success" in line]
            stale = [line for line in log.splitlines() if "error 438" in line]
            print(f"coturn: {len(refreshed)} refreshes, {len(stale)} stale-nonce answers")
            assert len(refreshed) >= 24, log[-3000:]
            assert len(stale) >= 24, log[-3000:]
            # The agent's release (Refresh with lifetime 0) went through, stale nonce or not.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "lifetime=0" not in log:
                time.sleep(0.2)
                log = (tmp_path / "turnserver.log").read_text(errors="replace")
            assert "lifetime=0" in log, log[-3000:]
        finally:
            for a in agents:
                a.stop()
            kill_process(server)


def test_wrong_turn_password_fails_with_the_servers_reason(understudy, tmp_path):
    _require_tools()
    turn_port, tls_port, port, media_port = free_port(), free_port(), free_port(), 44900
    with coturn(tmp_path, turn_port, tls_port), udp_blocked_except_relay(media_port):
        server = start_room_server(port, media_port, SECRET)
        host = AgentProcess("host", join_args(
            port, "badpass", "host", "--mode", "SEND_AND_RECV", "--consume", "none", "--ice-servers",
            f"turn:{TURN_USER}:wrong@{TURN_IP}:{turn_port}"), tmp_path)
        try:
            found = host.wait_for(r"TURN: 0 of 1 allocated \(turn:[^)]*Allocate refused: (\d+)[^)]*\)", timeout=90)
            print(f"refused: {found.group(0)}")
            assert found.group(1) == "401"
        finally:
            host.stop()
            kill_process(server)
