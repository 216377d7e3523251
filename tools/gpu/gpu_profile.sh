#!/usr/bin/env bash
# One call on the GPU machine: Nsight Compute profiles of single attention kernels,
# printed to text in $OUT (the machine has ncu; this one has not).
#
#   tools/gpu/gpu_profile.sh BIN_DIR NAME KERNEL_REGEX "BENCH CASE SUBSTRING" [NAME REGEX CASE]...
#
# For each triple: ncu --set full on the first launch of the kernel whose function name
# matches KERNEL_REGEX while attention_cuda_bench runs the one case (a case "cudnn:D:N" instead
# runs bench/cudnn_step.py D:N, one SDPA forward + backward on cuDNN, e.g. KERNEL_REGEX bprop), then
#   $OUT/NAME.txt      the details page (throughput, occupancy, warp states, ...)
#   $OUT/NAME_sass.csv the source page: SASS with per-instruction stall samples
#                      (PRINT_SOURCE=cuda,sass: CUDA source lines with their SASS, for -lineinfo builds)
# Clocks are left alone (--clock-control none), as the device notes ask.
set -uo pipefail
BIN=$1
shift
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT"
while [ $# -ge 3 ]; do
  name=$1 kre=$2 case_=$3
  shift 3
  rep=/tmp/prof_$name
  t0=$(date +%s)
  if [[ $case_ == cudnn:* ]]; then cmd=(python3 bench/cudnn_step.py "${case_#cudnn:}")
  else cmd=("$BIN/attention_cuda_bench" --only "$case_" --reps 1); fi
  ncu --clock-control none --kernel-name-base function --kernel-name "regex:$kre" --launch-count 1 \
    --set full --import-source yes -f -o "$rep" "${cmd[@]}" > "/tmp/prof_$name.log" 2>&1
  echo "== $name ($kre, '$case_'): rc=$? in $(( $(date +%s) - t0 )) s"
  tail -3 "/tmp/prof_$name.log"
  ncu -i "$rep.ncu-rep" --page details > "$OUT/$name.txt" 2>&1
  ncu -i "$rep.ncu-rep" --page source --csv --print-source "${PRINT_SOURCE:-sass}" > "$OUT/${name}_sass.csv" 2>&1
  gzip -f "$OUT/${name}_sass.csv"
  grep -E "Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput" "$OUT/$name.txt" | head -8
done
