// Tile shapes per head-dim bucket. Head dims are padded (zero-filled) up to
// the bucket: 16, 32, 64, 128, 256.
#pragma once

#include "kernels/sm80/bwd_det_kernel.cuh"
#include "kernels/sm80/bwd_kernel.cuh"
#include "kernels/sm80/fwd_kernel.cuh"

namespace tessera::attention::cuda {

// forward: warps (16 query rows each), key block
template <typename T, int D> struct FwdCfg { using type = FwdTraits<T, D, 4, 64, 1>; };
// (No query loop here: with it (QSPLIT) the Swin forwards without bias gained at most 0.6 % in
// attention_cuda_tune swin-ab, and the d32 kernel spills 136 bytes.)
template <typename T> struct FwdCfg<T, 16> { using type = FwdTraits<T, 16, 4, 64, 1, true, true, 4>; };
template <typename T> struct FwdCfg<T, 32> { using type = FwdTraits<T, 32, 4, 64, 1, true, true, 4>; };
template <typename T> struct FwdCfg<T, 64> { using type = FwdTraits<T, 64, 4, 64, 2>; };
template <typename T> struct FwdCfg<T, 128> { using type = FwdTraits<T, 128, 8, 64, 1>; };
template <typename T> struct FwdCfg<T, 256> { using type = FwdTraits<T, 256, 4, 32>; };
// the forward with staged bias tiles (kModsBias): d16 (Swin windows) with 8 warps, 128 query
// rows per CTA: 0.666 ms against 0.690 with 4 (1372 x 3 x 343, relative bias + shift mask, H200;
// d32: 2.467 against 2.408, so it keeps 4)
template <typename T, int D> struct FwdBiasCfg { using type = typename FwdCfg<T, D>::type; };
template <typename T> struct FwdBiasCfg<T, 16> { using type = FwdTraits<T, 16, 8, 64, 1, true, true, 2>; };
// d32: one CTA per sequence and head looping its query blocks (QSPLIT 1, sequences of at most 8 query
// blocks: launch_fwd_kernel), 1.753 ms against 1.788 for one CTA per block (Swin 2048 x 6 x 343, rel bias +
// mask, attention_cuda_tune swin-ab, five rounds); TESSERA_CUDA_QSPLIT=k overrides it (KArgs::qsplit)
template <typename T> struct FwdBiasCfg<T, 32> { using type = FwdTraits<T, 32, 4, 64, 1, true, true, 4, 1>; };

// backward main pass: warps, key block, query block (, warp rows of S^T / dKV / dQ, CTAs per SM plain / MODS)
// d16 / d32: registers capped for 4 (plain, 16 warps / SM) and 3 (MODS, 12 warps / SM) resident CTAs.
template <typename T, int D> struct BwdCfg { using type = BwdTraits<T, D, 4, 64, 64, 0, 0, 0, 4, 3>; };
template <typename T> struct BwdCfg<T, 64> { using type = BwdTraits<T, 64, 8, 128, 64, 4, 4, 4>; };
template <typename T> struct BwdCfg<T, 128> { using type = BwdTraits<T, 128, 8, 128, 64, 4, 4, 4>; };
template <typename T> struct BwdCfg<T, 256> { using type = BwdTraits<T, 256, 8, 64, 32>; };
// the backward with staged bias tiles (kModsBias): d16 / d32 (Swin windows) on 8 warps and 128 keys per
// CTA, registers capped for 2 CTAs per SM. LEAN, relative bias's dBias, 1372 x 3 x 343 d16: 1.487 ms
// against 1.584 with the 4-warp traits; 2048 x 6 x 343 d32: 5.613 against 6.001 (H200; uncapped the
// d32 8-warp kernel took 6.974)
template <typename T, int D> struct BwdBiasCfg { using type = typename BwdCfg<T, D>::type; };
template <typename T> struct BwdBiasCfg<T, 16> { using type = BwdTraits<T, 16, 8, 128, 64, 4, 8, 4, 2, 2>; };
template <typename T> struct BwdBiasCfg<T, 32> { using type = BwdTraits<T, 32, 8, 128, 64, 4, 8, 4, 2, 2>; };
// the WIN backward (one CTA per window and head, dQ in shared memory: win_smem): d16 as BwdBiasCfg; d32
// with 32-row query blocks, so that dQ of up to 416 rows, one bias stage and the tiles leave 2 CTAs per
// SM (the 64-row blocks' 150 KB leave one; 128 registers, no spills)
template <typename T, int D> struct BwdWinCfg { using type = typename BwdBiasCfg<T, D>::type; };
template <typename T> struct BwdWinCfg<T, 32> { using type = BwdTraits<T, 32, 8, 128, 32, 4, 8, 2, 2, 2>; };

// deterministic query-side passes
template <typename T, int D> struct QsideCfg { using type = QsideTraits<T, D, 4, 64>; };
template <typename T> struct QsideCfg<T, 256> { using type = QsideTraits<T, 256, 4, 32>; };

}  // namespace tessera::attention::cuda
