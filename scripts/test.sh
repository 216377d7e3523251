#!/usr/bin/env bash
# Sets up (Debian packages, configure, build) and runs every test that this
# machine can run. GPU tests carry the ctest label `gpu` and skip themselves
# without a GPU. Usage: scripts/test.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
scripts/setup.sh "$BUILD_DIR"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 900
