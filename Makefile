# Understudy build entry points. `make test` is what CI runs (via .ci/run).
# SWIFT_BUILD_FLAGS lets a developer use a private scratch path, e.g.
#   make test SWIFT_BUILD_FLAGS="--scratch-path /tmp/build-me"

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
SWIFT ?= swift
SWIFT_BUILD_FLAGS ?=
export SWIFT_BUILD_FLAGS
# libFuzzer executions per target for `make fuzz`; `make test` runs a short pass (FUZZ_CI_RUNS).
FUZZ_RUNS ?= 10000000
FUZZ_CI_RUNS ?= 100000
# Safety net for the CI pass: seconds per target before it stops short of FUZZ_CI_RUNS.
FUZZ_CI_MAX_TIME ?= 25

.PHONY: all deps build test unit interop interop-selfcheck fuzz bench bench-cluster-goal demo docs format clean

all: build

deps:
	scripts/install-deps.sh

build: deps
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)

# One process per test target (scripts/unit.sh says why).
unit: build
	SWIFT=$(SWIFT) scripts/unit.sh $(SWIFT_BUILD_FLAGS)

# Runs every part even when an earlier one fails (CI logs show everything),
# then fails if any part failed. A failed build skips the tests that need it.
test: deps
	@status=0; \
	scripts/check-module-graph.py || { echo "make test: module graph differs from docs/architecture.md" >&2; status=1; }; \
	scripts/check-wire-strings.py || { echo "make test: room wire names spelled outside Sources/RoomProtocol" >&2; status=1; }; \
	if $(SWIFT) build $(SWIFT_BUILD_FLAGS); then \
	    SWIFT=$(SWIFT) scripts/unit.sh $(SWIFT_BUILD_FLAGS) || { echo "make test: swift test failed" >&2; status=1; }; \
	    INTEROP_SKIP_BUILD=1 scripts/interop.sh || { echo "make test: interop suite failed" >&2; status=1; }; \
	else \
	    echo "make test: swift build failed" >&2; status=1; \
	fi; \
	FUZZ_MAX_TIME=$(FUZZ_CI_MAX_TIME) bash Fuzz/run.sh $(FUZZ_CI_RUNS) || { echo "make test: fuzz pass failed" >&2; status=1; }; \
	exit $$status

interop: deps
	scripts/interop.sh

# DocC archives of the library products in .build/docs (symbol graphs of the built modules +
# `docc convert`); fails on an undocumented public symbol of the SDK.
docs: deps
	scripts/docs.sh

# Proves the interop harness without any Swift code: aiortc + Chromium against the
# aiortc endpoint, then the WHEP/WHIP/Chromium tests against aiortc reference peers.
interop-selfcheck: deps
	unshare -n sh -c 'ip link set lo up && exec .venv/bin/python Tests/Interop/selfcheck.py'
	UNDERSTUDY_BIN=$(CURDIR)/Tests/Interop/reference/understudy \
	INTEROP_PEER_BIN=$(CURDIR)/Tests/Interop/reference/interop-peer \
	INTEROP_SKIP_BUILD=1 scripts/interop.sh Tests/Interop/test_whep_aiortc.py \
	    Tests/Interop/test_whip_aiortc.py Tests/Interop/test_chromium_peer.py

# `make fuzz FUZZ_RUNS=N [FUZZ_TARGETS="http jwt"]`: every parser that faces the network or a file.
fuzz: deps
	bash Fuzz/run.sh $(FUZZ_RUNS) $(FUZZ_TARGETS)

# The whole suite (about 15 minutes on 2 cores) in a network namespace with only loopback up;
# writes docs/benchmarks.md. `understudy bench --quick` is the CI variant (see test_bench_quick.py).
bench: deps
	$(SWIFT) build $(SWIFT_BUILD_FLAGS) -c release --product understudy
	unshare -n sh -c 'ip link set lo up && exec "$$1" bench --out docs/benchmarks.md' sh \
	    "$$($(SWIFT) build $(SWIFT_BUILD_FLAGS) -c release --show-bin-path)/understudy"
	$(MAKE) bench-cluster-goal

# Issue 38's goal layout (3 nodes, CLUSTER_GOAL_N audience members through each, default 60; the
# goal is 150), with kill -9 of an edge and of the origin: a section of docs/benchmarks.md.
CLUSTER_GOAL_N ?= 60
bench-cluster-goal: deps
	$(SWIFT) build $(SWIFT_BUILD_FLAGS) -c release --product understudy
	unshare -n sh -c 'ip link set lo up && exec python3 scripts/bench/cluster-goal.py --bin "$$1" --audience "$$2" --out docs/benchmarks.md' sh \
	    "$$($(SWIFT) build $(SWIFT_BUILD_FLAGS) -c release --show-bin-path)/understudy" "$(CLUSTER_GOAL_N)"

demo: deps
	$(SWIFT) run $(SWIFT_BUILD_FLAGS) understudy demo

format:
	$(SWIFT) format -i -r Sources Tests

clean:
	rm -rf .build
	find Tests/Interop -name __pycache__ -type d -prune -exec rm -rf {} +
