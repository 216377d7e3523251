#!/usr/bin/env bash
# Prepares .gpu_carry/ (ignored by git) for `tools/gpu/gpu_apps.sh` on the GPU machine, which has no
# network, none of ITK, GDCM, OpenCV, FFmpeg, OpenSlide or libtiff, and no HDF5 headers:
#   .gpu_carry/deps, googletest   as `tools/gpu/make_gpu_carry.sh none` makes them (run first: it wipes .gpu_carry)
#   .gpu_carry/apps/prefix.tar.xz a /usr prefix for CMAKE_PREFIX_PATH, PKG_CONFIG_LIBDIR and LD_LIBRARY_PATH
#   .gpu_carry/apps/manifest.txt  what is in it: Debian packages, real libraries, stubs, what the machine provides
#   .gpu_carry/apps/data/         copies of ../shared/data (the real CT, slide and video)
#   .gpu_carry/apps/weights/      the safetensors headers of the ViT-tiny and VideoMAE-tiny fixtures; the
#                                 device fills them with random values (tools/gpu/app_carry/fill_weights.py),
#                                 as the fixtures are random networks too and their 19 MB would not fit
# Then call the device tool with carry [".gpu_carry"]; the whole tree must stay under 64 MiB.
#
#   tools/gpu/make_app_carry.sh [BUILD]     BUILD: a local build with the CLI built (default: build)
#
# Why a trimmed tarball and not the .deb files: the CLI's full Debian closure is ~200 packages and
# ~105 MiB of .debs (libavcodec59 alone pulls ~35 codec libraries, OpenCV's imgcodecs pulls GDAL and
# its ~60 libraries), and the -dev packages carry static libraries. tools/gpu/app_carry/prefix.py
# instead (policy.py lists the choices):
#   - follows NEEDED from the locally built `tessera`, mapping each library to its Debian package
#     through dpkg -S, and `apt-get download`s those packages (plus the -dev packages and pkgconf)
#     into a cache (TESSERA_APPDEBS, default ~/.cache/tessera/appdebs);
#   - takes from the extracted packages only the libraries in that closure, the -dev packages'
#     headers, the CMake configs of ITK/GDCM/OpenCV (absolute /usr paths made relative, empty
#     placeholders for the package libraries that do not travel), the pkg-config files (relocated
#     with ${pcfiledir}) and pkgconf behind a usr/bin/pkg-config wrapper;
#   - replaces the libraries that are linked but never called on Tessera's paths by stubs;
#   - leaves out glibc, libstdc++/libgcc/libgomp and what Ubuntu 24.04's base and python3 have;
#   - checks that every symbol each carried library imports is defined somewhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
[ -x "$BUILD/apps/tessera" ] || { echo "make_app_carry.sh: $BUILD/apps/tessera: build the CLI first" >&2; exit 1; }
for f in CMU-1-Small-Region.svs example_ct_sm.nii.gz realshort.mp4; do
  [ -f "../shared/data/$f" ] || { echo "make_app_carry.sh: ../shared/data/$f is missing" >&2; exit 1; }
done
tools/gpu/make_gpu_carry.sh none > /dev/null
A=.gpu_carry/apps
mkdir -p "$A/data" "$A/weights"
python3 tools/gpu/app_carry/prefix.py --build "$BUILD" --cache "${TESSERA_APPDEBS:-$HOME/.cache/tessera/appdebs}" --out "$A"
cp ../shared/data/{CMU-1-Small-Region.svs,example_ct_sm.nii.gz,realshort.mp4} "$A/data/"
for w in vit_tiny_timm videomae_tiny_hf; do
  python3 tools/gpu/app_carry/fill_weights.py --header-of "../shared/fixtures/$w.safetensors" > "$A/weights/$w.json"
done

# What a device call sends: tracked and untracked-not-ignored files, plus the carried folder.
tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
carry=$(du -sb .gpu_carry | cut -f1)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "working tree $(mib "$tree") MiB + .gpu_carry $(mib "$carry") MiB (apps $(mib "$(du -sb $A | cut -f1)") MiB)" \
     "= $(mib $((tree + carry))) MiB of the 64 MiB a device call takes"
if [ $((tree + carry)) -ge $((64 * 1048576)) ]; then
  echo "make_app_carry.sh: over the 64 MiB a device call carries" >&2
  exit 1
fi
