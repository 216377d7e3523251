// The CPU kernels compiled for the generic instruction set (see CMakeLists.txt
// for the flags); cpu_backend.cpp picks one at run time.
#define TESSERA_CPU_NS generic
#define TESSERA_VW 8
#include "cpu/kernels.inc"
