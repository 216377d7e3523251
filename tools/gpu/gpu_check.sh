#!/usr/bin/env bash
# One call on the GPU machine: build, test, sanitize and benchmark the CUDA
# attention backend; logs go to $OUT (default ./gpu_out).
#
#   tools/gpu/gpu_check.sh [build] [tests] [sanitize] [bench|bench-quick] [torch]   (no argument: all but bench-quick)
#
# build     configure + build tests/gpu standalone (backend, reference, test, C++ bench) for sm_90a,
#           unless prebuilt binaries were carried in .gpu_carry/bin (built here with the same sources)
# tests     ctest -L gpu (or the carried test binary; TEST_FILTER=gtest filter for it, TEST_TIMEOUT=its time
#           limit in s, default 360)
# sanitize  compute-sanitizer memcheck + racecheck on AttentionCuda.SanitizerSmall
# bench     C++ timing of the kernels alone (bench/attention_cuda_bench.cu; BENCH_ONLY=substring of case names)
# tune      tile-shape exploration (bench/attention_cuda_tune.cu; TUNE_ARGS=its arguments, e.g. swin)
# project   the whole project against CUDA LibTorch (tests on; GoogleTest, nlohmann-json, CLI11 and yaml-cpp
#           from .gpu_carry, fixtures from .gpu_carry/fixtures), then ctest -L gpu (CUDA attention + models
#           on CUDA), bench_models and bench_train (model inference and training steps, Tessera vs SDPA);
#           PROJECT_CTEST_ARGS adds ctest arguments (e.g. "-E attention_cuda" when the tests step ran it);
#           PROJECT_TARGETS builds only those targets, e.g. the models' GPU tests in a few minutes with only
#           `make_gpu_carry.sh none`'s carry: PROJECT_TARGETS=test_models_cuda PROJECT_CTEST_ARGS="-R Fused|Encoder"
# python    the Python package as users install it (`pip install --no-build-isolation .`, CUDA kernels for
#           TESSERA_CUDA_ARCHS, default 90a here), then tests/python on each of PYTHON_DEVICES (default
#           "cpu cuda": TESSERA_TEST_DEVICE) with the model tests (timm ViT-B/16, MONAI SwinUNETR: MONAI's source
#           carried in .carry/pylib, put on PYTHONPATH); logs python_build.log, python_tests.log
# torch     build the LibTorch op and run bench/attention_cuda_bench.py against PyTorch SDPA (flash / cuDNN /
#           efficient); TORCH_ONLY=Swin runs only the cases whose name contains it (one minute instead of four)
# ab-build  build the LibTorch op of two trees side by side in build-ab/ (kept between calls on a warm
#           machine): before = .gpu_carry/ab_before.tar.gz (tools/gpu/make_ab_carry.sh packs main's
#           merge-base or a named commit), after = this tree
# ab        the SDPA table (bench/attention_cuda_bench.py, this tree's) of both builds, before then after,
#           AB_PASSES times (default 1: a pass of both takes ~8 minutes; TORCH_ONLY as for torch); the tables
#           accumulate in build-ab/runs over calls (AB_RESET=1 clears them), and $OUT/ab_sdpa.md has per row
#           the Tessera ms of every pass so far and after / before (tools/gpu/ab_table.py), rows off by more
#           than 2 % marked
# torch-profile  the same build, then only bench/profile_torch_op.py (kernel times of the op vs cuDNN;
#           PROFILE_CASES="d:N,...", PROFILE_PASS=fb|bwd)
# clocks    the same build, then only bench/sustained_clocks.py: each pass (fwd, bwd, fb) of Tessera and
#           cuDNN looped for ~1.5 s while nvidia-smi samples the SM clock, power and throttle reasons
#           (CLOCK_CASES="d:N,cd:N,..." as that script's --cases; c = causal)
# vit-eager the same build, then bench/vit_eager_reference.py: ViT-B/16 and ViT-L/16 in plain PyTorch
#           (eager, bf16, batch 256) with SDPA and with the Tessera op, beside bench_models' C++ rows
# vit-kernels (with project; PROJECT_BUILD_ONLY=1 skips the project's tests and benchmarks) Nsight Compute's time of every kernel of the C++ ViT-B/16 (bench_models
#           --only ViT-B --iters 1: warm-up and timed calls, both attention backends) and of the plain-PyTorch
#           one (vit_eager_reference.py --only ViT-B --reps 1, SDPA), summed per kernel name
#           (tools/gpu/ncu_kernel_table.py): where the C++ model's extra ~10 ms go
#
# The device tool returns at most 8 files from $OUT: the steps above write up to 8 (summary, tests,
# sanitizer, tune, torch_build, torch_bench, torch_profile, RESULTS_cuda.md); a caller that
# adds its own file there (e.g. `> $OUT/check.log`) loses one of them (tune.log went missing that way).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu_out}
mkdir -p "$OUT"
CARRY=$ROOT/.gpu_carry
BUILD=${BUILD:-/tmp/tessera-gpu-build}
PB=/tmp/tessera-project-build  # the whole project against CUDA LibTorch (project step)
STEPS=${*:-build tests sanitize bench torch}
has() { [[ " $STEPS " == *" $1 "* ]]; }
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
# Clock, temperature, power and throttle reasons now: model timings after minutes of tests may run on a
# hot, power-capped GPU (the C++ ViT-B timed 40 % slower than plain PyTorch on 2026-12-01, cause open).
gpu_state() {
  note "gpu state before $1: $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,clocks_throttle_reasons.active \
    --format=csv,noheader 2>/dev/null)"
}

note "== gpu_check $(date -u +%FT%TZ) steps: $STEPS"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$SUMMARY"

BIN=""
if has build; then
  # prebuilt binaries may be carried (.gpu_carry/bin/binaries.tar.xz) to stay under the transfer limit;
  # .gpu_carry is git-ignored, so the device call must name it in its carry list
  # (made by make_carried_binaries.sh, used only on the sources they were built from: SOURCES)
  CB=/tmp/tessera-carried
  rm -rf "$CB" && mkdir -p "$CB"
  . tools/gpu/carried_sources.sh
  if [ -f "$CARRY/bin/SOURCES" ] && [ "$(carried_sources)" != "$(cat "$CARRY/bin/SOURCES")" ]; then
    note "build: the carried binaries were built from other sources: building"
  else
    unpack_carried "$CB"
  fi
  if [ -x "$CB/test_attention_cuda" ] && "$CB/test_attention_cuda" --gtest_list_tests > /dev/null 2>&1; then
    BIN=$CB
    note "build: using carried binaries ($BIN)"
  else
    GT=()
    [ -d "$CARRY/googletest" ] && GT=(-DTESSERA_GTEST_SRC="$CARRY/googletest")
    t0=$(date +%s)
    if cmake -S tests/gpu -B "$BUILD" -G Ninja -DTESSERA_CUDA_ARCHS=90a -DTESSERA_BENCH_CUDA=ON "${GT[@]}" > "$OUT/build.log" 2>&1 &&
       ninja -C "$BUILD" >> "$OUT/build.log" 2>&1; then
      note "build: ok in $(( $(date +%s) - t0 )) s"
      BIN=$BUILD
      # The Hopper forward must be tensor-core wgmma in the sm_90a image (HGMMA in SASS).
      note "sm90 SASS: $(cuobjdump --dump-sass "$BUILD/test_attention_cuda" 2>/dev/null | grep -c HGMMA) HGMMA instructions"
    else
      note "build: FAILED (see build.log)"; tail -30 "$OUT/build.log"
    fi
  fi
fi
[ -z "$BIN" ] && [ -x "$BUILD/test_attention_cuda" ] && BIN=$BUILD

if has tests && [ -n "$BIN" ]; then
  t0=$(date +%s)
  if [ "$BIN" = "$BUILD" ]; then
    (cd "$BUILD" && ctest -L gpu --output-on-failure -V) > "$OUT/tests.log" 2>&1; rc=$?
  else
    # a time limit (TEST_TIMEOUT s, default 360: the suite takes ~150 s) so that a hung kernel costs one
    # step, not the call; the last test started is then the one printed without an OK line
    timeout "${TEST_TIMEOUT:-360}" "$BIN/test_attention_cuda" ${TEST_FILTER:+--gtest_filter="$TEST_FILTER"} \
      > "$OUT/tests.log" 2>&1; rc=$?
    [ $rc -eq 124 ] && note "tests: TIMED OUT after ${TEST_TIMEOUT:-360} s in: $(grep '^\[ RUN' "$OUT/tests.log" | tail -1)"
  fi
  note "tests: rc=$rc in $(( $(date +%s) - t0 )) s"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|rel err [0-9.e+-]+$|FAILED" "$OUT/tests.log" | grep -v "^  " | head -40 | tee -a "$SUMMARY"
fi

if has sanitize && [ -n "$BIN" ]; then
  t0=$(date +%s)
  {
    echo "### memcheck"; compute-sanitizer --tool memcheck --leak-check no "$BIN/test_attention_cuda" --gtest_filter=AttentionCuda.SanitizerSmall 2>&1 | tail -15
    echo "### racecheck"; compute-sanitizer --tool racecheck "$BIN/test_attention_cuda" --gtest_filter=AttentionCuda.SanitizerSmall 2>&1 | tail -15
  } > "$OUT/sanitizer.log" 2>&1
  note "sanitize: $(( $(date +%s) - t0 )) s"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|PASSED|FAILED" "$OUT/sanitizer.log" | tee -a "$SUMMARY"
fi

if { has bench || has bench-quick; } && [ -n "$BIN" ] && [ -x "$BIN/attention_cuda_bench" ]; then
  q=""; has bench-quick && q="--quick"
  "$BIN/attention_cuda_bench" $q ${BENCH_ONLY:+--only "$BENCH_ONLY"} 2>&1 | tee "$OUT/bench.log" | tail -40
fi

if has tune && [ -n "$BIN" ] && [ -x "$BIN/attention_cuda_tune" ]; then
  "$BIN/attention_cuda_tune" ${TUNE_ARGS:-} 2>&1 | tee "$OUT/tune.log" | tail -80
fi

if has project; then
  TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  # The carried yaml-cpp is a shared library: the built programs load it from there.
  export LD_LIBRARY_PATH="$CARRY/deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  t0=$(date +%s)
  if cmake -S . -B "$PB" -G Ninja -DCMAKE_PREFIX_PATH="$TP;$CARRY/deps" -DTESSERA_CUDA_ARCHS=90a -DTESSERA_REPORT=OFF \
       -DTESSERA_GTEST_SRC="$CARRY/googletest" -DTESSERA_FIXTURES_DIR="$CARRY/fixtures" \
       -DCMAKE_DISABLE_FIND_PACKAGE_spdlog=ON > "$OUT/project_build.log" 2>&1 &&
     ninja -C "$PB" ${PROJECT_TARGETS:-} >> "$OUT/project_build.log" 2>&1; then
    note "project build: ok in $(( $(date +%s) - t0 )) s"
    PROJECT_OK=1
  else
    note "project build: FAILED"; grep -E "error|Error" "$OUT/project_build.log" | head -20 | tee -a "$SUMMARY"
  fi
fi
# PROJECT_BUILD_ONLY=1: the build alone (for later steps such as vit-kernels), no tests or model benchmarks
if [ -n "${PROJECT_OK:-}" ] && [ -z "${PROJECT_BUILD_ONLY:-}" ]; then
  {
    (cd "$PB" && ctest -L gpu --output-on-failure -V ${PROJECT_CTEST_ARGS:-}) > "$OUT/project_gpu_tests.log" 2>&1
    note "project ctest -L gpu: rc=$?"
    grep -E "rel err|tests passed|tests failed|Failure|FAILED" "$OUT/project_gpu_tests.log" | head -30 | tee -a "$SUMMARY"
    if [ -x "$PB/bench/bench_models" ]; then
      gpu_state bench_models
      "$PB/bench/bench_models" 2>&1 | tee "$OUT/bench_models.md" | tee -a "$SUMMARY"
    fi
    if [ -x "$PB/bench/bench_train" ]; then
      "$PB/bench/bench_train" 2>&1 | tee "$OUT/bench_train.md" | tee -a "$SUMMARY"
    fi
  }
fi

if has python; then
  t0=$(date +%s)
  if TESSERA_CUDA_ARCHS=${TESSERA_CUDA_ARCHS:-90a} MAX_JOBS=${MAX_JOBS:-16} python3 -m pip install -v \
       --no-build-isolation . > "$OUT/python_build.log" 2>&1; then
    note "python package: installed in $(( $(date +%s) - t0 )) s"
    [ -d "$ROOT/.carry/pylib" ] && export PYTHONPATH="$ROOT/.carry/pylib${PYTHONPATH:+:$PYTHONPATH}"
    for dev in ${PYTHON_DEVICES:-cpu cuda}; do
      echo "### $dev"; (cd /tmp && TESSERA_TEST_DEVICE=$dev python3 -m pytest -q -s -p no:cacheprovider -rs \
        "$ROOT/tests/python"); echo "rc=$?"
    done > "$OUT/python_tests.log" 2>&1
    note "python tests: $(grep -E '^(### |rc=|[0-9]+ (passed|failed))|passed|failed' "$OUT/python_tests.log" | tr '\n' ' ')"
  else
    note "python package: FAILED"; tail -30 "$OUT/python_build.log"
  fi
fi

if has torch || has torch-profile || has vit-eager || has clocks; then
  TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  TB=/tmp/tessera-torch-build
  t0=$(date +%s)
  if cmake -S . -B "$TB" -G Ninja -DCMAKE_PREFIX_PATH="$TP" -DTESSERA_TORCH=ON -DTESSERA_CUDA_ARCHS=90a -DTESSERA_REPORT=OFF \
       -DTESSERA_TESTS=OFF -DTESSERA_BENCH=OFF > "$OUT/torch_build.log" 2>&1 &&
     ninja -C "$TB" tessera_torch >> "$OUT/torch_build.log" 2>&1; then
    note "torch build: ok in $(( $(date +%s) - t0 )) s"
    LIB=$(find "$TB" -name 'libtessera_torch.so' | head -1)
    if has torch || has torch-profile; then
      PYTHONUNBUFFERED=1 python3 bench/profile_torch_op.py --lib "$LIB" --cases "${PROFILE_CASES:-64:1024}" \
        --pass "${PROFILE_PASS:-fb}" 2>&1 | tee "$OUT/torch_profile.log"
    fi
    if has clocks; then
      PYTHONUNBUFFERED=1 python3 bench/sustained_clocks.py --lib "$LIB" --cases "${CLOCK_CASES:-128:8192,128:4096}" \
        2>&1 | tee "$OUT/clocks.md"
    fi
    if has vit-eager; then
      gpu_state vit_eager_reference
      PYTHONUNBUFFERED=1 python3 bench/vit_eager_reference.py --lib "$LIB" 2>&1 | tee "$OUT/vit_eager.md" |
        tee -a "$SUMMARY"
      # the C++ ViTs again, right after the Python ones, in the same GPU state (needs the project step)
      if [ -x "$PB/bench/bench_models" ]; then
        gpu_state "bench_models --only ViT"
        "$PB/bench/bench_models" --only ViT 2>&1 | tee -a "$SUMMARY"
      fi
    fi
    if has torch; then
      PYTHONUNBUFFERED=1 python3 bench/attention_cuda_bench.py --lib "$LIB" --out "$OUT/RESULTS_cuda.md" \
        ${TORCH_ONLY:+--only "$TORCH_ONLY"} 2>&1 |
        tee "$OUT/torch_bench.log" | tail -60
    fi
  else
    note "torch build: FAILED"; tail -30 "$OUT/torch_build.log"
  fi
fi
AB=$ROOT/build-ab
if has ab-build; then
  TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  if [ -f "$CARRY/ab_before.tar.gz" ]; then
    rm -rf "$AB/before-src" && mkdir -p "$AB/before-src" && tar xzf "$CARRY/ab_before.tar.gz" -C "$AB/before-src"
    ab_build() {  # source tree, build dir, log
      cmake -S "$1" -B "$2" -G Ninja -DCMAKE_PREFIX_PATH="$TP" -DTESSERA_TORCH=ON -DTESSERA_CUDA_ARCHS=90a \
        -DTESSERA_TESTS=OFF -DTESSERA_BENCH=OFF > "$3" 2>&1 && ninja -C "$2" -j8 tessera_torch >> "$3" 2>&1
    }
    t0=$(date +%s)
    ab_build "$AB/before-src" "$AB/before" /tmp/ab_before_build.log & pb=$!
    ab_build "$ROOT" "$AB/after" /tmp/ab_after_build.log & pa=$!
    wait $pb; rb=$?; wait $pa; ra=$?
    note "ab-build: before ($(cat "$CARRY/ab_before.commit" 2>/dev/null)) rc=$rb, after rc=$ra in $(( $(date +%s) - t0 )) s"
    [ $rb -eq 0 ] || tail -20 /tmp/ab_before_build.log
    [ $ra -eq 0 ] || tail -20 /tmp/ab_after_build.log
  else
    note "ab-build: no .gpu_carry/ab_before.tar.gz (tools/gpu/make_ab_carry.sh makes it)"
  fi
fi
if has ab; then
  LB=$(find "$AB/before" -name 'libtessera_torch.so' 2>/dev/null | head -1)
  LA=$(find "$AB/after" -name 'libtessera_torch.so' 2>/dev/null | head -1)
  if [ -n "$LB" ] && [ -n "$LA" ]; then
    gpu_state ab
    [ -n "${AB_RESET:-}" ] && rm -rf "$AB/runs"
    mkdir -p "$AB/runs"
    for ((pass = 1; pass <= ${AB_PASSES:-1}; ++pass)); do
      n=$(( $(ls "$AB/runs" | wc -l) / 2 + 1 ))
      for side in before after; do
        lib=$LB; [ $side = after ] && lib=$LA
        PYTHONUNBUFFERED=1 python3 bench/attention_cuda_bench.py --lib "$lib" ${TORCH_ONLY:+--only "$TORCH_ONLY"} \
          2>&1 | grep "^| " > "$AB/runs/${side}_$n.md"
      done
    done
    args=()
    for f in "$AB"/runs/*.md; do args+=("$(basename "$f" | cut -d_ -f1)=$f"); done
    python3 tools/gpu/ab_table.py "${args[@]}" | tee "$OUT/ab_sdpa.md" | tee -a "$SUMMARY"
  else
    note "ab: run the ab-build step first (no libtessera_torch.so in $AB/before or $AB/after)"
  fi
fi
if has vit-kernels; then
  if [ -n "${PROJECT_OK:-}" ]; then
    ncu_times() { ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
                    --launch-count 4000 "$@"; }
    t0=$(date +%s)
    ncu_times "$PB/bench/bench_models" --only ViT-B --iters 1 > "$OUT/vit_cpp_ncu.csv" 2> "$OUT/vit_cpp_ncu.err"
    ncu_times python3 bench/vit_eager_reference.py --only ViT-B --reps 1 > "$OUT/vit_py_ncu.csv" 2> "$OUT/vit_py_ncu.err"
    note "vit-kernels: ncu runs in $(( $(date +%s) - t0 )) s"
    python3 tools/gpu/ncu_kernel_table.py "C++=$OUT/vit_cpp_ncu.csv" "Python=$OUT/vit_py_ncu.csv" 2>&1 |
      tee "$OUT/vit_kernels.md" | tee -a "$SUMMARY"
    gzip -f "$OUT/vit_cpp_ncu.csv" "$OUT/vit_py_ncu.csv"
  else
    note "vit-kernels: needs the project step (no $PB/bench/bench_models)"
  fi
fi
note "== done $(date -u +%FT%TZ)"
