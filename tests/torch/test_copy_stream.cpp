// to_device_beside_compute: the copy on the side stream is complete before the current stream's next work reads
// it, batch after batch, while that stream is still busy with the batch before; elsewhere it is a plain copy.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../require_cuda.h"
#include "tessera/torch/copy_stream.h"

namespace {

using tessera::torch_ops::to_device_beside_compute;

TEST(CopyStream, ToTheCpuIsAPlainCopy) {
  const auto x = torch::randint(0, 255, {4, 8, 8, 3}, torch::kByte);
  EXPECT_TRUE(torch::equal(to_device_beside_compute(x, torch::kCPU), x));
}

TEST(CopyStreamCuda, EachBatchIsWholeWhenTheComputeStreamReadsIt) {
  REQUIRE_CUDA();
  ASSERT_TRUE(tessera::torch_ops::copy_stream_available()) << "a CUDA LibTorch build should take the side stream";
  const torch::Device dev(torch::kCUDA, 0);
  // The compute stream is kept busy (large matmuls) so that an unsynchronised read would see a partial copy; each
  // batch's memory held the batch before it, so a partial copy also shows in the sum.
  auto busy = torch::randn({4096, 4096}, dev);
  for (int i = 0; i < 12; ++i) {
    const auto host = torch::randint(0, 255, {64, 224, 224, 3}, torch::TensorOptions().dtype(torch::kByte).pinned_memory(true));
    const int64_t want = host.sum(torch::kLong).item<int64_t>();
    busy = torch::mm(busy, busy).div_(4096.0);
    const auto got = to_device_beside_compute(host, dev);
    EXPECT_EQ(got.device(), dev);
    EXPECT_EQ(got.sum(torch::kLong).item<int64_t>(), want) << "batch " << i;
  }
}

TEST(CopyStreamCuda, APageableSourceIsCopiedToo) {
  REQUIRE_CUDA();
  const auto host = torch::randint(0, 255, {3, 5, 7}, torch::kByte);
  EXPECT_TRUE(torch::equal(to_device_beside_compute(host, torch::kCUDA).cpu(), host));
}

}  // namespace
