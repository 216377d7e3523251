// Index arithmetic over AttentionParams shared by the CPU path, the CUDA
// kernels and the tests: where sequence b starts, how long it is, where an LSE
// entry lives, how many elements a bias tensor spans.
#pragma once

#include <cstdint>

#include "tessera/attention/host_device.h"
#include "tessera/attention/params.h"

namespace tessera::attention {

struct SeqSpan {
  int64_t q0, k0;  // first row of the sequence in q/o and k/v (varlen); 0 otherwise
  int nq, nk;
};

TESSERA_HD SeqSpan seq_span(const AttentionParams& p, int b) {
  SeqSpan s;
  if (p.cu_seqlens_q) {
    s.q0 = p.cu_seqlens_q[b];
    s.k0 = p.cu_seqlens_k[b];
    s.nq = static_cast<int>(p.cu_seqlens_q[b + 1] - s.q0);
    s.nk = static_cast<int>(p.cu_seqlens_k[b + 1] - s.k0);
  } else {
    s.q0 = 0, s.k0 = 0, s.nq = p.seqlen_q, s.nk = p.seqlen_k;
  }
  return s;
}

// Element offset of row r (0-based inside sequence b), head h, in a tensor
// with the given strides.
TESSERA_HD int64_t row_offset(const AttentionParams& p, int b, int64_t row0, int r, int h,
                          int64_t batch_stride, int64_t row_stride, int64_t head_stride) {
  const int64_t bofs = p.cu_seqlens_q ? 0 : static_cast<int64_t>(b) * batch_stride;
  return bofs + (row0 + r) * row_stride + static_cast<int64_t>(h) * head_stride;
}

// Sequence b's first row in a [rows_q, ...] tensor (the CUDA dQ accumulator): varlen rows are global.
TESSERA_HD int64_t flat_row0(const AttentionParams& p, int b, int64_t q0) {
  return q0 + (p.cu_seqlens_q ? 0 : static_cast<int64_t>(b) * p.seqlen_q);
}

// The same for keys: sequence b's first row in a [rows_k, ...] tensor (the CUDA dK / dV accumulators), and rows_k.
TESSERA_HD int64_t flat_key_row0(const AttentionParams& p, int b, int64_t k0) {
  return k0 + (p.cu_seqlens_k ? 0 : static_cast<int64_t>(b) * p.seqlen_k);
}
TESSERA_HD int64_t flat_key_rows(const AttentionParams& p) {
  return p.cu_seqlens_k ? p.total_k : static_cast<int64_t>(p.batch) * p.seqlen_k;
}

// Index into the dense fp32 lse buffer: [B, Hq, Nq] or, varlen, [Hq, total_q].
TESSERA_HD int64_t lse_index(const AttentionParams& p, int b, int h, int64_t q_row0, int i) {
  if (p.cu_seqlens_q) return static_cast<int64_t>(h) * p.total_q + q_row0 + i;
  return (static_cast<int64_t>(b) * p.heads_q + h) * p.seqlen_q + i;
}

TESSERA_HD int64_t lse_numel(const AttentionParams& p) {
  return p.cu_seqlens_q ? static_cast<int64_t>(p.heads_q) * p.total_q
                        : static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
}

TESSERA_HD int64_t bias_offset(const BiasTerm& t, int b, int h, int i) {
  return static_cast<int64_t>(b % t.batch_mod) * t.batch_stride +
         static_cast<int64_t>(h % t.head_mod) * t.head_stride + static_cast<int64_t>(i) * t.row_stride;
}

// Number of elements from the start of a bias tensor to one past its last
// element (the size of its grad buffer).
TESSERA_HD int64_t bias_extent(const BiasTerm& t, int max_nq, int max_nk) {
  return static_cast<int64_t>(t.batch_mod - 1) * t.batch_stride +
         static_cast<int64_t>(t.head_mod - 1) * t.head_stride +
         static_cast<int64_t>(max_nq > 0 ? max_nq - 1 : 0) * t.row_stride + max_nk;
}

}  // namespace tessera::attention
