// The CPU kernels compiled for the avx512 instruction set; cpu_backend.cpp picks one at run time.
#define TESSERA_CPU_NS avx512
#define TESSERA_CPU_TARGET "avx512f,avx512vl,avx512dq,avx2,fma,f16c"
#define TESSERA_VW 16
#include "cpu/kernels.inc"
