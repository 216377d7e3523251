#!/usr/bin/env bash
# Builds the GPU test and bench binaries here (sm_90a, the standalone tests/gpu project, ccache) and writes them
# gzipped to .gpu_carry/bin/ with the digest of their sources (SOURCES), so that a device call carrying
# .gpu_carry/bin skips a build of several minutes: gpu_check.sh uses them only where the digest matches.
#   tools/gpu/make_carried_binaries.sh [BUILD_DIR]   (default /tmp/tessera-carried-build)
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/gpu/carried_sources.sh
B=${1:-/tmp/tessera-carried-build}
cmake -S tests/gpu -B "$B" -G Ninja -DTESSERA_CUDA_ARCHS=90a -DTESSERA_BENCH_CUDA=ON -DTESSERA_GTEST_SRC=/usr/src/googletest \
  -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache > /dev/null
ninja -C "$B" test_attention_cuda attention_cuda_bench
mkdir -p .gpu_carry/bin
for f in test_attention_cuda attention_cuda_bench; do gzip -9 -c "$B/$f" > ".gpu_carry/bin/$f.gz"; done
carried_sources > .gpu_carry/bin/SOURCES
ls -l .gpu_carry/bin
