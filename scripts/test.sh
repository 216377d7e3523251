#!/usr/bin/env bash
# Sets up (Debian packages, configure, build) and runs every test that this
# machine can run: the io bad-input tests under AddressSanitizer, 30 s of
# fuzzing (the safetensors header parser and the PyTorch zip / pickle reader,
# 15 s each), the Python package's suite (tests/python),
# then the whole ctest suite (GPU
# tests carry the label `gpu` and skip themselves without a GPU; it runs last
# so that its summary closes the output).
# Usage: scripts/test.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
scripts/setup.sh "$BUILD_DIR"

# Malformed files must give errors, never memory errors: the readers' bad-input
# tests under ASan (io only: no LibTorch, no CUDA, a few minutes to build).
ASAN_DIR="${BUILD_DIR}-asan"
cmake -S . -B "$ASAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_TORCH=OFF -DTESSERA_CUDA=OFF \
  -DTESSERA_BENCH=OFF -DCMAKE_CXX_FLAGS="-fsanitize=address -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build "$ASAN_DIR" -j"$(nproc)" --target test_io
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir "$ASAN_DIR" --output-on-failure -j"$(nproc)" -R "BadInput|Argb|FeaturesH5" --timeout 600

# The safetensors header parser and the PyTorch checkpoint reader under libFuzzer (clang), sharing a bounded time.
scripts/fuzz.sh 30 "${BUILD_DIR}-fuzz" 2>&1 | tail -n 3

# The op from Python as users call it: pip-installed package, tests/python (pytest).
scripts/python_tests.sh "$BUILD_DIR"

ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 900
