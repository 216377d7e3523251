#!/usr/bin/env bash
# Prepares .gpu_carry/ (ignored by git) for `scripts/gpu_check.sh` runs on the
# GPU machine, which has no GoogleTest, nlohmann-json, CLI11, yaml-cpp or fixtures:
#   .gpu_carry/googletest   Debian's GoogleTest sources (libgtest-dev)
#   .gpu_carry/deps         a prefix for CMAKE_PREFIX_PATH: nlohmann-json and CLI11 (header-only,
#                           headers + CMake configs), yaml-cpp (headers, libyaml-cpp.so.0.7*, its
#                           CMake config, which finds everything relative to its own location);
#                           gpu_check.sh puts deps/lib/x86_64-linux-gnu on LD_LIBRARY_PATH
#   .gpu_carry/fixtures     the model fixtures the GPU tests read (from ../shared/fixtures)
# Then call the device tool with carry [".gpu_carry"]; the whole tree must stay under 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
# (git rev-parse: in a worktree .git is a file, the exclude list lives in the main checkout)
EXCLUDE=$(git rev-parse --git-path info/exclude)
grep -qx '/.gpu_carry/' "$EXCLUDE" 2>/dev/null || echo '/.gpu_carry/' >> "$EXCLUDE"
rm -rf .gpu_carry && mkdir -p .gpu_carry/deps/include .gpu_carry/deps/share/cmake .gpu_carry/fixtures
cp -r /usr/src/googletest .gpu_carry/googletest
cp -r /usr/include/nlohmann .gpu_carry/deps/include/
cp -r /usr/share/cmake/nlohmann_json .gpu_carry/deps/share/cmake/
cp -r /usr/include/CLI .gpu_carry/deps/include/
cp -r /usr/share/cmake/CLI11 .gpu_carry/deps/share/cmake/
# yaml-cpp keeps Debian's multiarch layout: its config climbs four levels from
# lib/x86_64-linux-gnu/cmake/yaml-cpp to find the prefix.
YL=.gpu_carry/deps/lib/x86_64-linux-gnu
mkdir -p "$YL/cmake"
cp -r /usr/include/yaml-cpp .gpu_carry/deps/include/
cp -a /usr/lib/x86_64-linux-gnu/libyaml-cpp.so.0.7* "$YL/"
cp -r /usr/lib/x86_64-linux-gnu/cmake/yaml-cpp "$YL/cmake/"
# All fixtures (53 MB) plus the repository (with its 16 MB phantom model) exceed the 64 MiB a device
# call carries, so a call takes a subset: the arguments name them (default: swin vit; tests whose
# fixture is absent skip themselves). `scripts/make_gpu_carry.sh videomae` for the VideoMAE checks.
SETS=${*:-swin vit}
for s in $SETS; do
  case $s in
    swin) files="swin_unetr_fs12_io.safetensors swin_unetr_fs12_weights-1of2.safetensors swin_unetr_fs12_weights-2of2.safetensors" ;;
    vit) files="vit_tiny_timm.safetensors vit_reg_timm.safetensors" ;;
    videomae) files="videomae_tiny_hf.safetensors videomae_tiny_hf_input.safetensors" ;;
    gigapath) files="gigapath_slide_tiny_w.safetensors gigapath_slide_tiny_x0.safetensors gigapath_slide_tiny_io.safetensors" ;;
    none) files="" ;;
    *) echo "make_gpu_carry.sh: unknown fixture set '$s' (swin, vit, videomae, gigapath, none)" >&2; exit 2 ;;
  esac
  for f in $files; do cp "../shared/fixtures/$f" .gpu_carry/fixtures/; done
done
du -sh .gpu_carry
total=$(( $(du -sb .gpu_carry | cut -f1) + $(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) ))
echo "carried + tracked: $(( total / 1048576 )) MiB of the 64 MiB a device call takes"
