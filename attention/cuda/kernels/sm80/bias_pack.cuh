// Reading and accumulating bias terms in fragment order (PackedBias, kernel_args.cuh).
// A 16 x 16 tile at (row tile R, column tile C) of slice s is 256 elements at
// ((s * rt + R) * ct + C) * 256; lane (g, tq) owns elements lane * 8 + k, k = 0..7:
//   row 16 R + g + 8 ((k >> 1) & 1), column 16 C + 8 (k >> 2) + 2 tq + (k & 1)
// i.e. k = 4 n + e for the tile's two m16n8 fragments n = 0, 1 and their elements e.
#pragma once

#include <cuda_fp16.h>

#include <type_traits>

#include "kernel_args.cuh"
#include "primitives/mma.cuh"

namespace tessera::attention::cuda {

__host__ __device__ __forceinline__ void frag_rc(int lane, int k, int& r, int& c) {
  r = (lane >> 2) + 8 * ((k >> 1) & 1);
  c = 8 * (k >> 2) + 2 * (lane & 3) + (k & 1);
}

// Distinct head slices of a term (a broadcast dimension has one).
__host__ __device__ __forceinline__ int bias_head_slices(const BiasTerm& t) { return t.head_stride ? t.head_mod : 1; }

// Slice of (sequence b, query head h) in a packed term: batch slice * head slices + head slice.
__device__ __forceinline__ int packed_slice(const BiasTerm& t, int b, int h) {
  return (t.batch_stride ? b % t.batch_mod : 0) * bias_head_slices(t) + (t.head_stride ? h % t.head_mod : 0);
}
// The same with the remainders by pk's FastDivs (set with its geometry: packed_geometry), for the CTAs'
// set-up. (Not in the general kernels' per-block paths: there the divisors' three words held in
// registers cost the d32 8-warp bias backward 444 bytes of spills.)
__device__ __forceinline__ int packed_slice(const BiasTerm& t, const PackedBias& pk, int b, int h) {
  return (t.batch_stride ? static_cast<int>(pk.bmod.mod(b)) : 0) * bias_head_slices(t) +
         (t.head_stride ? static_cast<int>(pk.hmod.mod(h)) : 0);
}

// Element offset of this lane's 8 values of tile (R, C) of slice s; R and C are clamped
// to the packed extent (tiles past it hold rows / columns that the caller masks).
// (The device code keeps min(): the conditional form, which the host test compiles, leaves the
// kernels 64-bit offset arithmetic after a select.)
__host__ __device__ __forceinline__ int clamp_tile(int x, int last) {
#ifdef __CUDA_ARCH__
  return min(x, last);
#else
  return x < last ? x : last;
#endif
}
__host__ __device__ __forceinline__ int64_t packed_off(const PackedBias& pk, int s, int R, int C, int lane) {
  R = clamp_tile(R, pk.rt - 1);
  C = clamp_tile(C, pk.ct - 1);
  return ((static_cast<int64_t>(s) * pk.rt + R) * pk.ct + C) * 256 + lane * 8;
}

// packed_off split for kernels whose slice and tile row stay fixed over their loop (the kModsBias
// forward): the lane's offset in tile column 0 of row R, computed once, plus a column's offset
// (C clamped as packed_off does). 32-bit: a packed term stays under 1 GiB (bias_packable).
__host__ __device__ __forceinline__ int packed_row_off(const PackedBias& pk, int s, int R, int lane) {
  return static_cast<int>(packed_off(pk, s, R, 0, lane));
}
__host__ __device__ __forceinline__ int packed_col_off(const PackedBias& pk, int C) {
  return clamp_tile(C, pk.ct - 1) * 256;
}

// f0 / f1: a tile's two m16n8 fragments (4 floats each); adds the lane's 8 values of a
// 16-bit term (dt: bf16 or f16), held in u.
__device__ __forceinline__ void add_tile16(DType dt, const uint4& u, float* f0, float* f1) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  float v[8];
  if (dt == DType::bf16) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = __uint_as_float(w[i] << 16);
      v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      v[2 * i] = f.x;
      v[2 * i + 1] = f.y;
    }
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) { f0[e] += v[e]; f1[e] += v[4 + e]; }
}

// The same for the lane's 8 values of tile `off` of a packed term of any dtype, from global memory.
__device__ __forceinline__ void add_packed_tile(const BiasTerm& t, const PackedBias& pk, int64_t off, float* f0,
                                                float* f1) {
  if (t.dtype == DType::f32) {
    const float4* src = reinterpret_cast<const float4*>(static_cast<const float*>(pk.ptr) + off);
    const float4 x = __ldg(src), y = __ldg(src + 1);
    f0[0] += x.x; f0[1] += x.y; f0[2] += x.z; f0[3] += x.w;
    f1[0] += y.x; f1[1] += y.y; f1[2] += y.z; f1[3] += y.w;
    return;
  }
  add_tile16(t.dtype, __ldg(reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(pk.ptr) + off)), f0, f1);
}

// Whether packed term t adds anything to slice s (PackedBias::live).
__device__ __forceinline__ bool slice_live(const PackedBias& pk, int s) { return !pk.live || __ldg(pk.live + s) != 0; }
// Whether every value of slice s is finite (unknown without flags: no).
__device__ __forceinline__ bool slice_finite(const PackedBias& pk, int s) {
  return pk.live && (__ldg(pk.live + s) & kSliceNonFinite) == 0;
}

// Bias adds on the tensor cores (kModsBias): a 16 x 16 tile of a 16-bit term in fragment order is
// already the A operand of m16n8k16 (frag_rc's order is the A fragment's), and with B = 8 columns
// of the 16 x 16 identity the mma returns C + tile: two mma per tile and term instead of 8 unpacks
// and 8 adds per lane. Products are exact and the zeros add nothing, so D = C + b rounded once, as
// the add was. Only for terms of the kernel's element type T (one mma kind, no branch per tile) and
// finite values: inf x 0 in the identity's zeros is NaN (bias_mma_ok).
// The lane's B register of the identity, `one` being T's bits of 1: B's rows 2 tq, 2 tq + 1 of column g.
__host__ __device__ __forceinline__ uint32_t eye_bits(int lane, uint32_t one) {
  const int g = lane >> 2, tq = lane & 3;
  return (2 * tq == g ? one : 0u) | (2 * tq + 1 == g ? one << 16 : 0u);
}
template <typename T>
__device__ __forceinline__ uint32_t eye_of(int lane) {
  return eye_bits(lane, std::is_same_v<T, __half> ? 0x3C00u : 0x3F80u);
}
// f0 / f1 (a tile's two m16n8 fragments) += the tile held in w (the lane's 8 values)
template <typename T>
__device__ __forceinline__ void mma_add_tile16(const uint32_t (&w)[4], uint32_t eye, float (&f0)[4], float (&f1)[4]) {
  mma16816<T>(f0, w, eye, 0u);
  mma16816<T>(f1, w, 0u, eye);
}
template <typename T>
__device__ __forceinline__ bool bias_mma_ok(const KArgs& a, int t, int slice) {
  constexpr DType dt = std::is_same_v<T, __half> ? DType::f16 : DType::bf16;
  return a.bias_mma && a.p.bias[t].dtype == dt && slice_finite(a.pk[t], slice);
}

// The bias terms a kModsBias CTA reads: p.num_bias, less a last term that is zero over the CTA's
// slice of it (slice(t); < 0: the slice is not fixed for the CTA) and, in the backward, has no
// gradient to accumulate there. Adding +-0 changes no score, so leaving the term out is exact;
// a branch per term around its copies and adds instead cost the forward 20-30 registers.
template <bool BWD, typename S>
__device__ __forceinline__ int terms_read(const KArgs& a, S&& slice) {
  int nb = a.p.num_bias;
  if (nb > 0) {
    // (slice called with a constant index: a runtime one put the callers' per-term arrays, the forward's
    // pk_slice and the LEAN backward's slice rows, in local memory, read back in every block's copies)
    const int t = nb - 1, s = t == 0 ? slice(0) : slice(1);
    const bool grad = BWD && (a.p.bias[t].grad || a.pk[t].grad);
    if (s >= 0 && !grad && !slice_live(a.pk[t], s)) --nb;
  }
  return nb;
}

// The staged chunks of a kModsBias kernel: f(t, m, n2, c) for bias term t < terms and the
// warp's 16 x 16 tile (m, n2) of an M x N2 grid, c = that chunk's index in a stage.
template <int M, int N2, typename F>
__device__ __forceinline__ void for_bias_chunks(int terms, F&& f) {
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    if (t >= terms) break;
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int n2 = 0; n2 < N2; ++n2) f(t, m, n2, (t * M + m) * N2 + n2);
  }
}

// Calls f with std::true_type where the bias adds run on the tensor cores (ENABLED, the kernel has the
// path, and mma, the CTA's slices allow it), else std::false_type: the forward's and backward's score
// code is compiled once per path.
template <bool ENABLED, typename F>
__device__ __forceinline__ void with_bias_path(bool mma, F&& f) {
  if constexpr (ENABLED) {
    if (mma) f(std::true_type{});
    else f(std::false_type{});
  } else {
    f(std::false_type{});
  }
}

// The backward's fp32 dBias tiles keep a tile's 256 floats in another order than the terms' tiles:
// lane l's fragment f0 at 4 l, f1 at 128 + 4 l, so each of a warp's two 16-byte reds covers 512
// contiguous bytes (whole 32-byte sectors); in the terms' order (8 l, 8 l + 4) each red touched 32
// sectors by halves, twice the L2's sector operations. dbias_frag_off: element offset of lane's f0 (f1: + 128) in the tile at tile_off.
__host__ __device__ __forceinline__ int64_t dbias_frag_off(int64_t tile_off, int lane) { return tile_off + 4 * lane; }

// Adds the lane's 8 dBias values (fragments f0, f1) into the packed fp32 tile at tile_off
// (packed_off of lane 0).
__device__ __forceinline__ void red_packed_tile(float* grad, int64_t tile_off, int lane, const float* f0,
                                                const float* f1) {
  float* dst = grad + dbias_frag_off(tile_off, lane);
#if __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float4*>(dst), make_float4(f0[0], f0[1], f0[2], f0[3]));
  atomicAdd(reinterpret_cast<float4*>(dst + 128), make_float4(f1[0], f1[1], f1[2], f1[3]));
#else
#pragma unroll
  for (int e = 0; e < 4; ++e) { atomicAdd(dst + e, f0[e]); atomicAdd(dst + 128 + e, f1[e]); }
#endif
}

}  // namespace tessera::attention::cuda
