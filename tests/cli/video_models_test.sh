#!/usr/bin/env bash
# `tessera video` with the encoders users download: a Hugging Face VideoMAE
# folder (config.json + model.safetensors) must give exactly the embeddings of
# the same weights through a config file; a classification folder labels the
# timeline with its id2label names; a per-frame timm ViT embeds every sampled
# frame. Bad folders and option mixes: one line naming the file or option.
# Usage: video_models_test.sh TESSERA_BINARY REPO_ROOT  (exit 77: no fixtures or sample video)
set -u
BIN="$1"
ROOT="$2"
DATA="$ROOT/../shared/data"
FIX="$ROOT/../shared/fixtures"
HERE="$(cd "$(dirname "$0")" && pwd)"
VIDEO="$DATA/realshort.mp4"
if ! "$BIN" --help | grep -q ' video' || [ ! -f "$VIDEO" ] || [ ! -f "$FIX/videomae_tiny_hf.safetensors" ] ||
   [ ! -f "$FIX/vit_tiny_timm.safetensors" ]; then
  echo "skipped: needs the video command, $VIDEO and the videomae_tiny_hf / vit_tiny_timm fixtures"
  exit 77
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
source "$HERE/count_lib.sh"

python3 "$HERE/make_videomae_folder.py" "$FIX/videomae_tiny_hf.safetensors" "$WORK/hf_model" model
python3 "$HERE/make_videomae_folder.py" "$FIX/videomae_tiny_hf.safetensors" "$WORK/hf_cls" classification
python3 "$HERE/make_videomae_folder.py" "$FIX/videomae_tiny_hf.safetensors" "$WORK/hf_sharded" sharded
# same_tensor A B NAME: tensor NAME of two safetensors files is byte-identical
same_tensor() {
  python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from make_videomae_folder import read_safetensors
a, b = read_safetensors(sys.argv[2])[sys.argv[4]], read_safetensors(sys.argv[3])[sys.argv[4]]
assert a == b, (a[:2], b[:2])
' "$HERE" "$1" "$2" "$3"
}
# close_tensor A B NAME TOL: tensor NAME of two safetensors files (F32) agrees within relative error TOL
close_tensor() {
  python3 -c '
import array, math, sys
sys.path.insert(0, sys.argv[1])
from make_videomae_folder import read_safetensors
(ta, sa, a), (tb, sb, b) = read_safetensors(sys.argv[2])[sys.argv[4]], read_safetensors(sys.argv[3])[sys.argv[4]]
assert ta == tb == "F32" and sa == sb, (ta, tb, sa, sb)
x, y = array.array("f", a), array.array("f", b)
err = math.sqrt(sum((p - q) ** 2 for p, q in zip(x, y)) / max(sum(q * q for q in y), 1e-30))
assert 0 < err < float(sys.argv[5]), err
' "$HERE" "$1" "$2" "$3" "$4"
}
shape_is() {  # FILE NAME DIMS...: tensor NAME has this shape
  python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from make_videomae_folder import read_safetensors
assert read_safetensors(sys.argv[2])[sys.argv[3]][1] == [int(d) for d in sys.argv[4:]]
' "$HERE" "$@"
}

V=("$BIN" video "$VIDEO" --fps 30 --quiet)
check "video from a config + weights" "${V[@]}" -o "$WORK/yaml" --model "$ROOT/configs/videomae_tiny_hf.yaml" \
  --weights "$FIX/videomae_tiny_hf.safetensors"
check "video from a Hugging Face folder" "${V[@]}" -o "$WORK/hf" --model "$WORK/hf_model/"
check "video --precision bf16" "${V[@]}" -o "$WORK/bf16" --model "$WORK/hf_model/" --precision bf16
check "bf16 embeddings within 3e-2 of fp32 (and not the same)" close_tensor "$WORK/hf/realshort_embeddings.safetensors" \
  "$WORK/bf16/realshort_embeddings.safetensors" embeddings 3e-2
check "the folder gives the config's embeddings exactly" same_tensor "$WORK/yaml/realshort_embeddings.safetensors" \
  "$WORK/hf/realshort_embeddings.safetensors" embeddings
check "video from a sharded folder" "${V[@]}" -o "$WORK/sharded" --model "$WORK/hf_sharded"
check "the shards give the same embeddings" same_tensor "$WORK/yaml/realshort_embeddings.safetensors" \
  "$WORK/sharded/realshort_embeddings.safetensors" embeddings
# Several decoders on keyframe-aligned stretches of a 12 s video (a keyframe every second): the same embeddings.
"$BIN" make-samples "$WORK/samples" --only video > /dev/null
S=("$BIN" video "$WORK/samples/endoscopy.mp4" --fps 8 --quiet --model "$WORK/hf_model/")
check "video --decode-readers 1" "${S[@]}" -o "$WORK/readers1" --decode-readers 1
check "video --decode-readers 3" bash -c '"${@:2}" > "$1"' _ "$WORK/readers3.json" "${S[@]}" -o "$WORK/readers3" \
  --decode-readers 3 --json
check "the summary says three decoders" grep -q '"decode_readers": *3' "$WORK/readers3.json"
check "three decoders give one decoder's embeddings exactly" same_tensor "$WORK/readers1/endoscopy_embeddings.safetensors" \
  "$WORK/readers3/endoscopy_embeddings.safetensors" embeddings
# pytorch_model.bin as torch.save writes it, where a Python with torch is at hand (Debian's python3-torch).
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  mkdir -p "$WORK/hf_bin" && cp "$WORK/hf_model/config.json" "$WORK/hf_bin/"
  /usr/bin/python3 -c '
import sys, torch
sys.path.insert(0, sys.argv[1])
from make_videomae_folder import read_safetensors
state = {k: torch.frombuffer(bytearray(blob), dtype=torch.float32).reshape(shape).clone()
         for k, (dtype, shape, blob) in read_safetensors(sys.argv[2]).items()}
torch.save(state, sys.argv[3])' "$HERE" "$WORK/hf_model/model.safetensors" "$WORK/hf_bin/pytorch_model.bin"
  check "video from a pytorch_model.bin folder" "${V[@]}" -o "$WORK/bin" --model "$WORK/hf_bin"
  check "the .bin gives the same embeddings" same_tensor "$WORK/yaml/realshort_embeddings.safetensors" \
    "$WORK/bin/realshort_embeddings.safetensors" embeddings
fi
check "the folder's name is the encoder's" grep -q '"encoder":"hf_model"' "$WORK/hf/realshort_embeddings.safetensors"

check "video from a classification folder" "${V[@]}" -o "$WORK/cls" --model "$WORK/hf_cls"
check "its timeline names id2label classes" bash -c "head -1 '$WORK/cls/realshort_timeline.csv' | grep -q '^second,clips,label,name,probability' &&
  [ \$(tail -n +2 '$WORK/cls/realshort_timeline.csv' | cut -d, -f4 | grep -c -E '^(idle|cut|clip)\$') -eq 2 ]"

check "video with a per-frame ViT" bash -c '"$@" > "'"$WORK"'/frame.json"' _ "$BIN" video "$VIDEO" --fps 10 --quiet --json \
  -o "$WORK/frame" --frame-model "$ROOT/configs/vit_tiny_timm.yaml" --weights "$FIX/vit_tiny_timm.safetensors" --frame-batch 5
check "per-frame: one embedding per second" shape_is "$WORK/frame/realshort_embeddings.safetensors" embeddings 2 192
check "per-frame: every sampled frame embedded once" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["frames"] == r["frames_sampled"] == 12, r' "$WORK/frame.json"
check "per-frame: timeline counts frames per second" bash -c "head -1 '$WORK/frame/realshort_timeline.csv' | grep -q '^second,frames' &&
  [ \"\$(tail -n +2 '$WORK/frame/realshort_timeline.csv' | cut -d, -f2 | tr '\n' ' ')\" = '10 2 ' ]"

F=("$BIN" video "$VIDEO" --fps 10 --quiet --frame-model "$ROOT/configs/vit_tiny_timm.yaml" --frame-batch 5)
check "--mean/--std set the normalisation" "${F[@]}" -o "$WORK/norm" --mean 0.5 0.5 0.5 --std 0.25 0.25 0.25 \
  --weights "$FIX/vit_tiny_timm.safetensors"
check "... and change the embeddings" bash -c "! cmp -s '$WORK/frame/realshort_embeddings.safetensors' '$WORK/norm/realshort_embeddings.safetensors'"
expect_error "--mean needs three values" 2 "--mean" -- "${F[@]}" -o "$WORK/e0" --mean 0.5 0.5 --weights "$FIX/vit_tiny_timm.safetensors"

mkdir -p "$WORK/empty"
expect_error "folder without config.json" 1 "empty/config.json: missing" -- "${V[@]}" -o "$WORK/e1" --model "$WORK/empty"
check "nothing written for a bad folder" bash -c "! ls '$WORK/e1' 2>/dev/null | grep -q ."
mkdir -p "$WORK/vit_folder" && printf '{"model_type": "vit"}' > "$WORK/vit_folder/config.json"
expect_error "folder of another model type" 1 "vit_folder/config.json: model_type 'vit'" -- "${V[@]}" -o "$WORK/e2" --model "$WORK/vit_folder"
mkdir -p "$WORK/noweights" && cp "$WORK/hf_model/config.json" "$WORK/noweights/"
expect_error "folder without weights" 1 "noweights: no weights" -- "${V[@]}" -o "$WORK/e3" --model "$WORK/noweights"
mkdir -p "$WORK/mismatch" && cp "$WORK/hf_model/model.safetensors" "$WORK/mismatch/" &&
  sed 's/"hidden_size": 192/"hidden_size": 96/' "$WORK/hf_model/config.json" > "$WORK/mismatch/config.json"
expect_error "weights that do not fit config.json" 1 "mismatch/model.safetensors: does not fit" -- "${V[@]}" -o "$WORK/e4" --model "$WORK/mismatch"
expect_error "folder with --weights" 2 "--weights" -- "${V[@]}" -o "$WORK/e5" --model "$WORK/hf_model" --weights "$FIX/videomae_tiny_hf.safetensors"
expect_error "config without --weights" 2 "needs --weights" -- "${V[@]}" -o "$WORK/e6" --model "$ROOT/configs/videomae_tiny_hf.yaml"
expect_error "both encoders" 2 "either --model" -- "${V[@]}" -o "$WORK/e7" --model "$WORK/hf_model" --frame-model "$ROOT/configs/vit_tiny_timm.yaml"
expect_error "no encoder" 2 "either --model" -- "${V[@]}" -o "$WORK/e8"

finish
