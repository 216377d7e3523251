// A warpgroup's 64-row fp32 accumulator tile (the m64nNk16 layout: acc[sl][4n + e] is row
// 16 warp + g + 8 (e >> 1), column 64 sl + 8n + 2tq + (e & 1)) written as 16-bit values into 64 rows
// of 128-byte-swizzled 64-column slabs in shared memory, the layout a TMA store with boxes of 64 rows
// x 64 columns reads: the forward's O epilogue and the backward's dK / dV epilogue.
#pragma once

#include "primitives/mma.cuh"

namespace tessera::attention::cuda::sm90 {

// o_word_off, the byte offset of a thread's word (row half r, 8-column group n) of slab sl (slab_off its
// first byte), as per-word stores would write it; o_stm_off, the row address lane l gives stmatrix.x4 for
// groups 2 q, 2 q + 1, whose matrices are the words (r 0, group 2 q), (1, 2 q), (0, 2 q + 1), (1, 2 q + 1)
// (tests/gpu/bwd_swz_test.cu emulates it against o_word_off).
__host__ __device__ __forceinline__ uint32_t o_word_off(int warp, int lane, int slab_off, int n, int r) {
  const int rr = warp * 16 + (lane >> 2) + 8 * r;
  return slab_off + static_cast<uint32_t>(rr * 128 + ((n ^ (rr & 7)) << 4)) + 4 * (lane & 3);
}
__host__ __device__ __forceinline__ uint32_t o_stm_off(int warp, int lane, int slab_off, int q) {
  const int rr = warp * 16 + 8 * ((lane >> 3) & 1) + (lane & 7), n = 2 * q + (lane >> 4);
  return slab_off + static_cast<uint32_t>(rr * 128 + ((n ^ (rr & 7)) << 4));
}

// acc times sc[r] (the scale of row half r) into the slabs at rows (this warpgroup's first row in
// the first slab; slab_bytes between slabs): one stmatrix.x4 per slab and pair of 8-column groups.
template <typename T, int SLABS>
__device__ __forceinline__ void stage_acc_tile(uint32_t rows, uint32_t slab_bytes, int warp, int lane,
                                               const float (&acc)[SLABS][32], const float (&sc)[2]) {
#pragma unroll
  for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t w[4];  // (row half r, group 2 q + k) -> matrix r + 2 k
#pragma unroll
      for (int k = 0; k < 2; ++k)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int n = 2 * q + k;
          w[r + 2 * k] = Elem<T>::pack(acc[sl][4 * n + 2 * r] * sc[r], acc[sl][4 * n + 2 * r + 1] * sc[r]);
        }
#if TESSERA_STMATRIX
      stmatrix_x4(rows + o_stm_off(warp, lane, sl * slab_bytes, q), w[0], w[1], w[2], w[3]);
#else
      (void)w;  // (the host pass and pre-sm_90 images: the kernels that call this exist only for sm_90a)
#endif
    }
}

}  // namespace tessera::attention::cuda::sm90
