#!/usr/bin/env bash
# One device call: the kernels alone (bench/attention_cuda_bench.cu) under several builds and
# kernel overrides (attention_cuda_bench --set NAME=VALUE), each variant in its own process, the
# variants alternating, PASSES times; then one table per chosen column, every pass side by side,
# into $OUT/ab[_TAG].md. A/B of two builds in the same call is the only comparison that holds: two calls
# may land on different H200s, a few percent apart.
#
#   tools/gpu/gpu_ab.sh [-p PASSES] [-c COLS] [-o "SUBSTR;SUBSTR"] [-q] [-t TAG] VARIANT...
#
# VARIANT: NAME=BINARY[,SETTING...]; BINARY: a file in .gpu_carry/bin, gzipped (.gz) or not, or one of
#   binaries.tar.xz (make_carried_binaries.sh: test_attention_cuda, attention_cuda_bench); SETTING: an
#   override NAME=VALUE (docs/attention.md, Options), passed as --set SETTING.
#   -p  passes (default 2)
#   -c  the columns to tabulate, comma-separated, of fwd, bwd, fb (default bwd); fwd alone times
#       only the forward (attention_cuda_bench --fwd-only)
#   -o  case-name substrings, ';'-separated, each one run (default: all cases)
#   -q  --quick (the N1k / N8k rows and a few others)
#   -t  a tag for the output files ($OUT/ab_TAG.md, ab_TAG_raw.log), so that several A / Bs in one
#       device call keep their tables (the device returns at most 8 files)
# Example: keep the previous build's bench as bench_prev.gz beside the new one, then
#   tools/gpu/gpu_ab.sh -q -o "d128;d64 " prev=bench_prev.gz new=attention_cuda_bench.gz \
#     new_rot0=attention_cuda_bench.gz,bwd_rotate=0
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/gpu_out}
mkdir -p "$OUT"
PASSES=2 COLS=bwd ONLY="" QUICK="" TAG=""
usage() {
  echo "usage: gpu_ab.sh [-p PASSES] [-c fwd,bwd,fb] [-o \"SUBSTR;...\"] [-q] [-t TAG] NAME=BINARY[,SETTING...]..." >&2
  exit 2
}
while getopts "p:c:o:qt:" opt; do
  case $opt in
    p) PASSES=$OPTARG ;;
    c) COLS=$OPTARG ;;
    o) ONLY=$OPTARG ;;
    q) QUICK=--quick ;;
    t) TAG=_$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "gpu_ab.sh: no variant given" >&2; exit 2; }
for c in ${COLS//,/ }; do
  case $c in fwd|bwd|fb) ;; *) echo "gpu_ab.sh: columns are fwd, bwd or fb, not '$c'" >&2; exit 2 ;; esac
done

BIN=/tmp/tessera-ab
mkdir -p "$BIN"
declare -a NAMES EXES SETS
for v in "$@"; do
  name=${v%%=*}
  rest=${v#*=}
  file=${rest%%,*}
  sets=""
  if [[ $rest == *,* ]]; then
    IFS=',' read -r -a list <<< "${rest#*,}"
    for x in "${list[@]}"; do sets+=" --set $x"; done
  fi
  src=$ROOT/.gpu_carry/bin/$file
  if [ ! -f "$src" ]; then  # (unpacked once: every variant of the archive's binaries reads the same files)
    [ -f "$BIN/${file%.gz}" ] || (cd "$ROOT" && . tools/gpu/carried_sources.sh && unpack_carried "$BIN")
    [ -f "$BIN/${file%.gz}" ] && src=$BIN/${file%.gz}
  fi
  [ -f "$src" ] || { echo "gpu_ab.sh: $src: no such binary" >&2; exit 2; }
  exe=$BIN/${file%.gz}
  if [ "$src" != "$exe" ] && [ ! -x "$exe" ]; then
    if [[ $file == *.gz ]]; then gunzip -c "$src" > "$exe"; else cp "$src" "$exe"; fi
  fi
  chmod +x "$exe"
  NAMES+=("$name") EXES+=("$exe") SETS+=("$sets")
done

FWDONLY=""
[ "$COLS" = fwd ] && FWDONLY=--fwd-only
RAW=$OUT/ab${TAG}_raw.log
: > "$RAW"
IFS=';' read -r -a SUBS <<< "${ONLY:-}"
[ ${#SUBS[@]} -eq 0 ] && SUBS=("")
for ((pass = 1; pass <= PASSES; ++pass)); do
  for i in "${!NAMES[@]}"; do
    for sub in "${SUBS[@]}"; do
      # rows "| case | kernels | fwd ms | ... |" tagged with variant and pass: case, kernels, fwd, bwd, fb ms
      "${EXES[$i]}" ${SETS[$i]} $QUICK $FWDONLY ${sub:+--only "$sub"} 2>&1 | grep -E "^\| " | grep -vE "^\| case |^\|---" |
        awk -F'|' -v n="${NAMES[$i]}" -v p="$pass" '{gsub(/^ +| +$/, "", $2); gsub(/ /, "", $4); gsub(/ /, "", $7);
          gsub(/ /, "", $10); print n "\t" p "\t" $2 "\t" $3 "\t" $4 "\t" $7 "\t" $10}' >> "$RAW"
    done
  done
done

# per column: case rows, variant columns, passes joined by " / "; the kernels each variant ran under its name
python3 - "$RAW" "$COLS" "${NAMES[@]}" > "$OUT/ab$TAG.md" <<'PY'
import sys, collections
raw, cols, names = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
field = {"fwd": 0, "bwd": 1, "fb": 2}
val = collections.defaultdict(list)
kern = {}
cases = []
for line in open(raw):
    n, p, case, k, *ms = line.rstrip("\n").split("\t")
    if case not in cases:
        cases.append(case)
    val[(case, n)].append(ms)
    kern[(case, n)] = k.strip()
for col in cols:
    print(f"{col} ms, passes side by side\n")
    print("| case | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for c in cases:
        cells = (" / ".join(m[field[col]] for m in val[(c, n)]) + f" ({kern.get((c, n), '?')})" for n in names)
        print(f"| {c} | " + " | ".join(cells) + " |")
    print()
PY
cat "$OUT/ab$TAG.md"
