// TESSERA_HD: a function the CPU path, the CUDA kernels and the tests share (host and device
// under nvcc, an inline function elsewhere).
#pragma once

#if defined(__CUDACC__)
#define TESSERA_HD __host__ __device__ __forceinline__
#else
#define TESSERA_HD inline
#endif
