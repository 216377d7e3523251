#!/usr/bin/env bash
# Sets up and runs the main job on this machine: for now, the exact attention
# module on the CPU against LibTorch's naive attention (time, GFLOP/s, peak
# memory), then `tessera doctor`. Usage: scripts/demo.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
scripts/setup.sh "$BUILD_DIR"
"$BUILD_DIR/apps/tessera" doctor
echo
echo "Exact fused attention on the CPU vs LibTorch matmul-softmax-matmul (B=1, H=4, d=64, $(nproc) threads):"
"$BUILD_DIR/bench/bench_attention_cpu" --all --threads "$(nproc)" --grid 1024 2048 4096 --memory-n 16384
