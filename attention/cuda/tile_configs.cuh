// The tile configuration of every kernel per head-dim bucket, as named fields, with
// one-line reasons (docs/attention.md has the measurements): the one place that sizes
// tiles. Head dims are padded (zero-filled) up to the bucket: 16, 32, 64, 128, 256.
// Which configuration runs for a call is dispatch.cu's choice; *Of below turn these
// into the kernels' traits types.
#pragma once

#include "kernels/sm80/bwd_det_kernel.cuh"
#include "kernels/sm80/bwd_kernel.cuh"
#include "kernels/sm80/fwd_kernel.cuh"

namespace tessera::attention::cuda {
namespace sm90 {
template <typename T, int D_, int BN_, int STAGES_, int NCONS_, bool PINGPONG_, int MINB_, bool PRODUCER_, bool PERSIST_,
          bool SPLIT_KV_>
struct FwdSm90Traits;  // kernels/sm90/fwd_sm90_kernel.cuh
}  // namespace sm90

// ---- portable forward (kernels/sm80/fwd_kernel.cuh): 16 * row_tiles query rows per warp
template <int D>
struct FwdTile {
  static constexpr int warps = 4, key_block = 64, row_tiles = 1, min_ctas = 1, qsplit = 0;
  static constexpr bool q_in_regs = D <= 128, half_tail = false;
};
// d16 / d32: four CTAs per SM, 32-key halves at a block's tail; no query loop (it spills at d32)
template <> struct FwdTile<16> : FwdTile<0> { static constexpr bool half_tail = true; static constexpr int min_ctas = 4; };
template <> struct FwdTile<32> : FwdTile<16> {};
// d64: two 16-row tiles per warp
template <> struct FwdTile<64> : FwdTile<0> { static constexpr int row_tiles = 2; };
// d128: eight warps, 128 query rows per CTA
template <> struct FwdTile<128> : FwdTile<0> { static constexpr int warps = 8; };
// d256: 32-key blocks, Q re-read from shared memory (registers)
template <> struct FwdTile<256> : FwdTile<0> { static constexpr int key_block = 32; static constexpr bool q_in_regs = false; };

// the forward with staged bias tiles (Mods::bias): as FwdTile except
template <int D> struct FwdBiasTile : FwdTile<D> {};
// d16 (Swin windows): eight warps, 128 query rows per CTA, two CTAs per SM
template <> struct FwdBiasTile<16> : FwdTile<16> { static constexpr int warps = 8, min_ctas = 2; };
// d32: one CTA per sequence and head looping over its query blocks (short sequences: launch_fwd_kernel)
template <> struct FwdBiasTile<32> : FwdTile<32> { static constexpr int qsplit = 1; };

template <typename T, int D, typename C>
using FwdOf = FwdTraits<T, D, C::warps, C::key_block, C::row_tiles, C::q_in_regs, C::half_tail, C::min_ctas, C::qsplit>;

// ---- portable backward main pass (kernels/sm80/bwd_kernel.cuh): one CTA per key block;
// warps_s / warps_dkv / warps_dq: warps along the rows of S^T, dK / dV and dQ (0: as many as fit);
// min_ctas / min_ctas_mods: CTAs per SM the registers must allow without / with modifiers
template <int D>
struct BwdTile {
  static constexpr int warps = 8, key_block = 128, query_block = 64, warps_s = 4, warps_dkv = 4, warps_dq = 4;
  static constexpr int min_ctas = 1, min_ctas_mods = 1;
};
// d16 / d32: four warps, registers capped for 4 (plain) and 3 (modifiers) resident CTAs
template <> struct BwdTile<16> {
  static constexpr int warps = 4, key_block = 64, query_block = 64, warps_s = 0, warps_dkv = 0, warps_dq = 0;
  static constexpr int min_ctas = 4, min_ctas_mods = 3;
};
template <> struct BwdTile<32> : BwdTile<16> {};
// d256: 64-key blocks of 32 query rows (shared memory)
template <> struct BwdTile<256> : BwdTile<0> {
  static constexpr int key_block = 64, query_block = 32, warps_s = 0, warps_dkv = 0, warps_dq = 0;
};

// the backward with staged bias tiles (Mods::bias): d16 / d32 (Swin windows) on eight warps and
// 128 keys per CTA, registers capped for two CTAs per SM
template <int D> struct BwdBiasTile : BwdTile<D> {};
template <> struct BwdBiasTile<16> : BwdTile<0> { static constexpr int warps_dkv = 8, min_ctas = 2, min_ctas_mods = 2; };
template <> struct BwdBiasTile<32> : BwdBiasTile<16> {};

// the WIN backward (one CTA per window and head, dQ in shared memory: win_smem): d16 as
// BwdBiasTile; d32 with 32-row query blocks, so that dQ of up to 416 rows, one bias stage and
// the tiles leave two CTAs per SM
template <int D> struct BwdWinTile : BwdBiasTile<D> {};
template <> struct BwdWinTile<32> : BwdBiasTile<32> { static constexpr int query_block = 32, warps_dq = 2; };
// the query rows WIN takes: dQ beside the tiles must leave two CTAs per SM (launch_bwd checks)
constexpr int win_max_rows(int head_dim) { return head_dim == 16 ? 448 : head_dim == 32 ? 416 : 0; }

template <typename T, int D, typename C>
using BwdOf = BwdTraits<T, D, C::warps, C::key_block, C::query_block, C::warps_s, C::warps_dkv, C::warps_dq,
                        C::min_ctas, C::min_ctas_mods>;

// ---- deterministic query-side dQ / dBias (kernels/sm80/bwd_det_kernel.cuh): 16 query rows per warp
template <int D> struct QsideTile { static constexpr int warps = 4, key_block = 64; };
template <> struct QsideTile<256> : QsideTile<0> { static constexpr int key_block = 32; };

template <typename T, int D, typename C>
using QsideOf = QsideTraits<T, D, C::warps, C::key_block>;

// ---- Hopper forward (kernels/sm90/fwd_sm90_kernel.cuh): 64 query rows per consumer warpgroup;
// stages: key blocks in flight; pingpong: two consumers alternate softmax and GEMMs;
// producer: a warpgroup issuing the TMA loads; persistent: min_ctas CTAs per SM walk the tiles;
// split_kv: K and V of a stage arrive and are refilled apart
struct Fwd90Tile {
  static constexpr int key_block = 128, stages = 3, consumers = 2, min_ctas = 1;
  static constexpr bool pingpong = true, producer = true, persistent = false, split_kv = false;
};
// d64: one consumer that issues its own loads, three CTAs per SM, a 2-deep ring with K and V apart
struct Fwd90Tile64 : Fwd90Tile {
  static constexpr int stages = 2, consumers = 1, min_ctas = 3;
  static constexpr bool pingpong = false, producer = false, split_kv = true;
};
// d64 rows of 129..208 keys (ViT's 197 tokens): one 208-key block, where 128-key blocks compute 256
struct Fwd90Tile64Row208 : Fwd90Tile64 {
  static constexpr int key_block = 208, stages = 1;
  static constexpr bool split_kv = false;
};
// d64 rows of many keys: three ping-ponging consumers and a producer, 192 query rows sharing each K / V block
// (the small CTAs read it once per 64 rows), which pays once K / V reads dominate (dispatch.cu)
struct Fwd90Tile64Wide : Fwd90Tile { static constexpr int consumers = 3; };
// d128: two ping-ponging consumers and a producer in one CTA per SM
struct Fwd90Tile128 : Fwd90Tile {};
// d128 rows of at most 4096 keys: persistent, the next tile's loads overlap a tile's epilogue
struct Fwd90Tile128Persistent : Fwd90Tile128 { static constexpr bool persistent = true; };
// d256: O takes 128 registers a thread, so 80-key blocks (S 40; FlashAttention-3's d256 tile), and two stages
// (Q 64 KB and the ring 160 KB)
struct Fwd90Tile256 : Fwd90Tile { static constexpr int key_block = 80, stages = 2; };

template <typename T, int D, typename C>
using Fwd90Of = sm90::FwdSm90Traits<T, D, C::key_block, C::stages, C::consumers, C::pingpong, C::min_ctas, C::producer,
                                    C::persistent, C::split_kv>;

// ---- Hopper backward (kernels/sm90): 128 keys per CTA in the pair and warp-specialised kernels,
// query_block rows per step (d128: 64, dQ split by columns; d64: 128, dQ split by rows);
// the one-warpgroup kernel: 64 keys and 64 queries, two CTAs per SM
template <int D> struct Bwd90Tile { static constexpr int query_block = D == 64 ? 128 : 64; };

}  // namespace tessera::attention::cuda
