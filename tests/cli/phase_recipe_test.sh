#!/usr/bin/env bash
# Surgical phase recognition, Cholec80-style, end to end on generated videos: five short 25 fps
# videos whose phases differ in colour, each with its annotation in Cholec80's format
# (videoXX-phase.txt, a row per frame, phases changing inside seconds, one ragged last second,
# one validation video without a phase); embedded per second by the tiny VideoMAE fixture;
# configs/train_cholec80_phases.yaml runs; a small temporal model trained on them reports
# per-phase precision, recall and Jaccard that are sane and high; `video --reference` scores the
# validation videos exactly as training validated them; bad references fail in one line, writing nothing.
# Usage: phase_recipe_test.sh TESSERA_BINARY REPO_ROOT WRITE_TEST_VIDEO_TOOL  (exit 77: no video or train command)
set -u
BIN="$1" ROOT="$2" TOOL="$3"
FIX="$ROOT/../shared/fixtures"
HERE="$(cd "$(dirname "$0")" && pwd)"
if ! "$BIN" --help | grep -q ' video' || ! "$BIN" --help | grep -q ' train'; then
  echo "skipped: this build has no video or train command"
  exit 77
fi
[ -f "$FIX/videomae_tiny_hf.safetensors" ] || { echo "FAILED: the fixture $FIX/videomae_tiny_hf.safetensors is missing"; exit 1; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
source "$HERE/count_lib.sh"
PHASES=(Preparation CalotTriangleDissection ClippingCutting GallbladderDissection GallbladderPackaging CleaningCoagulation
        GallbladderRetraction)
D="$WORK/cholec80"
mkdir -p "$D/videos"
# Frames per phase (25 fps): changes fall inside seconds; video03 ends 3 frames into its 7th second;
# video05 has no CalotTriangleDissection.
for spec in "01 40 35 45 30" "02 30 45 40 35" "03 45 30 35 43" "04 35 40 30 45" "05 50 0 60 40"; do
  set -- $spec
  "$TOOL" phases "$D/videos/video$1.mp4" "${@:2}" || exit 1
done
printf 'video\n' > "$D/videos.csv"
for i in 01 02 03 04 05; do echo "videos/video$i.mp4" >> "$D/videos.csv"; done
# A VideoMAE clip is 16 frames: at 16 fps, one clip per second.
VM=(--model "$ROOT/configs/videomae_tiny_hf.yaml" --weights "$FIX/videomae_tiny_hf.safetensors" --fps 16 --quiet)
check "embed the videos" "$BIN" video --manifest "$D/videos.csv" -o "$D/emb" "${VM[@]}"
printf 'features,label\n' > "$D/train.csv"
printf 'features,label\n' > "$D/val.csv"
for i in 01 02 03; do echo "emb/video${i}_embeddings.safetensors,videos/video$i-phase.txt" >> "$D/train.csv"; done
for i in 04 05; do echo "emb/video${i}_embeddings.safetensors,videos/video$i-phase.txt" >> "$D/val.csv"; done

# The recipe as shipped (paths relative to the folder it runs from), a few steps.
check "the Cholec80 recipe trains and validates" bash -c "cd '$WORK' && '$BIN' train -c '$ROOT/configs/train_cholec80_phases.yaml' \
  -o '$WORK/recipe' --steps 3 --quiet && grep -q '\"phase_metrics\"' '$WORK/recipe/summary.json'"

# The same recipe, smaller and faster, to convergence.
sed -e 's/dim: 256/dim: 64/; s/depth: 2/depth: 1/; s/num_heads: 4/num_heads: 2/; s/steps: 2000/steps: 60/' \
    -e 's/lr: 0.0003/lr: 0.003/; s/warmup_steps: 100/warmup_steps: 5/; s/every: 200/every: 30/' \
    "$ROOT/configs/train_cholec80_phases.yaml" > "$WORK/quick.yaml"
check "train the temporal phase model" bash -c "cd '$WORK' && '$BIN' train -c quick.yaml -o run --quiet"
check "summary.json: per-phase metrics, sane, high on separable phases" python3 - "$WORK/run/summary.json" "${PHASES[@]}" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["phase_metrics"]
names = sys.argv[2:]
assert m["videos"] == 2 and m["seconds"] == 12, m
for key in ("precision", "recall", "jaccard"):
    per = m[key]["per_phase"]
    assert sorted(per) == sorted(names), per
    for n in names[:4]:
        assert per[n] is not None and 0 <= per[n] <= 1, (key, n, per[n])
    assert all(per[n] is None for n in names[4:]), (key, per)  # in no validation video
    assert 0 <= m[key]["mean"] <= 1, m[key]
# Seconds straddling a change are mixed in colour; the others are plain: most must be right.
assert m["recall"]["mean"] >= 0.6 and m["accuracy"]["mean"] >= 0.6, m
PY
check "metrics.csv has the phase columns, filled at validation" python3 - "$WORK/run/metrics.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert rows[-1]["val_phase_jaccard"] and rows[29]["val_phase_recall"] and not rows[0]["val_phase_jaccard"], rows[-1]
assert 0 <= float(rows[-1]["val_phase_jaccard"]) <= 1
PY

# `video --reference`: the validation videos scored as training scored them.
printf 'video,reference\n' > "$D/val_videos.csv"
for i in 04 05; do echo "videos/video$i.mp4,videos/video$i-phase.txt" >> "$D/val_videos.csv"; done
LABELLED=(--temporal-weights "$WORK/run/model.safetensors" --labels "${PHASES[@]}")
"$BIN" video --manifest "$D/val_videos.csv" -o "$WORK/scored" "${VM[@]}" "${LABELLED[@]}" --json > "$WORK/scored.json"
check "video --reference over the validation videos runs" test $? -eq 0
check "its metrics are training's validation metrics" python3 - "$WORK/scored.json" "$WORK/run/summary.json" <<'PY'
import json, sys
got, want = json.load(open(sys.argv[1]))["phase_metrics"], json.load(open(sys.argv[2]))["phase_metrics"]
def same(a, b):
    if isinstance(a, dict): return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if a is None or b is None: return a is b
    return abs(a - b) < 1e-9
assert same(got, want), (got, want)
PY
"$BIN" video "$D/videos/video05.mp4" -o "$WORK/one" "${VM[@]}" "${LABELLED[@]}" --reference "$D/videos/video05-phase.txt" \
  --json > "$WORK/one.json"
check "video --reference on one video: its phases, the absent one null" python3 - "$WORK/one.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m = r["phase_metrics"]
assert r["reference"].endswith("video05-phase.txt") and m["videos"] == 1 and m["accuracy"]["std"] is None, r
assert m["recall"]["per_phase"]["CalotTriangleDissection"] is None and m["recall"]["per_phase"]["Preparation"] is not None, m
PY

sed 's/ClippingCutting/Clipping/' "$D/videos/video04-phase.txt" > "$WORK/unknown-phase.txt"
expect_error "an unknown phase name" 1 "unknown-phase.txt line 77: label \`Clipping\`" -- \
  "$BIN" video "$D/videos/video04.mp4" -o "$WORK/bad1" "${VM[@]}" "${LABELLED[@]}" --reference "$WORK/unknown-phase.txt"
head -n 51 "$D/videos/video04-phase.txt" > "$WORK/short-phase.txt"
expect_error "an annotation seconds short of the video" 1 "short-phase.txt: labels cover seconds 0..1 but" -- \
  "$BIN" video "$D/videos/video04.mp4" -o "$WORK/bad2" "${VM[@]}" "${LABELLED[@]}" --reference "$WORK/short-phase.txt"
expect_error "a reference without phase names" 1 "needs the phase names" -- \
  "$BIN" video "$D/videos/video04.mp4" -o "$WORK/bad3" "${VM[@]}" --temporal-weights "$WORK/run/model.safetensors" \
  --reference "$D/videos/video04-phase.txt"
check "nothing written for them" bash -c "! ls '$WORK/bad1' '$WORK/bad2' '$WORK/bad3' 2>/dev/null | grep -q ."
finish
