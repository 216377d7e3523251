#!/usr/bin/env bash
# Sets up this machine and runs Tessera's main jobs on samples it makes itself:
#  1. tessera make-samples: a CT phantom (+ labels, + a DICOM series), a
#     pyramidal Aperio-style slide, an endoscopy-like video (+ phase labels);
#  2. tessera info on each; tessera doctor;
#  3. the exact attention module on the CPU against LibTorch's naive attention;
#  4. segment the sample CT (NIfTI and its DICOM series) with the shipped
#     phantom model (models/phantom/, trained by `tessera train`), scored
#     against the sample's own labels (Dice per organ);
#  5. embed-wsi / video on the sample slide and video, when the reference
#     fixtures beside the repository (../shared/fixtures) provide weights.
#     Those weights are the fixtures' randomly initialised networks: the
#     outputs show the pipelines at work, not meaningful embeddings.
# Usage: scripts/demo.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
scripts/setup.sh "$BUILD_DIR"
T="$BUILD_DIR/apps/tessera"
S=data_samples/generated
OUT=data_samples/demo_output
mkdir -p "$S" "$OUT"

"$T" doctor
echo
# --report pages (HTML, open offline) when this build has the viewers (node and npm at build time).
REPORT=0
if "$T" doctor --json | grep -q '"report_viewers": true'; then REPORT=1; fi
# report NAME: sets REP to "--report OUT/NAME.html", or to nothing.
report() { REP=(); if ((REPORT)); then REP=(--report "$OUT/$1.html"); fi; }
"$T" make-samples "$S"
for f in "$S/ct_phantom.nii.gz" "$S/slide.svs" "$S/endoscopy.mp4"; do
  echo "== tessera info $f"
  "$T" info "$f" | head -12
done

echo
echo "== Exact fused attention on the CPU vs LibTorch matmul-softmax-matmul (B=1, H=4, d=64, $(nproc) threads)"
"$BUILD_DIR/bench/bench_attention_cpu" --all --threads "$(nproc)" --grid 1024 2048 4096 --memory-n 16384

echo
echo "== tessera segment: the shipped phantom model (models/phantom/) on the sample CT, scored against its labels"
for input in ct_phantom.nii.gz ct_phantom_dicom; do
  report "${input%%.*}_report"
  "$T" segment "$S/$input" -o "$OUT/${input%%.*}_mask.nii.gz" --model configs/swin_unetr_phantom.yaml \
    --weights models/phantom/swin_unetr_phantom.safetensors --labels models/phantom/labels.yaml \
    --spacing 1.5 1.5 2.5 --roi 64 64 64 --overlap 0.25 --reference "$S/ct_phantom_labels.nii.gz" "${REP[@]}"
done

FIX=../shared/fixtures
if [ -f "$FIX/vit_tiny_timm.safetensors" ]; then
  echo
  echo "== tessera embed-wsi (ViT-tiny fixture weights) on the sample slide"
  rm -f "$OUT/wsi/features/slide.h5"
  report slide_report
  "$T" embed-wsi "$S/slide.svs" -o "$OUT/wsi" --model configs/vit_tiny_timm.yaml --weights "$FIX/vit_tiny_timm.safetensors" --json "${REP[@]}"
  echo
  echo "== tessera video (VideoMAE-tiny fixture weights) on the sample video"
  report endoscopy_report
  "$T" video "$S/endoscopy.mp4" -o "$OUT/video" --model configs/videomae_tiny_hf.yaml \
    --weights "$FIX/videomae_tiny_hf.safetensors" --fps 2 --json "${REP[@]}"
fi
echo
echo "Outputs in $OUT/"
if ((REPORT)); then echo "Reports (open in a browser, offline): $OUT/*_report.html"; fi
