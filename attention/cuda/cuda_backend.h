// Entry points of the CUDA backend, called by src/attention.cpp after
// validate(). Plain C++: no CUDA types leak out of attention/cuda/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/attention/params.h"

namespace tessera::attention::cuda {

void forward(const AttentionParams& p);
void backward(const AttentionParams& p);
size_t forward_workspace_bytes(const AttentionParams& p);
size_t backward_workspace_bytes(const AttentionParams& p);
// A bias term in a pass's fragment order, for BiasTerm::packed (attention.h pack_bias_term).
size_t packed_term_bytes(const AttentionParams& p, int t, bool backward);
void pack_term(const AttentionParams& p, int t, bool backward, void* dst);
bool available();
// The kernel family a forward call with these params takes on the current
// device: "sm90_wgmma" (Hopper path; "sm90_wgmma_persistent" for its persistent
// configurations),
// "portable_mma" (sm_80+ mma.sync) or "f32_simt" (exact float32). Benchmarks
// and logs print it.
const char* forward_kernel(const AttentionParams& p);
// The same for the backward's main pass (dK, dV and the atomic dQ): on Hopper
// "sm90_wgmma_ws" (long rows: a producer warpgroup and two consumers per 128-key
// tile), "sm90_wgmma" (d64 causal rows of 513..1024 keys and the deterministic
// mode: two warpgroups per tile), "sm90_wgmma_1wg" (short rows) or
// "sm90_wgmma_persistent" (forced only); the deterministic dQ pass is always the
// portable query-side kernel.
const char* backward_kernel(const AttentionParams& p);
// Forces a Hopper backward kernel where calls have a dQ accumulator, as
// TESSERA_CUDA_BWD90 does: "pair", "wg", "persist" or "ws"; nullptr goes back to the
// default (and the environment's choice); another name throws std::invalid_argument.
// For tests: one process covers each.
void set_sm90_backward(const char* kernel);
// Forces the Hopper forward's persistent kernel ("persist": d128 and, only so, d64, where the call allows)
// or its one-CTA-per-tile kernel ("plain"), as TESSERA_CUDA_FWD90 does; nullptr goes back to the default
// (and the environment's choice); another name throws std::invalid_argument. For tests.
void set_sm90_forward(const char* kernel);
// Forces the portable kernels even where the Hopper path applies (tests of
// the fallback, A/B benchmarks). Also set by TESSERA_CUDA_PORTABLE=1.
void set_force_portable(bool on);
// How many backward calls of this process took the portable kernel's WIN variant (one CTA per
// sequence and head: short windows at d16 / d32 with packed bias; bwd_win_ok). For tests and benchmarks.
uint64_t backward_win_calls();
std::string device_name(int device);

}  // namespace tessera::attention::cuda
