#!/usr/bin/env bash
# The whole test suite, from a fresh Debian bookworm machine:
# set-up, build, C unit tests, that the benchmarks still compile, the same
# tests under ASan+UBSan and the runtime tests under TSan, then the
# foreign-client integration tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$PWD/node_modules/.bin:$PATH"

step() { printf '\n=== %s\n' "$*"; }

step "build (zig build)"
zig build

step "C unit tests (zig build test)"
zig build test

step "benchmarks compile (zig build bench; running them is scripts/bench-*.sh)"
zig build bench

step "unit tests under ASan+UBSan (zig build asan)"
zig build asan

step "runtime tests under TSan (zig build tsan)"
zig build tsan

step "integration tests (Debian python3, foreign clients; test_docs runs docs/http-api.md and the README walkthrough, test_dashboard drives headless Chromium)"
# Debian's interpreter: it is the one that sees python3-zmq, -msgpack, -protobuf.
CRESCENT_BIN_DIR="$PWD/zig-out/bin" /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/integration
