#!/usr/bin/env bash
# Fills .carry/pylib (ignored by git) with what bench/segment_vs_monai.py needs beside the GPU
# machine's torch, numpy and einops, which has no network: MONAI 1.5 (the source tarball in
# ../shared/vendor) and nibabel (Debian's python3-nibabel, pure Python, unpacked from its .deb
# without its tests). scripts/gpu_check.sh's python step finds MONAI there too.
# Then name ".carry" in the device call's carry, beside ".gpu_carry" (tools/gpu/make_app_carry.sh).
#
#   tools/gpu/make_monai_carry.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
TAR=../shared/vendor/monai-1.5.0-src.tar.gz
P=.carry/pylib
[ -f "$TAR" ] || { echo "make_monai_carry.sh: $TAR is missing" >&2; exit 1; }
mkdir -p "$P"
rm -rf "$P/monai" "$P/nibabel"
tar -C "$P" -xzf "$TAR" monai
DEBS=${TESSERA_APPDEBS:-$HOME/.cache/tessera/appdebs}
mkdir -p "$DEBS"
deb=$(ls "$DEBS"/python3-nibabel_*.deb 2>/dev/null | head -1 || true)
if [ -z "$deb" ]; then
  (cd "$DEBS" && apt-get download python3-nibabel >/dev/null 2>&1) || { echo "make_monai_carry.sh: apt-get download python3-nibabel failed" >&2; exit 1; }
  deb=$(ls "$DEBS"/python3-nibabel_*.deb | head -1)
fi
X=$(mktemp -d)
trap 'rm -rf "$X"' EXIT
dpkg -x "$deb" "$X"
cp -r "$X/usr/lib/python3/dist-packages/nibabel" "$P/nibabel"
find "$P/nibabel" -name tests -type d -prune -exec rm -rf {} +
echo "$P: monai $(du -sh "$P/monai" | cut -f1), nibabel $(du -sh "$P/nibabel" | cut -f1) ($(basename "$deb"))"
