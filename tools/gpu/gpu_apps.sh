#!/usr/bin/env bash
# The three pipelines end to end, with what they cost: `tessera segment`, `embed-wsi` and `video` on
# the generated samples and on the real CT, slide and video of ../shared/data, each timed (wall
# time of the process) with the throughput and peak GPU memory of its --json summary ("run"); a
# Markdown table at the end.
#
#   tools/gpu/gpu_apps.sh               on the GPU machine, one device call with carry [".gpu_carry"]
#                                     (tools/gpu/make_app_carry.sh makes it): unpacks the carried prefix
#                                     into /tmp, builds the CLI against CUDA LibTorch and that prefix,
#                                     checks `tessera doctor`, runs with --device cuda (segment in bf16)
#   tools/gpu/gpu_apps.sh --cpu [BUILD] here: the same runs with --device cpu (fp32) on a local build
#                                     (default: build); TESSERA_LD_LIBRARY_PATH, if set, is the library
#                                     path of the tessera processes alone (to try a build made against
#                                     the unpacked carry here, stubs included)
#   tools/gpu/gpu_apps.sh --segment-vs-monai [--cpu [BUILD]]
#                                     instead of the six runs, bench/segment_vs_monai.py: `tessera segment`
#                                     against MONAI's pipeline on a 512x512x300 CT (bf16; fp32 reference);
#                                     carry [".gpu_carry", ".carry"] (tools/gpu/make_monai_carry.sh makes .carry);
#                                     its table goes to $OUT/segment_vs_monai.md (with --cpu: a small
#                                     fs12 case; MONAI's SwinUNETR needs einops, which Debian 12 lacks)
#   tools/gpu/gpu_apps.sh --segment-check
#                                     the Swin UNETR side first, then --segment-vs-monai: the same build with
#                                     the tests and benchmarks, test_models_cuda's fused instance-norm tests,
#                                     bench_models' Swin UNETR fs48 row under cuDNN's heuristics, its timed search
#                                     and a search limited to 3 algorithms (first call and per batch); to
#                                     $OUT/segment_check.txt, the table to $OUT/segment_vs_monai.md
#   tools/gpu/gpu_apps.sh --encoder-check
#                                     the ViT side: the same build with the tests and benchmarks, test_models_cuda's
#                                     fused-layer, tile-encoder and VideoMAE tests (bf16 against the fixtures), then
#                                     bench_models' ViT-L/16 and UNI2-h rows; to $OUT/encoder_check.txt
#   tools/gpu/gpu_apps.sh --build-only  build the CLI and check `tessera doctor`, nothing else (a later
#                                     call on the warm machine reuses the build)
#   tools/gpu/gpu_apps.sh --encoders-vs-timm [ARGS...]
#                                     instead of the six runs, bench/encoders_vs_timm.py ARGS: `embed-wsi`
#                                     end to end against timm's UNI2-h / Virchow2 alone (eager and compiled)
#                                     on a generated ~50k-tile slide; its table goes to $OUT/encoders_vs_timm.md.
#                                     The build and the slide take minutes: split the models over calls on
#                                     a warm machine (--models uni2_h, then --models virchow2: the slide made
#                                     by the first is reused)
#
# Results in $OUT (default ./gpu_out; a device call brings back at most 8 files): build.log,
# apps.log (doctor, every run's stderr), apps_runs.json (each run's summary and wall time),
# apps_table.md. Exit code 1 when the build, the doctor check or any run failed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu_out}
CARRY=$ROOT/.gpu_carry
A=$CARRY/apps
WORK=/tmp/tessera-apps
mkdir -p "$OUT" "$WORK"
SEG_VS_MONAI=0 ENC_VS_TIMM=0 BUILD_ONLY=0 SEG_CHECK=0 ENC_CHECK=0
if [ "${1:-}" = --build-only ]; then BUILD_ONLY=1; shift; fi
if [ "${1:-}" = --segment-check ]; then SEG_CHECK=1 SEG_VS_MONAI=1; shift; fi
if [ "${1:-}" = --encoder-check ]; then ENC_CHECK=1; shift; fi
if [ "${1:-}" = --segment-vs-monai ]; then SEG_VS_MONAI=1; shift; fi
if [ "${1:-}" = --encoders-vs-timm ]; then ENC_VS_TIMM=1; shift; fi
LOG=$OUT/apps.log
: > "$LOG"
note() { echo "$*" | tee -a "$LOG"; }
die() { note "gpu_apps.sh: $*"; exit 1; }

if [ "${1:-}" = --cpu ]; then
  BUILD=$(cd "${2:-build}" 2>/dev/null && pwd) || die "${2:-build}: no such build folder"
  [ -x "$BUILD/apps/tessera" ] || die "$BUILD/apps/tessera: build the CLI first"
  DEV=cpu PREC=fp32 RUNLIBS=${TESSERA_LD_LIBRARY_PATH:-${LD_LIBRARY_PATH:-}}
  MACHINE="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) threads"
else
  [ -f "$A/prefix.tar.xz" ] || die "$A/prefix.tar.xz is missing: run tools/gpu/make_app_carry.sh before the device call"
  PFX=$WORK/prefix
  rm -rf "$PFX" && mkdir -p "$PFX"
  . tools/gpu/carried_sources.sh
  untar_xz "$A/prefix.tar.xz" "$PFX" || die "cannot unpack the carried prefix"
  P=$PFX/usr
  L=$P/lib/x86_64-linux-gnu
  # Carried CMake configs (ITK, HDF5) name the prefix's libz.so; zlib itself is the machine's.
  for z in libz.so; do
    [ -e "$L/$z" ] || ln -sf "$(ls /usr/lib/x86_64-linux-gnu/$z* /lib/x86_64-linux-gnu/$z* 2>/dev/null | head -1)" "$L/$z"
  done
  # The prefix's libraries go on LD_LIBRARY_PATH for Tessera's processes only (ahead of the
  # machine's own path, which may be where the driver's libcuda lives): its stubs would shadow the
  # machine's own libxml2, curl, ... under cmake, the compilers and python. The linker finds them
  # through -rpath-link; HDF5_ROOT keeps FindHDF5 off any h5cc the machine may have. Debian's
  # ITK 5.2 headers predate GCC 13, whose standard headers stopped including <cstdint>.
  RUNLIBS="$L:$P/lib:$CARRY/deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  BUILD=$WORK/build
  t0=$(date +%s)
  note "unpacked the carried prefix; configuring $(date -u +%T)"
  if ! cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TP;$CARRY/deps;$P" \
       -DCMAKE_CXX_FLAGS="-include cstdint" \
       -DTESSERA_CUDA_ARCHS=90a -DTESSERA_REPORT=OFF -DTESSERA_TESTS=OFF -DTESSERA_BENCH=OFF -DCMAKE_DISABLE_FIND_PACKAGE_spdlog=ON \
       -DPKG_CONFIG_EXECUTABLE="$P/bin/pkg-config" "-DHDF5_ROOT=$L;$P/include" -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
       "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$L:$P/lib" "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,-rpath-link,$L:$P/lib" \
       > "$OUT/build.log" 2>&1; then
    grep -E -A3 "CMake Error" "$OUT/build.log" | head -30 | tee -a "$LOG"
    die "configure failed (build.log)"
  fi
  # Where each library was found: every path should lie under $P.
  grep -E "tessera_io:|tessera:" "$OUT/build.log" | tee -a "$LOG"
  grep -E "^(ITK_DIR|OpenCV_DIR|HDF5_C_INCLUDE_DIR|HDF5_hdf5_LIBRARY_RELEASE|TIFF_LIBRARY_RELEASE|ZLIB_LIBRARY_RELEASE|TIO_OPENSLIDE_LIBRARY_DIRS|TIO_FFMPEG_INCLUDE_DIRS):" \
    "$BUILD/CMakeCache.txt" | tee -a "$LOG"
  note "configured in $(( $(date +%s) - t0 )) s; building $(date -u +%T)"
  if ! ninja -C "$BUILD" tessera >> "$OUT/build.log" 2>&1; then
    grep -E "error|FAILED" "$OUT/build.log" | head -30 | tee -a "$LOG"
    die "build failed (build.log)"
  fi
  note "build: ok in $(( $(date +%s) - t0 )) s"
  DEV=cuda PREC=bf16
  MACHINE="$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1), $(nproc) CPU threads"
fi
T=$BUILD/apps/tessera
TES=(env "LD_LIBRARY_PATH=$RUNLIBS" "$T")
missing=$(LD_LIBRARY_PATH=$RUNLIBS ldd "$T" | grep "not found")
[ -z "$missing" ] || die "libraries not found: $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')"

"${TES[@]}" doctor | tee -a "$LOG"
"${TES[@]}" doctor --json > "$WORK/doctor.json" || die "tessera doctor failed"
python3 - "$WORK/doctor.json" "$DEV" <<'PY' || die "the doctor check failed: the pipelines need every io library (and CUDA on the GPU machine)"
import json, sys
d = json.load(open(sys.argv[1]))
missing = [k for k in ("itk", "openslide", "ffmpeg", "hdf5", "opencv") if not d["libraries"].get(k)]
if sys.argv[2] == "cuda" and not (d["cuda"]["kernels_built"] and d["cuda"]["device_available"]):
    missing.append("CUDA kernels or device")
if missing:
    sys.exit("gpu_apps.sh: not built in: " + ", ".join(missing))
PY
[ "$BUILD_ONLY" = 1 ] && exit 0

if [ "$ENC_VS_TIMM" = 1 ]; then
  [ "$DEV" = cuda ] || die "--encoders-vs-timm needs the GPU machine"
  python3 bench/encoders_vs_timm.py --tessera "$T" --tessera-library-path "$RUNLIBS" --work "$WORK/encoders_vs_timm" \
    --out "$OUT/encoders_vs_timm.md" "$@" 2>&1 | tee -a "$LOG"
  exit "${PIPESTATUS[0]}"
fi

# The same build with the tests and benchmarks; test_models_cuda --gtest_filter=$2 into $1, a failure reported
# and the measurements after it run anyway.
model_tests() {
  local check=$1 filter=$2
  cmake -S . -B "$BUILD" -DTESSERA_TESTS=ON -DTESSERA_BENCH=ON -DTESSERA_GTEST_SRC="$CARRY/googletest" \
    -DTESSERA_FIXTURES_DIR="$CARRY/fixtures" >> "$OUT/build.log" 2>&1 || die "configure with tests failed (build.log)"
  ninja -C "$BUILD" test_models_cuda bench_models >> "$OUT/build.log" 2>&1 || die "test / bench build failed (build.log)"
  env "LD_LIBRARY_PATH=$RUNLIBS" "$BUILD/tests/models/gpu/test_models_cuda" --gtest_filter="$filter" > "$check" 2>&1 ||
    { grep -E "Failure|Expected|actual|FAILED" "$check" | tee -a "$LOG"; note "gpu_apps.sh: GPU tests $filter FAILED ($check); measuring anyway"; }
  grep -E "PASSED|SKIPPED" "$check" | tee -a "$LOG"
}

if [ "$SEG_CHECK" = 1 ]; then
  [ "$DEV" = cuda ] || die "--segment-check needs the GPU machine"
  CHECK=$OUT/segment_check.txt
  model_tests "$CHECK" '*InstanceNorm*'
  for mode in off on 3; do
    env "LD_LIBRARY_PATH=$RUNLIBS" "$BUILD/bench/bench_models" --only "Swin UNETR fs48" --cudnn-benchmark "$mode" 2>&1 |
      tee -a "$CHECK" | tee -a "$LOG"
  done
fi

if [ "$ENC_CHECK" = 1 ]; then
  [ "$DEV" = cuda ] || die "--encoder-check needs the GPU machine"
  CHECK=$OUT/encoder_check.txt
  model_tests "$CHECK" '*Fused*:*Encoder*:*VideoMAEHf*'
  for row in "ViT-L/16" "UNI2-h"; do
    env "LD_LIBRARY_PATH=$RUNLIBS" "$BUILD/bench/bench_models" --only "$row" 2>&1 | tee -a "$CHECK" | tee -a "$LOG"
  done
  exit 0
fi

if [ "$SEG_VS_MONAI" = 1 ]; then
  [ -d "$ROOT/.carry/pylib/monai" ] && [ -d "$ROOT/.carry/pylib/nibabel" ] ||
    die ".carry/pylib has no monai or nibabel: run tools/gpu/make_monai_carry.sh and carry .carry"
  # bf16 as the issue's comparison; fp16 too, the bundle's own amp precision (less prone to flipping near-ties).
  SEG_PREC=$PREC
  [ "$DEV" = cuda ] && SEG_PREC=bf16,fp16
  BENCH=(--tessera "$T" --tessera-library-path "$RUNLIBS" --device "$DEV" --precision "$SEG_PREC" --work "$WORK/segment_vs_monai"
         --out "$OUT/segment_vs_monai.md")
  [ "$DEV" = cpu ] && BENCH+=(--feature-size 12 --ct-size 160x128x64 --roi 64 64 64)  # a small case: minutes, not hours
  PY=python3  # the one with torch: the machine's on the GPU machine, Debian's python3-torch here
  "$PY" -c 'import torch' 2>/dev/null || PY=/usr/bin/python3
  PYTHONPATH="$ROOT/.carry/pylib${PYTHONPATH:+:$PYTHONPATH}" "$PY" bench/segment_vs_monai.py "${BENCH[@]}" 2>&1 | tee -a "$LOG"
  exit "${PIPESTATUS[0]}"
fi

# Inputs: the samples Tessera makes, the real files (carried, or beside the repository here), and
# random weights with the ViT-tiny and VideoMAE-tiny fixtures' names and shapes.
S=$WORK/samples
"${TES[@]}" make-samples "$S" >> "$LOG" 2>&1 || die "make-samples failed"
DATA=$A/data
[ -f "$DATA/realshort.mp4" ] || DATA=$ROOT/../shared/data
W=$WORK/weights
mkdir -p "$W"
for w in vit_tiny_timm videomae_tiny_hf; do
  h=$A/weights/$w.json
  if [ ! -f "$h" ]; then
    h=$W/$w.json
    python3 tools/gpu/app_carry/fill_weights.py --header-of "$ROOT/../shared/fixtures/$w.safetensors" > "$h" || die "no header for $w"
  fi
  python3 tools/gpu/app_carry/fill_weights.py --fill "$h" --out "$W/$w.safetensors" || die "cannot write $w weights"
done

RUNS=$WORK/runs.jsonl
: > "$RUNS"
failed=0
run() {  # NAME COMMAND INPUT OUTPUT ARGS...: one timed run; its --json summary and wall time go to $RUNS
  local name=$1 cmd=$2 input=$3 output=$4
  shift 4
  rm -rf "${WORK:?}/out_$name"
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout 300 "${TES[@]}" "$cmd" "$input" -o "$output" "$@" --device "$DEV" --json --quiet \
    > "$WORK/$name.json" 2> >(sed "s|^|[$name] |" >> "$LOG")
  rc=$?
  t1=$(date +%s.%N)
  [ "$rc" -eq 0 ] || failed=1
  note "$name: exit $rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
  python3 - "$name" "$cmd" "$input" "$rc" "$t0" "$t1" "$WORK/$name.json" >> "$RUNS" <<'PY'
import json, sys
name, cmd, path_in, rc, t0, t1, out = sys.argv[1:]
try:
    summary = json.load(open(out))
except (OSError, ValueError):
    summary = None
print(json.dumps({"name": name, "command": cmd, "input": path_in, "exit": int(rc),
                  "wall_s": float(t1) - float(t0), "summary": summary}))
PY
}
SEG=(--model configs/swin_unetr_phantom.yaml --weights models/phantom/swin_unetr_phantom.safetensors
     --labels models/phantom/labels.yaml --spacing 1.5 1.5 2.5 --roi 64 64 64 --overlap 0.25 --precision "$PREC")
EMB=(--model configs/vit_tiny_timm.yaml --weights "$W/vit_tiny_timm.safetensors")
VID=(--model configs/videomae_tiny_hf.yaml --weights "$W/videomae_tiny_hf.safetensors" --fps 4)
O=$WORK/out_
run segment_sample segment "$S/ct_phantom.nii.gz" "${O}segment_sample/mask.nii.gz" "${SEG[@]}" \
  --reference "$S/ct_phantom_labels.nii.gz"
run segment_real segment "$DATA/example_ct_sm.nii.gz" "${O}segment_real/mask.nii.gz" "${SEG[@]}"
run embed_wsi_sample embed-wsi "$S/slide.svs" "${O}embed_wsi_sample" "${EMB[@]}"
run embed_wsi_real embed-wsi "$DATA/CMU-1-Small-Region.svs" "${O}embed_wsi_real" "${EMB[@]}"
run video_sample video "$S/endoscopy.mp4" "${O}video_sample" "${VID[@]}"
run video_real video "$DATA/realshort.mp4" "${O}video_real" "${VID[@]}"

python3 tools/gpu/app_carry/apps_table.py "$RUNS" --device "$DEV" --machine "$MACHINE" \
  --json "$OUT/apps_runs.json" > "$OUT/apps_table.md"
tee -a "$LOG" < "$OUT/apps_table.md"
exit $failed
