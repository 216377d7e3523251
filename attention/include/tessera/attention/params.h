// The one parameter block shared by every attention backend (CPU, CUDA).
//
// Plain C++ on purpose: no LibTorch, no CUDA types. The binding layer
// (attention/torch) validates and fills it; kernels only read it.
//
// Layout (as FlashAttention): Q [B, Nq, Hq, D], K [B, Nk, Hkv, D],
// V [B, Nk, Hkv, Dv], O [B, Nq, Hq, Dv]; the last dimension is contiguous,
// every other dimension has an explicit element stride. With varlen
// packing (cu_seqlens_q/k set) the batch dimension disappears: tensors are
// [total_tokens, H, D] and sequence b spans rows cu_seqlens[b]..cu_seqlens[b+1].
#pragma once

#include <cstdint>

namespace tessera::attention {

enum class DType : int { f32 = 0, f16 = 1, bf16 = 2 };
enum class Device : int { cpu = 0, cuda = 1 };

const char* dtype_name(DType t);
int dtype_size(DType t);

// One additive bias term, added to the scaled scores before the softmax.
// Element (b, h, i, j) of the logical [B, Hq, Nq, Nk] bias is read at
//   ptr[(b % batch_mod) * batch_stride + (h % head_mod) * head_stride
//       + i * row_stride + j]
// so any dimension can be broadcast with stride 0 (and the *_mod fields
// express tiled broadcasts, e.g. a Swin shift mask [nW, N, N] over a batch
// of B*nW windows: batch_mod = nW). i and j are positions inside the
// sequence (varlen: relative to the sequence start).
//
// grad (optional, fp32): the gradient of the loss w.r.t. this tensor, laid
// out densely with the *same* strides as ptr, summed over every broadcast
// (batch/head index that maps to the same element). The backend overwrites
// it; the caller need not zero it.
struct BiasTerm {
  const void* ptr = nullptr;
  DType dtype = DType::f32;
  int64_t batch_stride = 0;
  int64_t head_stride = 0;
  int64_t row_stride = 0;
  int batch_mod = 1;   // number of distinct batch slices in the tensor (>= 1)
  int head_mod = 1;    // number of distinct head slices in the tensor (>= 1)
  float* grad = nullptr;
  // CUDA fp16/bf16 (optional): this term already in the fragment order of the pass it is given
  // to, made by pack_bias_term(p, t, backward, ...) with the same params; the pass then reads it
  // instead of repacking the term into its workspace (a constant mask reused across calls).
  const void* packed = nullptr;
};

struct AttentionParams {
  Device device = Device::cpu;
  DType dtype = DType::f32;   // dtype of q, k, v, o, do, dq, dk, dv

  // ---- sizes ----
  int batch = 0;        // number of sequences (varlen: cu_seqlens has batch+1 entries)
  int seqlen_q = 0;     // fixed-length: Nq; varlen: max query length over the batch
  int seqlen_k = 0;     // fixed-length: Nk; varlen: max key length over the batch
  int heads_q = 0;
  int heads_kv = 0;     // heads_q % heads_kv == 0 (MQA/GQA)
  int head_dim = 0;     // D of q and k
  int head_dim_v = 0;   // Dv of v and o

  // ---- tensors (element strides; last dim contiguous) ----
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;

  // Log-sum-exp of the scaled, biased scores per query row, natural log,
  // fp32, dense [B, Hq, Nq] (varlen: [Hq, total_q]). -inf for a row with no
  // visible key (its output row is 0). Required by backward.
  float* lse = nullptr;
  // Backward only, optional: gradient w.r.t. lse (same layout), for callers
  // that merge attention branches through their LSE (LongNet-style).
  const float* dlse = nullptr;

  // ---- varlen packing (int32, batch+1 increasing offsets) ----
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  int total_q = 0;   // varlen only: rows of q/o
  int total_k = 0;   // varlen only: rows of k/v

  // ---- score modifiers ----
  float scale = 1.f;          // softmax scale (usually 1/sqrt(D))
  bool causal = false;        // bottom-right aligned: key j visible to query i iff j <= i + Nk - Nq
  int window_left = -1;       // sliding window, -1 = unbounded: visible iff
  int window_right = -1;      //   i' - left <= j <= i' + right, i' = i + Nk - Nq
  BiasTerm bias[2];           // up to two additive terms (e.g. Swin rel-pos bias + shift mask)
  int num_bias = 0;
  // ALiBi: score += -slope[b, h] * |i' - j|; fp32, index b*alibi_batch_stride + h.
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;

  // ---- dropout on the softmax probabilities ----
  float dropout_p = 0.f;      // probability of dropping; kept values scaled by 1/(1-p)
  uint64_t dropout_seed = 0;
  uint64_t dropout_offset = 0;

  // ---- backward only ----
  const void* dout = nullptr;  // layout of o
  void* dq = nullptr;          // layout of q
  void* dk = nullptr;          // layout of k
  void* dv = nullptr;          // layout of v
  int64_t do_batch_stride = 0, do_row_stride = 0, do_head_stride = 0;
  int64_t dq_batch_stride = 0, dq_row_stride = 0, dq_head_stride = 0;
  int64_t dk_batch_stride = 0, dk_row_stride = 0, dk_head_stride = 0;
  int64_t dv_batch_stride = 0, dv_row_stride = 0, dv_head_stride = 0;
  bool deterministic = false;  // bitwise-repeatable backward (the CPU path always is)

  // Scratch memory owned by the caller (CUDA: device memory, 16-byte aligned
  // as cudaMalloc's is). backward: backward_workspace_bytes(params) bytes, may
  // be null when that is 0; the CPU path allocates its own when it is null.
  // forward: optional, forward_workspace_bytes(params) bytes (CUDA bias terms
  // are then repacked for faster reads); null takes the direct reads.
  void* workspace = nullptr;

  // ---- execution ----
  int num_threads = 0;         // CPU: 0 = hardware concurrency
  void* stream = nullptr;      // CUDA: a cudaStream_t; null = default stream

  bool is_varlen() const { return cu_seqlens_q != nullptr; }
};

}  // namespace tessera::attention
