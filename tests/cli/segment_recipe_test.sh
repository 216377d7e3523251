#!/usr/bin/env bash
# `tessera segment --model configs/swin_unetr_btcv.yaml --weights model.pt`: the
# bundle's recipe from the config's `inference:` section, with a MONAI-bundle
# checkpoint written by torch.save (module.-prefixed keys, plain and under
# "state_dict"; random values, tests/cli/make_bundle_checkpoint.py). The
# network is the BTCV config at feature size 12 (CPU time); the recipe is the
# bundle's, unchanged. The recipe run must equal a run that spells every step
# out on the command line, voxel for voxel (segment's --reference Dice), and
# the labels MONAI's own pipeline gave for the fixture's weights.
# usage: segment_recipe_test.sh TESSERA SOURCE_ROOT
# Exit 77 (ctest: skipped) without python3-torch, the fs12 fixture or segment.
set -uo pipefail
T=$1
ROOT=$2
FIX=$ROOT/../shared/fixtures
. "$(dirname "$0")/check_lib.sh"
"$T" --help | grep -q ' segment' && "$T" --help | grep -q ' make-samples' || skip "tessera built without segment or make-samples"
[ -f "$FIX/swin_unetr_fs12_weights-1of2.safetensors" ] || skip "$FIX: no swin_unetr_fs12 fixture"
[ -x "$PY" ] && "$PY" -c 'import torch' 2>/dev/null || skip "$PY with torch not available (python3-torch)"


"$T" make-samples "$WORK/s" --only ct --ct-size 48 40 16 >/dev/null || { echo "FAIL make-samples"; exit 1; }
CT=$WORK/s/ct_phantom.nii.gz
sed 's/^feature_size: 48$/feature_size: 12/' "$ROOT/configs/swin_unetr_btcv.yaml" > "$WORK/btcv_fs12.yaml"
sed '/^inference:/,$d' "$WORK/btcv_fs12.yaml" > "$WORK/btcv_fs12_bare.yaml"
check "the test config differs from the shipped one only in feature_size" \
  bash -c "diff '$ROOT/configs/swin_unetr_btcv.yaml' '$WORK/btcv_fs12.yaml' | grep -c '^[<>]' | grep -qx 2"
LIKE=("$FIX"/swin_unetr_fs12_weights-*.safetensors)
check "torch.save {'state_dict': module.* keys}" "$PY" "$ROOT/tests/cli/make_bundle_checkpoint.py" "$WORK/model.pt" --like "${LIKE[@]}"
check "torch.save plain module.* keys" "$PY" "$ROOT/tests/cli/make_bundle_checkpoint.py" "$WORK/plain.pt" --wrap none --like "${LIKE[@]}"

# The recipe from the config alone.
check "segment with the config's recipe" bash -c "'$T' segment '$CT' -o '$WORK/r/mask.nii.gz' --model '$WORK/btcv_fs12.yaml' \
  --weights '$WORK/model.pt' -q --json > '$WORK/r.json'"
check "  the recipe's 14 label names" "$PY" -c '
import json, sys
names = [l["name"] for l in json.load(open(sys.argv[1]))["labels"]]
assert len(names) == 14 and names[1] == "spleen" and names[9] == "IVC" and names[13] == "Left adrenal gland", names
' "$WORK/r.json"
# NIfTI keeps an oblique direction as a float32 quaternion: equal to ~1e-8 after a write.
check "  the mask has the input's geometry" bash -c "'$T' info --json '$CT' > '$WORK/ct_info.json' &&
  '$T' info --json '$WORK/r/mask.nii.gz' > '$WORK/mask_info.json' && '$PY' -c '
import json, sys
a, b = (json.load(open(p))[\"volume\"] for p in sys.argv[1:])
assert a[\"size\"] == b[\"size\"], (a, b)
for k in (\"spacing_mm\", \"origin_lps_mm\", \"direction_lps\"):
    x, y = (sum(v[k], []) if k == \"direction_lps\" else v[k] for v in (a, b))
    assert all(abs(p - q) < 1e-6 for p, q in zip(x, y)), (k, x, y)
' '$WORK/ct_info.json' '$WORK/mask_info.json'"

# Every step spelled out, the plain checkpoint, no recipe in the config: the same labels.
check "segment with the recipe spelled out" bash -c "'$T' segment '$CT' -o '$WORK/e/mask.nii.gz' --model '$WORK/btcv_fs12_bare.yaml' \
  --weights '$WORK/plain.pt' --spacing 1.5 1.5 2 --a-min -175 --a-max 250 --roi 96 96 96 --overlap 0.5 --mode constant \
  --sw-batch 4 --invert linear --reference '$WORK/r/mask.nii.gz' -q --json > '$WORK/e.json'"
check "  voxel for voxel the recipe's labels" "$PY" -c '
import json, sys
r, e = (json.load(open(p))["labels"] for p in sys.argv[1:])
assert [l["voxels"] for l in r] == [l["voxels"] for l in e], (r, e)
assert sum(l["voxels"] > 0 for l in r) >= 2, r  # a real label map, not one class
assert all(l["dice"] in (None, 1.0) for l in e[1:]), e
' "$WORK/r.json" "$WORK/e.json"
# A command-line option overrides the recipe.
check "segment --invert nearest overrides the recipe" bash -c "'$T' segment '$CT' -o '$WORK/n/mask.nii.gz' --model '$WORK/btcv_fs12.yaml' \
  --weights '$WORK/model.pt' --invert nearest -q"

# Against MONAI itself: MONAI 1.5's pipeline with the same recipe and the fs12 fixture's weights
# (3 classes) on this CT gave tests/cli/data/monai_recipe_fs12_labels.nii.gz
# (tests/cli/make_monai_reference.py); segment must give the same labels (Dice 1.0 when made).
{ cat "$ROOT/configs/swin_unetr_fs12.yaml"; sed -n '/^inference:/,/^  # metadata.json/p' "$ROOT/configs/swin_unetr_btcv.yaml" | sed '$d'; } \
  > "$WORK/fs12_recipe.yaml"
check "segment = MONAI's pipeline (fs12 fixture, the bundle's recipe)" bash -c "'$T' segment '$CT' -o '$WORK/m/mask.nii.gz' \
  --model '$WORK/fs12_recipe.yaml' --weights ${LIKE[*]} --reference '$ROOT/tests/cli/data/monai_recipe_fs12_labels.nii.gz' \
  -q --json > '$WORK/m.json' && '$PY' -c '
import json, sys
labels = json.load(open(sys.argv[1]))[\"labels\"]
assert len(labels) == 3 and all(l[\"dice\"] is not None and l[\"dice\"] >= 0.999 for l in labels[1:]), labels
' '$WORK/m.json'"

# A broken recipe: one line naming the config, exit 1, nothing written.
sed 's/sw_batch_size: 4/sw_batchsize: 4/' "$WORK/btcv_fs12.yaml" > "$WORK/typo.yaml"
sed 's/labels: \[background, /labels: [/' "$WORK/btcv_fs12.yaml" > "$WORK/labels13.yaml"
for bad in "typo.yaml:unknown key \`inference.sliding_window.sw_batchsize\`" "labels13.yaml:names 13 labels for 14 output channels"; do
  cfg=${bad%%:*} frag=${bad#*:}
  "$T" segment "$CT" -o "$WORK/bad_$cfg/mask.nii.gz" --model "$WORK/$cfg" --weights "$WORK/model.pt" -q 2>"$WORK/err"
  rc=$?
  check "$cfg: exit 1, one line naming it" bash -c "[ $rc -eq 1 ] && [ \$(wc -l < '$WORK/err') -eq 1 ] && grep -qF '$WORK/$cfg' '$WORK/err' && grep -qF -- '$frag' '$WORK/err'"
  check "  nothing written" bash -c "! ls '$WORK/bad_$cfg' 2>/dev/null | grep -q ."
done
finish
