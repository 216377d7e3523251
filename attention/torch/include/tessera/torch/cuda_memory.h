// Peak GPU memory as LibTorch's CUDA caching allocator counts it (what
// torch.cuda.max_memory_allocated reports): tensors only, not the allocator's
// cache or the CUDA context. Needs a CUDA build of LibTorch; elsewhere the
// functions say so instead of failing. Lives here, with the op, because this
// library is where the build decides whether LibTorch has CUDA (c10_cuda):
// the benchmarks and the CLI's --json summaries both read it.
#pragma once

#include <cstdint>

namespace tessera::torch_ops {

// Whether this build can read the allocator's statistics.
bool cuda_memory_stats_available();

// Hands cached blocks back to the driver and restarts the peak count, so the
// next case's peak is its own. Before any CUDA work on `device` it does nothing
// (in particular, it does not make the device's context).
void reset_peak_cuda_memory(int device = 0);

// Peak bytes allocated on `device` since the last reset (0 before any CUDA work
// there); -1 when unavailable.
int64_t peak_cuda_memory_bytes(int device = 0);

}  // namespace tessera::torch_ops
