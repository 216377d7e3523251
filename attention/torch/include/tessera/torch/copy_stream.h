// Host-to-device copies on a side stream: a batch's copy runs while the batch before it computes, instead of
// between the two on the compute stream. Lives beside cuda_memory.h, where the build knows whether LibTorch has
// CUDA; without it, or for a source that is not page-locked, the copy is the plain one on the current stream.
#pragma once

#include <ATen/ATen.h>

namespace tessera::torch_ops {

// `host` on `device`. On CUDA with a pinned source: copied on the device's copy stream; the current stream waits
// for the copy before its next work, and the result's memory is kept from reuse until that stream is done with it.
at::Tensor to_device_beside_compute(const at::Tensor& host, const at::Device& device);

// Whether copies to CUDA devices take the side stream in this build.
bool copy_stream_available();

}  // namespace tessera::torch_ops
