#include "tessera/torch/copy_stream.h"

#ifdef TESSERA_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <mutex>
#endif

namespace tessera::torch_ops {

#ifdef TESSERA_TORCH_CUDA
namespace {

// One copy stream per device for the process: copies to a device stay in order among themselves.
c10::cuda::CUDAStream copy_stream(c10::DeviceIndex device) {
  static std::mutex mu;
  static std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = streams.find(device);
  if (it == streams.end()) it = streams.emplace(device, c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device)).first;
  return it->second;
}

}  // namespace

bool copy_stream_available() { return true; }

at::Tensor to_device_beside_compute(const at::Tensor& host, const at::Device& device) {
  if (!device.is_cuda() || !host.is_cpu() || !host.is_pinned()) return host.to(device, /*non_blocking=*/true);
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  const c10::cuda::CUDAGuard on_device(index);
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(index);
  const c10::cuda::CUDAStream copy = copy_stream(index);
  at::Tensor out;
  {
    const c10::cuda::CUDAStreamGuard on_copy(copy);
    out = host.to(at::Device(at::kCUDA, index), /*non_blocking=*/true);  // the pinned block's reuse waits for this stream
  }
  at::cuda::CUDAEvent copied;
  copied.record(copy);
  copied.block(compute);
  // Allocated for the copy stream: without this, its memory could be handed out again while `compute` still reads it.
  c10::cuda::CUDACachingAllocator::recordStream(out.storage().data_ptr(), compute);
  return out;
}
#else
bool copy_stream_available() { return false; }

at::Tensor to_device_beside_compute(const at::Tensor& host, const at::Device& device) {
  return host.to(device, /*non_blocking=*/true);
}
#endif

}  // namespace tessera::torch_ops
