// Packing the token sequences of several slides or videos into one varlen
// batch for the long-sequence aggregator (and unpacking its outputs):
// tokens [n_i, D] and positions [n_i, P] (2-D tile grid coordinates, or
// timestamps) → [Σn_i, D], [Σn_i, P] and cu_seqlens int32 [B + 1].
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <vector>

namespace tessera::patching {

struct PackedSequences {
  at::Tensor tokens, positions, cu_seqlens;
  int64_t max_seqlen = 0;
};

PackedSequences pack_sequences(const std::vector<at::Tensor>& tokens, const std::vector<at::Tensor>& positions);
std::vector<at::Tensor> unpack_sequences(const at::Tensor& packed, const at::Tensor& cu_seqlens);

// Tile coordinates (level-0 pixels) → grid cells, the positions the aggregator's 2-D RoPE reads.
at::Tensor grid_positions(const std::vector<std::array<int64_t, 2>>& coords, int64_t tile_size_level0);

}  // namespace tessera::patching
