// Warp-level tensor-core primitives for sm_80+: cp.async, ldmatrix,
// mma.sync m16n8k16 (fp16 / bf16 in, fp32 accumulate), and the swizzled
// shared-memory tile layout every kernel uses.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

namespace tessera::attention::cuda {

// ---- element type traits ----
template <typename T> struct Elem;
template <> struct Elem<__half> {
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ float2 unpack(uint32_t u) {
    return __half22float2(*reinterpret_cast<__half2*>(&u));
  }
};
template <> struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ float2 unpack(uint32_t u) {
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&u));
  }
};

// float32 (the exact SIMT path): only the conversions of the shared row-wise kernels.
template <> struct Elem<float> {
  static __device__ __forceinline__ float to_float(float x) { return x; }
  static __device__ __forceinline__ float from_float(float x) { return x; }
};

// Row chunks of 16 bytes (8 elements of a 16-bit T), as the row passes read and write them:
// the dot product of two chunks (a row's share of D = rowsum(dO * O)), and eight fp32 values
// times s stored as one chunk (dQ).
template <typename T>
__device__ __forceinline__ float dot8(uint4 a, uint4 b) {  // (by value: 16-byte loads at the caller)
  const T* ae = reinterpret_cast<const T*>(&a);
  const T* be = reinterpret_cast<const T*>(&b);
  float acc = 0.f;
#pragma unroll
  for (int e = 0; e < 8; ++e) acc = fmaf(Elem<T>::to_float(ae[e]), Elem<T>::to_float(be[e]), acc);
  return acc;
}
template <typename T>
__device__ __forceinline__ uint4 pack8(const float4& x, const float4& y, float s = 1.f) {
  uint4 out;
  out.x = Elem<T>::pack(x.x * s, x.y * s);
  out.y = Elem<T>::pack(x.z * s, x.w * s);
  out.z = Elem<T>::pack(y.x * s, y.y * s);
  out.w = Elem<T>::pack(y.z * s, y.w * s);
  return out;
}

// D = A(16x16, row) * B(16x8, col) + D, fp32 accumulators.
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// sm_90: four 8 x 8 matrices of 16-bit pairs, register i holding matrix i in the mma accumulator layout
// (lane t: row t / 4, columns 2 (t % 4) ..), lanes 8 i .. 8 i + 7 giving the addresses of matrix i's rows.
// (The memory clobber keeps the compiler's own shared accesses on their side of it.)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TESSERA_STMATRIX 1
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n"
               :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
#else
#define TESSERA_STMATRIX 0
#endif
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

// 16-byte asynchronous global->shared copy; src_bytes < 16 zero-fills the rest.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
// 4-byte asynchronous global->shared copy (per-row scalars such as LSE).
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// ---- swizzled tile layout ----
// A tile of ROWS x (8*C) elements, rows of C 16-byte chunks. The chunk index
// is XORed with a function of the row so that the 8 row addresses of one
// ldmatrix phase fall into 8 distinct 16-byte bank groups for any C.
template <int C>
struct Swz {
  static __device__ __forceinline__ int chunk(int r, int c) {
    if constexpr (C >= 8) return c ^ (r & 7);
    else if constexpr (C == 4) return c ^ ((r >> 1) & 3);
    else if constexpr (C == 2) return c ^ ((r >> 2) & 1);
    else return c;
  }
  // element offset of chunk c of row r
  static __device__ __forceinline__ int off(int r, int c) { return r * (C * 8) + chunk(r, c) * 8; }
};

// ---- fragment loads from a swizzled tile ----
// A operand 16x16 at (m0, k0) from a tile stored [m][k] (C chunks per row).
template <int C, typename T>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const T* s, int m0, int k0, int lane) {
  const int r = m0 + (lane & 15), c = (k0 >> 3) + (lane >> 4);
  ldmatrix_x4(a, smem_u32(s + Swz<C>::off(r, c)));
}
// A operand 16x16 at (m0, k0) from a tile stored [k][m].
template <int C, typename T>
__device__ __forceinline__ void load_a_t(uint32_t (&a)[4], const T* s, int m0, int k0, int lane) {
  const int q = lane >> 3;
  const int r = k0 + (lane & 7) + (q >> 1) * 8, c = (m0 >> 3) + (q & 1);
  ldmatrix_x4_trans(a, smem_u32(s + Swz<C>::off(r, c)));
}
// B operands of two n8 tiles (n0, n0+8) over k0..k0+15 from a tile stored [n][k]:
// b[0],b[1] for n0 and b[2],b[3] for n0+8.
template <int C, typename T>
__device__ __forceinline__ void load_b2(uint32_t (&b)[4], const T* s, int n0, int k0, int lane) {
  const int q = lane >> 3;
  const int r = n0 + (lane & 7) + (q >> 1) * 8, c = (k0 >> 3) + (q & 1);
  ldmatrix_x4(b, smem_u32(s + Swz<C>::off(r, c)));
}
// Same from a tile stored [k][n].
template <int C, typename T>
__device__ __forceinline__ void load_b2_t(uint32_t (&b)[4], const T* s, int n0, int k0, int lane) {
  const int q = lane >> 3;
  const int r = k0 + (lane & 7) + (q & 1) * 8, c = (n0 >> 3) + (q >> 1);
  ldmatrix_x4_trans(b, smem_u32(s + Swz<C>::off(r, c)));
}
// One n8 tile (only used when a tile has an odd number of n8 columns).
template <int C, typename T>
__device__ __forceinline__ void load_b1(uint32_t (&b)[2], const T* s, int n0, int k0, int lane) {
  const int l = lane & 15;
  const int r = n0 + (l & 7), c = (k0 >> 3) + (l >> 3);
  ldmatrix_x2(b, smem_u32(s + Swz<C>::off(r, c)));
}
template <int C, typename T>
__device__ __forceinline__ void load_b1_t(uint32_t (&b)[2], const T* s, int n0, int k0, int lane) {
  const int l = lane & 15;
  const int r = k0 + (l & 7) + (l >> 3) * 8, c = n0 >> 3;
  ldmatrix_x2_trans(b, smem_u32(s + Swz<C>::off(r, c)));
}

// Warp GEMM on shared-memory operands:
//   acc[MT][NT] (a (16*MT) x (8*NT) tile at (m0, n0)) += A[m0.., 0..K) * B[0..K, n0..)
// A stored [m][k] (A_T = false) or [k][m] (A_T = true) with CA chunks per row;
// B stored [n][k] (B_T = false) or [k][n] (B_T = true) with CB chunks per row.
template <typename T, int MT, int NT, int K, bool A_T, bool B_T, int CA, int CB>
__device__ __forceinline__ void gemm_ss(float (&acc)[MT][NT][4], const T* sA, int m0, const T* sB, int n0,
                                        int lane) {
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if constexpr (A_T) load_a_t<CA>(a[mt], sA, m0 + mt * 16, k0, lane);
      else load_a<CA>(a[mt], sA, m0 + mt * 16, k0, lane);
    }
#pragma unroll
    for (int nt = 0; nt + 1 < NT; nt += 2) {
      uint32_t b[4];
      if constexpr (B_T) load_b2_t<CB>(b, sB, n0 + nt * 8, k0, lane);
      else load_b2<CB>(b, sB, n0 + nt * 8, k0, lane);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma16816<T>(acc[mt][nt], a[mt], b[0], b[1]);
        mma16816<T>(acc[mt][nt + 1], a[mt], b[2], b[3]);
      }
    }
    if constexpr (NT % 2 == 1) {
      uint32_t b[2];
      if constexpr (B_T) load_b1_t<CB>(b, sB, n0 + (NT - 1) * 8, k0, lane);
      else load_b1<CB>(b, sB, n0 + (NT - 1) * 8, k0, lane);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) mma16816<T>(acc[mt][NT - 1], a[mt], b[0], b[1]);
    }
  }
}

template <int MT, int NT>
__device__ __forceinline__ void zero(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[m][n][e] = 0.f;
}

}  // namespace tessera::attention::cuda
