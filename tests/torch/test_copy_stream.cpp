// to_device_beside_compute: the copy on the side stream is complete before the current stream's next work reads
// it, batch after batch, while that stream is still busy with the batch before; elsewhere it is a plain copy.
// DeviceFiller: a tensor filled from a reader holds exactly its bytes, in chunks of any size, every chunk seen once
// and in order on the host; on the GPU through the two page-locked buffers while the default stream is busy.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <vector>

#include "../require_cuda.h"
#include "tessera/torch/copy_stream.h"

namespace {

using tessera::torch_ops::DeviceFiller;
using tessera::torch_ops::to_device_beside_compute;

// Fills a `dtype` tensor of `numel` elements on `device` from random bytes through a filler of `chunk` bytes: the
// tensor's bytes and the bytes seen must both equal the source.
void expect_filled(const torch::Device& device, int64_t chunk, int64_t numel, torch::ScalarType dtype) {
  const int64_t nbytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  const auto source = torch::randint(0, 256, {nbytes}, torch::kByte);
  const auto* src = source.data_ptr<uint8_t>();
  DeviceFiller via(device, chunk);
  auto dst = torch::full({numel}, 7, torch::TensorOptions().dtype(dtype).device(device));  // poisoned
  std::vector<uint8_t> seen;
  uint64_t next = 0;  // the offset each read must ask for: chunks in order, none twice
  via.fill(
      dst,
      [&](uint64_t offset, void* p, uint64_t n) {
        EXPECT_EQ(offset, next);
        ASSERT_LE(offset + n, static_cast<uint64_t>(nbytes));
        std::memcpy(p, src + offset, n);
        next = offset + n;
      },
      [&](const void* p, uint64_t n) { seen.insert(seen.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n); });
  EXPECT_EQ(next, static_cast<uint64_t>(nbytes));
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(nbytes));
  EXPECT_EQ(std::memcmp(seen.data(), src, seen.size()), 0);
  const auto got = dst.cpu().contiguous();
  ASSERT_EQ(got.nbytes(), static_cast<std::size_t>(nbytes));
  EXPECT_EQ(std::memcmp(got.data_ptr(), src, got.nbytes()), 0) << "chunk " << chunk << ", numel " << numel;
}

TEST(CopyStream, ToTheCpuIsAPlainCopy) {
  const auto x = torch::randint(0, 255, {4, 8, 8, 3}, torch::kByte);
  EXPECT_TRUE(torch::equal(to_device_beside_compute(x, torch::kCPU), x));
}

TEST(DeviceFiller, AHostTensorHoldsTheSourceBytesSeenOnceInOrder) {
  expect_filled(torch::kCPU, 1 << 20, 10007, torch::kFloat);
  expect_filled(torch::kCPU, 3, 0, torch::kBFloat16);
}

TEST(DeviceFiller, AWrongDeviceOrAStridedTensorIsRefused) {
  DeviceFiller via(torch::kCPU, 64);
  auto t = torch::zeros({4, 4}).t();
  EXPECT_THROW(via.fill(t, [](uint64_t, void*, uint64_t) {}), c10::Error);
  EXPECT_THROW(DeviceFiller(torch::kCPU, 0), c10::Error);
}

TEST(DeviceFillerCuda, ADeviceTensorHoldsTheSourceBytesForAnyChunkSize) {
  REQUIRE_CUDA();
  ASSERT_TRUE(tessera::torch_ops::copy_stream_available());
  auto busy = torch::randn({4096, 4096}, torch::kCUDA);  // the default stream busy while the copy stream fills
  for (int i = 0; i < 4; ++i) busy = torch::mm(busy, busy).div_(4096.0);
  // Chunks smaller than, equal to and larger than the tensor; a last chunk shorter than the others; odd sizes.
  for (const int64_t chunk : {int64_t{1} << 20, int64_t{4001}, int64_t{40028}, int64_t{1} << 26})
    expect_filled(torch::Device(torch::kCUDA, 0), chunk, 10007, torch::kFloat);
  expect_filled(torch::kCUDA, 1 << 16, 3 << 20, torch::kBFloat16);
  expect_filled(torch::kCUDA, 4096, 0, torch::kFloat);
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
