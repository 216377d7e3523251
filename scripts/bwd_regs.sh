#!/usr/bin/env bash
# CPU-side resource table of every backward main-kernel instantiation (no GPU needed):
# registers, stack frame, spill stores / loads from ptxas -v, for one architecture.
#   scripts/bwd_regs.sh [arch (default 90a)] [tree (default: this checkout)]
set -euo pipefail
ARCH=${1:-90a}
ROOT=${2:-$(cd "$(dirname "$0")/.." && pwd)}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/bwd_only.cu" <<'CU'
#include "cuda/tile_configs.cuh"
namespace tessera::attention::cuda {
#define I(T, D, M) template __global__ void bwd_kernel<T, BwdCfg<T, D>::type, M>(const __grid_constant__ KArgs);
#define J(T, D) I(T, D, false) I(T, D, true)
J(__half, 16) J(__half, 32) J(__half, 64) J(__half, 128) J(__half, 256)
J(__nv_bfloat16, 16) J(__nv_bfloat16, 32) J(__nv_bfloat16, 64) J(__nv_bfloat16, 128) J(__nv_bfloat16, 256)
}
CU
nice -n 10 nvcc -std=c++17 -O3 --expt-relaxed-constexpr -gencode=arch=compute_$ARCH,code=sm_$ARCH -Xptxas -v \
  -I"$ROOT/attention/include" -I"$ROOT/attention" -c "$TMP/bwd_only.cu" -o "$TMP/x.o" 2> "$TMP/ptxas.txt" ||
  { cat "$TMP/ptxas.txt"; exit 1; }
python3 - "$TMP/ptxas.txt" <<'PY'
import re, subprocess, sys
cur, rows, info = None, [], {}
for l in open(sys.argv[1]):
    m = re.search(r"Compiling entry function '(\w+)'", l)
    if m: cur, info = m.group(1), {}; continue
    if cur is None: continue
    m = re.search(r'(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads', l)
    if m: info['st'] = m.groups()
    m = re.search(r'Used (\d+) registers', l)
    if m:
        dn = subprocess.run(['c++filt'], input=cur, capture_output=True, text=True).stdout
        d = re.search(r'BwdTraits<[^,]+, (\d+),', dn).group(1)
        rows.append(('f16' if '__half' in dn else 'bf16', int(d), 'MODS' if ', true>(' in dn else 'plain',
                     m.group(1)) + info.get('st', ('0', '0', '0')))
        cur = None
print('| dtype | bucket | variant | regs | stack B | spill st B | spill ld B |')
print('| --- | --- | --- | --- | --- | --- | --- |')
for r in sorted(rows): print('| %s | d%d | %s | %s | %s | %s | %s |' % r)
PY
