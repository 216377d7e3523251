// Varlen packing of token sequences.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tessera/patching/sequence_packing.h"

namespace {

using namespace tessera::patching;

TEST(Packing, PackUnpackRoundTrip) {
  std::vector<at::Tensor> toks = {torch::randn({5, 8}), torch::randn({1, 8}), torch::randn({30, 8})};
  std::vector<at::Tensor> pos = {torch::rand({5, 2}), torch::rand({1, 2}), torch::rand({30, 2})};
  auto p = pack_sequences(toks, pos);
  EXPECT_EQ(p.tokens.sizes(), (std::vector<int64_t>{36, 8}));
  EXPECT_TRUE(torch::equal(p.cu_seqlens, torch::tensor({0, 5, 6, 36}, torch::kInt)));
  EXPECT_EQ(p.max_seqlen, 30);
  auto back = unpack_sequences(p.tokens, p.cu_seqlens);
  ASSERT_EQ(back.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(back[i], toks[i]));
  EXPECT_THROW(pack_sequences({torch::randn({5, 8})}, {torch::rand({4, 2})}), std::invalid_argument);
  EXPECT_THROW(pack_sequences({torch::randn({5, 8}), torch::randn({5, 7})}, {torch::rand({5, 2}), torch::rand({5, 2})}),
               std::invalid_argument);
  auto g = grid_positions({{0, 0}, {448, 224}, {224, 672}}, 224);
  EXPECT_TRUE(torch::equal(g, torch::tensor({0.f, 0.f, 2.f, 1.f, 1.f, 3.f}).view({3, 2})));
}

}  // namespace
