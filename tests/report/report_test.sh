#!/usr/bin/env bash
# segment, embed-wsi and video with --report on the generated samples; each page opened offline in
# headless Chromium (browser_check.mjs): no console errors, no network requests, the overlay drawn where
# the mask / tissue is, the legend's names, the timeline seeking the video. Screenshots go to SHOTS_DIR.
# Usage: report_test.sh TESSERA REPO_ROOT NODE_MODULES SHOTS_DIR   (exit 77: skipped, with the reason)
set -u
BIN="$1" ROOT="$2" NM="$3" SHOTS="$4"
FIX="$ROOT/../shared/fixtures"
HERE="$(cd "$(dirname "$0")" && pwd)"
skip() { echo "SKIPPED: $*"; exit 77; }
CHROMIUM="$(command -v chromium || command -v chromium-browser)" || skip "no chromium (Debian package chromium)"
command -v node > /dev/null || skip "no node (Debian package nodejs)"
[ -d "$NM/puppeteer-core" ] || skip "this build has no report viewers (TESSERA_REPORT needs node and npm)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$SHOTS"
source "$HERE/../cli/count_lib.sh"  # check, expect_error, finish
# browser_check KIND PAGE SHOT [NAMES...]: the page in Chromium
browser_check() { local kind="$1" page="$2" shot="$3"; shift 3; node "$HERE/browser_check.mjs" "$NM" "$kind" "$page" "$shot" "$CHROMIUM" "$@"; }

S="$WORK/samples"
"$BIN" make-samples "$S" > /dev/null || { echo "FAILED: make-samples"; exit 1; }

# segment: the shipped phantom model, scored against the sample's labels.
SEG=("$BIN" segment "$S/ct_phantom.nii.gz" --model "$ROOT/configs/swin_unetr_phantom.yaml"
     --weights "$ROOT/models/phantom/swin_unetr_phantom.safetensors" --labels "$ROOT/models/phantom/labels.yaml"
     --spacing 1.5 1.5 2.5 --roi 64 64 64 --overlap 0.25 --quiet)
check "segment --report" "${SEG[@]}" -o "$WORK/seg/mask.nii.gz" --reference "$S/ct_phantom_labels.nii.gz" --report "$WORK/seg/report.html"
mapfile -t organs < <(tail -n +2 "$S/ct_phantom_labels.csv" | cut -d, -f2)
check "segment report in chromium" browser_check segment "$WORK/seg/report.html" "$SHOTS/segment.png" "${organs[@]}"
check "segment report has Dice" grep -q '"dice":' "$WORK/seg/report.html"
expect_error "segment --report needs .html" 2 "--report" -- "${SEG[@]}" -o "$WORK/seg2/mask.nii.gz" --report "$WORK/seg2/report.txt"
check "a refused --report leaves nothing" test ! -e "$WORK/seg2"

if [ -f "$FIX/vit_tiny_timm.safetensors" ]; then
  EW=("$BIN" embed-wsi --model "$ROOT/configs/vit_tiny_timm.yaml" --weights "$FIX/vit_tiny_timm.safetensors" --quiet)
  check "embed-wsi --report" "${EW[@]}" "$S/slide.svs" -o "$WORK/wsi" --report "$WORK/wsi/report.html"
  check "embed-wsi writes a Deep Zoom pyramid" test -s "$WORK/wsi/report_files/slide.dzi" -a -s "$WORK/wsi/report_files/slide_files/0/0_0.jpeg"
  check "embed-wsi report in chromium" browser_check wsi "$WORK/wsi/report.html" "$SHOTS/embed-wsi.png"
  # A slide classifier (a few steps on the sample's features) whose head gives per-tile scores: the heat map.
  mkdir -p "$WORK/agg"
  printf 'features,label\n%s,tumour\n%s,normal\n' "$WORK/wsi/features/slide.h5" "$WORK/wsi/features/slide.h5" > "$WORK/agg/slides.csv"
  cat > "$WORK/agg/agg.yaml" <<'YAML'
task: classification
level: bag
labels: [normal, tumour]
aggregator: {dim: 64, depth: 1, num_heads: 2, position: rope2d}
train: {source: csv, path: slides.csv}
val: {source: csv, path: slides.csv}
optim: {steps: 4, batch_size: 1, warmup_steps: 1}
validation: {every: 0}
YAML
  check "train a slide classifier" "$BIN" train -c "$WORK/agg/agg.yaml" -o "$WORK/agg/run" --quiet
  check "embed-wsi --report with a heat map" "${EW[@]}" "$S/slide.svs" -o "$WORK/wsi_heat" --aggregator-weights "$WORK/agg/run/model.safetensors" \
    --report "$WORK/wsi_heat/report.html"
  check "heat-map report in chromium" browser_check wsi "$WORK/wsi_heat/report.html" "$SHOTS/embed-wsi-heat.png" "heat map"
  # The head is linear and the slide embedding the mean of the tile tokens: the tiles' scores average to the slide's logit.
  check "heat-map scores average to the slide's logit" python3 - "$WORK/wsi_heat/report.html" "$WORK/wsi_heat/slide_embeddings/slide.json" <<'PY'
import json, re, sys
page = open(sys.argv[1]).read()
data = json.loads(re.search(r'<script type="application/json" id="tessera-data">(.*?)</script>', page, re.S).group(1))
logits = json.load(open(sys.argv[2]))["logits"]
c = max(range(len(logits)), key=lambda k: logits[k])
scores = data["heat"]["scores"]
assert len(scores) == len(data["tiles"]["coords"]) > 1, len(scores)
mean = sum(scores) / len(scores)
assert abs(mean - logits[c]) <= 1e-5 * max(1.0, abs(logits[c])), (mean, logits)
assert "class %d" % c in data["heat"]["title"], data["heat"]["title"]
PY
  expect_error "embed-wsi --report is for one slide" 2 "--report" -- "${EW[@]}" "$S/slide.svs" "$S/slide.svs" -o "$WORK/wsi2" --report "$WORK/wsi2/r.html"
else
  echo "SKIPPED embed-wsi: no $FIX/vit_tiny_timm.safetensors"
fi

if [ -f "$FIX/videomae_tiny_hf.safetensors" ]; then
  VM=(--model "$ROOT/configs/videomae_tiny_hf.yaml" --weights "$FIX/videomae_tiny_hf.safetensors" --fps 2 --quiet)
  PHASES=(preparation dissection clipping_cutting retraction)
  # A temporal phase model trained on the sample's per-second labels, as tests/cli does.
  "$ROOT/tests/cli/phase_model_setup.sh" "$BIN" "$ROOT" "$S" "$WORK/vt"
  check "train a temporal phase model" "$BIN" train -c "$WORK/vt/phases.yaml" -o "$WORK/vt/run" --quiet
  # The sample is MPEG-4 Part 2, which browsers do not play: the report carries an H.264 re-encode.
  check "video --report" "$BIN" video "$S/endoscopy.mp4" -o "$WORK/video" "${VM[@]}" --temporal-weights "$WORK/vt/run/model.safetensors" \
    --labels "${PHASES[@]}" --report "$WORK/video/report.html"
  check "video report re-encoded to H.264" bash -c "\"$BIN\" info --json \"$WORK/video/report_files/video.mp4\" | grep -q '\"codec\": \"h264\"'"
  check "video report in chromium" browser_check video "$WORK/video/report.html" "$SHOTS/video.png" "${PHASES[@]}"
  # An H.264 MP4 plays as it is: the report links (or copies) it instead of re-encoding.
  check "video --report on H.264" "$BIN" video "$WORK/video/report_files/video.mp4" -o "$WORK/video_h264" "${VM[@]}" \
    --temporal-weights "$WORK/vt/run/model.safetensors" --labels "${PHASES[@]}" --report "$WORK/video_h264/report.html"
  check "an H.264 source is not re-encoded" cmp -s "$WORK/video/report_files/video.mp4" "$WORK/video_h264/report_files/video.mp4"
  check "H.264 source report in chromium" browser_check video "$WORK/video_h264/report.html" "$WORK/video_h264.png" "${PHASES[@]}"
  expect_error "video --report with a manifest" 2 "--report" -- "$BIN" video --manifest "$WORK/vt/videos.csv" -o "$WORK/v2" "${VM[@]}" --report "$WORK/v2/r.html"
else
  echo "SKIPPED video: no $FIX/videomae_tiny_hf.safetensors"
fi

# The checker itself must fail on a page that fetches from the network.
sed 's|<body>|<body><img src="http://127.0.0.1:9/x.png">|' "$WORK/seg/report.html" > "$WORK/seg/fetching.html"
check "a page that fetches fails the check" bash -c "! node \"$HERE/browser_check.mjs\" \"$NM\" segment \"$WORK/seg/fetching.html\" \"$WORK/f.png\" \"$CHROMIUM\" 2> \"$WORK/f.err\" && grep -q 'network request' \"$WORK/f.err\""

finish
