// Kernel launches per (element type, head-dim bucket); explicit
// instantiations live in instantiations/ (generated) and launch_*.cu so the builds run in parallel.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "dispatch.h"
#include "kernel_args.cuh"

namespace tessera::attention::cuda {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("tessera attention CUDA: ") + what + ": " + cudaGetErrorString(e));
}

// The choice (dispatch.cu) as far as the launchers and tests ask it, on launch arguments.
Choice choose(const KArgs& a, Pass pass, const Overrides& ov, int arch, std::vector<std::string>* why);
int bucket_of(int head_dim);
// Which MODS variant a call takes: kModsBias when its only modifiers are bias terms that are
// all packed, 16-bit, and (backward) have their dBias accumulated packed too.
int mods_kind(const KArgs& a, bool bwd);
// Whether the backward at bucket D (16 or 32) may take bwd_kernel's LEAN variant: a dense, non-causal,
// unwindowed call with aligned rows, head dims equal to D, the fp32 dQ accumulator and the row statistics.
bool bwd_lean_ok(const KArgs& a, int D);
// Whether the backward takes bwd_kernel's WIN variant (one CTA per sequence and head, dQ in shared memory,
// lse / D computed in the kernel): d16 / d32, staged bias terms, equal heads, the non-deterministic mode,
// at most win_max_rows query rows.
bool bwd_win_ok(const KArgs& a, const Overrides& ov);
// dQ through an fp32 atomic accumulator (non-deterministic fp16 / bf16); otherwise the query-side kernel.
bool uses_dq_accum(const AttentionParams& p);
bool uses_row_stats(const AttentionParams& p);
// The deterministic mode's broadcast bias terms take the query-side dBias pass.
bool needs_det_dbias(const AttentionParams& p, int t);
// Calls the persistent Hopper forward takes (its launcher checks too).
bool fwd90_persistable(const AttentionParams& p);

// Launch arguments (cuda_backend.cu): from the params and overrides; plan_args adds what the
// launch would set from its workspace (packed terms, the dQ accumulator, row statistics, WIN)
// as placeholders, so that a choice can be made from the params alone.
KArgs make_args(const AttentionParams& p, bool bwd, const Overrides& ov);
KArgs plan_args(const AttentionParams& p, bool bwd, const Overrides& ov);

// Forward kernel (O, LSE).
template <typename T, int D> void launch_fwd(const KArgs& a, const Choice& c, cudaStream_t st);
// Hopper forward (launch_sm90_fwd.cu; D = 64 or 128): the sm90_forward* kernel c names.
template <typename T, int D> void launch_fwd_sm90(const KArgs& a, const Choice& c, cudaStream_t st);
// Backward main pass (dK, dV; dQ into a.dq_accum when set; dBias atomics when a.any_bias_grad).
// Hopper backward (launch_sm90_bwd.cu; D = 64 or 128): the sm90_backward* kernel c names.
template <typename T, int D> void launch_bwd_sm90(const KArgs& a, const Choice& c, cudaStream_t st);
template <typename T, int D> void launch_bwd(const KArgs& a, const Choice& c, cudaStream_t st);
// Deterministic dQ (written directly in the element type).
template <typename T, int D> void launch_dq(const KArgs& a, cudaStream_t st);
// Deterministic dBias of term t; `partial` is workspace for dbias_plan(p, t).splits > 1.
template <typename T, int D> void launch_dbias(const KArgs& a, int t, float* partial, cudaStream_t st);

// How the deterministic dBias of term t is split (pure function of the params,
// so backward_workspace_bytes can size the partial sums).
struct DbiasPlan {
  int splits, EB, EH, rows, grid_x;
  size_t partial_floats;  // 0 when splits == 1
};
DbiasPlan dbias_plan(const AttentionParams& p, int t);

// Exact float32 path (launch_f32.cu): forward, key-side backward (dK, dV, dBias
// atomics), query-side dQ (always deterministic), deterministic dBias of term t.
enum class F32Pass { fwd, bwd, dq };
void launch_f32(const KArgs& a, cudaStream_t st, F32Pass pass);
void launch_f32_dbias(const KArgs& a, int t, float* partial, cudaStream_t st);
constexpr int kF32Rows = 32;  // query rows per CTA of the f32 kernels (F32::TILE)

// Bias terms in fragment order (bias_pack.cu): whether term t of the fp16 / bf16 kernels is
// packed, the bytes of its packed copy and of its packed fp32 dBias, the pack launch
// (trans: the backward's [key][query] tiles) and the copy of packed dBias into p.bias[t].grad.
bool bias_packable(const AttentionParams& p, int t);
size_t packed_bias_bytes(const AttentionParams& p, int t);
size_t packed_grad_bytes(const AttentionParams& p, int t);
PackedBias pack_bias(const AttentionParams& p, int t, bool trans, void* dst, cudaStream_t st);
// The PackedBias of a copy pack_bias made earlier with the same params (no launch).
PackedBias packed_geometry(const AttentionParams& p, int t, bool trans, const void* src);
void unpack_dbias(const AttentionParams& p, int t, const float* packed, cudaStream_t st);

}  // namespace tessera::attention::cuda
