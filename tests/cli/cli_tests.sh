#!/usr/bin/env bash
# End-to-end checks of the `tessera` command line: exit codes, one-line
# errors naming the file, nothing half-written left behind, resumability.
# Usage: cli_tests.sh TESSERA_BINARY REPO_ROOT
set -u
BIN="$1"
ROOT="$2"
DATA="$ROOT/../shared/data"
FIX="$ROOT/../shared/fixtures"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/count_lib.sh"

check "version" bash -c "\"$BIN\" --version | grep -q '^tessera '"
check "help lists doctor" bash -c "\"$BIN\" --help | grep -q doctor"
check "doctor json" bash -c "\"$BIN\" doctor --json | grep -q '\"libtorch\"'"
# Thread pools size themselves by the cores the process may run on (a job's cpuset), not the machine's.
if command -v taskset > /dev/null && [ "$(nproc)" -ge 2 ]; then
  CPU0=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
  check "doctor: one core under taskset" bash -c "taskset -c $CPU0 \"$BIN\" doctor --json | python3 -c 'import json, sys; c = json.load(sys.stdin)[\"cpu\"]; assert c[\"usable_cores\"] == 1 and c[\"torch_threads\"] == 1, c'"
fi
expect_error "no subcommand" 2 "subcommand" -- "$BIN"

# A benchmark is not a test: only that it runs and reports what a script reads, never how fast.
bench_json_ok() {
  "$BIN" bench --quick --json --quiet > "$WORK/bench.json" && python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
row = {"case", "pass", "unit", "tessera_ms", "tessera_rate", "libtorch", "libtorch_ms", "libtorch_rate",
       "libtorch_over_tessera", "rel_diff"}
assert {"device", "precision", "threads", "libtorch", "attention", "models"} <= j.keys()
assert j["attention"] and j["models"]
assert all(row <= r.keys() and r["tessera_ms"] > 0 for r in j["attention"] + j["models"])
assert all({"seq", "heads", "head_dim"} <= r.keys() for r in j["attention"])
' "$WORK/bench.json"
}
if "$BIN" --help | grep -q ' bench'; then
  check "bench --quick --json" bench_json_ok
  expect_error "bench fp16 on cpu" 2 "fp16" -- "$BIN" bench --precision fp16
fi
expect_error "unknown subcommand" 2 "" -- "$BIN" frobnicate
# run_ok JSON UNIT: the --json summary's "run" object (tools/gpu/gpu_apps.sh reads it) has a positive
# throughput in UNIT per second, and no GPU peak on the CPU.
run_ok() {
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["run"]
assert r["seconds"] > 0 and r[sys.argv[2]] > 0 and r[sys.argv[2] + "_per_s"] > 0, r
assert r["device"] == "cpu" and r["peak_gpu_bytes"] is None, r
' "$1" "$2"
}

if "$BIN" --help | grep -q embed-wsi && [ -f "$DATA/CMU-1-Small-Region.svs" ] && [ -f "$FIX/vit_tiny_timm.safetensors" ]; then
  EW=("$BIN" embed-wsi --model "$ROOT/configs/vit_tiny_timm.yaml" --weights "$FIX/vit_tiny_timm.safetensors" --quiet)
  check "embed-wsi runs" bash -c "\"\${@}\" \"$DATA/CMU-1-Small-Region.svs\" -o \"$WORK/ew\" --json > \"$WORK/ew.json\"" _ "${EW[@]}"
  check "embed-wsi --json reports tiles/s" run_ok "$WORK/ew.json" tiles
  check "embed-wsi --json times the encoder's loading and each slide's two parts" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert 0 < j["run"]["load_encoder_seconds"] < j["run"]["seconds"], j["run"]
p = j["run"]["load_encoder_parts"]
assert 0 < p["read_seconds"] and 0 < p["build_and_first_batch_seconds"] and 0 <= p["apply_seconds"], p
assert 0 <= p["first_batch_seconds"] <= p["build_and_first_batch_seconds"], p
assert max(p["read_seconds"], p["build_and_first_batch_seconds"]) + p["apply_seconds"] <= j["run"]["load_encoder_seconds"], p
[s] = j["slides"]
assert 0 < s["encode_seconds"] and 0 < s["rest_seconds"] and s["encode_seconds"] + s["rest_seconds"] <= s["seconds"], s
r = j["run"]
assert abs(r["ended_unix"] - r["started_unix"] - r["seconds"]) < 0.5, r
' "$WORK/ew.json"
  check "embed-wsi writes features, thumbnail, embedding" test -s "$WORK/ew/features/CMU-1-Small-Region.h5" -a \
    -s "$WORK/ew/thumbnails/CMU-1-Small-Region.png" -a -s "$WORK/ew/slide_embeddings/CMU-1-Small-Region.json"
  check "embed-wsi skips finished slides" bash -c "\"\${@}\" --json \"$DATA/CMU-1-Small-Region.svs\" -o \"$WORK/ew\" | grep -q '\"skipped\"'" _ "${EW[@]}"
  expect_error "embed-wsi missing slide" 1 "/nonexistent.svs: " -- "${EW[@]}" /nonexistent.svs -o "$WORK/ew2"
  head -c 2000 "$DATA/CMU-1-Small-Region.svs" > "$WORK/truncated.svs"
  expect_error "embed-wsi truncated slide" 1 "truncated.svs" -- "${EW[@]}" "$WORK/truncated.svs" -o "$WORK/ew3"
  check "embed-wsi leaves nothing for a failed slide" bash -c "! ls \"$WORK/ew3/features\" | grep -q ."
  expect_error "embed-wsi bad shard" 2 "shard" -- "${EW[@]}" "$DATA/CMU-1-Small-Region.svs" -o "$WORK/ew4" --shard 3/2
  printf 'slide\n%s\n' "$DATA/CMU-1-Small-Region.svs" > "$WORK/m.csv"
  check "embed-wsi shard 1/2 of one slide does nothing" bash -c "\"\${@}\" --manifest \"$WORK/m.csv\" --shard 1/2 -o \"$WORK/ew5\" && ! ls \"$WORK/ew5/features\" | grep -q ." _ "${EW[@]}"
fi

# A Virchow2-shaped encoder as users download one: a torch.save'd timm state dict (no "weights." prefix),
# SwiGLU-packed MLP, 4 registers, class token ++ patch mean (2 x 32-d), 256-pixel tiles centre-cropped to 224.
if "$BIN" --help | grep -q embed-wsi && [ -f "$DATA/CMU-1-Small-Region.svs" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  cat > "$WORK/tiny_virchow.yaml" <<'YAML'
model: vit
img_size: 224
patch_size: 32
embed_dim: 32
depth: 1
num_heads: 2
mlp_ratio: 5.3375
mlp_layer: swiglu_packed
act_layer: silu
init_values: 1.0e-5
reg_tokens: 4
global_pool: token+avg
dynamic_img_size: true
preprocess:
  target_mpp: 1.0
  tile_size: 256
  crop: 224
YAML
  /usr/bin/python3 - "$WORK/pytorch_model.bin" <<'PY'
import sys, torch
D, n = 32, 7 * 7 + 5
shapes = {"cls_token": [1, 1, D], "reg_token": [1, 4, D], "pos_embed": [1, n, D], "patch_embed.proj.weight": [D, 3, 32, 32],
          "patch_embed.proj.bias": [D], "norm.weight": [D], "norm.bias": [D]}
for k, s in {"norm1.weight": [D], "norm1.bias": [D], "attn.qkv.weight": [3 * D, D], "attn.qkv.bias": [3 * D],
             "attn.proj.weight": [D, D], "attn.proj.bias": [D], "ls1.gamma": [D], "norm2.weight": [D], "norm2.bias": [D],
             "mlp.fc1.weight": [170, D], "mlp.fc1.bias": [170], "mlp.fc2.weight": [D, 85], "mlp.fc2.bias": [D], "ls2.gamma": [D]}.items():
    shapes["blocks.0." + k] = s
torch.manual_seed(0)
torch.save({k: torch.randn(s) * 0.02 for k, s in shapes.items()}, sys.argv[1])
PY
  TV=("$BIN" embed-wsi --model "$WORK/tiny_virchow.yaml" --weights "$WORK/pytorch_model.bin" --quiet)
  check "embed-wsi loads a timm .bin and pools class token ++ patch mean" bash -c "\"\${@}\" \"$DATA/CMU-1-Small-Region.svs\" -o \"$WORK/tv\" --json > \"$WORK/tv.json\"" _ "${TV[@]}"
  check "embed-wsi features are 64-d at 1 um/px" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["slides"][0]
assert r["dim"] == 64 and r["tiles"] > 0, r
' "$WORK/tv.json"
  expect_error "embed-wsi tile smaller than the crop" 1 "centre crop" -- "${TV[@]}" "$DATA/CMU-1-Small-Region.svs" -o "$WORK/tv2" --tile-size 200
fi

if "$BIN" --help | grep -q ' video' && [ -f "$DATA/realshort.mp4" ] && [ -f "$FIX/videomae_tiny_hf.safetensors" ]; then
  VID=("$BIN" video --model "$ROOT/configs/videomae_tiny_hf.yaml" --weights "$FIX/videomae_tiny_hf.safetensors" --quiet)
  check "video runs" bash -c "\"\${@}\" \"$DATA/realshort.mp4\" -o \"$WORK/v\" --fps 30 --json > \"$WORK/v.json\" &&
    grep -q '\"frames_sampled\": 36' \"$WORK/v.json\"" _ "${VID[@]}"
  check "video --json reports video-seconds/s" run_ok "$WORK/v.json" video_seconds
  check "video --json reports its stages, the model loaded beside the decoding" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["run"]
st = r["stage_seconds"]
assert set(st) == {"load_model", "wait_for_model", "wait_for_frames", "encode", "outputs"}, st
assert 0 < st["load_model"] and 0 <= st["wait_for_model"] <= st["load_model"] and 0 < st["encode"] and 0 < st["outputs"], st
assert sum(v for k, v in st.items() if k != "load_model") <= r["seconds"], (st, r["seconds"])
' "$WORK/v.json"
  check "video writes embeddings, timeline, picture" test -s "$WORK/v/realshort_embeddings.safetensors" -a \
    -s "$WORK/v/realshort_timeline.csv" -a -s "$WORK/v/realshort_timeline.png"
  check "video timeline has both seconds" bash -c "[ \$(wc -l < \"$WORK/v/realshort_timeline.csv\") -eq 3 ]"
  expect_error "video missing file" 1 "/nonexistent.mp4" -- "${VID[@]}" /nonexistent.mp4 -o "$WORK/v2"
  printf 'not a video at all' > "$WORK/fake.mp4"
  expect_error "video corrupt file" 1 "fake.mp4" -- "${VID[@]}" "$WORK/fake.mp4" -o "$WORK/v3"
  check "video leaves nothing for a corrupt file" bash -c "! ls \"$WORK/v3\" 2>/dev/null | grep -q ."
  expect_error "video bad fps" 2 "fps" -- "${VID[@]}" "$DATA/realshort.mp4" -o "$WORK/v4" --fps -1
fi

if "$BIN" --help | grep -q ' segment' && [ -f "$DATA/example_ct_sm.nii.gz" ] && [ -f "$FIX/swin_unetr_fs12_weights-1of2.safetensors" ]; then
  SEG=("$BIN" segment --model "$ROOT/configs/swin_unetr_fs12.yaml" --weights "$FIX/swin_unetr_fs12_weights-1of2.safetensors"
       "$FIX/swin_unetr_fs12_weights-2of2.safetensors" --roi 64 64 32 --sw-batch 2 --quiet)
  check "segment runs" "${SEG[@]}" "$DATA/example_ct_sm.nii.gz" -o "$WORK/seg/mask.nii.gz"
  check "segment writes mask, volumes, overlay" test -s "$WORK/seg/mask.nii.gz" -a -s "$WORK/seg/mask_volumes.json" -a -s "$WORK/seg/mask_overlay.png"
  check "segment mask has the input geometry" bash -c "diff <(\"$BIN\" info --json \"$DATA/example_ct_sm.nii.gz\" | grep -E 'origin|spacing|direction|size' -A3) \
    <(\"$BIN\" info --json \"$WORK/seg/mask.nii.gz\" | grep -E 'origin|spacing|direction|size' -A3)"
  check "segment volumes add up" bash -c "grep -q volume_ml \"$WORK/seg/mask_volumes.json\""
  expect_error "segment missing input" 1 "/nonexistent.nii.gz" -- "${SEG[@]}" /nonexistent.nii.gz -o "$WORK/seg2/m.nii.gz"
  printf 'garbage' > "$WORK/bad.nii.gz"
  expect_error "segment corrupt input" 1 "bad.nii.gz" -- "${SEG[@]}" "$WORK/bad.nii.gz" -o "$WORK/seg3/m.nii.gz"
  check "segment leaves no mask for a corrupt input" bash -c "! ls \"$WORK/seg3\" 2>/dev/null | grep -q ."
  expect_error "segment roi not a multiple of 32" 2 "roi" -- "${SEG[@]}" "$DATA/example_ct_sm.nii.gz" -o "$WORK/seg4/m.nii.gz" --roi 60 64 32
  # Each row's input is read while the previous one is on the model: a corrupt row still fails alone, under its own name.
  cp "$DATA/example_ct_sm.nii.gz" "$WORK/ct_b.nii.gz"
  printf 'image\n%s\n%s\n%s\n' "$DATA/example_ct_sm.nii.gz" "$WORK/bad.nii.gz" "$WORK/ct_b.nii.gz" > "$WORK/seg_m.csv"
  expect_error "segment manifest: the corrupt row fails, named" 1 "seg_m.csv row 2 (line 3): .*bad.nii.gz" -- \
    "${SEG[@]}" --manifest "$WORK/seg_m.csv" -o "$WORK/seg5"
  check "segment manifest: the rows around it are done" test -s "$WORK/seg5/example_ct_sm.nii.gz" -a -s "$WORK/seg5/ct_b.nii.gz" \
    -a ! -e "$WORK/seg5/bad.nii.gz"
  # A row's outputs are written while the next row is on the model: the same mask as the one-input run.
  check "segment manifest: a row's mask is the one-input run's" bash -c "cmp <(gzip -dc \"$WORK/seg5/example_ct_sm.nii.gz\") \
    <(gzip -dc \"$WORK/seg/mask.nii.gz\")"
  check "segment manifest: a row's volumes are the one-input run's" bash -c "diff <(grep -v '\"output\"' \"$WORK/seg5/example_ct_sm_volumes.json\") \
    <(grep -v '\"output\"' \"$WORK/seg/mask_volumes.json\")"
fi

# The shipped phantom model on the generated sample CT (NIfTI and DICOM): a real segmentation, scored
# against the sample's own label map. Held-out validation Dice was 0.956; the sample is a fixed phantom.
if "$BIN" --help | grep -q ' segment' && "$BIN" --help | grep -q ' make-samples'; then
  "$BIN" make-samples "$WORK/samples" > /dev/null
  PH=("$BIN" segment --model "$ROOT/configs/swin_unetr_phantom.yaml" --weights "$ROOT/models/phantom/swin_unetr_phantom.safetensors"
      --labels "$ROOT/models/phantom/labels.yaml" --spacing 1.5 1.5 2.5 --roi 64 64 64 --overlap 0.25 --quiet --json)
  dice_ok() {  # summary json, minimum Dice of every organ
    python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
d = {l["name"]: l["dice"] for l in j["labels"] if l["label"] > 0}
assert len(d) == 6 and all(v is not None and v >= float(sys.argv[2]) for v in d.values()), d
assert sum(d.values()) / 6 >= 0.9, d
' "$1" "$2"
  }
  for input in ct_phantom.nii.gz ct_phantom_dicom; do
    check "phantom model segments $input" bash -c "\"\${@}\" \"$WORK/samples/$input\" -o \"$WORK/ph_$input/mask.nii.gz\" \
      --reference \"$WORK/samples/ct_phantom_labels.nii.gz\" > \"$WORK/ph_$input.json\"" _ "${PH[@]}"
    check "phantom model Dice on $input (mean >= 0.9, each >= 0.75)" dice_ok "$WORK/ph_$input.json" 0.75
    check "segment --json reports voxels/s ($input)" run_ok "$WORK/ph_$input.json" voxels
  done
  if [ -f "$DATA/example_ct_sm.nii.gz" ]; then
    expect_error "segment reference on another grid" 1 "example_ct_sm.nii.gz: the reference's grid" -- \
      "${PH[@]}" "$WORK/samples/ct_phantom.nii.gz" -o "$WORK/ph_bad/mask.nii.gz" --reference "$DATA/example_ct_sm.nii.gz"
  fi
fi

# Training: errors first, then a tiny run stopped and resumed from its checkpoint.
if "$BIN" --help | grep -q ' train'; then
  expect_error "train missing config" 2 "config" -- "$BIN" train -c "$WORK/none.yaml" -o "$WORK/tr0"
  printf 'model: %s\nlabels: [background, liver]\noptim: {stepz: 3}\n' "$ROOT/configs/swin_unetr_phantom.yaml" > "$WORK/typo.yaml"
  expect_error "train config typo" 1 "typo.yaml: unknown key \`optim.stepz\`" -- "$BIN" train -c "$WORK/typo.yaml" -o "$WORK/tr1"
  printf 'model: %s\nlabels: [background, liver]\n' "$ROOT/configs/swin_unetr_phantom.yaml" > "$WORK/two.yaml"
  cat >> "$WORK/two.yaml" <<'YAML'
train: {source: phantom, count: 1, seed: 5}
val: {source: phantom, count: 1, seed: 6}
YAML
  expect_error "train label count vs model" 1 "2 labels but the model" -- "$BIN" train -c "$WORK/two.yaml" -o "$WORK/tr2"
  cat > "$WORK/tiny.yaml" <<YAML
model: $ROOT/configs/swin_unetr_phantom.yaml
labels: [background, liver, spleen, kidney_left, kidney_right, vertebra, aorta]
train: {source: phantom, count: 1, seed: 5}
val: {source: phantom, count: 1, seed: 6}
preprocess: {spacing: [4, 4, 5]}
crop: {roi: [32, 32, 32]}
optim: {steps: 3, batch_size: 1, warmup_steps: 1}
validation: {every: 0}
YAML
  check "train stops after 2 steps" "$BIN" train -c "$WORK/tiny.yaml" -o "$WORK/tr3" --stop-after 2 --quiet
  check "train leaves a checkpoint, no final weights yet" test -s "$WORK/tr3/checkpoint.safetensors" -a ! -e "$WORK/tr3/model.safetensors"
  check "train resumes to the end" bash -c "\"$BIN\" train -c \"$WORK/tiny.yaml\" -o \"$WORK/tr3\" --resume \"$WORK/tr3/checkpoint.safetensors\" --json \
    | python3 -c 'import json,sys; j=json.load(sys.stdin); assert j[\"steps_done\"] == 3 and 0 <= j[\"val_mean_dice\"] <= 1, j'"
  check "train writes weights, metrics, summary" test -s "$WORK/tr3/model.safetensors" -a -s "$WORK/tr3/metrics.csv" -a -s "$WORK/tr3/summary.json"
  check "trained weights segment" "$BIN" segment "$WORK/samples/ct_phantom.nii.gz" -o "$WORK/tr3/seg/mask.nii.gz" \
    --model "$ROOT/configs/swin_unetr_phantom.yaml" --weights "$WORK/tr3/model.safetensors" --spacing 4 4 5 --roi 32 32 32 --quiet
  expect_error "train resume from a non-checkpoint" 1 "not a Tessera training checkpoint" -- \
    "$BIN" train -c "$WORK/tiny.yaml" -o "$WORK/tr4" --resume "$WORK/tr3/model.safetensors"
fi

# Video → a temporal phase model trained on the sample's per-second labels → the timeline it labels.
if "$BIN" --help | grep -q ' train' && "$BIN" --help | grep -q ' video' && [ -f "$FIX/videomae_tiny_hf.safetensors" ]; then
  VM=(--model "$ROOT/configs/videomae_tiny_hf.yaml" --weights "$FIX/videomae_tiny_hf.safetensors" --fps 2 --quiet)
  "$(dirname "$0")/phase_model_setup.sh" "$BIN" "$ROOT" "$WORK/samples" "$WORK/vt"
  check "train a temporal phase model on video embeddings" "$BIN" train -c "$WORK/vt/phases.yaml" -o "$WORK/vt/run" --quiet
  check "video labels its timeline with the trained model" bash -c "\"\${@}\" \"$WORK/samples/endoscopy.mp4\" -o \"$WORK/vt/labelled\" \
    --temporal-weights \"$WORK/vt/run/model.safetensors\" --labels preparation dissection clipping_cutting retraction --json | grep -q '\"labelled\": true'" \
    _ "$BIN" video "${VM[@]}"
  printf 'features,label\nemb/endoscopy_embeddings.safetensors,%s\n' "$WORK/samples/ct_phantom_labels.csv" > "$WORK/vt/bad.csv"
  sed 's/videos.csv/bad.csv/' "$WORK/vt/phases.yaml" > "$WORK/vt/bad.yaml"
  expect_error "train token labels of another length" 1 "ct_phantom_labels.csv:" -- "$BIN" train -c "$WORK/vt/bad.yaml" -o "$WORK/vt/bad"
fi

# Batch runs (apps/batch): manifest rows that fail alone, shards from Slurm's environment, stale locks,
# task summaries and `collect`, on a tiny generated slide.
if "$BIN" --help | grep -q embed-wsi && [ -f "$FIX/vit_tiny_timm.safetensors" ]; then
  B="$WORK/batch"
  mkdir -p "$B"
  "$BIN" make-samples "$B/s" --only slide > /dev/null
  cp "$B/s/slide.svs" "$B/a.svs"
  cp "$B/s/slide.svs" "$B/b.svs"
  printf 'slide,fallback_mpp\na.svs,\nmissing.svs,\nb.svs,abc\nb.svs\n"c.svs,0.5\nd.svs\n' > "$B/m.csv"
  BW=("$BIN" embed-wsi --model "$ROOT/configs/vit_tiny_timm.yaml" --weights "$FIX/vit_tiny_timm.safetensors" --quiet)
  expect_error "manifest: a missing file fails its row, named" 1 "m.csv row 2 (line 3): .*missing.svs: no such file" -- \
    "${BW[@]}" --manifest "$B/m.csv" -o "$B/out"
  check "manifest: bad option and malformed CSV rows fail alone" bash -c "grep -q 'm.csv row 3 (line 4): column fallback_mpp: expected a number' \"$WORK/err\" &&
    grep -q 'm.csv:6: unterminated quoted field' \"$WORK/err\" && [ \$(grep -c '^tessera: error:' \"$WORK/err\") -eq 3 ]"
  check "manifest: the good rows are done" test -s "$B/out/features/a.h5" -a -s "$B/out/features/b.h5"
  check "manifest: the task summary records done and failed rows" python3 -c '
import glob, json, sys
[f] = glob.glob(sys.argv[1] + "/summaries/embed-wsi-shard0of1-*.json")
j = json.load(open(f))
assert j["finished"] and j["counts"] == {"done": 2, "skipped": 0, "failed": 3}, j["counts"]
assert [i["status"] for i in j["items"]] == ["done", "failed", "failed", "done", "failed"], j["items"]
assert all(i["seconds"] >= 0 for i in j["items"]) and "missing.svs" in j["items"][1]["error"]
' "$B/out"
  check "collect: failed rows, exit 1" bash -c "! \"$BIN\" collect \"$B/out\" > \"$B/collect.txt\" 2>&1 && grep -q '2 done, 3 failed, 0 missing' \"$B/collect.txt\" &&
    grep -q 'failed.*m.csv:6: unterminated quoted field' \"$B/collect.txt\""
  printf 'slide\na.svs\nb.svs\na.svs\n' > "$B/m2.csv"
  check "shard from SLURM_ARRAY_TASK_ID/COUNT/MIN (ids 5..7)" bash -c "SLURM_ARRAY_TASK_ID=7 SLURM_ARRAY_TASK_MIN=5 SLURM_ARRAY_TASK_COUNT=3 \
    \"\${@}\" --manifest \"$B/m2.csv\" -o \"$B/out\" --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j[\"shard\"] == {\"index\": 2, \"count\": 3, \"source\": \"slurm\"}, j[\"shard\"]
assert [(s[\"row\"], s[\"status\"], s[\"reason\"]) for s in j[\"slides\"]] == [(2, \"skipped\", \"output exists\")], j[\"slides\"]
'" _ "${BW[@]}"
  expect_error "shard: Slurm task id outside the array" 1 "SLURM_ARRAY_TASK_ID=9" -- \
    env SLURM_ARRAY_TASK_ID=9 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_COUNT=3 "${BW[@]}" --manifest "$B/m2.csv" -o "$B/out"
  expect_error "shard: --shard overrides Slurm, and is checked" 2 "shard" -- \
    env SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3 "${BW[@]}" --manifest "$B/m2.csv" -o "$B/out" --shard 1/0
  mkdir -p "$B/out2/features"
  printf '{"host": "elsewhere", "pid": 4242, "started": "2026-01-01T00:00:00Z", "job": "7_1"}\n' > "$B/out2/features/a.h5.lock"
  check "lock: a live holder on another host is respected" bash -c "\"\${@}\" \"$B/a.svs\" -o \"$B/out2\" --json --lock-stale 60 2>&1 | grep -q 'locked (host elsewhere, pid 4242, job 7_1'" \
    _ "${BW[@]}"
  touch -d '2 minutes ago' "$B/out2/features/a.h5.lock"
  check "lock: a silent holder on another host is broken after --lock-stale" bash -c "\"\${@}\" \"$B/a.svs\" -o \"$B/out2\" --lock-stale 60 > \"$B/l.txt\" 2>&1;
    grep -q 'broke a stale lock .*silent for' \"$B/l.txt\" && test -s \"$B/out2/features/a.h5\" -a ! -e \"$B/out2/features/a.h5.lock\"" _ "${BW[@]}"
  printf '{"host": "%s", "pid": 999999999, "started": "2026-01-01T00:00:00Z", "job": ""}\n' "$(hostname)" > "$B/out2/features/b.h5.lock"
  check "lock: a dead pid on this host is broken at once" bash -c "\"\${@}\" \"$B/b.svs\" -o \"$B/out2\" 2>&1 | grep -q 'broke a stale lock .*gone'" _ "${BW[@]}"
  expect_error "collect: no summaries" 1 "no task summaries" -- "$BIN" collect "$B/out2"
  # The next slide is prepared (opened, tissue, first tiles) while one is embedded: a corrupt one still fails alone.
  printf 'not a slide' > "$B/bad.svs"
  printf 'slide\na.svs\nbad.svs\nb.svs\n' > "$B/m3.csv"
  expect_error "manifest: a corrupt slide read ahead fails its own row" 1 "m3.csv row 2 (line 3): .*bad.svs" -- \
    "${BW[@]}" --manifest "$B/m3.csv" -o "$B/out3"
  check "manifest: the slides around it are done" bash -c "test -s \"$B/out3/features/a.h5\" -a -s \"$B/out3/features/b.h5\" \
    -a ! -e \"$B/out3/features/bad.h5\" && [ \$(grep -c '^tessera: error:' \"$WORK/err\") -eq 1 ]"
fi

# `convert`: a torch.save checkpoint (written by Debian's python3-torch) → safetensors; bad input → one line, no output.
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 -c '
import sys, torch
lin = torch.nn.Linear(3, 2)
torch.save({"state_dict": {"module." + k: v for k, v in lin.state_dict().items()}, "epoch": 4}, sys.argv[1])
' "$WORK/ckpt.pt"
  check "convert a .pt to safetensors (json)" bash -c "\"$BIN\" convert \"$WORK/ckpt.pt\" -o \"$WORK/ckpt.safetensors\" --dtype bf16 --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j[\"format\"] == \"pytorch-zip\" and j[\"key\"] == \"state_dict\" and j[\"prefix_stripped\"] == \"module.\", j
assert j[\"tensors\"] == 2 and j[\"dtypes\"] == {\"BF16\": 2} and j[\"skipped\"] == [\"epoch (int)\"], j
'"
  check "converted file reads back" bash -c "\"$BIN\" convert \"$WORK/ckpt.safetensors\" -o \"$WORK/again.safetensors\" | grep -q 'tensors     2'"
  head -c 200 "$WORK/ckpt.pt" > "$WORK/cut.pt"
  expect_error "convert a truncated .pt" 1 "cut.pt: " -- "$BIN" convert "$WORK/cut.pt" -o "$WORK/cut.safetensors"
  check "no output after a failed convert" test ! -e "$WORK/cut.safetensors"
fi

finish
