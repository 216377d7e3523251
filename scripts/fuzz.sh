#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs them for a bounded time
# shared between them (default 60 s in all) from small seed corpora:
#  - fuzz_safetensors_header: the safetensors header parser;
#  - fuzz_torch_pickle: PyTorch checkpoints' zip directory and restricted
#    pickle reader with the state-dict selection (seeds: tests/fuzz/seeds_torch,
#    data.pkl files and small archives written by torch.save).
#   scripts/fuzz.sh [seconds] [build-dir]
# Exit status is non-zero when libFuzzer finds a crash, leak or sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
BUILD=${2:-build-fuzz}
CXX=${CXX_FUZZ:-clang++}
FLAGS=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I models/include)
mkdir -p "$BUILD/corpus" "$BUILD/corpus_torch"
"$CXX" "${FLAGS[@]}" tests/fuzz/fuzz_safetensors_header.cpp models/src/io/safetensors_header.cpp \
  -o "$BUILD/fuzz_safetensors_header"
"$CXX" "${FLAGS[@]}" tests/fuzz/fuzz_torch_pickle.cpp models/src/io/zip_archive.cpp models/src/io/pickle.cpp \
  models/src/io/pickle_state.cpp models/src/io/safetensors_header.cpp -o "$BUILD/fuzz_torch_pickle"
# Seeds: one valid file with metadata and two tensors, and a few near misses.
seed() { local json=$1 data=$2 out=$3; python3 - "$json" "$data" "$out" <<'PY'
import struct, sys
j, d, out = sys.argv[1].encode(), bytes.fromhex(sys.argv[2]), sys.argv[3]
open(out, "wb").write(struct.pack("<Q", len(j)) + j + d)
PY
}
seed '{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[1,2],"data_offsets":[8,10]}}' 0000803f000000400102 "$BUILD/corpus/valid"
seed '{"a":{"dtype":"BF16","shape":[],"data_offsets":[0,2]}}' 803f "$BUILD/corpus/scalar"
seed '{"a":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}}' 00000000 "$BUILD/corpus/short"
seed '{"a":{"dtype":"I64","shape":[0],"data_offsets":[0,0]}}' '' "$BUILD/corpus/empty"
cp tests/fuzz/seeds_torch/* "$BUILD/corpus_torch/"
# Half the time each, at least one second.
EACH=$(( SECONDS_TO_RUN / 2 > 0 ? SECONDS_TO_RUN / 2 : 1 ))
"$BUILD/fuzz_safetensors_header" -max_total_time="$EACH" -max_len=4096 -rss_limit_mb=2048 \
  -artifact_prefix="$BUILD/" "$BUILD/corpus"
"$BUILD/fuzz_torch_pickle" -max_total_time="$EACH" -max_len=4096 -rss_limit_mb=2048 \
  -artifact_prefix="$BUILD/torch-" "$BUILD/corpus_torch"
