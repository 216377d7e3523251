// The CPU kernels for any x86-64 (the baseline instruction set); cpu_backend.cpp picks one at run time.
#define TESSERA_CPU_NS generic
#define TESSERA_VW 8
#include "cpu/kernels.inc"
