// own_storage: what embed-wsi keeps of each batch (a class token) must not hold the batch's whole token sequence.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "own_storage.h"

namespace tessera::apps {
namespace {

TEST(OwnStorage, AClassTokenViewIsCopiedOutOfItsSequence) {
  const auto seq = torch::randn({4, 265, 32});
  const auto token = seq.select(1, 0);
  ASSERT_GT(token.storage().nbytes(), token.nbytes());
  const auto kept = own_storage(token);
  EXPECT_EQ(kept.storage().nbytes(), kept.nbytes());
  EXPECT_NE(kept.data_ptr(), seq.data_ptr());
  EXPECT_TRUE(kept.is_contiguous());
  EXPECT_TRUE(torch::equal(kept, token));
}

TEST(OwnStorage, ABatchOfOneTokenIsCopiedThoughContiguous) {
  const auto token = torch::randn({1, 197, 16}).select(1, 0);
  ASSERT_TRUE(token.is_contiguous());
  const auto kept = own_storage(token);
  EXPECT_EQ(kept.storage().nbytes(), kept.nbytes());
  EXPECT_TRUE(torch::equal(kept, token));
}

TEST(OwnStorage, ATensorOwningItsBytesIsKeptAsIs) {
  const auto pooled = torch::randn({4, 265, 32}).mean(1);
  EXPECT_EQ(own_storage(pooled).data_ptr(), pooled.data_ptr());
}

}  // namespace
}  // namespace tessera::apps
