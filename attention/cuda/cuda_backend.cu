// Host side of the CUDA backend: checks what the kernels assume, carves the
// workspace, picks the head-dim bucket and element type, and launches on
// p.stream. Validation of sizes and options is done before this by validate().
#include "cuda_backend.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "launch.cuh"
#include "primitives/mma.cuh"
#include "score_mod.cuh"
#include "tessera/attention/layout.h"

namespace tessera::attention::cuda {
namespace {

bool al16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }
bool st8(int64_t s) { return s % 8 == 0; }

bool vec_ok(const AttentionParams& p, bool bwd) {
  if (p.head_dim % 8 || p.head_dim_v % 8) return false;
  bool ok = al16(p.q) && al16(p.k) && al16(p.v) && al16(p.o);
  ok = ok && st8(p.q_batch_stride) && st8(p.q_row_stride) && st8(p.q_head_stride);
  ok = ok && st8(p.k_batch_stride) && st8(p.k_row_stride) && st8(p.k_head_stride);
  ok = ok && st8(p.v_batch_stride) && st8(p.v_row_stride) && st8(p.v_head_stride);
  ok = ok && st8(p.o_batch_stride) && st8(p.o_row_stride) && st8(p.o_head_stride);
  if (bwd) {
    ok = ok && al16(p.dout) && al16(p.dq) && al16(p.dk) && al16(p.dv);
    ok = ok && st8(p.do_batch_stride) && st8(p.do_row_stride) && st8(p.do_head_stride);
    ok = ok && st8(p.dq_batch_stride) && st8(p.dq_row_stride) && st8(p.dq_head_stride);
    ok = ok && st8(p.dk_batch_stride) && st8(p.dk_row_stride) && st8(p.dk_head_stride);
    ok = ok && st8(p.dv_batch_stride) && st8(p.dv_row_stride) && st8(p.dv_head_stride);
  }
  return ok;
}

}  // namespace

KArgs make_args(const AttentionParams& p, bool bwd, const Overrides& ov) {
  KArgs a{};
  a.p = p;
  a.scale_log2 = p.scale * 1.4426950408889634f;
  a.dropout = p.dropout_p > 0.f;
  a.keep_scale = a.dropout ? 1.f / (1.f - p.dropout_p) : 1.f;
  a.drop_threshold = dropout_threshold(p.dropout_p);
  a.vec_ok = vec_ok(p, bwd);
  a.dq_accum = nullptr;
  a.dvec = nullptr;
  a.row_stats = nullptr;
  a.stat_plane = 0;
  a.dq_accum_d = p.head_dim;
  a.dkv_accum = nullptr;
  a.head_splits = 1;
  a.any_bias_grad = false;
  a.win = false;
  a.bias_mma = ov.bias_mma;
  a.qsplit = ov.qsplit;
  a.causal_chunk = ov.causal_chunk;
  a.fwd_half_last = ov.fwd_half_last;
  a.fwd_lazy_rescale = ov.fwd_lazy_rescale;
  a.bwd_rotate = ov.bwd_rotate;
  a.group = FastDiv::make(static_cast<uint32_t>(p.heads_q / std::max(1, p.heads_kv)));
  return a;
}

namespace {

int64_t rows_q(const AttentionParams& p) {
  return p.cu_seqlens_q ? p.total_q : static_cast<int64_t>(p.batch) * p.seqlen_q;
}

size_t align256(size_t x) { return (x + 255) & ~size_t(255); }

template <typename T, int D>
void launch_bucket(const KArgs& a, const Choice& c, Pass pass, int t, cudaStream_t st) {
  switch (pass) {
    case Pass::forward:
      if constexpr (D == 64 || D == 128 || D == 256) {
        if (c.kernel != Kernel::portable) return launch_fwd_sm90<T, D>(a, c, st);
      }
      return launch_fwd<T, D>(a, c, st);
    case Pass::backward:
      if constexpr (D == 64 || D == 128) {
        if (c.kernel != Kernel::portable && c.kernel != Kernel::portable_lean) return launch_bwd_sm90<T, D>(a, c, st);
      }
      return launch_bwd<T, D>(a, c, st);
    case Pass::dq: return launch_dq<T, D>(a, st);
    case Pass::dbias: return launch_dbias<T, D>(a, t, a.dbias_partial, st);
  }
}

template <typename T>
void launch_t(const KArgs& a, const Choice& c, Pass pass, int t, cudaStream_t st) {
  switch (c.bucket) {
    case 16: return launch_bucket<T, 16>(a, c, pass, t, st);
    case 32: return launch_bucket<T, 32>(a, c, pass, t, st);
    case 64: return launch_bucket<T, 64>(a, c, pass, t, st);
    case 128: return launch_bucket<T, 128>(a, c, pass, t, st);
    default: return launch_bucket<T, 256>(a, c, pass, t, st);
  }
}

// float32 takes the exact SIMT kernels (launch_f32.cu); its dQ pass is always the query-side one.
void launch_f32_pass(const KArgs& a, Pass pass, int t, cudaStream_t st) {
  switch (pass) {
    case Pass::forward: return launch_f32(a, st, F32Pass::fwd);
    case Pass::backward: return launch_f32(a, st, F32Pass::bwd);
    case Pass::dq: return launch_f32(a, st, F32Pass::dq);
    case Pass::dbias: return launch_f32_dbias(a, t, a.dbias_partial, st);
  }
}

// Launches pass `pass` with the kernel dispatch.cu chooses for these launch arguments.
void launch(const KArgs& a, const Overrides& ov, Pass pass, cudaStream_t st, int t = 0) {
  const Choice c = choose(a, pass, ov, 0, nullptr);
  if (c.kernel == Kernel::none) return;
  if (a.p.dtype == DType::bf16) launch_t<__nv_bfloat16>(a, c, pass, t, st);
  else if (a.p.dtype == DType::f16) launch_t<__half>(a, c, pass, t, st);
  else launch_f32_pass(a, pass, t, st);
}

// D = rowsum(dO * O) - dlse of row i (dot = rowsum(dO * O)), and the Hopper backward's
// padded copy of it and of lse in log2 units (an empty row's -inf becomes +inf: P = 0).
__device__ __forceinline__ void write_row_stats(const KArgs& a, int b, int h, int64_t q0, int i, float dot) {
  const AttentionParams& p = a.p;
  const int64_t li = lse_index(p, b, h, q0, i);
  const float d = dot - (p.dlse ? p.dlse[li] : 0.f);
  a.dvec[li] = d;
  if (a.row_stats) {
    const int64_t si = stat_idx(p, b, h, q0, i);
    const float l = p.lse[li];
    a.row_stats[si] = lse_log2(l);
    a.row_stats[a.stat_plane + si] = d;
  }
}

// D = rowsum(dO * O) - dlse, one warp per row.
template <typename T>
__global__ void bwd_preprocess(const __grid_constant__ KArgs a) {
  const AttentionParams& p = a.p;
  const int b = blockIdx.z, h = blockIdx.y;
  const int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
  const SeqSpan sq = seq_span(p, b);
  if (i >= sq.nq) return;
  const T* o = static_cast<const T*>(p.o) + row_offset(p, b, sq.q0, i, h, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
  const T* d = static_cast<const T*>(p.dout) + row_offset(p, b, sq.q0, i, h, p.do_batch_stride, p.do_row_stride, p.do_head_stride);
  float acc = 0.f;
  for (int c = lane; c < p.head_dim_v; c += 32) acc += Elem<T>::to_float(o[c]) * Elem<T>::to_float(d[c]);
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
  if (lane == 0) write_row_stats(a, b, h, sq.q0, i, acc);
}

// dq (element type) = dq_accum (fp32, already scaled).
template <typename T>
__global__ void dq_convert(const __grid_constant__ KArgs a) {
  const AttentionParams& p = a.p;
  const int b = blockIdx.z, h = blockIdx.y;
  const int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
  const SeqSpan sq = seq_span(p, b);
  if (i >= sq.nq) return;
  const int64_t row = flat_row0(p, b, sq.q0) + i;
  const float* src = a.dq_accum + (row * p.heads_q + h) * a.dq_accum_d;
  T* dst = static_cast<T*>(p.dq) + row_offset(p, b, sq.q0, i, h, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride);
  for (int c = lane; c < p.head_dim; c += 32) dst[c] = Elem<T>::from_float(src[c]);
}

// dK and dV (element type) from the fp32 accumulators the Hopper backward's head splits added into (dK already
// scaled): one warp per key row and kv head.
template <typename T>
__global__ void dkv_convert(const __grid_constant__ KArgs a) {
  const AttentionParams& p = a.p;
  const int b = blockIdx.z, h = blockIdx.y;
  const int j = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
  const SeqSpan sq = seq_span(p, b);
  if (j >= sq.nk) return;
  const int64_t row = (flat_key_row0(p, b, sq.k0) + j) * p.heads_kv + h;
  const float* sk = a.dkv_accum + row * p.head_dim;
  const float* sv = a.dkv_accum + flat_key_rows(p) * p.heads_kv * p.head_dim + row * p.head_dim_v;
  T* dk = static_cast<T*>(p.dk) + row_offset(p, b, sq.k0, j, h, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride);
  T* dv = static_cast<T*>(p.dv) + row_offset(p, b, sq.k0, j, h, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride);
  for (int c = lane; c < p.head_dim; c += 32) dk[c] = Elem<T>::from_float(sk[c]);
  for (int c = lane; c < p.head_dim_v; c += 32) dv[c] = Elem<T>::from_float(sv[c]);
}

void dkv_convert_any(const KArgs& a, cudaStream_t st) {
  const AttentionParams& p = a.p;
  constexpr int kRows = 8;
  const dim3 grid((p.seqlen_k + kRows - 1) / kRows, p.heads_kv, p.batch);
  if (p.dtype == DType::bf16) dkv_convert<__nv_bfloat16><<<grid, kRows * 32, 0, st>>>(a);
  else if (p.dtype == DType::f16) dkv_convert<__half><<<grid, kRows * 32, 0, st>>>(a);
  else throw std::logic_error("tessera attention CUDA: dK / dV accumulators of a float32 backward");
  check_cuda(cudaGetLastError(), "dK / dV convert launch");
}

// The same two passes with 16-byte vectors (fp16/bf16, vec_ok): L lanes per row, 8 elements
// each (L = 2 at d16, 4 at d32, 8 at d64, 16 at d128), so a warp moves whole 128-byte lines
// instead of one 2-byte element per lane; these passes are memory-bound and matter at short
// sequences (Swin's d16 windows: with 8 lanes per row, 3 of 4 were idle).
// With a dQ accumulator the preprocess also zeroes the row's accumulator (L then covers
// max(head_dim, head_dim_v)): one pass over the rows instead of a memset beside it, as cuDNN's
// dot(dO, O) kernel does (preprocess_zeroes_dq).
template <typename T, int L>
__global__ void __launch_bounds__(256) bwd_preprocess_vec(const __grid_constant__ KArgs a) {
  const AttentionParams& p = a.p;
  const int b = blockIdx.z, h = blockIdx.y;
  const int i = blockIdx.x * (256 / L) + threadIdx.x / L, c = (threadIdx.x % L) * 8;
  const SeqSpan sq = seq_span(p, b);
  if (a.dq_accum && i < sq.nq && c < a.dq_accum_d) {
    const int64_t row = flat_row0(p, b, sq.q0) + i;
    float4* dst = reinterpret_cast<float4*>(a.dq_accum + (row * p.heads_q + h) * a.dq_accum_d + c);
    dst[0] = dst[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float acc = 0.f;
  if (i < sq.nq && c < p.head_dim_v) {
    const T* o = static_cast<const T*>(p.o) + row_offset(p, b, sq.q0, i, h, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
    const T* d = static_cast<const T*>(p.dout) + row_offset(p, b, sq.q0, i, h, p.do_batch_stride, p.do_row_stride, p.do_head_stride);
    const uint4 ov = *reinterpret_cast<const uint4*>(o + c), dv = *reinterpret_cast<const uint4*>(d + c);
    acc = dot8<T>(ov, dv);
  }
#pragma unroll
  for (int s = L / 2; s > 0; s >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
  if (i < sq.nq && c == 0) write_row_stats(a, b, h, sq.q0, i, acc);
}

template <typename T, int L>
__global__ void __launch_bounds__(256) dq_convert_vec(const __grid_constant__ KArgs a) {
  const AttentionParams& p = a.p;
  const int b = blockIdx.z, h = blockIdx.y;
  const int i = blockIdx.x * (256 / L) + threadIdx.x / L, c = (threadIdx.x % L) * 8;
  const SeqSpan sq = seq_span(p, b);
  if (i >= sq.nq || c >= p.head_dim) return;
  const int64_t row = flat_row0(p, b, sq.q0) + i;
  const float4* src = reinterpret_cast<const float4*>(a.dq_accum + (row * p.heads_q + h) * a.dq_accum_d + c);
  const float4 x = src[0], y = src[1];
  T* dst = static_cast<T*>(p.dq) + row_offset(p, b, sq.q0, i, h, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride);
  *reinterpret_cast<uint4*>(dst + c) = pack8<T>(x, y);
}

template <typename T, int L>
void rowwise_vec(const KArgs& a, cudaStream_t st, bool convert) {
  const AttentionParams& p = a.p;
  constexpr int kRows = 256 / L;
  dim3 grid((p.seqlen_q + kRows - 1) / kRows, p.heads_q, p.batch);
  if (convert) dq_convert_vec<T, L><<<grid, 256, 0, st>>>(a);
  else bwd_preprocess_vec<T, L><<<grid, 256, 0, st>>>(a);
}

// Whether the preprocess pass zeroes the dQ accumulator itself (bwd_preprocess_vec): 16-bit types
// with every row 16-byte aligned and both head dims whole 8-element chunks; otherwise a memset does.
bool preprocess_zeroes_dq(const KArgs& a) {
  const AttentionParams& p = a.p;
  return a.dq_accum && p.dtype != DType::f32 && a.vec_ok && p.head_dim_v % 8 == 0 && a.dq_accum_d % 8 == 0 &&
         std::max(p.head_dim_v, a.dq_accum_d) <= 256;
}

template <typename T>
void rowwise(const KArgs& a, cudaStream_t st, bool convert) {
  const AttentionParams& p = a.p;
  const bool zero_dq = !convert && preprocess_zeroes_dq(a);
  const int d = convert ? p.head_dim : zero_dq ? std::max(p.head_dim_v, a.dq_accum_d) : p.head_dim_v;
  bool vec = false;
  if constexpr (!std::is_same_v<T, float>) {
    // (the preprocess with a dQ accumulator is vectorised exactly when it zeroes the accumulator)
    vec = a.vec_ok && d % 8 == 0 && d <= 256 && (convert ? a.dq_accum_d % 8 == 0 : !a.dq_accum || zero_dq);
    if (vec && d <= 16) rowwise_vec<T, 2>(a, st, convert);
    else if (vec && d <= 32) rowwise_vec<T, 4>(a, st, convert);
    else if (vec && d <= 64) rowwise_vec<T, 8>(a, st, convert);
    else if (vec && d <= 128) rowwise_vec<T, 16>(a, st, convert);
    else if (vec) rowwise_vec<T, 32>(a, st, convert);
  }
  if (!vec) {
    constexpr int kRows = 8;
    dim3 grid((p.seqlen_q + kRows - 1) / kRows, p.heads_q, p.batch);
    if (convert) dq_convert<T><<<grid, kRows * 32, 0, st>>>(a);
    else bwd_preprocess<T><<<grid, kRows * 32, 0, st>>>(a);
  }
  check_cuda(cudaGetLastError(), convert ? "dq convert launch" : "backward preprocess launch");
}

void rowwise_any(const KArgs& a, cudaStream_t st, bool convert) {
  if (a.p.dtype == DType::bf16) rowwise<__nv_bfloat16>(a, st, convert);
  else if (a.p.dtype == DType::f16) rowwise<__half>(a, st, convert);
  else rowwise<float>(a, st, convert);
}

bool empty_launch(const AttentionParams& p) { return p.batch == 0 || p.heads_q == 0; }

size_t det_partial_floats(const AttentionParams& p) {
  size_t n = 0;
  for (int t = 0; t < p.num_bias; ++t)
    if (needs_det_dbias(p, t)) n = std::max(n, dbias_plan(p, t).partial_floats);
  return n;
}

}  // namespace

DbiasPlan dbias_plan(const AttentionParams& p, int t) {
  constexpr int kQsideBM = 64;  // QsideTraits: 4 warps x 16 rows for every bucket
  const int bm = p.dtype == DType::f32 ? kF32Rows : kQsideBM;
  const BiasTerm& bt = p.bias[t];
  DbiasPlan pl{};
  pl.EB = bt.batch_stride == 0 ? 1 : bt.batch_mod;
  pl.EH = bt.head_stride == 0 ? 1 : bt.head_mod;
  pl.rows = bt.row_stride == 0 ? 1 : p.seqlen_q;
  pl.grid_x = bt.row_stride == 0 ? 1 : (p.seqlen_q + bm - 1) / bm;
  const int nb = bt.batch_stride == 0 ? p.batch : (p.batch + bt.batch_mod - 1) / bt.batch_mod;
  const int nh = bt.head_stride == 0 ? p.heads_q : (p.heads_q + bt.head_mod - 1) / bt.head_mod;
  const int64_t members = std::max<int64_t>(1, int64_t(nb) * nh);
  const int64_t ctas = std::max<int64_t>(1, int64_t(pl.grid_x) * pl.EB * pl.EH);
  const int64_t slots = int64_t(pl.EB) * pl.EH * pl.rows * std::max(p.seqlen_k, 1);
  int64_t splits = std::min<int64_t>((1024 + ctas - 1) / ctas, members);
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, (int64_t(64) << 20) / slots));  // <= 256 MB of partials
  pl.splits = static_cast<int>(std::max<int64_t>(splits, 1));
  pl.partial_floats = pl.splits > 1 ? static_cast<size_t>(pl.splits * slots) : 0;
  return pl;
}

namespace {

// Packed copies of the bias terms (bias_pack.cu) at the start of the workspace: [query][key]
// tiles for the forward, [key][query] for the backward, which also packs the fp32 dBias of
// the terms whose gradient its main kernel accumulates.
bool packs_grad(const AttentionParams& p, int t) { return p.bias[t].grad && !needs_det_dbias(p, t); }

// A term the caller packed already (BiasTerm::packed) takes no workspace and no pack kernel.
size_t pack_bytes(const AttentionParams& p, bool bwd) {
  size_t bytes = 0;
  for (int t = 0; t < p.num_bias; ++t) {
    if (!bias_packable(p, t)) continue;
    if (!p.bias[t].packed) bytes += align256(packed_bias_bytes(p, t));
    if (bwd && packs_grad(p, t)) bytes += align256(packed_grad_bytes(p, t));
  }
  return bytes;
}

// WIN backwards keep dQ in shared memory and compute lse / D themselves: their workspace holds neither
// the fp32 dQ accumulator nor the row statistics (Swin d32, 2048 windows of 343 x 6 heads: 540 MB less).
bool takes_win(const AttentionParams& p, const Overrides& ov) { return plan_args(p, true, ov).win; }

// Packs them into ws (pack_bytes' layout), points a.pk at them; returns the end of that region.
// A forward without a workspace (ws null) reads the terms not packed by the caller in place.
char* pack_terms(const AttentionParams& p, bool bwd, char* ws, KArgs& a, cudaStream_t st) {
  for (int t = 0; t < p.num_bias; ++t) {
    if (!bias_packable(p, t)) continue;
    if (p.bias[t].packed) {
      a.pk[t] = packed_geometry(p, t, bwd, p.bias[t].packed);
    } else if (ws) {
      a.pk[t] = pack_bias(p, t, bwd, ws, st);
      ws += align256(packed_bias_bytes(p, t));
    }
    if (bwd && packs_grad(p, t)) {
      a.pk[t].grad = reinterpret_cast<float*>(ws);
      check_cuda(cudaMemsetAsync(ws, 0, packed_grad_bytes(p, t), st), "memset packed dbias");
      ws += align256(packed_grad_bytes(p, t));
    }
  }
  return ws;
}

}  // namespace

// The launch arguments as far as the choice reads them, from the params alone: the terms pack_terms
// packs (and whose dBias it packs), the bias gradients the main kernel adds, WIN, the dQ accumulator and
// the row statistics, marked by placeholder pointers. backward() builds the same from the real workspace
// and checks that the two agree on WIN.
KArgs plan_args(const AttentionParams& p, bool bwd, const Overrides& ov) {
  KArgs a = make_args(p, bwd, ov);
  alignas(16) static float placeholder[4];
  for (int t = 0; t < p.num_bias; ++t) {
    if (bias_packable(p, t) && (bwd || p.bias[t].packed || p.workspace)) {
      a.pk[t].ptr = placeholder;
      if (bwd && packs_grad(p, t)) a.pk[t].grad = placeholder;
    }
    if (!bwd || !p.bias[t].grad) continue;
    if (needs_det_dbias(p, t)) a.p.bias[t].grad = nullptr;
    else a.any_bias_grad = true;
  }
  if (!bwd) return a;
  a.win = bwd_win_ok(a, ov);
  if (uses_dq_accum(p) && !a.win) a.dq_accum = placeholder;
  if (uses_row_stats(p) && !a.win) a.row_stats = placeholder;
  return a;
}

size_t forward_workspace_bytes(const AttentionParams& p) { return pack_bytes(p, false); }

// The forward reads packed terms only from a workspace; the backward always packs.
size_t packed_term_bytes(const AttentionParams& p, int t, bool backward) {
  (void)backward;  // both orientations hold the same number of tiles
  return bias_packable(p, t) ? packed_bias_bytes(p, t) : 0;
}

void pack_term(const AttentionParams& p, int t, bool backward, void* dst) {
  pack_bias(p, t, backward, dst, static_cast<cudaStream_t>(p.stream));
}

void forward(const AttentionParams& p, const Overrides& ov) {
  if (empty_launch(p) || p.seqlen_q == 0) return;
  cudaStream_t st = static_cast<cudaStream_t>(p.stream);
  KArgs a = make_args(p, false, ov);
  // With a workspace (or copies packed by the caller), bias terms are read in fragment order.
  pack_terms(p, false, static_cast<char*>(p.workspace), a, st);
  launch(a, ov, Pass::forward, st);
}

namespace {

// The fp32 dK and dV that the Hopper backward's head splits (dispatch.cu) add into; 0 without splits.
size_t dkv_accum_bytes(const AttentionParams& p, const Overrides& ov) {
  if (p.seqlen_k == 0 || choose(p, Pass::backward, ov).head_splits <= 1) return 0;
  return static_cast<size_t>(flat_key_rows(p)) * p.heads_kv * (p.head_dim + p.head_dim_v) * sizeof(float);
}

}  // namespace

size_t backward_workspace_bytes(const AttentionParams& p, const Overrides& ov) {
  const bool win = takes_win(p, ov);
  size_t bytes = pack_bytes(p, true);
  bytes += align256(static_cast<size_t>(lse_numel(p)) * sizeof(float));
  if (uses_dq_accum(p) && !win)
    bytes += align256(static_cast<size_t>(rows_q(p)) * p.heads_q * p.head_dim * sizeof(float));
  bytes += align256(dkv_accum_bytes(p, ov));
  bytes += align256(det_partial_floats(p) * sizeof(float));
  if (uses_row_stats(p) && !win) bytes += align256(2 * static_cast<size_t>(stat_plane_floats(p)) * sizeof(float));
  return bytes;
}

void backward(const AttentionParams& p, const Overrides& ov) {
  if (empty_launch(p)) return;
  cudaStream_t st = static_cast<cudaStream_t>(p.stream);
  KArgs a = make_args(p, true, ov);
  const size_t need = backward_workspace_bytes(p, ov);
  if (need > 0 && p.workspace == nullptr)
    throw std::invalid_argument("tessera attention CUDA: backward needs a workspace of backward_workspace_bytes()");
  // (the Hopper backward adds dQ rows into it with the copy engine, which needs 16-byte alignment)
  if (reinterpret_cast<uintptr_t>(p.workspace) % 16 != 0)
    throw std::invalid_argument("tessera attention CUDA: the backward workspace must be 16-byte aligned");
  const bool win = takes_win(p, ov);  // (the workspace's layout: backward_workspace_bytes)
  char* ws = pack_terms(p, true, static_cast<char*>(p.workspace), a, st);
  a.dvec = reinterpret_cast<float*>(ws);
  ws += align256(static_cast<size_t>(lse_numel(p)) * sizeof(float));
  float* dq_ws = nullptr;
  size_t dq_bytes = 0;
  if (uses_dq_accum(p) && !win) {
    dq_ws = reinterpret_cast<float*>(ws);
    dq_bytes = static_cast<size_t>(rows_q(p)) * p.heads_q * p.head_dim * sizeof(float);
    ws += align256(dq_bytes);
  }
  const size_t dkv_bytes = dkv_accum_bytes(p, ov);
  float* dkv_ws = dkv_bytes ? reinterpret_cast<float*>(ws) : nullptr;
  ws += align256(dkv_bytes);
  a.dbias_partial = det_partial_floats(p) ? reinterpret_cast<float*>(ws) : nullptr;
  ws += align256(det_partial_floats(p) * sizeof(float));
  float* stats_ws = uses_row_stats(p) && !win ? reinterpret_cast<float*>(ws) : nullptr;
  // bias grads: zeroed here; broadcast terms in deterministic mode go to dbias_kernel
  bool det_bias[2] = {false, false};
  for (int t = 0; t < p.num_bias; ++t) {
    const BiasTerm& bt = p.bias[t];
    if (!bt.grad) continue;
    const int64_t n = bias_extent(bt, p.seqlen_q, p.seqlen_k);
    if (n > 0) check_cuda(cudaMemsetAsync(bt.grad, 0, n * sizeof(float), st), "memset bias grad");
    if (needs_det_dbias(p, t)) {
      det_bias[t] = true;
      a.p.bias[t].grad = nullptr;
    } else {
      a.any_bias_grad = true;
    }
  }
  // WIN computes lse / D itself and keeps dQ in shared memory: no accumulator, statistics or passes
  a.win = bwd_win_ok(a, ov);
  if (a.win != win)  // (plan_args out of step with pack_terms / the gradient set-up above)
    throw std::logic_error("tessera attention CUDA: the backward's WIN plan and its launch arguments disagree");
  if (dq_ws && !a.win) {
    a.dq_accum = dq_ws;
    // (the preprocess below zeroes it where it can: preprocess_zeroes_dq)
    if (dq_bytes && !(p.seqlen_q > 0 && preprocess_zeroes_dq(a)))
      check_cuda(cudaMemsetAsync(a.dq_accum, 0, dq_bytes, st), "memset dq accumulator");
  }
  if (dkv_ws) {
    a.dkv_accum = dkv_ws;
    a.head_splits = choose(a, Pass::backward, ov, 0, nullptr).head_splits;
    check_cuda(cudaMemsetAsync(a.dkv_accum, 0, dkv_bytes, st), "memset dK / dV accumulators");
  }
  if (stats_ws && !a.win) {
    a.row_stats = stats_ws;
    a.stat_plane = stat_plane_floats(p);
    // Zero padding: a block reading rows past its run gets finite statistics (its P is masked
    // to 0 there, and 0 * (dP - D) must stay 0, not NaN from uninitialised memory).
    check_cuda(cudaMemsetAsync(a.row_stats, 0, 2 * static_cast<size_t>(a.stat_plane) * sizeof(float), st),
               "memset row statistics");
  }
  if (p.seqlen_q > 0 && !a.win) rowwise_any(a, st, false);
  // no keys: dK, dV are empty and dQ = 0 comes from the zeroed accumulator / dq kernel
  if (p.seqlen_k > 0) launch(a, ov, Pass::backward, st);
  if (a.dkv_accum) dkv_convert_any(a, st);
  for (int t = 0; t < p.num_bias; ++t)
    if (a.pk[t].grad) unpack_dbias(p, t, a.pk[t].grad, st);
  if (p.seqlen_q > 0 && !a.win) {
    if (uses_dq_accum(p)) rowwise_any(a, st, true);
    else launch(a, ov, Pass::dq, st);
  }
  for (int t = 0; t < p.num_bias; ++t) {
    if (!det_bias[t] || p.seqlen_q == 0 || p.seqlen_k == 0) continue;
    KArgs ad = a;
    ad.p.bias[t].grad = p.bias[t].grad;
    launch(ad, ov, Pass::dbias, st, t);
  }
}

bool available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

const char* forward_kernel(const AttentionParams& p, const Overrides& ov) {
  switch (choose(p, Pass::forward, ov).kernel) {
    case Kernel::f32_simt: return "f32_simt";
    case Kernel::sm90_forward_persistent: return "sm90_wgmma_persistent";
    case Kernel::sm90_forward_wide: return "sm90_wgmma_wide";
    case Kernel::sm90_forward:
    case Kernel::sm90_forward_row208: return "sm90_wgmma";
    default: return "portable_mma";
  }
}

const char* backward_kernel(const AttentionParams& p, const Overrides& ov) {
  switch (choose(p, Pass::backward, ov).kernel) {
    case Kernel::f32_simt: return "f32_simt";
    case Kernel::sm90_backward_one_wg: return "sm90_wgmma_1wg";
    case Kernel::sm90_backward_ws: return "sm90_wgmma_ws";
    case Kernel::sm90_backward_pair: return "sm90_wgmma";
    default: return "portable_mma";
  }
}

std::string device_name(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return std::string();
  return prop.name;
}

}  // namespace tessera::attention::cuda
