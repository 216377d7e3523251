#include "tessera/torch/cuda_memory.h"

#ifdef TESSERA_TORCH_CUDA
#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace tessera::torch_ops {

#ifdef TESSERA_TORCH_CUDA
namespace alloc = c10::cuda::CUDACachingAllocator;

bool cuda_memory_stats_available() { return true; }

void reset_peak_cuda_memory(int device) {
  // Before the device's first CUDA work there is no peak to reset; making its context here would also take that
  // fair part of a second off the thread where a command overlaps it with reading its weights.
  if (!at::detail::getCUDAHooks().hasPrimaryContext(device)) return;
  // The allocator sizes its per-device tables on first use: before any CUDA
  // tensor exists, resetPeakStats fails with "Invalid device argument".
  (void)at::empty({1}, at::TensorOptions().device(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device))));
  alloc::emptyCache();
  alloc::resetPeakStats(static_cast<c10::DeviceIndex>(device));
}

int64_t peak_cuda_memory_bytes(int device) {
  if (!at::detail::getCUDAHooks().hasPrimaryContext(device)) return 0;  // nothing ran there (and the tables are unsized)
  // Index 0 is StatType::AGGREGATE (all pools) in every LibTorch version; the
  // enum itself moved namespace in 2.5, the index did not.
  return alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device)).allocated_bytes[0].peak;
}
#else
bool cuda_memory_stats_available() { return false; }
void reset_peak_cuda_memory(int) {}
int64_t peak_cuda_memory_bytes(int) { return -1; }
#endif

}  // namespace tessera::torch_ops
