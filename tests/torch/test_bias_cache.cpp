// PackedBiasCache (attention/torch/bias_cache.h): what a cached copy of a constant bias term
// belongs to. Host tensors stand in for the CUDA ones; `make` records each (re)pack.
#include <gtest/gtest.h>

#include <cstring>
#include <torch/torch.h>

#include "bias_cache.h"

namespace {

using tessera::torch_ops::detail::PackedBiasCache;

struct Packer {
  int calls = 0;
  // the "packed copy": the source's first byte, so a test sees which source a copy came from
  at::Tensor get(PackedBiasCache& c, const at::Tensor& src, std::vector<int64_t> sig = {1, 2}, size_t bytes = 64) {
    return c.get(src, sig, bytes, at::TensorOptions(), [&](void* dst) {
      ++calls;
      std::memset(dst, 0, bytes);
      std::memcpy(dst, src.data_ptr(), 1);
    });
  }
};

TEST(BiasCache, SameSourceAndViewsOfItHit) {
  PackedBiasCache c(1 << 20, 8);
  Packer pk;
  auto mask = torch::full({3, 7, 7}, 5, torch::kByte);
  const auto a = pk.get(c, mask);
  const auto b = pk.get(c, mask);
  EXPECT_EQ(pk.calls, 1);
  EXPECT_EQ(a.data_ptr(), b.data_ptr());
  // a view with the same offset, sizes and strides (a new TensorImpl per call, as the models'
  // mask.unsqueeze(1) makes) hits; another view of the storage does not
  pk.get(c, mask.view({3, 7, 7}));
  EXPECT_EQ(pk.calls, 1);
  pk.get(c, mask.unsqueeze(1));
  pk.get(c, mask.narrow(0, 1, 2));
  EXPECT_EQ(pk.calls, 3);
  EXPECT_EQ(c.entries(), 3u);
}

TEST(BiasCache, InPlaceChangeRepacksAndReplaces) {
  PackedBiasCache c(1 << 20, 8);
  Packer pk;
  auto mask = torch::full({4, 4}, 5, torch::kByte);
  pk.get(c, mask);
  mask.fill_(9);  // bumps the version
  const auto b = pk.get(c, mask);
  EXPECT_EQ(pk.calls, 2);
  EXPECT_EQ(b.data_ptr<uint8_t>()[0], 9);
  EXPECT_EQ(c.entries(), 1u);  // the stale copy went
  // through another view of the same storage (views share the version counter)
  mask.view({16}).narrow(0, 0, 1).fill_(3);
  EXPECT_EQ(pk.get(c, mask).data_ptr<uint8_t>()[0], 3);
  EXPECT_EQ(pk.calls, 3);
}

TEST(BiasCache, SignatureAndSizeAreOwnEntries) {
  PackedBiasCache c(1 << 20, 8);
  Packer pk;
  auto mask = torch::full({4, 4}, 5, torch::kByte);
  pk.get(c, mask, {1, 2});
  pk.get(c, mask, {0, 2});  // e.g. the backward's orientation
  EXPECT_EQ(pk.calls, 2);
  EXPECT_EQ(c.entries(), 2u);
  pk.get(c, mask, {1, 2});
  pk.get(c, mask, {0, 2});
  EXPECT_EQ(pk.calls, 2);
  pk.get(c, mask, {1, 2}, 128);  // a different size is a different copy: replaced
  EXPECT_EQ(pk.calls, 3);
  EXPECT_EQ(c.entries(), 2u);
}

TEST(BiasCache, FreedSourceExpires) {
  PackedBiasCache c(1 << 20, 8);
  Packer pk;
  {
    auto mask = torch::full({4, 4}, 5, torch::kByte);
    pk.get(c, mask);
    EXPECT_EQ(c.entries(), 1u);
  }
  // a new tensor, perhaps at the freed address, with other values: never the old copy
  auto other = torch::full({4, 4}, 7, torch::kByte);
  EXPECT_EQ(pk.get(c, other).data_ptr<uint8_t>()[0], 7);
  EXPECT_EQ(pk.calls, 2);
  EXPECT_EQ(c.entries(), 1u);
}

TEST(BiasCache, LeastRecentlyUsedGoPastTheLimits) {
  PackedBiasCache c(256, 3);  // 3 entries, 256 bytes
  Packer pk;
  std::vector<at::Tensor> src;
  for (int i = 0; i < 5; ++i) src.push_back(torch::full({2}, i, torch::kByte));
  for (int i = 0; i < 3; ++i) pk.get(c, src[i]);
  pk.get(c, src[0]);  // 0 is now the most recent
  pk.get(c, src[3]);  // drops 1
  EXPECT_EQ(c.entries(), 3u);
  EXPECT_EQ(pk.calls, 4);
  pk.get(c, src[0]);
  pk.get(c, src[2]);
  EXPECT_EQ(pk.calls, 4);
  pk.get(c, src[1]);
  EXPECT_EQ(pk.calls, 5);
  pk.get(c, src[4], {1, 2}, 200);  // 200 bytes: only it fits
  EXPECT_EQ(c.entries(), 1u);
  EXPECT_EQ(c.bytes(), 200u);
  pk.get(c, src[4], {1, 2}, 200);
  EXPECT_EQ(pk.calls, 6);
  c.clear();
  EXPECT_EQ(c.entries(), 0u);
  EXPECT_EQ(c.bytes(), 0u);
}

}  // namespace
