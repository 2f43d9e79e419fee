#!/usr/bin/env bash
# Runs the interop suite: each Tests/Interop/test_*.py file in its own network
# namespace (only `lo` exists there, so no traffic can leave loopback).
#
#   scripts/interop.sh [Tests/Interop/test_x.py ...]   (default: every test file)
#
# Env: SWIFT_BUILD_FLAGS (e.g. "--scratch-path /tmp/build-me"), UNDERSTUDY_BIN and
# INTEROP_PEER_BIN (override the binaries), INTEROP_SKIP_BUILD=1 (don't swift build).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SWIFT="${SWIFT:-swift}"
read -r -a BUILD_FLAGS <<<"${SWIFT_BUILD_FLAGS:-}"

if [[ ! -x .venv/bin/pytest ]]; then
    scripts/install-deps.sh || exit 1
fi

if [[ "${INTEROP_SKIP_BUILD:-0}" != 1 ]]; then
    echo "interop: building Swift binaries" >&2
    if ! "$SWIFT" build "${BUILD_FLAGS[@]}" --product understudy >&2 ||
        ! "$SWIFT" build "${BUILD_FLAGS[@]}" --product interop-peer >&2; then
        echo "interop: swift build failed" >&2
        echo "interop: 0 passed, 1 failed"
        exit 1
    fi
fi
BIN_DIR="$("$SWIFT" build "${BUILD_FLAGS[@]}" --show-bin-path 2>/dev/null || echo "$ROOT/.build/debug")"
export UNDERSTUDY_BIN="${UNDERSTUDY_BIN:-$BIN_DIR/understudy}"
export INTEROP_PEER_BIN="${INTEROP_PEER_BIN:-$BIN_DIR/interop-peer}"
export PYTHONDONTWRITEBYTECODE=1

if (($# > 0)); then
    files=("$@")
else
    files=(Tests/Interop/test_*.py)
fi

REPORTS="$(mktemp -d /tmp/understudy-interop.XXXXXX)"
trap 'rm -rf "$REPORTS"' EXIT

failed_files=()
index=0
for file in "${files[@]}"; do
    if [[ ! -f "$file" ]]; then
        echo "interop: no such file $file" >&2
        failed_files+=("$file")
        echo "$file" >>"$REPORTS/crashed"
        continue
    fi
    index=$((index + 1))
    echo "interop: $file (own network namespace)" >&2
    # A hard cap per file, so that a hung peer can never stall CI.
    if ! timeout -k 10 600 unshare -n sh -c \
        'ip link set lo up && exec .venv/bin/pytest -q -p no:cacheprovider --junitxml="$2" "$1"' \
        sh "$file" "$REPORTS/$index.xml"; then
        failed_files+=("$file")
        [[ -s "$REPORTS/$index.xml" ]] || echo "$file" >>"$REPORTS/crashed"
    fi
done

# Count test cases from the JUnit reports; a file that
# crashed before writing one (or a missing file) counts as one failure.
read -r passed failed < <(.venv/bin/python - "$REPORTS" <<'PY'
import sys, glob, os, xml.etree.ElementTree as ET
passed = failed = 0
crashed = os.path.join(sys.argv[1], "crashed")
if os.path.exists(crashed):
    failed += len(open(crashed).read().split())
for path in glob.glob(sys.argv[1] + "/*.xml"):
    for suite in ET.parse(path).getroot().iter("testsuite"):
        total = int(suite.get("tests", 0))
        bad = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        passed += total - bad - int(suite.get("skipped", 0))
        failed += bad
print(passed, failed)
PY
)

if ((${#failed_files[@]} > 0)); then
    echo "interop: failing files: ${failed_files[*]}" >&2
fi
echo "interop: $passed passed, $failed failed"
((${#failed_files[@]} == 0 && passed > 0))
