// Entry points of the CUDA backend, called by src/attention.cpp after
// validate(). Plain C++: no CUDA types leak out of attention/cuda/.
#pragma once

#include <cstddef>
#include <string>

#include "dispatch.h"
#include "tessera/attention/params.h"

namespace tessera::attention::cuda {

// ov: kernel choices forced by tests and benchmarks (dispatch.h); the library passes none.
void forward(const AttentionParams& p, const Overrides& ov = {});
void backward(const AttentionParams& p, const Overrides& ov = {});
size_t forward_workspace_bytes(const AttentionParams& p);
size_t backward_workspace_bytes(const AttentionParams& p, const Overrides& ov = {});
// A bias term in a pass's fragment order, for BiasTerm::packed (attention.h pack_bias_term).
size_t packed_term_bytes(const AttentionParams& p, int t, bool backward);
void pack_term(const AttentionParams& p, int t, bool backward, void* dst);
bool available();
// The kernel family a forward call takes on the current device, as benchmarks and logs print it:
// "sm90_wgmma" (Hopper; "sm90_wgmma_persistent" for its persistent configuration), "portable_mma"
// (sm_80+ mma.sync) or "f32_simt" (exact float32); explain() (dispatch.h) has the kernel and why.
const char* forward_kernel(const AttentionParams& p, const Overrides& ov = {});
// The same for the backward's main pass: "sm90_wgmma_ws", "sm90_wgmma" (the pair),
// "sm90_wgmma_1wg", "portable_mma" or "f32_simt".
const char* backward_kernel(const AttentionParams& p, const Overrides& ov = {});
std::string device_name(int device);

}  // namespace tessera::attention::cuda
