// The CPU kernels compiled for the avx512 instruction set (see CMakeLists.txt
// for the flags); cpu_backend.cpp picks one at run time.
#define TESSERA_CPU_NS avx512
#define TESSERA_VW 16
#include "cpu/kernels.inc"
