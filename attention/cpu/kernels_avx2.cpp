// The CPU kernels compiled for the avx2 instruction set; cpu_backend.cpp picks one at run time.
#define TESSERA_CPU_NS avx2
#define TESSERA_CPU_TARGET "avx2,fma,f16c"
#define TESSERA_VW 8
#include "cpu/kernels.inc"
