#!/usr/bin/env bash
# `tessera video` on awkward recordings (made by write_test_video_tool): a
# variable frame rate is sampled by timestamp; a file with no video track and
# a file cut short give one line naming the file (the cut one keeps the
# seconds before the damage and says where it stopped); the display rotation
# is honoured (a rotated landscape file embeds like the same picture stored
# upright). The encoder is the per-frame tiny ViT fixture.
# Usage: video_bad_input_test.sh TESSERA_BINARY REPO_ROOT WRITE_TEST_VIDEO_TOOL  (exit 77: no fixture)
set -u
BIN="$1"
ROOT="$2"
TOOL="$3"
FIX="$ROOT/../shared/fixtures"
HERE="$(cd "$(dirname "$0")" && pwd)"
if ! "$BIN" --help | grep -q ' video' || [ ! -f "$FIX/vit_tiny_timm.safetensors" ]; then
  echo "skipped: needs the video command and the vit_tiny_timm fixture"
  exit 77
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
source "$HERE/count_lib.sh"

for kind in vfr rotated coded upright clockwise; do "$TOOL" "$kind" "$WORK/$kind.mp4" || exit 1; done
"$TOOL" long "$WORK/long.mkv" || exit 1
# V INPUT OPTIONS...: the input first (--weights takes several files)
V() { "$BIN" video "$1" --quiet --frame-model "$ROOT/configs/vit_tiny_timm.yaml" --weights "$FIX/vit_tiny_timm.safetensors" "${@:2}"; }
embeddings() {  # FILE: the embeddings tensor's float32 values, one per line
  python3 -c '
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    e = json.loads(f.read(n))["embeddings"]
    f.seek(8 + n + e["data_offsets"][0])
    blob = f.read(e["data_offsets"][1] - e["data_offsets"][0])
print("\n".join(map(repr, struct.unpack("<%df" % (len(blob) // 4), blob))))' "$1"
}

V "$WORK/vfr.mp4" -o "$WORK/vfr" --fps 4 --json > "$WORK/vfr.json"
check "variable frame rate runs" test $? -eq 0
check "variable frame rate: 4 samples in each second, by timestamp" bash -c "
  grep -q '\"frames_sampled\": 8' '$WORK/vfr.json' && [ \"\$(tail -n +2 '$WORK/vfr/vfr_timeline.csv' | tr '\n' ' ')\" = '0,4 1,4 ' ]"

python3 -c '
import sys, wave
with wave.open(sys.argv[1], "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(8000); w.writeframes(b"\0\0" * 8000)' "$WORK/sound.wav"
expect_error "a file with no video track" 1 "sound.wav: has no video stream" -- V "$WORK/sound.wav" -o "$WORK/nv"
check "nothing written for it" bash -c "! ls '$WORK/nv' 2>/dev/null | grep -q ."

check "the whole file runs" V "$WORK/long.mkv" -o "$WORK/long" --fps 2
size=$(stat -c %s "$WORK/long.mkv")
head -c $((size / 2)) "$WORK/long.mkv" > "$WORK/cut.mkv"
expect_error "a file cut midway fails saying where" 1 "cut.mkv: decoding stopped at " -- V "$WORK/cut.mkv" -o "$WORK/cut" --fps 2
check "the error names the seconds kept" grep -q "seconds before it are embedded" "$WORK/err"
check "the seconds before the cut are embedded" python3 -c '
import sys
full, cut = (open(p).read().split("\n")[1:] for p in sys.argv[1:3])
full, cut = [l for l in full if l], [l for l in cut if l]
assert 1 <= len(cut) < len(full) == 4, (cut, full)' "$WORK/long/long_timeline.csv" "$WORK/cut/cut_timeline.csv"

for kind in rotated coded upright clockwise; do
  check "$kind video runs" V "$WORK/$kind.mp4" -o "$WORK/$kind" --fps 10
  embeddings "$WORK/$kind/${kind}_embeddings.safetensors" > "$WORK/$kind.txt"
done
# Codec and scaling blur the red/blue edge differently across and along rows: near, not equal.
check "rotation honoured: the rotated file embeds like the upright picture, not its coded pixels or a clockwise turn" python3 -c '
import math, sys
rot, upright, coded, clockwise = ([float(v) for v in open(p)] for p in sys.argv[1:5])
d = lambda a, b: math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
assert d(rot, upright) < 0.5 * min(d(rot, coded), d(rot, clockwise)), (d(rot, upright), d(rot, coded), d(rot, clockwise))' \
  "$WORK/rotated.txt" "$WORK/upright.txt" "$WORK/coded.txt" "$WORK/clockwise.txt"

finish
