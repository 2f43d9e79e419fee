#!/usr/bin/env bash
# Builds and runs the libFuzzer targets: every parser that network or file input reaches.
#
#   Fuzz/run.sh [RUNS] [TARGET...]     (default 10^7 runs per target, all targets)
#
# Environment:
#   FUZZ_MAX_TIME=S   stop each target after S seconds even if RUNS were not reached (CI safety net)
#   FUZZ_JOBS=N       parallel compiles (default: number of cores)
#   FUZZ_PARALLEL=N   targets fuzzed at the same time (default: FUZZ_JOBS)
#   FUZZ_OUT, FUZZ_CORPUS  other folders for binaries/logs and corpora (e.g. a long run beside short ones)
#
# Each target, Fuzz/Targets/<name>.swift, defines LLVMFuzzerTestOneInput and names the library it
# fuzzes in a `// library: NAME` line (default RTCWire). The libraries are compiled once each with
# `swiftc -sanitize=fuzzer,address -O -wmo -enable-testing` into static libraries plus modules:
#   RTCWire    Sources/RTCWire (pure Swift)
#   SystemCalls Sources/SystemCalls (the epoll/eventfd/mmsg bindings Signaling's reactor uses)
#   Signaling  Sources/Signaling (Foundation, OpenSSL through CModules/COpenSSL; links -lssl -lcrypto)
#   RoomProtocol  Sources/RoomProtocol over Signaling (envelopes, tokens; links -lssl -lcrypto)
#   Media      Sources/Media/Files + MediaError.swift: the container readers only (no codec libraries)
#   RTC        Sources/RTC/RTP + SRTPReplayWindow.swift: the RTP receive/send engine (pure Swift over RTCWire; no DTLS/SRTP crypto/sockets)
#   SRTP       Sources/RTC/SRTP: SRTPSession over OpenSSL's libcrypto (not the libsrtp reference)
#   Cluster    Sources/Cluster/NodeRecord.swift + Sources/RoomProtocol/NameEscaping.swift: registrations read from Redis
#   Agent      Sources/Agent/AgentJobOptions.swift: a job's agent options as data (Foundation only),
#              with RoomProtocol's vocabulary (RoomVocabulary.swift) compiled beside it
#   Fleet      Sources/Fleet/FleetJob.swift + FleetRecords.swift: the job records read from Redis (over Agent)
#   RTMP       Sources/Egress/Outputs/RTMPChunkReader.swift + AMF0.swift: an RTMP server's replies
# Targets use `@testable import` where they drive internal types.
#
# Seeds: Fuzz/seeds/<name>/ (committed, real inputs) are copied into the working corpus
# Fuzz/corpus/<name>/ before each run. Binaries and logs go to Fuzz/out/ (both gitignored). Exits
# non-zero when a target fails to build or finds a crash; the crashing input is saved as
# Fuzz/out/<name>-crash-* (add it to Fuzz/seeds/<name>/ together with the fix).
set -euo pipefail

RUNS="${1:-10000000}"
shift || true
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SWIFTC="${SWIFTC:-$(command -v swiftc || echo /opt/swift/usr/bin/swiftc)}"
OUT="${FUZZ_OUT:-$ROOT/Fuzz/out}"
CORPUS="${FUZZ_CORPUS:-$ROOT/Fuzz/corpus}"
SEEDS="$ROOT/Fuzz/seeds"
MODULE_DIR="$OUT/module"
JOBS="${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}"
mkdir -p "$OUT" "$CORPUS" "$MODULE_DIR"
# Let libFuzzer handle crashes: Swift's own backtracer reads memory in ways ASan reports as bogus errors.
export SWIFT_BACKTRACE=enable=no

lib_sources() {
    case "$1" in
    RTCWire) find Sources/RTCWire -name '*.swift' ;;
    SystemCalls) find Sources/SystemCalls -name '*.swift' ;;
    Signaling) find Sources/Signaling -name '*.swift' ;;
    Media) find Sources/Media/Files -name '*.swift' && echo Sources/Media/MediaError.swift ;;
    # The RTP engine's dedupe and given-up windows reuse the SRTP replay window (pure Swift).
    RTC) find Sources/RTC/RTP -name '*.swift' && echo Sources/RTC/SRTP/SRTPReplayWindow.swift ;;
    # Records read from Redis: node registrations (Foundation only) and the name escaping of their keys.
    Cluster) printf '%s\n' Sources/Cluster/NodeRecord.swift Sources/RoomProtocol/NameEscaping.swift ;;
    SRTP) printf '%s\n' Sources/RTC/SRTP/SRTPSession.swift Sources/RTC/SRTP/SRTPCrypto.swift \
        Sources/RTC/SRTP/SRTPReplayWindow.swift Sources/RTC/DTLS/SRTPProfile.swift ;;
    # A job's agent options (Foundation only): what the Fleet records carry.
    Agent) printf '%s\n' Sources/Agent/AgentJobOptions.swift Sources/RoomProtocol/RoomVocabulary.swift ;;
    Fleet) printf '%s\n' Sources/Fleet/FleetJob.swift Sources/Fleet/FleetRecords.swift ;;
    # What an RTMP server sends the composite's RTMP client: the chunk stream and AMF0 (pure Swift).
    RTMP) printf '%s\n' Sources/Egress/Outputs/RTMPChunkReader.swift Sources/Egress/Outputs/AMF0.swift ;;
    # The room's vocabulary: envelopes, tokens (HMAC through OpenSSL), errors, over Signaling.
    RoomProtocol) find Sources/RoomProtocol -name '*.swift' ;;
    *) return 1 ;;
    esac | sort
}
lib_deps() {
    case "$1" in
    Media | RTC) echo RTCWire ;;
    Signaling) echo SystemCalls ;;
    Fleet) echo Agent ;;
    RoomProtocol) echo Signaling SystemCalls ;;
    *) ;;
    esac
}
C_MODULES=(-I "$ROOT/CModules/COpenSSL")
# One package name for every library and target, as SwiftPM gives them: `package` declarations need it.
SANITIZE=(-sanitize=fuzzer,address -parse-as-library -O -package-name understudy)

if grep -l '^import Foundation' $(lib_sources RTCWire) >/dev/null 2>&1; then
    echo "warning: Sources/RTCWire imports Foundation (it should be pure Swift)" >&2
fi

if [[ $# -gt 0 ]]; then
    TARGETS=("$@")
else
    TARGETS=()
    for f in Fuzz/Targets/*.swift; do TARGETS+=("$(basename "$f" .swift)"); done
fi

library_of() { sed -n 's|^// library: *\([A-Za-z0-9_]*\).*|\1|p' "Fuzz/Targets/$1.swift" | head -1 | grep . || echo RTCWire; }
max_len_for() {
    case "$1" in
    sdp | signal | jwt | rtpreceiver | rtpsender | noderecord | fleetrecords | rtmp) echo 16384 ;;
    ivf | ogg | webm | http | websocket) echo 65536 ;;
    *) echo 4096 ;;
    esac
}

# Compiles library $1 whole-module into $OUT/lib$1Fuzz.a and its module, unless up to date.
build_library() {
    local name="$1" lib="$OUT/lib$1Fuzz.a" log="$OUT/$1.build.log" dep
    local -a sources
    mapfile -t sources < <(lib_sources "$name")
    if [[ -f "$lib" && -f "$MODULE_DIR/$name.swiftmodule" && -z "$(find "${sources[@]}" -newer "$lib" | head -1)" ]]; then
        local stale=""
        for dep in $(lib_deps "$name"); do [[ "$OUT/lib${dep}Fuzz.a" -nt "$lib" ]] && stale=1; done
        [[ -z "$stale" ]] && return 0
    fi
    echo "build library $name (sanitized, -O)"
    # Compile a snapshot: other people may be saving files meanwhile.
    local snap
    snap="$(mktemp -d)"
    cp --parents "${sources[@]}" "$snap"/
    if ! (cd "$snap" && "$SWIFTC" "${SANITIZE[@]}" -wmo -enable-testing -module-name "$name" \
        -I "$MODULE_DIR" "${C_MODULES[@]}" \
        -emit-module -emit-module-path "$MODULE_DIR/$name.swiftmodule" \
        -emit-library -static -o "$lib" "${sources[@]}") >"$log" 2>&1; then
        cat "$log" >&2
        rm -rf "$snap" "$lib"
        return 1
    fi
    rm -rf "$snap"
}

build_target() {
    local name="$1" entry="Fuzz/Targets/$1.swift" bin="$OUT/$1" lib dep
    lib="$(library_of "$name")"
    if [[ -x "$bin" && "$bin" -nt "$OUT/lib${lib}Fuzz.a" && "$bin" -nt "$entry" ]]; then return 0; fi
    local -a libs=(-l"${lib}Fuzz")
    for dep in $(lib_deps "$lib"); do libs+=(-l"${dep}Fuzz"); done
    [[ "$lib" == Signaling || "$lib" == SRTP || "$lib" == RoomProtocol ]] && libs+=(-lssl -lcrypto)
    echo "build $name"
    if ! "$SWIFTC" "${SANITIZE[@]}" -module-name "Fuzz_$name" -I "$MODULE_DIR" "${C_MODULES[@]}" \
        "$entry" -L "$OUT" "${libs[@]}" -o "$bin" >"$OUT/$name.build.log" 2>&1; then
        grep -v 'Cannot export local symbol' "$OUT/$name.build.log" >&2 || true
        return 1
    fi
}

for name in "${TARGETS[@]}"; do
    [[ -f "Fuzz/Targets/$name.swift" ]] || { echo "no such target: $name" >&2; exit 1; }
done

# Libraries the chosen targets need, dependencies first.
needed=()
for name in "${TARGETS[@]}"; do
    lib="$(library_of "$name")"
    for l in $(lib_deps "$lib") "$lib"; do [[ " ${needed[*]} " == *" $l "* ]] || needed+=("$l"); done
done
build_start=$(date +%s)
# 0: no dependencies; 1: only on level-0 libraries; 2: on a level-1 library (RoomProtocol over Signaling).
lib_level() {
    local deps d
    deps="$(lib_deps "$1")"
    [[ -z "$deps" ]] && { echo 0; return; }
    for d in $deps; do [[ -n "$(lib_deps "$d")" ]] && { echo 2; return; }; done
    echo 1
}
# Libraries without dependencies compile side by side, then the ones that import them, level by level.
lib_failed=""
for phase in 0 1 2; do
    lib_pids=()
    for lib in "${needed[@]}"; do
        [[ "$(lib_level "$lib")" == "$phase" ]] || continue
        build_library "$lib" &
        lib_pids+=("$!:$lib")
    done
    for entry in "${lib_pids[@]}"; do
        wait "${entry%%:*}" || lib_failed+=" ${entry#*:}"
    done
    [[ -z "$lib_failed" ]] || break
done
if [[ -n "$lib_failed" ]]; then
    echo "FAILED:$lib_failed does not compile with -sanitize=fuzzer,address" >&2
    exit 1
fi

# Targets compile and link independently: run up to $JOBS at once.
failed=()
summary=()
declare -A build_failed=()
pids=()
names=()
for name in "${TARGETS[@]}"; do
    while [[ $(jobs -rp | wc -l) -ge $JOBS ]]; do wait -n || true; done
    build_target "$name" &
    pids+=($!)
    names+=("$name")
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || build_failed[${names[$i]}]=1
done
echo "builds took $(($(date +%s) - build_start)) s"

# Runs target $1 and writes its one-line result to $OUT/$1.result ("ok ..." or "CRASH ...").
run_target() {
    local name="$1" log="$OUT/$1.log" rc start elapsed runs cov files
    mkdir -p "$CORPUS/$name"
    if [[ -d "$SEEDS/$name" ]]; then cp -n "$SEEDS/$name"/* "$CORPUS/$name"/ 2>/dev/null || true; fi
    [[ -n "$(ls -A "$CORPUS/$name")" ]] || printf '\x80' >"$CORPUS/$name/one-byte"
    local -a limits=(-runs="$RUNS")
    [[ -n "${FUZZ_MAX_TIME:-}" ]] && limits+=(-max_total_time="$FUZZ_MAX_TIME")
    echo "run   $name: $RUNS runs${FUZZ_MAX_TIME:+ (at most ${FUZZ_MAX_TIME}s)}"
    start=$(date +%s.%N)
    set +e
    "$OUT/$name" "${limits[@]}" -max_len="$(max_len_for "$name")" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$OUT/$name-" "$CORPUS/$name" >"$log" 2>&1
    rc=$?
    set -e
    elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 || true)
    files=$(find "$CORPUS/$name" -type f | wc -l)
    if [[ $rc -ne 0 ]]; then
        printf '%-9s CRASH after %s runs, %ss (see %s)\n' "$name" "${runs:-?}" "$elapsed" "$log" >"$OUT/$name.result"
        grep -E 'ERROR|Fatal error|Precondition|SUMMARY|Test unit written' "$log" | head -10 >&2 || true
    else
        printf '%-9s ok  %9s runs in %6ss, corpus %5s files, %s\n' "$name" "${runs:-?}" "$elapsed" "$files" \
            "$cov" >"$OUT/$name.result"
    fi
}

# Targets run side by side, FUZZ_PARALLEL (default: $JOBS) at a time.
run_start=$(date +%s)
for name in "${TARGETS[@]}"; do
    rm -f "$OUT/$name.result"
    [[ -n "${build_failed[$name]:-}" ]] && continue
    while [[ $(jobs -rp | wc -l) -ge ${FUZZ_PARALLEL:-$JOBS} ]]; do wait -n || true; done
    run_target "$name" &
done
wait
for name in "${TARGETS[@]}"; do
    if [[ -n "${build_failed[$name]:-}" ]]; then
        failed+=("$name (build)")
        summary+=("$(printf '%-9s BUILD FAILED (see %s)' "$name" "$OUT/$name.build.log")")
    elif [[ ! -f "$OUT/$name.result" ]]; then
        failed+=("$name")
        summary+=("$(printf '%-9s DID NOT RUN' "$name")")
    else
        summary+=("$(cat "$OUT/$name.result")")
        grep -q '^[^ ]* *ok ' "$OUT/$name.result" || failed+=("$name")
    fi
done
echo "runs took $(($(date +%s) - run_start)) s"

echo
echo "fuzz summary ($RUNS runs per target${FUZZ_MAX_TIME:+, at most ${FUZZ_MAX_TIME}s each}):"
printf '  %s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "FAILED: ${failed[*]}" >&2
    exit 1
fi
