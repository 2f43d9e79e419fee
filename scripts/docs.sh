#!/usr/bin/env bash
# Builds the DocC archives of the library products (`make docs`) into $DOCS_DIR (default
# .build/docs) from symbol graphs of the already-built modules, and fails when a public symbol of
# the SDK (`Understudy`) has no documentation comment.
#
#   scripts/docs.sh            SWIFT_BUILD_FLAGS="--scratch-path /tmp/b" scripts/docs.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SWIFT="${SWIFT:-swift}"
read -r -a BUILD_FLAGS <<<"${SWIFT_BUILD_FLAGS:-}"
DOCS_DIR="${DOCS_DIR:-$ROOT/.build/docs}"
MODULES=(${DOCS_MODULES:-Understudy RoomProtocol Janus Agent WHIP LoadGen Scenario RoomServer SFU Cluster Fleet Signaling Media RTC RTCWire Redis})

"$SWIFT" build "${BUILD_FLAGS[@]}" >&2
BIN="$("$SWIFT" build "${BUILD_FLAGS[@]}" --show-bin-path)"
TRIPLE="$("$SWIFT" -print-target-info | python3 -c 'import json,sys; print(json.load(sys.stdin)["target"]["triple"])')"
DOCC="$(command -v docc || echo /opt/swift/usr/bin/docc)"

# The C modules the Swift modules import, as the build saw them.
C_FLAGS=()
for dir in CModules/*/; do C_FLAGS+=(-I "$dir"); done
C_FLAGS+=(-Xcc -I/usr/include/opus -Xcc -ICModules/CAudioProcessing/include)
C_FLAGS+=(-Xcc "-fmodule-map-file=$BIN/CAudioProcessing.build/module.modulemap")

GRAPHS="$(mktemp -d /tmp/understudy-symbols.XXXXXX)"
trap 'rm -rf "$GRAPHS"' EXIT
mkdir -p "$DOCS_DIR"
for module in "${MODULES[@]}"; do
    mkdir -p "$GRAPHS/$module"
    swift-symbolgraph-extract -module-name "$module" -I "$BIN/Modules" -target "$TRIPLE" \
        -minimum-access-level public -output-dir "$GRAPHS/$module" "${C_FLAGS[@]}"
    catalog=()
    [[ -d "Sources/$module/$module.docc" ]] && catalog=("Sources/$module/$module.docc")
    "$DOCC" convert "${catalog[@]}" --additional-symbol-graph-dir "$GRAPHS/$module" \
        --fallback-display-name "$module" --fallback-bundle-identifier "understudy.$module" \
        --output-path "$DOCS_DIR/$module.doccarchive" >"$GRAPHS/$module.log" 2>&1 ||
        { cat "$GRAPHS/$module.log" >&2; echo "docs: docc convert failed for $module" >&2; exit 1; }
    echo "docs: $DOCS_DIR/$module.doccarchive" >&2
done
python3 scripts/check_sdk_docs.py "$GRAPHS/Understudy" Understudy
echo "docs: every public symbol of Understudy is documented" >&2
