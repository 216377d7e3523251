#!/usr/bin/env bash
# Builds the GPU test and bench binaries here (sm_90a, the standalone tests/gpu project, ccache) and writes them
# to .gpu_carry/bin/binaries.tar.xz with the digest of their sources (SOURCES), so that a device call carrying
# .gpu_carry/bin skips a build of several minutes: gpu_check.sh uses them only where the digest matches. One
# solid xz archive: the two binaries share the attention library, so both take ~10 MB where each took ~13
# gzipped, which leaves room in a call's 64 MiB for the apps' carry beside them.
#   tools/gpu/make_carried_binaries.sh [BUILD_DIR]   (default /tmp/tessera-carried-build)
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/gpu/carried_sources.sh
B=${1:-/tmp/tessera-carried-build}
cmake -S tests/gpu -B "$B" -G Ninja -DTESSERA_CUDA_ARCHS=90a -DTESSERA_BENCH_CUDA=ON -DTESSERA_GTEST_SRC=/usr/src/googletest \
  -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache > /dev/null
ninja -C "$B" test_attention_cuda attention_cuda_bench
rm -rf .gpu_carry/bin && mkdir -p .gpu_carry/bin
tar -C "$B" -cf - test_attention_cuda attention_cuda_bench | xz -9e -T"$(nproc)" > .gpu_carry/bin/binaries.tar.xz
carried_sources > .gpu_carry/bin/SOURCES
ls -l .gpu_carry/bin
