#!/usr/bin/env bash
# Prepares .gpu_carry/ (ignored by git) for `scripts/gpu_check.sh` runs on the
# GPU machine, which has no GoogleTest, nlohmann-json or fixtures:
#   .gpu_carry/googletest   Debian's GoogleTest sources (libgtest-dev)
#   .gpu_carry/deps         nlohmann-json headers + CMake config (header-only)
#   .gpu_carry/fixtures     the model fixtures the GPU tests read (from ../shared/fixtures)
# Then call the device tool with carry [".gpu_carry"]; the whole tree must stay under 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.gpu_carry/' .git/info/exclude 2>/dev/null || echo '/.gpu_carry/' >> .git/info/exclude
rm -rf .gpu_carry && mkdir -p .gpu_carry/deps/include .gpu_carry/deps/share/cmake .gpu_carry/fixtures
cp -r /usr/src/googletest .gpu_carry/googletest
cp -r /usr/include/nlohmann .gpu_carry/deps/include/
cp -r /usr/share/cmake/nlohmann_json .gpu_carry/deps/share/cmake/
for f in vit_tiny_timm.safetensors swin_unetr_fs12_io.safetensors swin_unetr_fs12_weights-1of2.safetensors \
         swin_unetr_fs12_weights-2of2.safetensors videomae_tiny_hf.safetensors videomae_tiny_hf_input.safetensors; do
  cp "../shared/fixtures/$f" .gpu_carry/fixtures/
done
du -sh .gpu_carry
