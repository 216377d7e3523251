#!/usr/bin/env bash
# DICOM SEG output, end to end: `tessera segment <dicom folder> -o seg.dcm` with
# the shipped phantom model on a small sample CT, and the io writer alone on the
# sample's label volume (write_dicom_seg_tool). Each SEG must pass dciodvfy
# with no "Error" line and tests/cli/check_dicom_seg.py (pydicom): positions,
# references, Frame of Reference, voxels per segment / voxel for voxel.
# usage: dicom_seg_test.sh TESSERA SOURCE_ROOT [WRITE_DICOM_SEG_TOOL]
# Exit 77 (ctest: skipped) with a reason when DCMTK, dicom3tools or pydicom are absent.
set -uo pipefail
T=$1
ROOT=$2
TOOL=${3:-}
. "$(dirname "$0")/check_lib.sh"
"$T" doctor --json 2>/dev/null | grep -q '"dcmtk": true' || skip "tessera was built without DCMTK (libdcmtk-dev)"
command -v dciodvfy >/dev/null || skip "dciodvfy not installed (dicom3tools)"
[ -x "$PY" ] && "$PY" -c 'import pydicom, numpy' 2>/dev/null || skip "$PY with pydicom and numpy not available (python3-pydicom)"

verify() {  # name seg.dcm: dciodvfy reports no Error line
  dciodvfy "$2" >"$WORK/dciodvfy_$1.txt" 2>&1
  local errors warnings
  errors=$(grep -c '^Error' "$WORK/dciodvfy_$1.txt")
  warnings=$(grep -c '^Warning' "$WORK/dciodvfy_$1.txt")
  echo "     dciodvfy $1: $errors errors, $warnings warnings"
  grep '^Error' "$WORK/dciodvfy_$1.txt" | sed 's/^/     /'
  [ "$errors" -eq 0 ]
}

S=$WORK/samples
"$T" make-samples "$S" --only ct --ct-size 96 80 32 >/dev/null || { echo "FAIL make-samples"; exit 1; }
DICOM=$S/ct_phantom_dicom
SEG=(--model "$ROOT/configs/swin_unetr_phantom.yaml" --weights "$ROOT/models/phantom/swin_unetr_phantom.safetensors"
     --labels "$ROOT/models/phantom/labels.yaml" --spacing 1.5 1.5 2.5 --roi 64 64 64 --overlap 0.25 -q)

# A volume file with .dcm output: one line, exit 1, nothing written.
"$T" segment "$S/ct_phantom.nii.gz" -o "$WORK/bad.dcm" "${SEG[@]}" 2>"$WORK/err"; rc=$?
check "non-DICOM input with .dcm output: exit 1" test "$rc" -eq 1
check "  one-line error naming the need for a DICOM series" bash -c "[ \$(wc -l <'$WORK/err') -eq 1 ] && grep -q 'needs a DICOM series folder' '$WORK/err'"
check "  nothing written" bash -c "! ls '$WORK' | grep -q '^bad'"

# segment → SEG, checked against the source series and segment's own voxel counts.
check "segment DICOM folder -o seg.dcm" "$T" segment "$DICOM" -o "$WORK/out/seg.dcm" "${SEG[@]}"
check "  dciodvfy: no errors" verify segment "$WORK/out/seg.dcm"
check "  pydicom: geometry, references, voxels per segment" "$PY" "$ROOT/tests/cli/check_dicom_seg.py" "$WORK/out/seg.dcm" "$DICOM" \
  --volumes-json "$WORK/out/seg_volumes.json"
cat "$WORK/log" | sed 's/^/     /'

# The io writer alone on the sample's true labels: voxel for voxel.
if [ -n "$TOOL" ]; then
  check "write_dicom_seg_tool labels -> seg" "$TOOL" "$S/ct_phantom_labels.nii.gz" "$DICOM" "$WORK/truth.dcm" \
    1=liver 2=spleen 3=kidney_left 4=kidney_right 5=vertebra 6=aorta
  check "  dciodvfy: no errors" verify truth "$WORK/truth.dcm"
  check "  pydicom: geometry, references, frames equal the label volume" "$PY" "$ROOT/tests/cli/check_dicom_seg.py" "$WORK/truth.dcm" "$DICOM" \
    --labels-nii "$S/ct_phantom_labels.nii.gz"
  cat "$WORK/log" | sed 's/^/     /'
fi
finish
