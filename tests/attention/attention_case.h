// Builds a random attention problem (tensors, strides, options) and checks a
// backend against the float64 reference. Shared by the CPU and GPU suites.
#pragma once

#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "reference.h"
#include "tessera/attention/params.h"

namespace tessera::test {

using attention::AttentionParams;
using attention::DType;

enum class BiasKind {
  none,
  full,          // [B, H, Nq, Nk]
  head_shared,   // [H, Nq, Nk], broadcast over batch
  batch_only,    // [B, 1, Nq, Nk], broadcast over heads
  key_padding,   // [B, 1, 1, Nk], broadcast over heads and query rows
  swin,          // rel-pos [H, N, N] + shift mask [nW, N, N] over B = images*nW windows
  neg_inf_rows,  // full bias with some rows entirely -inf
};

struct Case {
  std::string name;
  int batch = 1, nq = 16, nk = 16, hq = 2, hkv = 2, d = 16, dv = -1;
  DType dtype = DType::f32;
  bool causal = false;
  int window_left = -1, window_right = -1;
  BiasKind bias = BiasKind::none;
  bool bias_grad = true;
  int swin_windows = 2;     // nW for BiasKind::swin
  int alibi = 0;            // 0 none, 1 [H] slopes, 2 [B, H] slopes
  std::vector<int> varlen_q, varlen_k;  // non-empty: packed varlen batch
  float dropout = 0.f;
  bool dlse = false;
  bool padded_strides = false;   // gaps between heads/rows
  bool bhnd_layout = false;      // q/k/v stored as [B, H, N, D] (strided view)
  float scale = 0.f;             // 0 = 1/sqrt(d)
  int threads = 0;
};

// All the buffers behind an AttentionParams.
struct Problem {
  Case c;
  AttentionParams p;
  std::vector<uint8_t> q, k, v, o, dout, dq, dk, dv;
  std::vector<float> lse, dlse, bias[2], bias_grad[2], alibi;
  std::vector<int32_t> cu_q, cu_k;
  uint64_t seed = 0;
};

// Fills a Problem with fresh random inputs (seeded from std::random_device
// unless seed != 0) and NaN-poisoned outputs.
Problem make_problem(const Case& c, uint64_t seed = 0);
void poison_outputs(Problem& pr);

struct Errors {
  double o = 0, lse = 0, dq = 0, dk = 0, dv = 0, dbias[2] = {0, 0};
  bool has_nan = false;
  std::string detail;
};

// ||x - ref|| / ||ref|| per output; NaN anywhere (or an unwritten output)
// sets has_nan. The outputs must already be on the host.
Errors compare_forward(const Problem& pr, const attention::reference::Result& ref);
Errors compare_backward(const Problem& pr, const attention::reference::Result& ref);

double tolerance(DType t);
std::string describe(const Case& c);
// GoogleTest prints parameters through this instead of a byte dump.
inline void PrintTo(const Case& c, std::ostream* os) { *os << describe(c); }

}  // namespace tessera::test
