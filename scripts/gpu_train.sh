#!/usr/bin/env bash
# Training on the GPU machine, in as few device calls as possible; logs and
# results go to $OUT (default ./gpu_out).
#
#   scripts/gpu_train.sh [build] [phantom] [curves] [bench]     (no argument: all but bench)
#
# build    configure + build the `tessera` CLI against CUDA LibTorch into .gpu_build/ (ignored; kept
#          between calls on a warm machine), with CLI11, yaml-cpp and nlohmann-json from .gpu_carry
#          (scripts/make_gpu_carry.sh)
# phantom  train the shipped phantom model: configs/train_phantom.yaml, CUDA, bf16, weights saved fp16 → $OUT/phantom/
#          (model.safetensors, metrics.csv, summary.json with the held-out validation Dice)
# bench    also build the benchmarks and run bench_train (training step time and peak memory, Tessera vs
#          LibTorch SDPA: Swin UNETR fs48 96³ batch 2, ViT-B over 16k and 64k tokens) → $OUT/bench_train.md
# curves   200 steps with Tessera attention and 200 with LibTorch SDPA (same seed, data and precision,
#          no validation): metrics CSVs and a comparison of the loss curves → $OUT/curves/
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu_out}
mkdir -p "$OUT"
CARRY=$ROOT/.gpu_carry
PB=$ROOT/.gpu_build
STEPS=${*:-build phantom curves}
has() { [[ " $STEPS " == *" $1 "* ]]; }
BENCH=OFF; has bench && BENCH=ON
SUMMARY=$OUT/train_summary.txt
note() { echo "$*" | tee -a "$SUMMARY"; }
grep -qx '/.gpu_build/' .git/info/exclude 2>/dev/null || echo '/.gpu_build/' >> .git/info/exclude
export LD_LIBRARY_PATH="$CARRY/deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TESSERA=$PB/apps/tessera

note "== gpu_train $(date -u +%FT%TZ) steps: $STEPS"
if has build; then
  TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  t0=$(date +%s)
  if cmake -S . -B "$PB" -G Ninja -DCMAKE_PREFIX_PATH="$TP;$CARRY/deps" -DTESSERA_CUDA_ARCHS=90a -DTESSERA_REPORT=OFF \
       -DTESSERA_TESTS=OFF -DTESSERA_BENCH=$BENCH -DCMAKE_DISABLE_FIND_PACKAGE_spdlog=ON > "$OUT/train_build.log" 2>&1 &&
     ninja -C "$PB" tessera $([ $BENCH = ON ] && echo bench_train) >> "$OUT/train_build.log" 2>&1; then
    note "build: ok in $(( $(date +%s) - t0 )) s"
  else
    note "build: FAILED"; grep -E "error|Error" "$OUT/train_build.log" | head -20 | tee -a "$SUMMARY"
  fi
  "$TESSERA" doctor 2>&1 | tee -a "$SUMMARY"
fi

if has phantom && [ -x "$TESSERA" ]; then
  t0=$(date +%s)
  "$TESSERA" train -c configs/train_phantom.yaml -o "$OUT/phantom" --device cuda --precision bf16 \
    --weights-dtype fp16 > "$OUT/phantom.log" 2>&1
  note "phantom: rc=$? in $(( $(date +%s) - t0 )) s"
  grep -E "validation|trained|error" "$OUT/phantom.log" | tee -a "$SUMMARY"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader >> "$SUMMARY"
  rm -f "$OUT/phantom/checkpoint.safetensors"  # optimizer state: too big to bring back, not needed
fi

if has curves && [ -x "$TESSERA" ]; then
  for att in tessera torch_sdpa; do
    t0=$(date +%s)
    "$TESSERA" train -c configs/train_phantom.yaml -o "$OUT/curves/$att" --device cuda --precision bf16 \
      --attention "$att" --steps 200 --no-validation -q > "$OUT/curves_$att.log" 2>&1
    note "curves $att: rc=$? in $(( $(date +%s) - t0 )) s"
    rm -f "$OUT/curves/$att/checkpoint.safetensors" "$OUT/curves/$att/model.safetensors"
  done
  python3 - "$OUT/curves" <<'PY' 2>&1 | tee -a "$SUMMARY"
import csv, sys
d = sys.argv[1]
def losses(att):
    with open(f"{d}/{att}/metrics.csv") as f:
        return [float(r["loss"]) for r in csv.DictReader(f)], None
a, _ = losses("tessera"); b, _ = losses("torch_sdpa")
n = min(len(a), len(b))
print(f"curves: {n} steps; loss at 1/50/100/200: tessera {a[0]:.4f} {a[49]:.4f} {a[99]:.4f} {a[n-1]:.4f}"
      f" | sdpa {b[0]:.4f} {b[49]:.4f} {b[99]:.4f} {b[n-1]:.4f}")
w = 20
for s in range(0, n, w):
    ma = sum(a[s:s+w]) / len(a[s:s+w]); mb = sum(b[s:s+w]) / len(b[s:s+w])
    print(f"  steps {s+1:4d}-{min(n, s+w):4d}: mean loss tessera {ma:.4f} sdpa {mb:.4f} rel diff {abs(ma-mb)/mb:.3%}")
PY
fi
if has bench && [ -x "$PB/bench/bench_train" ]; then
  timeout 240 "$PB/bench/bench_train" 2>&1 | tee "$OUT/bench_train.md" | tee -a "$SUMMARY"
  timeout 120 "$TESSERA" bench --device cuda --precision bf16 --quick 2>&1 | tee "$OUT/bench_cli.md" | tee -a "$SUMMARY"
fi
note "== done $(date -u +%FT%TZ)"
