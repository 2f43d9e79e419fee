#!/usr/bin/env bash
# Installs everything Understudy needs to build and test on Debian 12.
# Idempotent and fast when everything is present: apt-get runs only for missing
# packages, and the Python venv is rebuilt only when its stamp is stale.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Debian packages. The Swift toolchain at /opt/swift ships its own libFuzzer
# runtime (lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a), so `swiftc -sanitize=fuzzer`
# needs nothing extra; clang + libclang-rt-14-dev are for C-side sanitizers (LSan).
# janus (1.1.2) is an interop peer: Tests/Interop/test_janus.py runs its own instance with
# a private configuration, so the packaged service (if it starts) is never used.
# redis-server is started by the Redis, fleet and cluster tests themselves (a throw-away instance each).
DEB_PACKAGES=(
    pkg-config libssl-dev libsrtp2-dev libopus-dev libvpx-dev libasound2-dev
    libwebrtc-audio-processing-dev libturbojpeg0-dev
    ffmpeg chromium iproute2 util-linux python3-venv
    # Firefox ESR as a browser peer beside Chromium (Tests/Interop/test_firefox.py), driven over its
    # built-in WebDriver BiDi: no geckodriver.
    firefox-esr
    clang libclang-rt-14-dev
    janus
    libhiredis-dev redis-server
    # GStreamer webrtcbin as a WHIP publisher (Tests/Interop/test_whip_server_gstreamer.py); -ugly has x264enc
    gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly
    gstreamer1.0-nice
    python3-gst-1.0 gir1.2-gst-plugins-bad-1.0
    coturn nftables
    # nginx-rtmp receives the composite's RTMP push (Tests/Interop/test_live_outputs.py runs its own nginx
    # on loopback with a config it writes; the packaged service is never used)
    nginx libnginx-mod-rtmp
    # libx264: the agent and load bots publish H.264 (--video-codec h264; CModules/CX264)
    libx264-dev
    # libaom: the agent and load bots publish AV1 (--video-codec av1; CModules/CAOM); VP9 is libvpx's
    libaom-dev
    # libavcodec (H.264, VP9) and libdav1d (AV1): captureImage's decoders beside libvpx's VP8
    libavcodec-dev libavutil-dev libdav1d-dev
    # libyuv: scaling and blits of the room composite (--composite; CModules/CYUV)
    libyuv-dev
)

missing=()
for pkg in "${DEB_PACKAGES[@]}"; do
    status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
    if [[ "$status" != "install ok installed" ]]; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} > 0)); then
    echo "install-deps: installing Debian packages: ${missing[*]}" >&2
    SUDO=""
    if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python venv for the interop suite (aiortc is the reference peer).
VENV="$ROOT/.venv"
PY_REQUIREMENTS=("aiortc==1.16.*" "aiohttp" "pytest" "websockets")
STAMP="$VENV/.understudy-deps"
WANT="${PY_REQUIREMENTS[*]}"

pick_python() {
    # Prefer a python3 on PATH (pyenv's 3.11 on these machines), then Debian's.
    for candidate in "${PYTHON:-}" python3 /usr/bin/python3; do
        [[ -n "$candidate" ]] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

venv_ok() {
    [[ -x "$VENV/bin/python" ]] || return 1
    [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] || return 1
    "$VENV/bin/python" -c 'import aiortc, aiohttp, pytest, websockets, av' 2>/dev/null
}

if ! venv_ok; then
    PY="$(pick_python)" || { echo "install-deps: no usable python3 (>= 3.10 with venv)" >&2; exit 1; }
    echo "install-deps: creating Python venv at $VENV with $PY" >&2
    if [[ ! -x "$VENV/bin/python" ]]; then
        "$PY" -m venv "$VENV"
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PY_REQUIREMENTS[@]}"
    "$VENV/bin/python" -c 'import aiortc, aiohttp, pytest, websockets, av'
    echo "$WANT" >"$STAMP"
fi

echo "install-deps: ok" >&2
