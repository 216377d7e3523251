// What every kernel receives: the user's AttentionParams plus a few derived
// values (the index helpers are layout.h's, shared with the CPU path).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "primitives/fast_div.cuh"
#include "tessera/attention/layout.h"
#include "tessera/attention/mask.h"
#include "tessera/attention/params.h"
#include "tessera/attention/philox.h"

namespace tessera::attention::cuda {

// A bias term repacked in mma fragment order (bias_pack.cu): the term's [rows, cols] slice
// cut into 16 x 16 tiles, each stored as 32 lanes x 8 elements in the order one lane holds
// them as two m16n8 accumulator fragments (frag_rc), so a warp reads a tile with one
// 16-byte load per lane (fp32 terms: two) instead of a gather of 8 rows per instruction.
// The forward packs [query][key] tiles; the backward packs [key][query] ones (S^T).
// The pack also records, per slice, whether any of its values is nonzero (`live`): a term that
// is zero over a whole slice (the Swin shift mask in every window off the shifted border) adds
// nothing there, and the kModsBias kernels leave it out for that slice (terms_read). A second
// flag marks slices holding an inf or NaN, which the tensor-core bias adds cannot take (slice_finite).
enum : int { kSliceLive = 1, kSliceNonFinite = 2 };
struct PackedBias {
  const void* ptr;  // null: the term is read from p.bias[t] directly
  float* grad;      // backward: fp32 dBias tiles, lanes' values in red_packed_tile's order (null: atomics into p.bias[t].grad)
  const int* live;  // per slice: kSlice* flags, 0 = every value is +-0 (null: all live, finiteness unknown)
  int rt, ct;       // tiles along rows, columns
  FastDiv bmod, hmod;  // the term's batch_mod, head_mod (packed_slice)
};

// Score-modifier variants of the portable fp16 / bf16 kernels (template parameter MODS):
// none; packed 16-bit bias terms only (no ALiBi, dropout or direct bias reads: staged with the
// K/V or Q/dO copies, no per-element branches); everything.
enum : int { kModsNone = 0, kModsBias = 1, kModsAll = 2 };

// (flags fill the alignment gaps: every kernel takes this as its parameter)
struct KArgs {
  AttentionParams p;
  float scale_log2;        // scale * log2(e)
  float keep_scale;        // 1 / (1 - dropout_p)
  uint32_t drop_threshold; // philox.h
  bool dropout;
  bool vec_ok;             // every tensor row is 16-byte aligned: cp.async loads
  bool any_bias_grad;      // main backward kernel adds dS into bias grads (atomics)
  bool bwd_rotate;         // Hopper backward: rotated query-block walks (Overrides::bwd_rotate)
  float* dq_accum;         // fp32 [rows_q, Hq, D] (non-deterministic backward)
  float* dvec;             // fp32 D = rowsum(dO*O) - dlse, lse layout
  int dq_accum_d;          // row length of dq_accum (= head_dim)
  float* dkv_accum;        // Hopper ws backward with head_splits > 1: fp32 dK [rows_k, Hkv, D], then dV
                           // [rows_k, Hkv, Dv], each tile's dK (already scaled) and dV added in
  int head_splits;         // Hopper ws backward: tiles per key block and kv head, each over heads_q /
                           // heads_kv / head_splits of the group's query heads (Choice::head_splits)
  float* dbias_partial;    // deterministic dBias partial sums (workspace), see DbiasSplit
  float* row_stats;        // fp16/bf16: [2][stat_plane] fp32, lse * log2 e (+inf: empty row) and D at stat_idx
  int64_t stat_plane;
  PackedBias pk[2];        // per bias term; pk[t].ptr null = not packed
  bool win;                // backward: bwd_kernel's WIN variant (bwd_win_ok), decided before its passes
  bool bias_mma;           // kModsBias d16 / d32: finite terms of the data's type added on the tensor
                           // cores (bias_mma_ok); Overrides::bias_mma
  bool fwd_half_last;      // Hopper forward: 64-key last blocks (Overrides::fwd_half_last)
  bool fwd_lazy_rescale;   // Hopper d128 forward: lazy O rescaling (Overrides::fwd_lazy_rescale)
  FastDiv group;           // heads_q / heads_kv: query head -> kv head (the portable forward)
  int qsplit;              // forward kernels with the query loop (FwdTraits QSPLIT > 0): CTAs per sequence
                           // and head; 0 = the traits' QSPLIT, -1 = one per query block (Overrides::qsplit)
  int causal_chunk;        // Hopper one-CTA-per-tile kernels (forward, ws backward), causal calls: tiles
                           // numbered heaviest first within chunks of this many heads (chunked_order); 0 =
                           // off, -1 = the kernel's default (the forward: off; the ws backward:
                           // ws_causal_chunk); Overrides::causal_chunk
};

// Tile L of a launch whose tiles are `per_head` ranks (rank 0 the heaviest) of each of `heads` heads: by
// default (chunk 0) ranks count fastest, so the CTAs at work together share a head's data in L2, but with a
// causal mask the last head's heaviest tile then starts near the launch's end and runs on alone (a tail).
// With chunk G > 0, heads go in chunks of G, and within a chunk ranks count slowest: every head's heavy
// tiles start a chunk's worth of work before its light ones, while the tiles at work together stay within
// G heads (ranks slowest over all heads lose L2 locality).
// A bijection of [0, per_head * heads) for any G (tests/gpu/bwd_tiles_test.cu).
struct ChunkPos {
  int rank, head;
};
__host__ __device__ __forceinline__ ChunkPos chunked_order(int L, int per_head, int heads, int chunk) {
  if (chunk <= 0) return {L % per_head, L / per_head};
  const int c = L / (chunk * per_head), r = L - c * chunk * per_head;
  const int gc = min(chunk, heads - c * chunk);  // heads in this chunk (the last may hold fewer)
  return {r / gc, c * chunk + r % gc};
}

// Row (b, h, i) of the row statistics that the Hopper backward loads with bulk copies: every
// (b, h) run, and with varlen every sequence of a head, starts 16-byte aligned, so the rows of
// a query block are one aligned copy (blocks may read past a run's end into padding or the
// next run: those rows are masked). stat_plane_floats in cuda_backend.cu sizes a plane.
// Rows of one run: varlen, a head's (sequence b starts at round_up4(q0) + 4 b in it);
// otherwise a (b, h) pair's, seqlen_q rounded up to 4.
__host__ __device__ __forceinline__ int64_t stat_head_rows(const AttentionParams& p) {
  return ((p.total_q + 3) & ~int64_t(3)) + 4 * int64_t(p.batch) + 4;
}
__host__ __device__ __forceinline__ int stat_bh_rows(const AttentionParams& p) { return (p.seqlen_q + 3) & ~3; }
__host__ __device__ __forceinline__ int64_t stat_idx(const AttentionParams& p, int b, int h, int64_t q0, int i) {
  if (p.cu_seqlens_q) return static_cast<int64_t>(h) * stat_head_rows(p) + ((q0 + 3) & ~int64_t(3)) + 4 * b + i;
  return (static_cast<int64_t>(b) * p.heads_q + h) * stat_bh_rows(p) + i;
}

// One plane of the row statistics (stat_idx), with a tail for the last block's reads
// past the end (the Hopper backward's query blocks are at most 128 rows, the LEAN one's 64).
__host__ __device__ __forceinline__ int64_t stat_plane_floats(const AttentionParams& p) {
  const int64_t rows = p.cu_seqlens_q ? p.heads_q * stat_head_rows(p) : int64_t(p.batch) * p.heads_q * stat_bh_rows(p);
  return rows + 128;
}

__device__ __forceinline__ float load_bias(const BiasTerm& t, int64_t idx) {
  if (t.dtype == DType::f32) return __ldg(static_cast<const float*>(t.ptr) + idx);
  const unsigned short u = __ldg(static_cast<const unsigned short*>(t.ptr) + idx);
  if (t.dtype == DType::bf16) return __uint_as_float(static_cast<uint32_t>(u) << 16);
  return __half2float(__ushort_as_half(u));
}

// Adds bias term t to every element of a register tile: acc[k] += bias[off(k)],
// with the dtype switch hoisted out of the loop so the loads issue back to back.
// off(k) must be in bounds for every k.
template <int N, typename Off>
__device__ __forceinline__ void add_bias_tile(const BiasTerm& t, float* acc, Off off) {
  if (t.dtype == DType::f32) {
    const float* bp = static_cast<const float*>(t.ptr);
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] += __ldg(bp + off(k));
  } else if (t.dtype == DType::bf16) {
    const unsigned short* bp = static_cast<const unsigned short*>(t.ptr);
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] += __uint_as_float(static_cast<uint32_t>(__ldg(bp + off(k))) << 16);
  } else {
    const unsigned short* bp = static_cast<const unsigned short*>(t.ptr);
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] += __half2float(__ushort_as_half(__ldg(bp + off(k))));
  }
}

}  // namespace tessera::attention::cuda
