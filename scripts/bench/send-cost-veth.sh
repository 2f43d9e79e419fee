#!/usr/bin/env bash
# What one UDP datagram costs the sending process's kernel time, over loopback and over a veth
# pair to a second network namespace (issue 15: is loopback's delivery, which Linux charges to the
# sender, the reason the SFU's whole-process figure is bound near 250k packets/s per core?).
# udp-send-cost.c measures the syscall patterns on loopback; this compares loopback with veth.
#
#   scripts/bench/send-cost-veth.sh [DATAGRAMS] [ROUNDS]     (default 200000, 3; needs root)
#
# Runs in its own network and mount namespaces: traffic stays on loopback and the veth pair.
set -euo pipefail
N="${1:-200000}"
ROUNDS="${2:-3}"
if [[ "${SEND_COST_INNER:-0}" != 1 ]]; then
    exec env SEND_COST_INNER=1 unshare -n -m "$0" "$N" "$ROUNDS"
fi
WORK="$(mktemp -d)"
cat >"$WORK/send.py" <<'PY'
import os, socket, sys, time
host, port, n, label = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
payload = b"x" * 300
t0 = os.times()
for i in range(n):
    s.sendto(payload, (host, port))
    if i % 2000 == 1999:
        time.sleep(0.002)  # the receiver keeps up: nothing is dropped
t1 = os.times()
print(f"{label}: kernel {(t1.system - t0.system) / n * 1e9:.0f} ns, user {(t1.user - t0.user) / n * 1e9:.0f} ns per datagram")
PY
cat >"$WORK/recv.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(3)
got = 0
try:
    while True:
        s.recv(2048)
        got += 1
except socket.timeout:
    pass
print(f"  received {got}")
PY
mount --make-rprivate /
mkdir -p /run/netns && mount -t tmpfs tmpfs /run/netns
ip link set lo up
ip netns add receiver
ip link add va type veth peer name vb
ip link set vb netns receiver
ip addr add 10.9.0.1/24 dev va && ip link set va up
ip netns exec receiver sh -c 'ip link set lo up && ip addr add 10.9.0.2/24 dev vb && ip link set vb up'
for _ in $(seq "$ROUNDS"); do
    python3 "$WORK/recv.py" 127.0.0.1 9100 &
    sleep 0.5
    python3 "$WORK/send.py" 127.0.0.1 9100 "$N" loopback
    wait
    ip netns exec receiver python3 "$WORK/recv.py" 10.9.0.2 9100 &
    sleep 0.5
    python3 "$WORK/send.py" 10.9.0.2 9100 "$N" veth
    wait
done
rm -rf "$WORK"
