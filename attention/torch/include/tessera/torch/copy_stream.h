// Host-to-device copies on a side stream: a batch's copy runs while the batch before it computes, instead of
// between the two on the compute stream. Lives beside cuda_memory.h, where the build knows whether LibTorch has
// CUDA; without it, or for a source that is not page-locked, the copy is the plain one on the current stream.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace tessera::torch_ops {

// `host` on `device`. On CUDA with a pinned source: copied on the device's copy stream; the current stream waits
// for the copy before its next work, and the result's memory is kept from reuse until that stream is done with it.
at::Tensor to_device_beside_compute(const at::Tensor& host, const at::Device& device);

// Whether copies to CUDA devices take the side stream in this build.
bool copy_stream_available();

// Device memory filled from a reader of host bytes (a checkpoint's tensors): on CUDA, through two page-locked
// buffers on the device's copy stream, the next chunk read while the last one is copied; no pageable copy, and the
// file is never whole in host memory. Elsewhere (or without a CUDA build) the bytes are read into the tensor, or
// through a host buffer.
class DeviceFiller {
 public:
  // read(offset, dst, n): bytes [offset, offset + n) of the source into dst. seen(p, n): each chunk on the host, in order.
  using Read = std::function<void(uint64_t offset, void* dst, uint64_t n)>;
  using Seen = std::function<void(const void* p, uint64_t n)>;
  explicit DeviceFiller(const at::Device& device, int64_t chunk_bytes = int64_t{32} << 20);
  ~DeviceFiller();
  DeviceFiller(const DeviceFiller&) = delete;
  DeviceFiller& operator=(const DeviceFiller&) = delete;
  const at::Device& device() const { return device_; }
  // Fills `dst` (contiguous, on device(), dst.nbytes() bytes) from read(0 .. nbytes); returns once it holds them.
  void fill(const at::Tensor& dst, const Read& read, const Seen& seen = {});

 private:
  struct Buffers;
  at::Device device_;
  int64_t chunk_;
  std::unique_ptr<Buffers> buffers_;  // made at the first fill that needs them
};

}  // namespace tessera::torch_ops
