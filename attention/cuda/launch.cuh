// Kernel launches per (element type, head-dim bucket); explicit
// instantiations live in inst_*.cu so the builds run in parallel.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernel_args.cuh"

namespace tessera::attention::cuda {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("tessera attention CUDA: ") + what + ": " + cudaGetErrorString(e));
}

// Whether environment variable NAME is set to VALUE: the A / B switches (TESSERA_CUDA_...=0 turns a
// measured choice off); callers read it once, into a static.
inline bool env_is(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e && std::strcmp(e, value) == 0;
}

// Dispatch rules of the portable fp16 / bf16 kernels (host-only; tests/gpu/dispatch_rules_test.cu).
// Which MODS variant a call takes: kModsBias when its only modifiers are bias terms that are
// all packed, 16-bit, and (backward) have their dBias accumulated packed too.
inline int mods_kind(const KArgs& a, bool bwd) {
  const AttentionParams& p = a.p;
  if (p.num_bias == 0 && p.alibi_slopes == nullptr && !a.dropout) return kModsNone;
  if (p.alibi_slopes != nullptr || a.dropout) return kModsAll;
  for (int t = 0; t < p.num_bias; ++t) {
    if (!a.pk[t].ptr || p.bias[t].dtype == DType::f32) return kModsAll;
    if (bwd && a.any_bias_grad && p.bias[t].grad && !a.pk[t].grad) return kModsAll;
  }
  return kModsBias;
}

// Whether the backward may take bwd_kernel's LEAN variant (bwd_kernel.cuh): a dense, non-causal,
// unwindowed call with aligned rows, head dims equal to the bucket D, the fp32 dQ accumulator with
// 16-byte rows and the row statistics. Only the d16 / d32 buckets have it (short-window models).
template <int D>
bool bwd_lean_ok(const KArgs& a) {
  const AttentionParams& p = a.p;
  return D <= 32 && !p.cu_seqlens_q && !p.causal && p.window_left < 0 && p.window_right < 0 && a.vec_ok &&
         p.head_dim == D && p.head_dim_v == D && a.dq_accum != nullptr && a.dq_accum_d % 4 == 0 &&
         reinterpret_cast<uintptr_t>(a.dq_accum) % 16 == 0 && a.row_stats != nullptr;
}

// Whether the backward takes bwd_kernel's WIN variant (one CTA per sequence and head, dQ accumulated
// in shared memory, lse / D computed in the kernel): LEAN's conditions at d16 / d32 without the dQ
// accumulator and row statistics (WIN goes without them, and without the passes that fill them),
// staged bias terms (kModsBias: the Swin windows), equal head counts, the non-deterministic mode,
// and at most win_max_rows query rows (dQ beside the tiles leaves two CTAs per SM: win_smem of
// BwdWinCfg, checked where it launches). TESSERA_CUDA_WIN=0 turns it off (A / B timing through the
// op). Host-only.
inline constexpr int win_max_rows(int head_dim) { return head_dim == 16 ? 448 : head_dim == 32 ? 416 : 0; }
inline bool bwd_win_ok(const KArgs& a) {
  static const bool enabled = !env_is("TESSERA_CUDA_WIN", "0");
  const AttentionParams& p = a.p;
  return enabled && p.dtype != DType::f32 && !p.deterministic && (p.head_dim == 16 || p.head_dim == 32) &&
         p.head_dim_v == p.head_dim && !p.cu_seqlens_q && !p.causal && p.window_left < 0 && p.window_right < 0 &&
         a.vec_ok && p.heads_q == p.heads_kv && p.seqlen_q > 0 && p.seqlen_q <= win_max_rows(p.head_dim) &&
         p.seqlen_k > 0 &&
         mods_kind(a, true) == kModsBias;
}

// Forward kernel (O, LSE).
template <typename T, int D> void launch_fwd(const KArgs& a, cudaStream_t st);
// Hopper forward (inst_sm90.cu; D = 64 or 128, no bias / ALiBi / dropout, vec_ok).
template <typename T, int D> void launch_fwd_sm90(const KArgs& a, cudaStream_t st);
// Whether the Hopper forward at head-dim bucket d takes its persistent configuration (inst_sm90.cu):
// d128 fixed-length calls without window masks (causal: as many queries as keys), rows of at most 4096 keys;
// TESSERA_CUDA_FWD90=persist / plain or set_sm90_forward forces it on (where the call allows; d64 only so)
// or off.
bool sm90_fwd_persistent(int d, const AttentionParams& p);
// The Hopper backward kernel at head-dim bucket d (64 or 128; inst_sm90_bwd.cu): one warpgroup per 64
// keys on short rows (d64 up to 208 keys, causal up to 512) with a dQ accumulator; otherwise two consumer
// warpgroups and a producer per 128 keys (ws) at d128, the pair of warpgroups per 128 keys at d64 and
// without an accumulator, one CTA per tile (pair) or one per SM walking tiles (persist, forced only);
// TESSERA_CUDA_BWD90=wg / pair / persist / ws forces one where there is an accumulator.
enum class Bwd90 { none, pair, one_wg, persist, ws };
Bwd90 sm90_bwd_kernel(int d, int seqlen_k, bool causal, bool dq_accum);
// Backward main pass (dK, dV; dQ into a.dq_accum when set; dBias atomics when a.any_bias_grad).
// Hopper backward (inst_sm90_bwd.cu; D = 64 or 128, no bias / ALiBi / dropout, vec_ok).
template <typename T, int D> void launch_bwd_sm90(const KArgs& a, cudaStream_t st);
template <typename T, int D> void launch_bwd(const KArgs& a, cudaStream_t st);
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

// Exact float32 path (inst_f32.cu): forward, key-side backward (dK, dV, dBias
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
