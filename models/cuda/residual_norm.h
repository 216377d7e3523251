// The step between a pre-norm transformer's sublayers, fused (plain CUDA, no LibTorch;
// models/src/blocks/fused_layers.cpp binds it to tensors):
//
//   x ← x + gamma ⊙ y          the residual sum with timm's LayerScale (gamma: 1 when absent; skipped without y)
//   out = LayerNorm(x) · w + b  over each row of the updated, stored x (skipped without out)
//
// one read of x and y and one write of x and out, statistics in fp32, each result rounded once.
#pragma once

#include <cstdint>

#include "dtype.h"

namespace tessera::models::cuda {

struct ResidualNormArgs {
  DType dtype = DType::f32;
  void* x = nullptr;             // [rows, cols], contiguous; updated in place when y is given
  const void* y = nullptr;       // [rows, cols], contiguous, or nullptr
  const void* gamma = nullptr;   // [cols] or nullptr
  const void* weight = nullptr;  // [cols] or nullptr (1)
  const void* bias = nullptr;    // [cols] or nullptr (0)
  void* out = nullptr;           // [rows, cols], contiguous, or nullptr; not x or y
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
  void* stream = nullptr;  // cudaStream_t
};

// Most columns a row may have (it is staged in shared memory as fp32).
constexpr int64_t kResidualNormMaxCols = 12288;

// Launches on `stream`; throws std::invalid_argument for sizes it cannot take, std::runtime_error if the launch fails.
void residual_norm(const ResidualNormArgs& args);

}  // namespace tessera::models::cuda
