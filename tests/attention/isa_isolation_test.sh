#!/usr/bin/env bash
# The CPU kernels' instruction sets stay inside their own namespaces: no function of the attention library
# outside cpu::avx2 and cpu::avx512 may use AVX registers (ymm, zmm). A standard-library or shared-header
# inline function compiled for AVX-512 in one file is a copy the linker may keep for every caller, and an
# illegal instruction on a CPU without it (cpu/kernels.inc).
#   isa_isolation_test.sh LIBRARY     (skipped, 77, without objdump)
set -euo pipefail
LIB=$1
command -v objdump > /dev/null || { echo "objdump not found: skipped"; exit 77; }
objdump -d --no-show-raw-insn -C "$LIB" | awk '
  /^[0-9a-f]+ <.*>:$/ { name = $0; isa = (name ~ /tessera::attention::cpu::(avx2|avx512)::/); next }
  /%[yz]mm[0-9]/ && !isa { bad[name]++ }
  END {
    n = 0
    for (f in bad) { print "AVX registers outside an ISA namespace: " f; n++ }
    if (n) exit 1
    print "no AVX registers outside cpu::avx2 and cpu::avx512"
  }'
