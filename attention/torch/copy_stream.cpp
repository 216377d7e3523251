#include "tessera/torch/copy_stream.h"

#include <algorithm>
#include <array>
#include <optional>

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

namespace {

// The staged copies of DeviceFiller::fill on CUDA: buffer k is refilled once its last copy has left it.
void fill_cuda(const at::Tensor& bytes, std::array<at::Tensor, 2>& host, std::array<std::optional<at::cuda::CUDAEvent>, 2>& copied,
               const DeviceFiller::Read& read, const DeviceFiller::Seen& seen) {
  const c10::DeviceIndex index = bytes.device().index();
  const c10::cuda::CUDAGuard on_device(index);
  const c10::cuda::CUDAStream copy = copy_stream(index);
  const auto n = static_cast<uint64_t>(bytes.numel()), chunk = static_cast<uint64_t>(host[0].numel());
  int k = 0;
  for (uint64_t at_byte = 0; at_byte < n; at_byte += chunk, k ^= 1) {
    const auto len = std::min(chunk, n - at_byte);
    if (copied[k]) copied[k]->synchronize();
    read(at_byte, host[k].data_ptr(), len);
    if (seen) seen(host[k].data_ptr(), len);
    {
      const c10::cuda::CUDAStreamGuard on_copy(copy);
      bytes.narrow(0, static_cast<int64_t>(at_byte), static_cast<int64_t>(len))
          .copy_(host[k].narrow(0, 0, static_cast<int64_t>(len)), /*non_blocking=*/true);
    }
    copied[k].emplace();
    copied[k]->record(copy);
  }
  for (auto& e : copied)
    if (e) e->synchronize();
}

}  // namespace
#else
bool copy_stream_available() { return false; }

at::Tensor to_device_beside_compute(const at::Tensor& host, const at::Device& device) {
  return host.to(device, /*non_blocking=*/true);
}
#endif

// Page-locked on CUDA (with the event of the copy last made from each), plain elsewhere.
struct DeviceFiller::Buffers {
  std::array<at::Tensor, 2> host;
#ifdef TESSERA_TORCH_CUDA
  std::array<std::optional<at::cuda::CUDAEvent>, 2> copied;
#endif
};

DeviceFiller::DeviceFiller(const at::Device& device, int64_t chunk_bytes) : device_(device), chunk_(chunk_bytes) {
  TORCH_CHECK(chunk_bytes > 0, "DeviceFiller: chunk_bytes must be positive");
}

DeviceFiller::~DeviceFiller() {
#ifdef TESSERA_TORCH_CUDA
  if (buffers_)
    for (auto& e : buffers_->copied)
      if (e) e->synchronize();  // a copy may still read the page-locked memory freed with the buffers
#endif
}

void DeviceFiller::fill(const at::Tensor& dst, const Read& read, const Seen& seen) {
  TORCH_CHECK(dst.device().type() == device_.type() && (!device_.has_index() || dst.device().index() == device_.index()) &&
                  dst.is_contiguous(),
              "DeviceFiller: the tensor must be contiguous on ", device_, ", not ", dst.device());
  const auto n = static_cast<uint64_t>(dst.nbytes());
  if (n == 0) return;
  if (dst.is_cpu()) {
    read(0, dst.data_ptr(), n);
    if (seen) seen(dst.data_ptr(), n);
    return;
  }
  const bool pinned = dst.is_cuda() && copy_stream_available();
  if (!buffers_) {
    buffers_ = std::make_unique<Buffers>();
    for (auto& b : buffers_->host) b = at::empty({chunk_}, at::TensorOptions().dtype(at::kByte).pinned_memory(pinned));
  }
  const at::Tensor bytes = at::from_blob(dst.data_ptr(), {static_cast<int64_t>(n)}, dst.options().dtype(at::kByte));
#ifdef TESSERA_TORCH_CUDA
  if (pinned) return fill_cuda(bytes, buffers_->host, buffers_->copied, read, seen);
#endif
  const at::Tensor& buf = buffers_->host[0];
  for (uint64_t at_byte = 0; at_byte < n; at_byte += static_cast<uint64_t>(chunk_)) {
    const auto len = std::min(static_cast<uint64_t>(chunk_), n - at_byte);
    read(at_byte, buf.data_ptr(), len);
    if (seen) seen(buf.data_ptr(), len);
    bytes.narrow(0, static_cast<int64_t>(at_byte), static_cast<int64_t>(len)).copy_(buf.narrow(0, 0, static_cast<int64_t>(len)));
  }
}

}  // namespace tessera::torch_ops
