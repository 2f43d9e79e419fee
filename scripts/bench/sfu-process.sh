#!/usr/bin/env bash
# The SFU figure as a user sees it: the whole `understudy serve` process in a steady room.
#
#   scripts/bench/sfu-process.sh [BIN] [SUBSCRIBERS] [OUT_DIR] [PERF]
#
# Runs serve and `understudy load` (2 simulcast publishers, SUBSCRIBERS subscribers, 3x3 layout)
# inside its own network namespace (loopback only), waits until every bot has joined, then reads the
# serve process's CPU (user and kernel, /proc/PID/stat) and its forwarded-packet counter (/metrics)
# over a 15 s window. PERF=1 records a perf profile of that window into OUT_DIR/perf.data.
# Note: on loopback the kernel delivers each datagram to the receiving bot inside the sender's
# sendmmsg, so the kernel share is higher than with a real NIC.
set -u
if [ "${SFU_PROCESS_IN_NETNS:-0}" != 1 ]; then
  exec unshare -n env SFU_PROCESS_IN_NETNS=1 "$0" "$@"
fi
BIN=${1:-.build/release/understudy}; N=${2:-100}; OUT=${3:-/tmp/sfu-process}; PERF=${4:-0}
ip link set lo up
mkdir -p "$OUT"
"$BIN" serve --secret s3cret --listen 127.0.0.1:7880 > "$OUT/serve.log" 2>&1 &
SPID=$!
sleep 2
"$BIN" load --server http://127.0.0.1:7880 --room r --secret s3cret --publishers 2 --subscribers "$N" --layout 3x3 \
  --join-rate 25 --duration 50 --quiet --json "$OUT/load.json" > "$OUT/load.log" 2>&1 &
LPID=$!
sleep $((N / 25 + 12))
sample() {
  local stat; stat=$(cat /proc/$SPID/stat); stat=${stat##*) }
  set -- $stat
  local cpu="${12} ${13}"
  local pk; pk=$(curl -s 127.0.0.1:7880/metrics | awk '/^understudy_rtp_packets_forwarded_total/ {print $2}')
  echo "$cpu $pk $(date +%s.%N)"
}
read u1 s1 p1 t1 < <(sample)
if [ "$PERF" = 1 ]; then perf record -F 499 -g -p $SPID -o "$OUT/perf.data" -- sleep 15 > /dev/null 2>&1; else sleep 15; fi
read u2 s2 p2 t2 < <(sample)
HZ=$(getconf CLK_TCK)
python3 - "$u1" "$s1" "$u2" "$s2" "$p1" "$p2" "$t1" "$t2" "$HZ" "$(grep VmRSS /proc/$SPID/status)" <<'PY'
import sys
u1,s1,u2,s2,p1,p2,t1,t2,hz=map(float,sys.argv[1:10])
w=t2-t1; user=(u2-u1)/hz/w; sys_=(s2-s1)/hz/w; cores=user+sys_; pps=(p2-p1)/w
print(f"window {w:.1f}s: forwarded {pps:.0f} packets/s on {cores:.3f} cores (user {user:.3f}, kernel {sys_:.3f}) = {pps/cores:.0f} packets/s per core, {pps/user:.0f} per user-space core; {sys.argv[10]}")
PY
wait $LPID
kill $SPID; wait $SPID 2>/dev/null
