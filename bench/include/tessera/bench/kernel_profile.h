// Where a forward's GPU time goes: LibTorch's profiler (Kineto) around a few
// runs, the device kernels summed by name, printed as a Markdown table.
#pragma once

#include <c10/core/Device.h>

#include <functional>

namespace tessera::bench {

// Runs `fn` `reps` times under the profiler and prints the `top` kernels by GPU time per run.
void print_kernel_profile(const std::function<void()>& fn, int reps, const c10::Device& device, int top = 25);

}  // namespace tessera::bench
