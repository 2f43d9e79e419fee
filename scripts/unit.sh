#!/usr/bin/env bash
# Runs the Swift unit tests one test target per process, one process after another.
#
#   scripts/unit.sh [swift build/test flags...]      (SWIFT_BUILD_FLAGS, e.g. --scratch-path, pass through)
#
# Why not one `swift test`: Swift Testing runs every suite of a process on one cooperative pool of
# one thread per core. A suite that encodes, decodes or waits for ffprobe holds a pool thread for
# seconds; in one process with every target, such suites starved the waits of all the others (on 2
# cores, a CI run saw RoomServer requests time out after a 35-second stall, while RoomServerTests
# alone pass in 16 s). A process per target gives each target its own pool, so a media target's
# work can only slow its own tests.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SWIFT="${SWIFT:-swift}"
"$SWIFT" build --build-tests "$@" || exit 1
status=0
failed=()
for dir in Tests/*Tests; do
    target="$(basename "$dir")"
    echo "unit: $target"
    if ! "$SWIFT" test --skip-build "$@" --filter "^$target\\."; then
        status=1
        failed+=("$target")
    fi
done
[ "$status" = 0 ] || echo "unit: failed: ${failed[*]}" >&2
exit "$status"
