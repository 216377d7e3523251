#!/usr/bin/env bash
# Sets up this machine and runs Tessera's main jobs on samples it makes itself:
#  1. tessera make-samples: a CT phantom (+ labels, + a DICOM series), a
#     pyramidal Aperio-style slide, an endoscopy-like video (+ phase labels);
#  2. tessera info on each; tessera doctor;
#  3. the exact attention module on the CPU against LibTorch's naive attention;
#  4. segment / embed-wsi / video on those samples, when the reference
#     fixtures beside the repository (../shared/fixtures) provide weights.
#     Those weights are the fixtures' randomly initialised networks: the
#     outputs show the pipelines at work, not meaningful labels.
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
"$T" make-samples "$S"
for f in "$S/ct_phantom.nii.gz" "$S/slide.svs" "$S/endoscopy.mp4"; do
  echo "== tessera info $f"
  "$T" info "$f" | head -12
done

echo
echo "== Exact fused attention on the CPU vs LibTorch matmul-softmax-matmul (B=1, H=4, d=64, $(nproc) threads)"
"$BUILD_DIR/bench/bench_attention_cpu" --all --threads "$(nproc)" --grid 1024 2048 4096 --memory-n 16384

FIX=../shared/fixtures
if [ -f "$FIX/swin_unetr_fs12_weights-1of2.safetensors" ]; then
  echo
  echo "== tessera segment (Swin UNETR fs12 fixture weights) on the CT phantom"
  "$T" segment "$S/ct_phantom.nii.gz" -o "$OUT/ct_phantom_mask.nii.gz" --model configs/swin_unetr_fs12.yaml \
    --weights "$FIX/swin_unetr_fs12_weights-1of2.safetensors" "$FIX/swin_unetr_fs12_weights-2of2.safetensors" \
    --roi 64 64 32 --sw-batch 2
  echo
  echo "== tessera embed-wsi (ViT-tiny fixture weights) on the sample slide"
  rm -f "$OUT/wsi/features/slide.h5"
  "$T" embed-wsi "$S/slide.svs" -o "$OUT/wsi" --model configs/vit_tiny_timm.yaml --weights "$FIX/vit_tiny_timm.safetensors" --json
  echo
  echo "== tessera video (VideoMAE-tiny fixture weights) on the sample video"
  "$T" video "$S/endoscopy.mp4" -o "$OUT/video" --model configs/videomae_tiny_hf.yaml \
    --weights "$FIX/videomae_tiny_hf.safetensors" --fps 2 --json
  echo
  echo "Outputs in $OUT/"
fi
