// Naive float64 attention, for tests only: the definition every backend is
// checked against. Reads inputs through the same AttentionParams (any dtype,
// any strides) and returns dense float64 results.
#pragma once

#include <vector>

#include "tessera/attention/params.h"

namespace tessera::attention::reference {

struct Result {
  // Dense row-major [rows, H, D] where rows = B*Nq (or total_q with varlen);
  // row index = b*Nq + i (fixed length) or cu_seqlens[b] + i (varlen).
  std::vector<double> o;   // [rows_q, Hq, Dv]
  std::vector<double> lse; // same indexing as AttentionParams::lse
  std::vector<double> dq;  // [rows_q, Hq, D]
  std::vector<double> dk;  // [rows_k, Hkv, D]
  std::vector<double> dv;  // [rows_k, Hkv, Dv]
  std::vector<double> dbias[2];  // same element offsets as BiasTerm::grad
};

// Forward only (o, lse).
Result forward(const AttentionParams& p);
// Forward and backward (needs p.dout; uses p.dlse when set).
Result forward_backward(const AttentionParams& p);

}  // namespace tessera::attention::reference
