#include "tessera/patching/sequence_packing.h"

#include <limits>
#include <stdexcept>

namespace tessera::patching {

PackedSequences pack_sequences(const std::vector<at::Tensor>& tokens, const std::vector<at::Tensor>& positions) {
  if (tokens.empty()) throw std::invalid_argument("pack_sequences: no sequences");
  if (tokens.size() != positions.size())
    throw std::invalid_argument("pack_sequences: " + std::to_string(tokens.size()) + " token sequences but " +
                                std::to_string(positions.size()) + " position sequences");
  std::vector<int32_t> cu = {0};
  PackedSequences out;
  for (size_t b = 0; b < tokens.size(); ++b) {
    if (tokens[b].dim() != 2 || tokens[b].size(1) != tokens[0].size(1))
      throw std::invalid_argument("pack_sequences: sequence " + std::to_string(b) + " is not [n, D] with the width of sequence 0");
    if (positions[b].size(0) != tokens[b].size(0))
      throw std::invalid_argument("pack_sequences: sequence " + std::to_string(b) + " has " +
                                  std::to_string(tokens[b].size(0)) + " tokens but " +
                                  std::to_string(positions[b].size(0)) + " positions");
    const int64_t next = int64_t(cu.back()) + tokens[b].size(0);
    if (next > std::numeric_limits<int32_t>::max()) throw std::invalid_argument("pack_sequences: more than 2^31 tokens");
    cu.push_back(static_cast<int32_t>(next));
    out.max_seqlen = std::max(out.max_seqlen, tokens[b].size(0));
  }
  out.tokens = at::cat(tokens, 0);
  std::vector<at::Tensor> pos;
  for (const auto& p : positions) pos.push_back(p.dim() == 1 ? p.unsqueeze(1) : p);
  out.positions = at::cat(pos, 0).to(at::kFloat);
  out.cu_seqlens = at::tensor(cu, at::TensorOptions().dtype(at::kInt)).to(tokens[0].device());
  return out;
}

std::vector<at::Tensor> unpack_sequences(const at::Tensor& packed, const at::Tensor& cu_seqlens) {
  const at::Tensor cu = cu_seqlens.to(at::kCPU).to(at::kLong);
  std::vector<at::Tensor> out;
  for (int64_t b = 0; b + 1 < cu.size(0); ++b) {
    const int64_t s = cu[b].item<int64_t>(), e = cu[b + 1].item<int64_t>();
    out.push_back(packed.narrow(0, s, e - s));
  }
  return out;
}

at::Tensor grid_positions(const std::vector<std::array<int64_t, 2>>& coords, int64_t tile) {
  if (tile < 1) throw std::invalid_argument("grid_positions: tile size must be >= 1");
  at::Tensor out = at::empty({static_cast<int64_t>(coords.size()), 2}, at::kFloat);
  auto a = out.accessor<float, 2>();
  for (size_t i = 0; i < coords.size(); ++i) {
    a[i][0] = static_cast<float>(coords[i][0] / tile);
    a[i][1] = static_cast<float>(coords[i][1] / tile);
  }
  return out;
}

}  // namespace tessera::patching
