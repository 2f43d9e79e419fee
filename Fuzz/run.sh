#!/usr/bin/env bash
# Builds and runs the libFuzzer targets for every RTCWire parser.
#
#   Fuzz/run.sh [ITERATIONS] [TARGET...]     (default 1000000 iterations, all targets)
#
# All of Sources/RTCWire is compiled once with `swiftc -sanitize=fuzzer,address -O -wmo` into a
# static library; each target, Fuzz/Targets/<name>.swift (`import RTCWire` + LLVMFuzzerTestOneInput),
# is compiled and linked against it. A target whose
# file says `// requires: Symbol` is skipped while no Sources/RTCWire file declares that symbol.
# Binaries go to Fuzz/out/, corpora to Fuzz/corpus/<name> (both gitignored). Exits non-zero when
# any target fails to build or finds a crash; the crashing input is saved as Fuzz/out/<name>-crash-*.
set -euo pipefail

ITERATIONS="${1:-1000000}"
shift || true
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SWIFTC="${SWIFTC:-$(command -v swiftc || echo /opt/swift/usr/bin/swiftc)}"
OUT="$ROOT/Fuzz/out"
CORPUS="$ROOT/Fuzz/corpus"
mkdir -p "$OUT" "$CORPUS"
# Let libFuzzer handle crashes: Swift's own backtracer reads memory in ways ASan reports as bogus errors.
export SWIFT_BACKTRACE=enable=no

mapfile -t SOURCES < <(find Sources/RTCWire -name '*.swift' | sort)
if grep -l '^import Foundation' "${SOURCES[@]}" >/dev/null 2>&1; then
    echo "warning: Sources/RTCWire imports Foundation (it should be pure Swift):" >&2
    grep -l '^import Foundation' "${SOURCES[@]}" >&2
fi

if [[ $# -gt 0 ]]; then
    TARGETS=("$@")
else
    TARGETS=()
    for f in Fuzz/Targets/*.swift; do TARGETS+=("$(basename "$f" .swift)"); done
fi

max_len_for() { [[ "$1" == sdp ]] && echo 16384 || echo 4096; }

# Writes a hex string as a binary seed file.
seed() { printf '%s' "$2" | xxd -r -p >"$1" 2>/dev/null || python3 -c "import sys;open(sys.argv[1],'wb').write(bytes.fromhex(sys.argv[2]))" "$1" "$2"; }

make_corpus() {
    local name="$1" dir="$CORPUS/$1"
    mkdir -p "$dir"
    [[ -n "$(ls -A "$dir" 2>/dev/null)" ]] && return 0
    case "$name" in
    stun)
        # RFC 5769 §2.1 sample request (with MESSAGE-INTEGRITY and FINGERPRINT).
        seed "$dir/rfc5769-request" "000100582112a442b7e7a701bc34d686fa87dfae802200105354554e207465737420636c69656e74002400046e0001ff80290008932ff9b151263b36000600096576746a3a68367659202020000800149aeaa70cbfd8cb56781ef2b5b2d3f249c1b571a280280004e57a3bcf"
        seed "$dir/binding-request" "000100002112a442000102030405060708090a0b"
        ;;
    sdp)
        local src=""
        if [[ -d /work/shared/data/sdp ]]; then src=/work/shared/data/sdp; fi
        if [[ -z "$src" && -d Tests/RTCWireTests/SDPVectors ]]; then src=Tests/RTCWireTests/SDPVectors; fi
        if [[ -n "$src" ]]; then cp "$src"/*.sdp "$dir"/ 2>/dev/null || true; fi
        printf 'v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:111 opus/48000/2\r\n' >"$dir/minimal.sdp"
        ;;
    rtp)
        seed "$dir/plain" "8060000100000001000000020102030405"
        seed "$dir/one-byte-ext" "906f1234deadbeef01020304bede0003103021686932abcdef40aa00aabb"
        seed "$dir/two-byte-ext" "90600001000000010000000210000002140272300302000790e08001054010"
        seed "$dir/padded-csrc" "a16000010000000100000002000000aa01020002"
        seed "$dir/vp8-keyframe" "806000010000000100000002105042009d012a"
        seed "$dir/opus-code3" "806f0001000000010000000283050000"
        ;;
    rtcp)
        seed "$dir/sr-sdes" "81c8000c11223344e87b1c2d800000000001e2400000006400003e80aabbccdd40fffffe00010005000000201c2d80000001000081ca0003112233440103616263000000"
        seed "$dir/rr" "81c9000711223344aabbccdd40fffffe00010005000000201c2d800000010000"
        seed "$dir/nack-pli-fir" "81cd0004000000011122334400640005ffff000181ce0002000000011122334484ce000400000001000000001122334407000000"
        seed "$dir/remb-bye" "8fce0005000000010000000052454d42010bd0901122334481cb00021122334403627965"
        seed "$dir/twcc" "8fcd000a00000001112233440100001400123405200ce141a0000404080004040404040404ffff9c10140102"
        seed "$dir/app" "82cc00020102030441424344"
        ;;
    vp8)
        seed "$dir/minimal" "105042009d012a"
        seed "$dir/full" "b2f0923405a39d"
        seed "$dir/pid7" "80807f00"
        ;;
    opus)
        for hex in f80102 f90102 fa01aabb fb03000000 030c 8330 fc; do seed "$dir/toc-$hex" "$hex"; done
        ;;
    esac
    # Drop seeds that failed to decode (odd hex) so libFuzzer does not choke on empty files.
    find "$dir" -type f -empty -delete
    [[ -n "$(ls -A "$dir")" ]] || printf '\x80' >"$dir/one-byte"
}

LIB="$OUT/libRTCWireFuzz.a"
MODULE_DIR="$OUT/module"

# Compiles all of Sources/RTCWire once, whole-module, with fuzzer coverage and ASan, into a static
# library plus module that every target links (one optimized compile instead of one per target).
build_library() {
    if [[ -f "$LIB" && -f "$MODULE_DIR/RTCWire.swiftmodule" ]] \
        && [[ -z "$(find "${SOURCES[@]}" -newer "$LIB" | head -1)" ]]; then
        return 0
    fi
    echo "build RTCWire (sanitized, -O)"
    mkdir -p "$MODULE_DIR"
    # Compile a snapshot: other people may be saving files in Sources/RTCWire meanwhile.
    local snap log="$OUT/RTCWire.build.log"
    snap="$(mktemp -d)"
    cp --parents "${SOURCES[@]}" "$snap"/
    if ! (cd "$snap" && "$SWIFTC" -sanitize=fuzzer,address -parse-as-library -O -wmo -module-name RTCWire \
        -emit-module -emit-module-path "$MODULE_DIR/RTCWire.swiftmodule" \
        -emit-library -static -o "$LIB" "${SOURCES[@]}") >"$log" 2>&1; then
        cat "$log" >&2
        rm -rf "$snap" "$LIB"
        return 1
    fi
    rm -rf "$snap"
}

build_target() {
    local name="$1" entry="Fuzz/Targets/$1.swift" bin="$OUT/$1"
    [[ -f "$entry" ]] || { echo "no such target: $name" >&2; return 1; }
    local needed
    needed="$(sed -n 's|^// requires: *\([A-Za-z0-9_]*\).*|\1|p' "$entry" | head -1)"
    if [[ -n "$needed" ]] && ! grep -qE "(enum|struct|class) $needed\b" "${SOURCES[@]}"; then
        echo "skip $name: $needed not in Sources/RTCWire yet"
        return 2
    fi
    if [[ -x "$bin" && "$bin" -nt "$LIB" && "$bin" -nt "$entry" ]]; then return 0; fi
    echo "build $name"
    local log="$OUT/$name.build.log"
    if ! "$SWIFTC" -sanitize=fuzzer,address -parse-as-library -O -module-name "Fuzz_$name" -I "$MODULE_DIR" \
        "$entry" -L "$OUT" -lRTCWireFuzz -o "$bin" >"$log" 2>&1; then
        grep -v 'Cannot export local symbol' "$log" >&2 || true
        return 1
    fi
}

if ! build_library; then
    echo "FAILED: RTCWire does not compile with -sanitize=fuzzer,address" >&2
    exit 1
fi

failed=()
summary=()
for name in "${TARGETS[@]}"; do
    set +e
    build_target "$name"
    rc=$?
    set -e
    if [[ $rc -eq 2 ]]; then summary+=("$(printf '%-6s skipped (entry function not written yet)' "$name")"); continue; fi
    if [[ $rc -ne 0 ]]; then failed+=("$name (build)"); summary+=("$(printf '%-6s BUILD FAILED' "$name")"); continue; fi
    make_corpus "$name"
    log="$OUT/$name.log"
    echo "run   $name: $ITERATIONS iterations"
    start=$(date +%s.%N)
    set +e
    "$OUT/$name" -runs="$ITERATIONS" -max_len="$(max_len_for "$name")" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$OUT/$name-" "$CORPUS/$name" >"$log" 2>&1
    rc=$?
    set -e
    elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 || true)
    if [[ $rc -ne 0 ]]; then
        failed+=("$name")
        summary+=("$(printf '%-6s CRASH after %s runs, %ss (see %s)' "$name" "${runs:-?}" "$elapsed" "$log")")
        grep -E 'ERROR|Fatal error|Precondition|SUMMARY|Test unit written' "$log" | head -10 >&2 || true
    else
        summary+=("$(printf '%-6s ok  %s runs in %ss, %s' "$name" "${runs:-?}" "$elapsed" "$cov")")
    fi
done

echo
echo "fuzz summary ($ITERATIONS iterations per target):"
printf '  %s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "FAILED: ${failed[*]}" >&2
    exit 1
fi
