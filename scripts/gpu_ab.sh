#!/usr/bin/env bash
# One device call: the kernels alone (bench/attention_cuda_bench.cu) under several builds and
# environment settings, each variant in its own process (settings are read once per process), the
# variants alternating, PASSES times; then one table of the chosen column, every pass side by side,
# into $OUT/ab.md. A/B of two builds in the same call is the only comparison that holds: two calls
# may land on different H200s, a few percent apart.
#
#   scripts/gpu_ab.sh [-p PASSES] [-c fwd|bwd|fb] [-o "SUBSTR;SUBSTR"] [-q] VARIANT...
#
# VARIANT: NAME=BINARY[,VAR=VALUE...]; BINARY: a file in .gpu_carry/bin, gzipped (.gz) or not.
#   -p  passes (default 2)        -c  the column to tabulate (default bwd)
#   -o  case-name substrings, ';'-separated, each one run (default: all cases)
#   -q  --quick (the N1k / N8k rows and a few others)
# Example: keep the previous build's bench as bench_prev.gz beside the new one, then
#   scripts/gpu_ab.sh -q -o "d128;d64 " prev=bench_prev.gz new=attention_cuda_bench.gz \
#     new_rot0=attention_cuda_bench.gz,TESSERA_CUDA_BWD90_ROT=0
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu_out}
mkdir -p "$OUT"
PASSES=2 COL=bwd ONLY="" QUICK=""
while getopts "p:c:o:q" opt; do
  case $opt in
    p) PASSES=$OPTARG ;;
    c) COL=$OPTARG ;;
    o) ONLY=$OPTARG ;;
    q) QUICK=--quick ;;
    *) echo "usage: gpu_ab.sh [-p PASSES] [-c fwd|bwd|fb] [-o \"SUBSTR;...\"] [-q] NAME=BINARY[,VAR=VALUE...]..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "gpu_ab.sh: no variant given" >&2; exit 2; }
case $COL in fwd) FIELD=4 ;; bwd) FIELD=7 ;; fb) FIELD=10 ;; *) echo "gpu_ab.sh: column must be fwd, bwd or fb" >&2; exit 2 ;; esac

BIN=/tmp/tessera-ab
mkdir -p "$BIN"
declare -a NAMES EXES ENVS
for v in "$@"; do
  name=${v%%=*}
  rest=${v#*=}
  file=${rest%%,*}
  envs=""
  [[ $rest == *,* ]] && envs=${rest#*,}
  src=$ROOT/.gpu_carry/bin/$file
  [ -f "$src" ] || { echo "gpu_ab.sh: $src: no such binary" >&2; exit 2; }
  exe=$BIN/${file%.gz}
  if [ ! -x "$exe" ]; then
    if [[ $file == *.gz ]]; then gunzip -c "$src" > "$exe"; else cp "$src" "$exe"; fi
    chmod +x "$exe"
  fi
  NAMES+=("$name") EXES+=("$exe") ENVS+=("${envs//,/ }")
done

RAW=$OUT/ab_raw.log
: > "$RAW"
IFS=';' read -r -a SUBS <<< "${ONLY:-}"
[ ${#SUBS[@]} -eq 0 ] && SUBS=("")
for ((pass = 1; pass <= PASSES; ++pass)); do
  for i in "${!NAMES[@]}"; do
    for sub in "${SUBS[@]}"; do
      # rows "| case | kernels | fwd ms | ... |" tagged with variant and pass
      env ${ENVS[$i]} "${EXES[$i]}" $QUICK ${sub:+--only "$sub"} 2>&1 | grep -E "^\| " | grep -vE "^\| case |^\|---" |
        awk -F'|' -v n="${NAMES[$i]}" -v p="$pass" -v f="$FIELD" '{gsub(/^ +| +$/, "", $2); gsub(/ /, "", $f); print n "\t" p "\t" $2 "\t" $3 "\t" $f}' >> "$RAW"
    done
  done
done

# case rows, variant columns, passes joined by " / "; the kernels each variant ran under its name
python3 - "$RAW" "$COL" "${NAMES[@]}" > "$OUT/ab.md" <<'EOF'
import sys, collections
raw, col, names = sys.argv[1], sys.argv[2], sys.argv[3:]
val = collections.defaultdict(list)
kern = {}
cases = []
for line in open(raw):
    n, p, case, k, ms = line.rstrip("\n").split("\t")
    if case not in cases:
        cases.append(case)
    val[(case, n)].append(ms)
    kern[(case, n)] = k.strip()
print(f"{col} ms, passes side by side\n")
print("| case | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
for c in cases:
    print(f"| {c} | " + " | ".join(" / ".join(val[(c, n)]) + f" ({kern.get((c, n), '?')})" for n in names) + " |")
EOF
cat "$OUT/ab.md"
