#!/usr/bin/env bash
# Prepares the training of a temporal phase model on the sample video: its per-second embeddings in
# DIR/emb, DIR/videos.csv (embeddings, the sample's phase labels) and DIR/phases.yaml; train it with
# `tessera train -c DIR/phases.yaml -o DIR/run`. Used by tests/cli and tests/report.
# Usage: phase_model_setup.sh TESSERA REPO_ROOT SAMPLES_DIR DIR
set -eu
BIN="$1" ROOT="$2" S="$3" DIR="$4"
FIX="$ROOT/../shared/fixtures"
"$BIN" video "$S/endoscopy.mp4" -o "$DIR/emb" --model "$ROOT/configs/videomae_tiny_hf.yaml" \
  --weights "$FIX/videomae_tiny_hf.safetensors" --fps 2 --quiet > /dev/null
printf 'features,label\nemb/endoscopy_embeddings.safetensors,%s\n' "$S/endoscopy_phases.csv" > "$DIR/videos.csv"
cat > "$DIR/phases.yaml" <<'YAML'
task: classification
level: token
labels: [preparation, dissection, clipping_cutting, retraction]
aggregator: {dim: 64, depth: 1, num_heads: 2, position: rope1d}
train: {source: csv, path: videos.csv}
val: {source: csv, path: videos.csv}
optim: {steps: 20, batch_size: 1, warmup_steps: 2}
validation: {every: 10}
YAML
