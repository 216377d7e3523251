#!/usr/bin/env bash
# DICOM folders that would give a wrong volume: `tessera segment` must refuse
# each with one line on stderr naming the folder, exit 1, and write nothing.
#   mixed series (no --series), a missing slice, a gantry tilt (pydicom shifts
#   ImagePositionPatient along the rows), and one slice in another orientation.
# usage: dicom_bad_input_test.sh TESSERA SOURCE_ROOT
# Exit 77 (ctest: skipped) without pydicom or without segment / make-samples.
set -uo pipefail
T=$1
ROOT=$2
. "$(dirname "$0")/check_lib.sh"
"$T" --help | grep -q ' segment' && "$T" --help | grep -q ' make-samples' || skip "tessera built without segment or make-samples"
[ -x "$PY" ] && "$PY" -c 'import pydicom' 2>/dev/null || skip "$PY with pydicom not available (python3-pydicom)"

SEG=(segment --model "$ROOT/configs/swin_unetr_phantom.yaml" --weights "$ROOT/models/phantom/swin_unetr_phantom.safetensors"
     --roi 32 32 32 -q)
# refused NAME DIR FRAGMENT [ARGS...]: exit 1, one stderr line naming DIR and holding FRAGMENT, no output folder.
refused() {
  local name=$1 dir=$2 frag=$3
  shift 3
  "$T" "${SEG[@]}" "$dir" -o "$WORK/out_$name/mask.nii.gz" "$@" >"$WORK/stdout" 2>"$WORK/err"
  local rc=$? lines
  lines=$(wc -l <"$WORK/err")
  if [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] && grep -qF -- "$dir" "$WORK/err" && grep -qF -- "$frag" "$WORK/err" &&
     ! ls "$WORK/out_$name" 2>/dev/null | grep -q .; then
    echo "ok   $name: $(cat "$WORK/err")"
  else
    echo "FAIL $name (exit $rc, $lines stderr lines, output: $(ls "$WORK/out_$name" 2>/dev/null | tr '\n' ' ')): $(cat "$WORK/err")"
    fails=$((fails + 1))
  fi
}

# Two small CT series (different UIDs), 16 slices of 2.5 mm each.
for s in a b; do
  "$T" make-samples "$WORK/s_$s" --only ct --ct-size 48 40 16 >/dev/null || { echo "FAIL make-samples"; exit 1; }
done
A=$WORK/s_a/ct_phantom_dicom

# The untouched series reads: the checks below are about the defects, not the series.
check "a regular series segments" "$T" "${SEG[@]}" "$A" -o "$WORK/good/mask.nii.gz"

mkdir "$WORK/mixed"
cp "$A"/*.dcm "$WORK/mixed/"
for f in "$WORK/s_b/ct_phantom_dicom"/*.dcm; do cp "$f" "$WORK/mixed/b_$(basename "$f")"; done
refused mixed_series "$WORK/mixed" "DICOM series, choose one"

cp -r "$A" "$WORK/missing"
rm "$WORK/missing/IM0005.dcm"
refused missing_slice "$WORK/missing" "uneven slice spacing: 5 mm between IM0004.dcm and IM0006.dcm"

# tilt DIR DEGREES | rotate DIR FILE: rewrite geometry tags with pydicom.
cp -r "$A" "$WORK/tilt"
"$PY" - "$WORK/tilt" <<'PY' || { echo "FAIL pydicom tilt"; exit 1; }
import math, pathlib, sys
import pydicom
files = sorted(pathlib.Path(sys.argv[1]).glob("*.dcm"))
slices = [(pydicom.dcmread(f), f) for f in files]
first = [float(v) for v in slices[0][0].ImagePositionPatient]
for ds, f in slices:
    row = [float(v) for v in ds.ImageOrientationPatient[:3]]
    pos = [float(v) for v in ds.ImagePositionPatient]
    along = math.dist(pos, first)  # distance stacked so far
    shift = along * math.tan(math.radians(20))  # a 20 degree gantry tilt shears rows by this much
    ds.ImagePositionPatient = [f"{p + shift * r:.6f}" for p, r in zip(pos, row)]
    ds.GantryDetectorTilt = "20"
    ds.save_as(f)
PY
refused gantry_tilt "$WORK/tilt" "sheared by 20.00 degrees (gantry tilt)"

cp -r "$A" "$WORK/rotated"
"$PY" - "$WORK/rotated/IM0007.dcm" <<'PY' || { echo "FAIL pydicom rotate"; exit 1; }
import sys
import pydicom
ds = pydicom.dcmread(sys.argv[1])
ds.ImageOrientationPatient = ["1", "0", "0", "0", "0", "-1"]
ds.save_as(sys.argv[1])
PY
refused mixed_orientation "$WORK/rotated" "have different orientations"

finish
