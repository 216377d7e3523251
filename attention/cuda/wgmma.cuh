// Hopper (sm_90a) warpgroup primitives: shared-memory matrix descriptors for the
// 128-byte-swizzled tile layout, wgmma fences / commit / wait, and the wgmma
// shapes the sm90 kernels use (m64nNk16 with both operands in shared memory, N
// the key-block width; m64n64k16 with A in registers). Only code compiled for
// sm_90a may call these (the kernels guard their bodies with
// __CUDA_ARCH_FEAT_SM90_ALL).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace tessera::attention::cuda::sm90 {

template <typename T> struct Tag {};

}  // namespace tessera::attention::cuda::sm90

#include "wgmma_ss_shapes.cuh"

namespace tessera::attention::cuda::sm90 {

// The tile layout wgmma reads with 128-byte swizzling: a [ROWS x 64] slab of
// 16-bit elements, 128 bytes per row, 16-byte chunk c of row r stored at chunk
// c ^ (r % 8). Slabs start 1024-byte aligned (the swizzle works on address bits
// 4-6 xor 7-9). Wider tiles are several slabs one after the other.
__device__ __forceinline__ uint32_t sw128_off(int r, int chunk) {
  return static_cast<uint32_t>(r * 128 + ((chunk ^ (r & 7)) << 4));
}

// A 32-bit store into shared memory (the tile layouts above are addressed as shared-window offsets).
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

// Descriptor of a swizzled operand starting at shared address `addr`.
// sbo: bytes between consecutive 8-row groups (1024 for whole slabs);
// lbo: bytes between 64-column slabs along a non-K dimension (MN-major only).
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr, uint32_t sbo, uint32_t lbo) {
  uint64_t d = (addr & 0x3FFFFu) >> 4;
  d |= static_cast<uint64_t>((lbo >> 4) & 0x3FFFu) << 16;
  d |= static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32;
  d |= static_cast<uint64_t>(1) << 62;  // 128-byte swizzle
  return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Writes by ordinary stores / cp.async become visible to wgmma (the async proxy).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Keeps the compiler from moving reads or writes of accumulator registers
// across the asynchronous wgmma that owns them.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// ---- wgmma shapes (generated operand lists) ----
// wgmma_ss(d, descA, descB, scale_d): D(64 x N) (+)= A(64 x 16, K-major) * B(16 x N, K-major); N = 2 * size(d)
// (wgmma_ss_shapes.cuh, one overload per key-block width, from scripts/gen_wgmma_ss.py).
// wgmma_rs(d, a, descB, scale_d): D(64 x 64) (+)= A(registers, the m16n8k16 A layout per warp) * B(16 x 64, MN-major).
// wgmma_ss_mn(d, descA, descB, scale_d): D(64 x 64) (+)= A(64 x 16, MN-major) * B(16 x 64, MN-major) (the backward's dQ = dS K).
__device__ __forceinline__ void wgmma_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t db, int scale_d, Tag<__nv_bfloat16>) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t db, int scale_d, Tag<__half>) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_ss_mn(float (&d)[32], uint64_t da, uint64_t db, int scale_d, Tag<__nv_bfloat16>) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_ss_mn(float (&d)[32], uint64_t da, uint64_t db, int scale_d, Tag<__half>) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(scale_d));
}

// acc (+)= A B^T over K = 16 * KSTEPS columns, both operands K-major in the
// slab layout: a / b address the operand's first row inside the first slab,
// a_slab / b_slab are the bytes between its 64-column slabs (4 K-steps of 32
// bytes per 128-byte slab row). The first step overwrites acc.
template <int KSTEPS, int N, typename T>
__device__ __forceinline__ void gemm_ss_kmajor(float (&acc)[N], uint32_t a, uint32_t a_slab, uint32_t b,
                                               uint32_t b_slab, Tag<T> tag) {
#pragma unroll
  for (int kk = 0; kk < KSTEPS; ++kk) {
    const uint32_t koff = (kk & 3) * 32;
    wgmma_ss(acc, desc_sw128(a + (kk >> 2) * a_slab + koff, 1024, 16), desc_sw128(b + (kk >> 2) * b_slab + koff, 1024, 16),
             kk > 0 ? 1 : 0, tag);
  }
}

// acc[sl] += A B over K = 16 * KSTEPS rows: A from registers (a[kk], the A-operand layout of
// one 64 x 16 step), B MN-major in the slab layout (b: its first row in the first slab;
// slab_bytes between its 64-column slabs, one accumulator per slab).
template <int KSTEPS, int SLABS, typename T>
__device__ __forceinline__ void gemm_rs_mn(float (&acc)[SLABS][32], const uint32_t (&a)[KSTEPS][4], uint32_t b,
                                           uint32_t slab_bytes, Tag<T> tag) {
#pragma unroll
  for (int kk = 0; kk < KSTEPS; ++kk)
#pragma unroll
    for (int sl = 0; sl < SLABS; ++sl)
      wgmma_rs(acc[sl], a[kk], desc_sw128(b + sl * slab_bytes + kk * 16 * 128, 1024, 1024), 1, tag);
}

}  // namespace tessera::attention::cuda::sm90
