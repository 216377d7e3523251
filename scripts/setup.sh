#!/usr/bin/env bash
# Installs every Debian package Tessera needs, then configures and builds it.
# Usage: scripts/setup.sh [build-dir]   (default: build)
# Idempotent: packages already present are skipped by apt; the build is incremental (ccache).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libopenblas0-pthread
  libgtest-dev libgmock-dev
  libcli11-dev nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libinsighttoolkit5-dev libopencv-dev
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev
  libopenslide-dev libhdf5-dev libtiff-dev zlib1g-dev
  libdcmtk-dev dicom3tools python3-pydicom
  clang libclang-rt-14-dev python3
  python3-torch python3-numpy python3-pytest python3-venv python3-pip python3-setuptools
  slurm-wlm munge
  nodejs npm chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  # A node from elsewhere (e.g. NodeSource, which bundles npm) stands in for Debian's nodejs and npm.
  case "$p" in nodejs) command -v node >/dev/null && continue ;; npm) command -v npm >/dev/null && continue ;; esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# LibTorch must use OpenBLAS, not the reference BLAS (~30x slower matmuls).
if command -v update-alternatives >/dev/null; then
  alt=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas-pthread | head -n1 || true)
  [ -n "$alt" ] && update-alternatives --set libblas.so.3-x86_64-linux-gnu "$alt" >/dev/null 2>&1 || true
  alt=$(update-alternatives --list liblapack.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas-pthread | head -n1 || true)
  [ -n "$alt" ] && update-alternatives --set liblapack.so.3-x86_64-linux-gnu "$alt" >/dev/null 2>&1 || true
fi

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache ${TESSERA_CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j"$(nproc)"
